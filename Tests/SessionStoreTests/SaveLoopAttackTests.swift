import BrowserModel
import Foundation
import Glibc
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Attack on the fix of the stress hang (ee1e41c): random faults, random completion order,
/// pipelined saves, explicit saves and a hand-moved clock, on the simulated disk. After every
/// turn: no spin (a deadline at or before now that the next turn does nothing about, or a save
/// in flight that no turn advances), and a power cut brings back the window as it was after a
/// command at or past the durable seq. At the end, with the faults gone, everything is durable
/// within a bounded number of turns.
@Suite struct SaveLoopAttackTests {
    @Test(arguments: 0..<(UInt64(ProcessInfo.processInfo.environment["WINDOWHOST_ATTACK_SEEDS"] ?? "24") ?? 24))
    func randomFaultsNeitherSpinNorHangNorLoseWhatWasAcknowledged(seed: UInt64) throws {
        if let only = ProcessInfo.processInfo.environment["WINDOWHOST_ATTACK_ONLY"].flatMap(UInt64.init), only != seed {
            return
        }
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        var random = SeededGenerator(seed: seed &+ 1000)
        let options = StoreOptions(
            compactAfterRecords: Int.random(in: 4...24, using: &random), compactAfterBytes: 1 << 20,
            journalPreallocation: 16 << 10, savesInFlight: Int.random(in: 1...4, using: &random))
        let (store, _) = try simulatedWindow(
            engine, options: options, delay: Bool.random(using: &random) ? 0 : 50, clock: clock)
        var browsing = WindowBrowsing(seed: seed, maxTabs: 8, incognitoOneIn: 2)
        var contents: [UInt64: WindowContents] = [0: try WindowContents(store)]
        var seq: UInt64 = 0
        var log: [String] = []
        var knownMarkerLosses = 0

        /// A turn as the worker's loop makes it: a failure is logged and the loop goes on.
        func poll(waiting: Bool = false) -> [SaveEvent] {
            do {
                let events = try store.poll(waiting: waiting)
                if ProcessInfo.processInfo.environment["WINDOWHOST_ATTACK_ONLY"] != nil {
                    for event in events { log.append("  \(event)") }
                }
                return events
            } catch {
                log.append("turn threw \(error)")
                return store.takeEvents() + [.compactionFailed(error)]
            }
        }

        /// A turn, then the spin checks the worker's loop would hit.
        func turn(_ waiting: Bool = false) throws {
            _ = poll(waiting: waiting)
            let operations = engine.operationCount
            let saving = store.savingSeq
            if saving == nil, let deadline = store.nextDeadline, deadline <= clock.now {
                let events = poll()
                let idle = store.savingSeq == nil && events.isEmpty && engine.operationCount == operations
                #expect(
                    !(idle && (store.nextDeadline ?? .max) <= clock.now),
                    "seed \(seed): a past deadline the loop does nothing about (\(log.suffix(6)))")
            } else if saving != nil, engine.completionOrder == nil, engine.inFlight == 0 {
                // A blocking engine: the worker polls with no timeout while a save is in flight.
                let events = poll()
                let stuck =
                    store.savingSeq == saving && events.isEmpty && engine.operationCount == operations
                    && engine.inFlight == 0
                #expect(!stuck, "seed \(seed): a save in flight that no turn advances (\(log.suffix(6)))")
            }
        }

