import BrowserModel
import Foundation
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Failed saves, in process on the fault engine and a hand-moved clock: retried by themselves
/// with backoff, reported once per episode, and failing one Browser at a time.
@Suite struct SaveRetryTests {
    @Test func theBackoffDoublesFrom100MillisecondsAndIsCapped() {
        let delays = (1...9).map { SavePolicy.retryDelayMilliseconds(afterFailures: $0) }
        #expect(delays == [100, 200, 400, 800, 1600, 3200, 3200, 3200, 3200])
        #expect(
            SavePolicy.retryDelayMilliseconds(afterFailures: .max) == SavePolicy.maximumRetryMilliseconds,
            "no shift overflows")
    }

    /// Three failed attempts, then the disk works: the save lands on the loop's own retries,
    /// with no request between them, each after its backoff; the episode is reported at its
    /// start and its end, every attempt counted.
    @Test func aFailedSaveIsRetriedByItselfAfterABackoff() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, clock: clock)
        var browsing = WindowBrowsing(seed: 5, incognitoOneIn: 1_000_000)
        try browsing.step(store, seq: 1)
        try store.waitUntilDurable(1)

        for next in 1...3 { engine.failures[engine.operationCount + next] = .noSpace }
        try browsing.step(store, seq: 2)
        var events = try store.pollWhileSaving()
        #expect(store.durableSeq == 1)
        #expect(events.failures.map(\.attempt) == [1] && events.failures.first?.error.errno == .noSpace)
        #expect(store.failure?.errno == .noSpace && store.failingBrowsers == [.regular])
        #expect(store.nextDeadline == clock.now + 100_000_000, "the loop wakes for the retry")

        // Not before the backoff: the loop turns, nothing is written.
        let operations = engine.operationCount
        events = try store.poll()
        #expect(events.isEmpty && engine.operationCount == operations)

        clock.advance(milliseconds: 100)
        events = try store.pollWhileSaving()
        #expect(events.failures.map(\.attempt) == [2] && events.failures.first?.retryAfterMilliseconds == 200)
        clock.advance(milliseconds: 199)
        #expect(try store.pollWhileSaving().isEmpty, "the second backoff is 200 ms")
        clock.advance(milliseconds: 1)
        #expect(try store.pollWhileSaving().failures.map(\.attempt) == [3])
        clock.advance(milliseconds: 400)
        events = try store.pollWhileSaving()
        #expect(events.contains(.durable(2)))
        #expect(events.contains(.recovered(.regular, failedAttempts: 3)))
        #expect(store.durableSeq == 2 && store.failure == nil && store.nextDeadline == nil)
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(engine) == live)
    }

    /// A durable wait is an explicit request: it retries at once, whatever the backoff, and
    /// throws as soon as that attempt fails.
    @Test func aDurableWaitRetriesAtOnceAndThrowsWhenTheSaveFails() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, clock: clock)
        var browsing = WindowBrowsing(seed: 6, incognitoOneIn: 1_000_000)
        try browsing.step(store, seq: 1)
        try store.waitUntilDurable(1)
        for next in 1...2 { engine.failures[engine.operationCount + next] = .ioError }
        try browsing.step(store, seq: 2)
        _ = try store.pollWhileSaving()
        let operations = engine.operationCount
        #expect(throws: StoreError.self) { try store.waitUntilDurable(2) }
        #expect(engine.operationCount == operations + 1, "one attempt, at once, not after the 100 ms backoff")
        try store.waitUntilDurable(2)
        #expect(store.durableSeq == 2)
    }

    /// The incognito Browser's first save needs new files, which a full disk refuses; the
    /// regular Browser's save in the same turn goes on alone, durable and kept by recovery.
    /// The incognito save lands once room returns, by itself.
    @Test func aFailingIncognitoSaveDoesNotHoldTheRegularOne() throws {
        let (engine, clock, store) = try regularWindowDurableThroughOne()
        let before = try WindowContents(store)

        engine.capacity = totalBytes(engine)
        try store.apply(seq: 2) {
            try store.incognito.webStateList.insert(
                newTab("https://private.example/", store.incognito.profile), InsertionParams())
        }
        try store.apply(seq: 3) {
            try store.regular.webStateList.insert(
                newTab("https://public.example/", store.regular.profile), InsertionParams())
        }
        let events = try store.pollWhileSaving()
        #expect(events.failures.map(\.browser) == [.incognito])
        #expect(store.durableSeq(of: .regular) == 3, "the regular Browser saved alone")
        #expect(store.durableSeq(of: .incognito) == 1)
        #expect(store.durableSeq == 1, "the window is durable through what both Browsers have")

        let restored = try contentsAfterPowerCut(engine.copy())
        // Saved, but not durable for the window: after a cut it comes back as it was after one
        // command, never with the regular change and without the incognito one before it.
        #expect(restored == before, "the regular save made while the incognito Browser lagged is left out")

        engine.capacity = nil
        clock.advance(milliseconds: 100)
        let later = try store.pollWhileSaving()
        #expect(later.contains(.recovered(.incognito, failedAttempts: 1)) && store.durableSeq == 3)
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(engine) == live)
    }

    /// The regular Browser must write a snapshot (`needsRebase`, as after a failed read-back)
    /// while the incognito Browser's saves fail. A snapshot cannot be left out by recovery,
    /// so the regular Browser waits with its records staged: after a cut neither Browser is
    /// ahead of the other. Once the incognito Browser saves again, both land together.
    @Test func aBrowserThatMustCompactWaitsWhileTheOtherLags() throws {
        let (engine, clock, store) = try regularWindowDurableThroughOne()
        let before = try WindowContents(store)

        let incognito = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
            BrowserKind.incognito.rawValue)
        let firstSnapshot = incognito.appending(DiskLayout.snapshotName(1) + DiskLayout.temporarySuffix).string
        engine.failingOpens[firstSnapshot] = .noSpace
        try store.apply(seq: 2) {
            try store.incognito.webStateList.insert(
                newTab("https://private.example/", store.incognito.profile), InsertionParams())
        }
        store.stores[0].needsRebase = true
        try store.apply(seq: 3) {
            try store.regular.webStateList.insert(
                newTab("https://public.example/", store.regular.profile), InsertionParams())
        }
        let events = try store.pollWhileSaving()
        #expect(events.failures.map(\.browser) == [.incognito])
        #expect(store.durableSeq(of: .regular) == 1, "the regular Browser waits instead of writing a snapshot")

        #expect(try contentsAfterPowerCut(engine.copy()) == before, "neither Browser ahead of the other")

        engine.failingOpens = [:]
        clock.advance(milliseconds: 100)
        let later = try store.pollWhileSaving()
        #expect(later.contains(.recovered(.incognito, failedAttempts: 1)) && store.durableSeq == 3)
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(engine) == live)
    }

    /// Both Browsers failed; the regular one must now write a snapshot and its retry is due,
    /// while the incognito one fails again. The regular Browser waits for the other (as
    /// above), and the loop's deadline is the incognito retry, ahead: it returned the regular
    /// Browser's past retry, and the worker polled with no timeout, at 100 % CPU, for as long
    /// as the other Browser kept failing.
    @Test func aDueRetryThatMustWaitForTheOtherBrowserDoesNotWakeTheLoop() throws {
        let (engine, clock, store) = try regularWindowDurableThroughOne()

        for next in 1...64 { engine.failures[engine.operationCount + next] = .ioError }
        try store.apply(seq: 2) {
            try store.incognito.webStateList.insert(
                newTab("https://private.example/", store.incognito.profile), InsertionParams())
            try store.regular.webStateList.insert(
                newTab("https://public.example/", store.regular.profile), InsertionParams())
        }
        #expect(Set(try store.pollWhileSaving().failures.map(\.browser)) == [.regular, .incognito])

        engine.failures = [:]
        let incognito = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
            BrowserKind.incognito.rawValue)
        engine.failingOpens[incognito.appending(DiskLayout.snapshotName(1) + DiskLayout.temporarySuffix).string] =
            .noSpace
        store.stores[0].needsRebase = true
        for attempt in 2...4 {
            clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
            #expect(try store.pollWhileSaving().failures.map(\.browser) == [.incognito], "attempt \(attempt)")
            let deadline = try #require(store.nextDeadline)
            #expect(deadline > clock.now, "the loop sleeps until the incognito retry (attempt \(attempt))")
        }
        #expect(store.durableSeq == 1)

        engine.failingOpens = [:]
        clock.advance(milliseconds: SavePolicy.maximumRetryMilliseconds)
        _ = try store.pollWhileSaving()
        #expect(store.durableSeq == 2 && store.nextDeadline == nil)
        #expect(try contentsAfterPowerCut(engine) == (try WindowContents(store)))
    }

    /// Both Browsers write, the incognito write fails: the regular part landed with a commit
    /// naming both, which recovery drops without the incognito part. It is retracted and
    /// written again alone, marked lagging; a power cut before or after that gives the
    /// acknowledged state (the window is not durable through the regular change yet). Nothing
    /// acknowledged is dropped either way.
    @Test func aLandedPartOfAFailedSaveIsRewrittenAlone() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, clock: clock)
        try store.apply(seq: 1) {
            try store.regular.webStateList.insert(
                newTab("https://one.example/", store.regular.profile), InsertionParams())
        }
        try store.apply(seq: 2) {
            try store.incognito.webStateList.insert(
                newTab("https://two.example/", store.incognito.profile), InsertionParams())
        }
        try store.waitUntilDurable(2)
        let acknowledged = try WindowContents(store)

        try store.apply(seq: 3) {
            try store.regular.webStateList.insert(
                newTab("https://three.example/", store.regular.profile), InsertionParams())
        }
        try store.apply(seq: 4) {
            try store.incognito.webStateList.insert(
                newTab("https://four.example/", store.incognito.profile), InsertionParams())
        }
        // The group's writes run one per reap, in order: the regular append, then the incognito one.
        engine.completionOrder = { _ in 0 }
        engine.failures[engine.operationCount + 2] = .noSpace
        var failed: [SaveEvent] = []
        for _ in 0..<3 { failed += try store.poll() }
        #expect(failed.failures.map(\.browser) == [.incognito])
        #expect(store.savingSeq == 4, "the regular part goes again at once")
        #expect(store.durableSeq(of: .regular) == 2, "not durable: recovery would drop a save naming both")
        #expect(try contentsAfterPowerCut(engine.copy()) == acknowledged, "before the rewrite: the acknowledged state")

        _ = try store.pollWhileSaving()
        #expect(store.durableSeq(of: .regular) == 4 && store.durableSeq == 2)
        let restored = try contentsAfterPowerCut(engine.copy())
        #expect(restored == acknowledged, "the regular part, rewritten while the incognito Browser lags, is left out")

        clock.advance(milliseconds: 100)
        _ = try store.pollWhileSaving()
        #expect(store.durableSeq == 4)
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(engine) == live)
    }

    /// A compaction that fails on a full disk is reported on each failure (each is counted), and
    /// its episode's end once, when a compaction succeeds again.
    @Test func aCompactionEpisodeEndsOnceWhenCompactionWorksAgain() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let options = StoreOptions(compactAfterRecords: 6, compactAfterBytes: 1 << 20, journalPreallocation: 16 << 10)
        let store = WindowStore(
            root: simulatedRoot, windowID: windowID, engine: engine, options: options, saveDelayMilliseconds: 0,
            keys: engine.keyring.keys(for: windowID))
        _ = try store.recover()
        var browsing = WindowBrowsing(seed: 22, maxTabs: 8, incognitoOneIn: 1_000_000)
        var seq: UInt64 = 0
        func step() throws -> [SaveEvent] {
            seq += 1
            try browsing.step(store, seq: seq)
            return try store.pollWhileSaving()
        }
        for _ in 0..<3 { _ = try step() }
        // Full without a spare journal's room: a failed compaction that took the spare frees it
        // (removed with the attempt), and a disk with room again is not full. (A spare gone
        // from its name is not taken: the compaction creates its journal as before.)
        let spare = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
            BrowserKind.regular.rawValue
        ).appending(
            DiskLayout.spareJournal)
        if engine.contents(of: spare) != nil { try engine.removeFile(spare) }
        engine.capacity = totalBytes(engine)
        var events: [SaveEvent] = []
        for _ in 0..<20 { events += try step() }
        let failed = events.filter { if case .compactionFailed = $0 { true } else { false } }
        #expect(failed.count >= 2, "a deferred compaction fails again later, and counts again: \(events)")
        #expect(!events.contains(.compactionRecovered(.regular)))
        #expect(events.failures.isEmpty, "the saves ride in the journal's room")

        engine.capacity = nil
        events = []
        for _ in 0..<30 { events += try step() }
        #expect(events.filter { $0 == .compactionRecovered(.regular) }.count == 1)
    }
}

extension WindowStore {
    /// Turns the loop once, then until no save is in flight: what it reported.
    func pollWhileSaving() throws -> [SaveEvent] {
        var events = try poll()
        for _ in 0..<100 where savingSeq != nil { events += try poll() }
        return events
    }
}

/// A simulated window on a hand-moved clock whose first command (regular tabs only) is durable.
private func regularWindowDurableThroughOne() throws -> (FaultEngine, ManualClock, WindowStore) {
    let engine = FaultEngine(directories: [simulatedRoot])
    let clock = ManualClock()
    let (store, _) = try simulatedWindow(engine, clock: clock)
    var browsing = WindowBrowsing(seed: 7)
    try browsing.step(store, seq: 1, incognito: false)
    try store.waitUntilDurable(1)
    return (engine, clock, store)
}

extension [SaveEvent] {
    var failures: [SaveFailure] {
        compactMap { event in
            if case .failed(let failure) = event { failure } else { nil }
        }
    }
}
