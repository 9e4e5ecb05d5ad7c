import BrowserModel
import Foundation
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

@Suite struct StoreRoundTripTests {
    /// The same seeded browsing, saved on each engine, restores to the same window.
    @Test(arguments: ["uring", "sync", "fault"])
    func browsingSavedOnEachEngineRestoresExactly(engineName: String) throws {
        try withTemporaryDirectory { directory in
            let sharedFault = FaultEngine(directories: [directory])
            let recovery = try browseThenRestore(in: directory, seed: 7, commands: 300) {
                switch engineName {
                case "uring": try UringEngine()
                case "sync": SyncEngine()
                default: sharedFault
                }
            }
            #expect(recovery.regular.generation > 1, "300 commands with a 40-record threshold compact")
        }
    }
}

@Suite struct RingFallbackStoreTests {
    /// A window saved on a ring without each of the features a kernel may refuse (the setup
    /// flags, the registered buffers, all of them) restores to the same window.
    @Test(arguments: [RingFeatures.all, .setup, [.cooperativeTaskRun], [.registeredBuffers], []])
    func browsingSavedOnEachFallbackRestoresExactly(features: RingFeatures) throws {
        try withTemporaryDirectory { directory in
            _ = try browseThenRestore(in: directory, seed: 11, commands: 200) {
                let engine = try UringEngine(features: features)
                #expect(engine.features == features)
                return engine
            }
        }
    }
}

/// Seeded browsing of `commands` commands saved durably through one store on `engine()`, then
/// recovered by a second: expects no damage and the same window, and returns the recovery.
private func browseThenRestore(
    in directory: FilePath, seed: UInt64, commands: UInt64, engine: () throws -> any IOEngine
) throws -> WindowRecovery {
    let options = StoreOptions(compactAfterRecords: 40, compactAfterBytes: 16 << 10)
    let first = WindowStore(
        root: directory, windowID: windowID, engine: try engine(), options: options, saveDelayMilliseconds: 0)
    _ = try first.recover()
    var browsing = WindowBrowsing(seed: seed)
    for seq in 1...commands {
        try browsing.step(first, seq: seq)
        _ = try first.poll()
    }
    try first.waitUntilDurable(commands)
    #expect(first.durableSeq == first.appliedSeq)
    let expected = try WindowContents(first)
    let second = WindowStore(root: directory, windowID: windowID, engine: try engine(), options: options)
    let recovery = try second.recover()
    #expect(recovery.regular.damaged.isEmpty && recovery.incognito.damaged.isEmpty)
    #expect(try WindowContents(second) == expected)
    return recovery
}

@Suite struct SavePolicyTests {
    @Test func theDelayedSaveIsOneShotAndNotRestartedByLaterChanges() {
        var policy = SavePolicy(delayMilliseconds: 2500)
        let first = policy.changed(at: 0)
        let later = policy.changed(at: 2_000_000_000)
        let early = policy.takeDue(at: 2_499_999_999)
        let due = policy.takeDue(at: 2_500_000_000)
        let again = policy.takeDue(at: 2_600_000_000)
        #expect(!first && !later, "a delayed save, not an immediate one")
        #expect(!early && due, "due 2.5 s after the first change, not the second")
        #expect(!again, "one shot")
    }

    @Test func zeroDelaySavesEveryChangeAndCancelDropsThePendingSave() {
        var immediate = SavePolicy(delayMilliseconds: 0)
        let now = immediate.changed(at: 5)
        #expect(now)
        var delayed = SavePolicy(delayMilliseconds: 100)
        _ = delayed.changed(at: 0)
        delayed.cancel()
        let due = delayed.takeDue(at: 1_000_000_000)
        #expect(delayed.deadline == nil && !due)
    }
}