        func checkPowerCut() throws {
            let durable = store.durableSeq
            let restored = try contentsAfterPowerCut(engine.copy(), options: options)
            let matches = contents.filter { $0.key >= durable && $0.key <= seq }.contains { $0.value == restored }
            // The known class (`aFailedIncognitoDeletion...`): a marker left in a live session.
            let marker = store.incognito.sessionDirectory.appending(DiskLayout.deletionMarker)
            if !matches, store.stores[1].isOnDisk, (try? engine.kind(marker)) != nil {
                knownMarkerLosses += 1
                return
            }
            let anyMatch = contents.filter { $0.value == restored }.map(\.key).sorted()
            if !matches, ProcessInfo.processInfo.environment["WINDOWHOST_ATTACK_ONLY"] != nil {
                let cut = engine.copy()
                func walk(_ path: FilePath) -> [String] {
                    guard let entries = try? cut.directoryEntries(path) else {
                        return ["\(path) \(cut.contents(of: path)?.count ?? -1) bytes"]
                    }
                    return entries.flatMap { walk(path.appending($0)) }
                }
                log.append("visible: \(walk(simulatedRoot))")
                cut.powerCut()
                log.append("after cut: \(walk(simulatedRoot))")
                let (window, recovery) = try simulatedWindow(cut, options: options)
                log.append("recovery: \(recovery) window seq \(window.appliedSeq)")
            }
            #expect(
                matches,
                "seed \(seed): a cut brings back no state at or past durable seq \(durable) (applied \(seq)); it is the state after \(anyMatch)\nrestored \(restored)\ndurable  \(contents[durable].map(String.init(describing:)) ?? "?")\n\(log.suffix(ProcessInfo.processInfo.environment["WINDOWHOST_ATTACK_ONLY"] != nil ? 400 : 60).joined(separator: "\n"))"
            )
        }

        for _ in 0..<160 {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<40:
                seq += 1
                if Int.random(in: 0..<12, using: &random) == 0 {
                    store.apply(seq: seq) { store.incognito.webStateList.closeAll(includingPinned: true) }
                    log.append("\(seq): close incognito")
                } else {
                    try browsing.step(store, seq: seq)
                    log.append("\(seq): step")
                }
                contents[seq] = try WindowContents(store)
            case 40..<50:
                log.append("save")
                do { try store.save() } catch { log.append("save threw \(error)") }
                if ProcessInfo.processInfo.environment["WINDOWHOST_ATTACK_ONLY"] != nil {
                    for event in store.takeEvents() { log.append("  \(event)") }
                }
            case 50..<65:
                let milliseconds = [0, 1, 50, 100, 400, 3200][Int.random(in: 0..<6, using: &random)]
                clock.advance(milliseconds: UInt64(milliseconds))
                log.append("+\(milliseconds) ms")
            case 65..<72:
                let errno: Errno = Bool.random(using: &random) ? .noSpace : .ioError
                for _ in 0..<Int.random(in: 1...6, using: &random) {
                    engine.failures[engine.operationCount + Int.random(in: 1...12, using: &random)] = errno
                }
                log.append("fail \(errno)")
            case 72..<76:
                engine.capacity =
                    engine.capacity == nil ? totalBytes(engine) + Int.random(in: 0..<4096, using: &random) : nil
                log.append("capacity \(engine.capacity.map(String.init) ?? "none")")
            case 76..<82:
                if engine.completionOrder == nil {
                    var order = SeededGenerator(seed: seed &* 7 &+ UInt64(seq) &* 131 &+ UInt64(engine.operationCount))
                    engine.completionOrder = { queued in Int.random(in: 0..<queued, using: &order) }
                } else {
                    engine.completionOrder = nil
                }
                log.append("order \(engine.completionOrder == nil ? "fifo" : "random")")
            case 82..<86:
                try checkPowerCut()
            default:
                break
            }
            try turn(Bool.random(using: &random))
        }

        engine.removeFaults()
        var turns = 0
        while store.durableSeq < store.appliedSeq || store.savingSeq != nil, turns < 200 {
            clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
            try turn(true)
            turns += 1
        }
        #expect(
            store.durableSeq == store.appliedSeq,
            "seed \(seed): everything durable within 200 turns once the faults are gone")
        try checkPowerCut()
        if store.durableSeq == store.appliedSeq {
            let live = try WindowContents(store)
            let restored = try contentsAfterPowerCut(engine, options: options)
            #expect(
                restored == live || knownMarkerLosses > 0,
                "seed \(seed): live \(live)\nrestored \(restored)\n\(log.suffix(40))")
        }
    }
}

