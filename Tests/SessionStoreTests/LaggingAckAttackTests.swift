import BrowserModel
import Foundation
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Attack on the window's acknowledgement of lagging saves (`WindowStore.keptDurableSeq`,
/// 1fc8484): Browsers lagging in turn many times, pipelined saves, more lagging saves than the
/// list keeps (the merge), compactions a lagging Browser must make, incognito closing while
/// the regular Browser lags, both failing in one group. After every turn a power cut (all
/// unsynced writes lost, or a random prefix of them kept) and a kill each bring the window
/// back as it was after a command at or past `durableSeq`; once the faults stop, everything
/// is durable within a bounded number of turns.
@Suite struct LaggingAckAttackTests {
    /// One window on the simulated disk with every command's contents, checked after each turn.
    final class Harness {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let options: StoreOptions
        let store: WindowStore
        let name: String
        var seq: UInt64 = 0
        var contents: [UInt64: WindowContents] = [:]
        var log: [String] = []
        var cuts = SeededGenerator(seed: 99)
        /// Turns at which one Browser was durable past the other (a lagging save landed).
        var laggingTurns = 0
        /// How often the Browser that lags changed.
        var alternations = 0
        private var lastLagging: BrowserKind?

        init(_ name: String, options: StoreOptions) throws {
            self.name = name
            self.options = options
            (store, _) = try simulatedWindow(engine, options: options, clock: clock)
            contents[0] = try WindowContents(store)
        }

        /// One command: a change in the Browsers given (a new tab in each), recorded.
        func command(regular: Bool = true, incognito: Bool = true) throws {
            seq += 1
            let seq = seq
            try store.apply(seq: seq) {
                if regular {
                    try store.regular.webStateList.insert(
                        newTab("https://r-\(seq).example/", store.regular.profile), InsertionParams())
                }
                if incognito {
                    try store.incognito.webStateList.insert(
                        newTab("https://i-\(seq).example/", store.incognito.profile), InsertionParams())
                }
            }
            contents[seq] = try WindowContents(store)
            log.append("\(seq): \(regular ? "r" : "")\(incognito ? "i" : "")")
        }

        /// Incognito closes its last tab.
        func closeIncognito() throws {
            seq += 1
            store.apply(seq: seq) { store.incognito.webStateList.closeAll(includingPinned: true) }
            contents[seq] = try WindowContents(store)
            log.append("\(seq): close incognito")
        }

        /// A turn as the worker makes it (a failure is logged, the loop goes on), then the checks.
        func turn(waiting: Bool = false) throws {
            do { _ = try store.poll(waiting: waiting) } catch { log.append("turn threw \(error)") }
            log.append(
                "  durable \(store.durableSeq) r \(store.durableSeq(of: .regular)) i \(store.durableSeq(of: .incognito)) failing \(store.failingBrowsers) saving \(store.savingSeq.map(String.init) ?? "-")"
            )
            let lagging: BrowserKind? =
                store.durableSeq(of: .regular) > store.durableSeq(of: .incognito)
                    && store.durableSeq(of: .regular) > store.durableSeq
                ? .regular
                : store.durableSeq(of: .incognito) > store.durableSeq(of: .regular)
                    && store.durableSeq(of: .incognito) > store.durableSeq
                    ? .incognito : nil
            if let lagging {
                laggingTurns += 1
                if let last = lastLagging, last != lagging { alternations += 1 }
                lastLagging = lagging
            }
            try check()
        }

        /// A cut (nothing unsynced kept, then a random prefix kept) and a kill bring back the
        /// window after some command in `durableSeq...seq`.
        func check() throws {
            let durable = store.durableSeq
            let acceptable = contents.filter { $0.key >= durable && $0.key <= seq }
            func expectAcceptable(_ disk: FaultEngine, _ what: String) throws {
                let restored = try WindowContents(try simulatedWindow(disk, options: options).0)
                let at = contents.filter { $0.value == restored }.map(\.key).sorted()
                #expect(
                    acceptable.values.contains(restored),
                    "\(name): \(what) brings back no state at or past durable \(durable) (applied \(seq), regular \(store.durableSeq(of: .regular)), incognito \(store.durableSeq(of: .incognito))); it is the state after \(at)\nrestored \(restored)\n\(log.suffix(30).joined(separator: "\n"))"
                )
            }
            let cut = engine.copy()
            cut.powerCut()
            try expectAcceptable(cut, "a cut")
            let partial = engine.copy()
            partial.powerCut(keepingUnsyncedWith: &cuts)
            try expectAcceptable(partial, "a cut keeping part of the unsynced writes")
            let killed = engine.copy()
            killed.processKilled()
            try expectAcceptable(killed, "a kill")
        }