@Suite struct SaveScheduleTests {
    /// Case 3 with Chrome's delay: nothing is written before 2.5 s after the first change, even
    /// as later changes arrive; then one save covers them all.
    @Test func changesWaitForTheDelayThenOneSaveCoversThemAll() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, delay: 2500, clock: clock)
        var browsing = WindowBrowsing(seed: 3)
        let before = engine.operationCount
        for seq in 1...5 as ClosedRange<UInt64> {
            try browsing.step(store, seq: seq)
            clock.advance(milliseconds: 400)
            #expect(try store.poll().isEmpty)
        }
        #expect(engine.operationCount == before, "nothing written within the delay")
        clock.advance(milliseconds: 500)
        #expect(try store.poll().isEmpty, "the write is submitted; it completes on a later turn")
        // Command 5 changes nothing here, so the last change is command 4.
        #expect(store.appliedSeq == 4)
        #expect(try store.poll(waiting: true) == [.durable(4)])
        #expect(store.durableSeq == 4)
    }

    /// Case 1 saves at once and cancels the pending delayed save.
    @Test func backgroundSavesAtOnceAndCancelsTheTimer() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, delay: 2500, clock: clock)
        var browsing = WindowBrowsing(seed: 4)
        try browsing.step(store, seq: 1)
        #expect(store.nextDeadline != nil)
        try store.background()
        #expect(store.nextDeadline == nil)
        #expect(try store.poll(waiting: true) == [.durable(1)])
        let after = engine.operationCount
        clock.advance(milliseconds: 3000)
        #expect(try store.poll().isEmpty)
        #expect(engine.operationCount == after, "the cancelled timer writes nothing")
    }

    /// A save asked for with nothing unsaved is not a request: the next save's latency is
    /// timed from its own change, not from the earlier call.
    @Test func aSaveWithNothingUnsavedTimesNoLaterSave() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(engine, clock: clock)
        var browsing = WindowBrowsing(seed: 4)
        try browsing.step(store, seq: 1)
        try store.waitUntilDurable(1)
        try store.save()
        try store.background()
        #expect(store.pendingSaveRequests == 0)
        clock.advance(milliseconds: 10_000)
        try browsing.step(store, seq: 2)
        try store.waitUntilDurable(2)
        #expect(store.durableSeq == 2 && store.saveLatency.max == 0, "the manual clock stood still during the save")
    }

    /// Case 2 writes only when something is unsaved; restoring writes nothing.
    @Test func teardownSavesOnlyWhatIsUnsavedAndRestoreWritesNothing() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(engine, delay: 2500, clock: ManualClock())
        var browsing = WindowBrowsing(seed: 5)
        for seq in 1...3 as ClosedRange<UInt64> { try browsing.step(store, seq: seq) }
        try store.teardown()
        #expect(store.durableSeq == 3)
        let saved = engine.operationCount
        try store.teardown()
        #expect(engine.operationCount == saved, "nothing unsaved, nothing written")

        let files = try Self.sessionFiles(store, engine)
        let (restored, recovery) = try simulatedWindow(engine, delay: 2500, clock: ManualClock())
        #expect(recovery.seq == 3)
        // Nothing but a sync of each directory whose journal it continues (a killed process's
        // last rename may not be durable yet).
        #expect(try Self.sessionFiles(store, engine) == files, "a clean restore writes nothing")
        #expect(engine.operationCount - saved <= 2)
        #expect(try WindowContents(restored) == WindowContents(store))
    }

    /// Every file of the window's sessions, by path, with its bytes.
    static func sessionFiles(_ store: WindowStore, _ engine: FaultEngine) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for directory in [store.regular.sessionDirectory, store.incognito.sessionDirectory] {
            for name in try engine.directoryEntries(directory) ?? [] {
                files[directory.appending(name).string] = engine.contents(of: directory.appending(name))
            }
        }
        return files
    }

    /// Group commit: every request pending when a write starts rides on it.
    @Test func requestsPendingWhenTheWriteStartsShareIt() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(engine)
        var browsing = WindowBrowsing(seed: 6)
        var seq: UInt64 = 0
        // Until both Browsers have files: the first save of each creates them.
        while !store.stores.allSatisfy(\.isOnDisk) {
            seq += 1
            try browsing.step(store, seq: seq)
            try store.waitUntilDurable(seq)
        }
        let before = engine.operationCount
        let latencyCountBefore = store.saveLatency.totalCount
        for next in seq + 1...seq + 20 { try browsing.step(store, seq: next) }
        // A command that changes nothing (activating the active tab) asks for no save.
        let requests = store.pendingSaveRequests
        #expect(requests >= 15)
        _ = try store.poll()
        #expect(try store.poll(waiting: true) == [.durable(seq + 20)])
        #expect(engine.operationCount - before <= 2, "one append per Browser for all the requests")
        #expect(
            store.saveLatency.totalCount - latencyCountBefore == UInt64(requests), "each request's latency is recorded")
    }
}