extension SaveLoopAttackTests {
    /// The incognito session's last tab closes, and its deletion fails after the marker was
    /// made (the directory's sync refuses: EIO). A tab opened in incognito afterwards is saved
    /// into the same session and acknowledged; a kill (or a cut after any later sync of the
    /// directory) then brings the window back: the marker is still there, recovery takes the
    /// session for one being deleted, and the acknowledged incognito tab is gone.
    @Test(arguments: 1...12)
    func aFailedIncognitoDeletionDoesNotTakeLaterAcknowledgedTabsWithIt(failing operation: Int) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, clock: clock)
        try store.apply(seq: 1) {
            try store.incognito.webStateList.insert(
                newTab("https://one.example/", store.incognito.profile), InsertionParams())
        }
        try store.waitUntilDurable(1)
        engine.failures[engine.operationCount + operation] = .ioError
        store.apply(seq: 2) { store.incognito.webStateList.closeAll(includingPinned: true) }
        for _ in 0..<8 { _ = try? store.poll() }
        try store.apply(seq: 3) {
            try store.incognito.webStateList.insert(
                newTab("https://three.example/", store.incognito.profile), InsertionParams())
        }
        try store.apply(seq: 4) {
            try store.regular.webStateList.insert(
                newTab("https://four.example/", store.regular.profile), InsertionParams())
        }
        let acknowledged = try turnUntilDurableAndKill(store, engine, clock, seq: 4, "failing operation \(operation)")
        #expect(
            try contentsAfterPowerCut(engine) == acknowledged,
            "failing operation \(operation): a cut loses nothing acknowledged")
    }
}

extension SaveLoopAttackTests {
    /// On the ring, the worker sleeps on the ring's descriptor while a save is in flight
    /// (`WorkerLoop.wait`). A compaction of one Browser alone submits its directory's sync
    /// when its files land, inside the turn, and nothing flushes it in that turn: the ring
    /// then never completes anything, and the loop sleeps until its next heartbeat (100 ms) or
    /// command. Each turn here is followed by the worker's wait, bounded at 2 s: a save in
    /// flight whose ring stays silent that long had a write queued and never submitted.
    @Test func aCompactionsDirectorySyncIsSubmittedInTheTurnThatQueuesIt() throws {
        try withTemporaryDirectory { root in
            let engine = try UringEngine()
            let store = WindowStore(
                root: root, windowID: windowID, engine: engine, options: StoreOptions(compactAfterRecords: 3),
                saveDelayMilliseconds: 0)
            _ = try store.recover()
            let descriptor = try #require(engine.completionDescriptor)
            var silent: [UInt64] = []
            for seq in 1...(12 as UInt64) {
                try store.apply(seq: seq) {
                    try store.regular.webStateList.insert(
                        newTab("https://\(seq).example/", store.regular.profile), InsertionParams())
                }
                try store.turn()
                var turns = 0
                while store.durableSeq < seq, turns < 100 {
                    turns += 1
                    if !engine.hasCompletionsToReap, store.savingSeq != nil {
                        var ring = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                        if poll(&ring, 1, 2000) == 0 { silent.append(seq) }
                    }
                    try store.turn()
                }
                try #require(store.durableSeq == seq)
            }
            #expect(silent.isEmpty, "saves whose ring stayed silent with a write queued: \(silent)")
        }
    }
}