        /// The faults gone: everything durable within a bounded number of turns, and kept.
        func settleAndCheck() throws {
            engine.removeFaults()
            var turns = 0
            while store.durableSeq < store.appliedSeq || store.savingSeq != nil, turns < 100 {
                clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
                try turn(waiting: true)
                turns += 1
            }
            #expect(
                store.durableSeq == store.appliedSeq,
                "\(name): everything durable within 100 turns once the faults are gone (\(store.durableSeq) of \(store.appliedSeq))"
            )
            if store.durableSeq == store.appliedSeq {
                #expect(
                    try contentsAfterPowerCut(engine.copy(), options: options) == (try WindowContents(store)),
                    "\(name): a cut after settling keeps all")
            }
        }
    }

    /// Browsers lag in turn, six times (regular, incognito, regular, ...): each round the
    /// lagging one's part of a save naming both fails, then the other saves alone twice. With
    /// `waiting`, each save lands before the next command; without, saves pipeline.
    @Test(arguments: 1...4, [true, false])
    func browsersLaggingInTurnManyTimes(savesInFlight: Int, waiting: Bool) throws {
        let h = try Harness(
            "inFlight \(savesInFlight) waiting \(waiting)", options: StoreOptions(savesInFlight: savesInFlight))
        try h.command()
        try h.store.waitUntilDurable(1)
        for round in 0..<6 {
            let failing = round % 2
            h.clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
            // The group's chains run in order at the flush: the regular append, then the incognito one.
            h.engine.failures[h.engine.operationCount + 1 + failing] = .ioError
            h.log.append("round \(round): fail \(failing == 0 ? "regular" : "incognito")")
            try h.command()
            try h.turn(waiting: waiting)
            for _ in 0..<2 {
                try h.command(regular: failing == 1, incognito: failing == 0)
                try h.turn(waiting: waiting)
            }
            if waiting { for _ in 0..<8 where h.store.savingSeq != nil { try h.turn(waiting: true) } }
        }
        #expect(h.alternations >= 3, "\(h.name): the lagging Browser changed \(h.alternations) times")
        try h.settleAndCheck()
    }

    /// The incognito Browser fails once and waits out its backoff while the regular one saves
    /// alone 80 times (more than the 64 the window lists: the oldest merge), a journal small
    /// enough that the regular Browser must compact meanwhile; then the regular one fails and
    /// the incognito one saves alone; a cut and a kill after every turn.
    @Test(arguments: [4, 1 << 20])
    func moreLaggingSavesThanTheListKeeps(compactAfterRecords: Int) throws {
        let h = try Harness(
            "compactAfter \(compactAfterRecords)",
            options: StoreOptions(
                compactAfterRecords: compactAfterRecords, compactAfterBytes: 1 << 20, journalPreallocation: 16 << 10))
        try h.command()
        try h.store.waitUntilDurable(1)
        h.engine.failures[h.engine.operationCount + 2] = .ioError
        try h.command()
        try h.turn(waiting: true)
        let generation = h.store.stores[0].generation
        for _ in 0..<80 {
            try h.command(regular: true, incognito: false)
            try h.turn(waiting: true)
            for _ in 0..<4 where h.store.savingSeq != nil { try h.turn(waiting: true) }
        }
        #expect(
            h.store.durableSeq(of: .incognito) < h.store.durableSeq(of: .regular),
            "the incognito Browser lagged throughout")
        #expect(h.store.stores[0].generation == generation, "\(h.name): no snapshot holds a lagging save")
        h.clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
        h.engine.failures[h.engine.operationCount + 1] = .ioError
        try h.command()
        try h.turn(waiting: true)
        for _ in 0..<5 {
            try h.command(regular: false, incognito: true)
            try h.turn(waiting: true)
        }
        try h.settleAndCheck()
    }

    /// The merge across an alternation: the regular Browser lags once, the incognito one once,
    /// then the regular one 70 times (its oldest lagging saves merge with ones past the
    /// incognito lagging save).
    @Test(arguments: 1...4)
    func mergedLaggingSavesAcrossAnAlternation(savesInFlight: Int) throws {
        let h = try Harness("inFlight \(savesInFlight)", options: StoreOptions(savesInFlight: savesInFlight))
        try h.command()
        try h.store.waitUntilDurable(1)
        for (round, (failing, alone)) in [(1, 1), (0, 1), (1, 70)].enumerated() {
            h.clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
            h.engine.failures[h.engine.operationCount + 1 + failing] = .ioError
            h.log.append("round \(round): fail \(failing == 0 ? "regular" : "incognito")")
            try h.command()
            try h.turn(waiting: true)
            for _ in 0..<alone {
                try h.command(regular: failing == 1, incognito: failing == 0)
                try h.turn(waiting: round % 2 == 0)
            }
        }
        #expect(
            h.alternations >= 2,
            "\(h.name): the lagging Browser changed \(h.alternations) times\n\(h.log.prefix(24).joined(separator: "\n"))"
        )
        try h.settleAndCheck()
    }

    /// Incognito closes its last tab while the regular Browser lags (its saves failing), with
    /// the failing operation at each place of the save and deletion that follow.
    @Test(arguments: 1...10)
    func incognitoClosesWhileTheRegularBrowserLags(failing operation: Int) throws {
        let h = try Harness("failing \(operation)", options: StoreOptions())
        try h.command()
        try h.store.waitUntilDurable(1)
        h.engine.failures[h.engine.operationCount + 1] = .ioError
        try h.command()
        try h.turn(waiting: true)
        try h.command(regular: false, incognito: true)
        try h.turn(waiting: true)
        h.engine.failures[h.engine.operationCount + operation] = .ioError
        try h.closeIncognito()
        for _ in 0..<4 { try h.turn(waiting: true) }
        try h.command(regular: true, incognito: false)
        try h.turn(waiting: true)
        try h.command(regular: false, incognito: true)
        try h.turn(waiting: true)
        try h.settleAndCheck()
    }

    /// Random faults aimed at one Browser's append or both, commands in one Browser or both,
    /// incognito closing now and then, pipelined saves and a hand-moved clock; a cut, a partial
    /// cut and a kill after every turn.
    @Test(arguments: 0..<(UInt64(ProcessInfo.processInfo.environment["WINDOWHOST_LAG_SEEDS"] ?? "8") ?? 8))
    func randomLaggingKeepsWhatTheWindowAcknowledged(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed &+ 5000)
        let h = try Harness(
            "seed \(seed)",
            options: StoreOptions(
                compactAfterRecords: Int.random(in: 4...16, using: &random), compactAfterBytes: 1 << 20,
                journalPreallocation: 16 << 10, savesInFlight: 1 + Int(seed % 4)))
        for _ in 0..<120 {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<45:
                if Int.random(in: 0..<15, using: &random) == 0 {
                    try h.closeIncognito()
                } else {
                    let which = Int.random(in: 0..<3, using: &random)
                    try h.command(regular: which != 1, incognito: which != 0)
                }
            case 45..<62:
                // One Browser's append (1 or 2), or both (1 and 2), or a later operation.
                let errno: Errno = Bool.random(using: &random) ? .ioError : .noSpace
                switch Int.random(in: 0..<4, using: &random) {
                case 0: h.engine.failures[h.engine.operationCount + 1] = errno
                case 1: h.engine.failures[h.engine.operationCount + 2] = errno
                case 2:
                    h.engine.failures[h.engine.operationCount + 1] = errno
                    h.engine.failures[h.engine.operationCount + 2] = errno
                default: h.engine.failures[h.engine.operationCount + Int.random(in: 3...8, using: &random)] = errno
                }
                h.log.append("fail \(h.engine.failures.keys.sorted().map { $0 - h.engine.operationCount })")
            case 62..<74:
                let milliseconds = [0, 50, 400, SavePolicy.maximumRetryMilliseconds][
                    Int.random(in: 0..<4, using: &random)]
                h.clock.advance(milliseconds: milliseconds)
                h.log.append("+\(milliseconds) ms")
            case 74..<80:
                h.log.append("save")
                do { try h.store.save() } catch { h.log.append("save threw \(error)") }
            default:
                break
            }
            try h.turn(waiting: Bool.random(using: &random))
        }
        h.log.append("lagging turns \(h.laggingTurns), alternations \(h.alternations)")
        try h.settleAndCheck()
    }
}