extension SaveLoopAttackTests {
    /// The same class in the regular Browser: a window torn down unused deletes the session
    /// made ahead at start (`forgetUnusedSession`). When that deletion fails after its marker
    /// was made, the teardown fails and the worker keeps serving; a regular tab opened then is
    /// saved into the marked session and acknowledged, and the next start deletes it.
    @Test(arguments: 1...6)
    func aFailedUnusedWindowTeardownDoesNotTakeLaterAcknowledgedTabsWithIt(failing operation: Int) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, clock: clock)
        engine.failures[engine.operationCount + operation] = .ioError
        // A teardown that succeeds ends the worker: only a failed one goes on serving.
        guard (try? store.teardown()) == nil else { return }
        try store.apply(seq: 1) {
            try store.regular.webStateList.insert(
                newTab("https://one.example/", store.regular.profile), InsertionParams())
        }
        _ = try turnUntilDurableAndKill(store, engine, clock, seq: 1, "failing operation \(operation)")
    }
}

extension SaveLoopAttackTests {
    /// Both Browsers lag in turn: the incognito save fails while the regular one goes alone,
    /// marked lagging (seqs 3, 4); then the regular save fails while the incognito one goes
    /// alone, marked lagging too (seq 5). After a power cut, recovery leaves out the incognito
    /// save (lagging, past the regular files' 4), then every regular lagging save past what is
    /// left of incognito (2): the window comes back at 2. It said 4 (each Browser's files reach
    /// 4 or more), which a cut lost (fuzz seed 12 of `randomFaults...`: acknowledged 29,
    /// restored 2). It acknowledges what recovery keeps: 2, then all of it once the regular
    /// Browser saves again.
    @Test func browsersLaggingInTurnKeepWhatTheWindowAcknowledged() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, clock: clock)
        func both(_ seq: UInt64) throws {
            try store.apply(seq: seq) {
                try store.regular.webStateList.insert(
                    newTab("https://regular-\(seq).example/", store.regular.profile), InsertionParams())
                try store.incognito.webStateList.insert(
                    newTab("https://incognito-\(seq).example/", store.incognito.profile), InsertionParams())
            }
        }
        try both(1)
        try store.waitUntilDurable(1)
        try both(2)
        try store.waitUntilDurable(2)

        // The group's chains run in order at the flush: the regular append, then the incognito one.
        engine.failures[engine.operationCount + 2] = .ioError
        try both(3)
        _ = try store.pollWhileSaving()
        try store.apply(seq: 4) {
            try store.regular.webStateList.insert(
                newTab("https://regular-4.example/", store.regular.profile), InsertionParams())
        }
        _ = try store.pollWhileSaving()
        try #require(
            store.durableSeq(of: .regular) == 4 && store.durableSeq(of: .incognito) == 2 && store.durableSeq == 2)

        clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
        engine.failures[engine.operationCount + 1] = .ioError
        try both(5)
        _ = try store.pollWhileSaving()
        try #require(store.failingBrowsers == [.regular], "the regular save failed, the incognito one went alone")
        try #require(store.durableSeq(of: .incognito) == 5 && store.durableSeq(of: .regular) == 4)
        #expect(store.durableSeq == 2, "recovery keeps neither Browser's lagging saves")

        let restored = try simulatedWindow(engine.copy().cutting(), clock: clock)
        #expect(restored.1.seq >= store.durableSeq, "a cut keeps what was acknowledged: back at \(restored.1.seq)")
        let killed = engine.copy()
        killed.processKilled()
        #expect(try simulatedWindow(killed).1.seq >= store.durableSeq, "a kill keeps what was acknowledged")

        clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
        _ = try store.pollWhileSaving()
        #expect(store.failure == nil && store.durableSeq == 5, "the regular save lands: everything is kept")
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(engine.copy()) == live)
    }
}

extension FaultEngine {
    /// This disk after a power cut.
    fileprivate func cutting() -> FaultEngine {
        powerCut()
        return self
    }
}

extension SaveLoopAttackTests {
    /// Pipelined saves (4 in flight) on both real engines, with entries planted in both
    /// Browsers under every name a compaction or a spare journal takes next: FIFOs under
    /// snapshot names, directories under temporaries and `journal.spare`, symlinks under
    /// journal names, a file where `damaged/` belongs. Every command is durable within a
    /// bounded number of turns, and a window opened on the files after has every tab.
    @Test(arguments: ["uring", "sync"])
    func plantedNamesUnderPipelinedSavesLoseNothingAndHangNothing(engineName: String) throws {
        try withTemporaryDirectory { root in
            let engine = try #require(IOEngineChoice(rawValue: engineName)).makeEngine().engine
            let options = StoreOptions(compactAfterRecords: 5, savesInFlight: 4)
            let store = WindowStore(
                root: root, windowID: windowID, engine: engine, options: options, saveDelayMilliseconds: 0)
            _ = try store.recover()
            var urls: [[String]] = [[], []]
            var planted = false
            for seq in 1...(40 as UInt64) {
                try store.apply(seq: seq) {
                    urls[0].append("https://regular-\(seq).example/")
                    try store.regular.webStateList.insert(
                        newTab(urls[0].last!, store.regular.profile), InsertionParams())
                    if seq % 3 != 0 {
                        urls[1].append("https://incognito-\(seq).example/")
                        try store.incognito.webStateList.insert(
                            newTab(urls[1].last!, store.incognito.profile), InsertionParams())
                    }
                }
                if !planted, lstatKind(store.incognito.sessionDirectory) == "directory" {
                    planted = true
                    for directory in [store.regular.sessionDirectory, store.incognito.sessionDirectory] {
                        for generation in 2...(30 as UInt64) {
                            mkfifo(directory.appending(DiskLayout.snapshotName(generation)).string, 0o600)
                            mkdir(
                                directory.appending(DiskLayout.snapshotName(generation) + DiskLayout.temporarySuffix)
                                    .string, 0o700)
                            symlink("/nonexistent", directory.appending(DiskLayout.journalName(generation)).string)
                        }
                        mkdir(directory.appending(DiskLayout.spareJournal).string, 0o700)
                        close(open(directory.appending(DiskLayout.damagedDirectory).string, O_CREAT | O_WRONLY, 0o600))
                    }
                }
                // Mostly pipelined turns; now and then an explicit save.
                if seq % 4 == 0 { try store.save() } else { try store.turn() }
                if seq % 8 == 0 {
                    var turns = 0
                    while store.durableSeq < seq, turns < 400 {
                        try store.turn(waiting: true)
                        turns += 1
                    }
                    try #require(store.durableSeq == seq, "seq \(seq) durable within 400 turns")
                }
            }
            #expect(planted)
            for directory in [store.regular.sessionDirectory, store.incognito.sessionDirectory] {
                let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory.string)) ?? []
                #expect(
                    entries.contains { $0.hasPrefix(DiskLayout.damagedDirectory + ".not-a-directory") },
                    "compactions met the plants: \(entries)")
            }
            let reopened = WindowStore(
                root: root, windowID: UUID(uuidString: windowID.uuidString)!, engine: SyncEngine(),
                saveDelayMilliseconds: 0)
            _ = try reopened.recover()
            #expect(reopened.regular.webStateList.webStates.map(\.url) == urls[0])
            #expect(reopened.incognito.webStateList.webStates.map(\.url) == urls[1])
        }
    }
}

/// Turns the loop, each turn a full backoff later, until `seq` is durable (within a bound),
/// then checks that a kill loses none of it; returns what was acknowledged.
private func turnUntilDurableAndKill(
    _ store: WindowStore, _ engine: FaultEngine, _ clock: ManualClock, seq: UInt64, _ what: String
) throws
    -> WindowContents
{
    var turns = 0
    while store.durableSeq < seq, turns < 50 {
        clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
        _ = try? store.poll(waiting: true)
        turns += 1
    }
    try #require(store.durableSeq == seq, "\(what): acknowledged")
    let acknowledged = try WindowContents(store)
    let killed = engine.copy()
    killed.processKilled()
    let (restarted, _) = try simulatedWindow(killed)
    #expect(try WindowContents(restarted) == acknowledged, "\(what): a kill loses nothing acknowledged")
    return acknowledged
}
