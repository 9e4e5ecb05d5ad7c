import BrowserModel
import Foundation
import HostLimits
import TestSupport
import Testing

@testable import SessionStore

/// Issue 29: group commit on the ring. While a save is in flight, commands wait for it (as a
/// blocking engine's do) and the next save carries them together, unless enough wait
/// (`GroupCommit.batchCommands`) or the oldest has waited a flush.
@Suite struct GroupCommitTests {
    // MARK: the rule alone

    @Test func nothingInFlightStartsASaveForOneCommand() {
        let rule = GroupCommit()
        #expect(rule.shouldStart(inFlight: 0, waitingCommands: 1, oldestWaitNanoseconds: 0))
        #expect(
            !rule.shouldStart(inFlight: 0, waitingCommands: 0, oldestWaitNanoseconds: 1_000_000_000), "nothing to carry"
        )
    }

    @Test func aSaveInFlightHoldsTheNextUntilABatchOrAFlushHasPassed() {
        let rule = GroupCommit(flushNanoseconds: 400_000)
        #expect(!rule.shouldStart(inFlight: 1, waitingCommands: 3, oldestWaitNanoseconds: 100_000))
        #expect(
            !rule.shouldStart(
                inFlight: 1, waitingCommands: GroupCommit.batchCommands - 1, oldestWaitNanoseconds: 399_999))
        #expect(
            rule.shouldStart(inFlight: 1, waitingCommands: GroupCommit.batchCommands, oldestWaitNanoseconds: 0),
            "a batch")
        #expect(rule.shouldStart(inFlight: 1, waitingCommands: 1, oldestWaitNanoseconds: 400_000), "a flush waited")
        #expect(
            rule.shouldStart(
                inFlight: Limits.maxSavesInFlight - 1, waitingCommands: GroupCommit.batchCommands,
                oldestWaitNanoseconds: 0))
    }

    /// The flush estimate follows what saves alone took, an eighth at a time, and a stall
    /// counts only up to the longest wait: a command never waits longer than that for depth.
    @Test func theFlushEstimateFollowsSavesAloneAndAStallIsCapped() {
        var rule = GroupCommit(flushNanoseconds: 800_000)
        for _ in 0..<64 { rule.observe(saveNanoseconds: 200_000) }
        #expect((200_000...210_000).contains(rule.flushNanoseconds), "\(rule.flushNanoseconds)")
        rule.observe(saveNanoseconds: 5_000_000_000)
        #expect(rule.flushNanoseconds <= 200_000 + GroupCommit.maximumWaitNanoseconds / 8 + 1)
        let stalled = GroupCommit(flushNanoseconds: 50_000_000)
        #expect(
            stalled.shouldStart(
                inFlight: 1, waitingCommands: 1, oldestWaitNanoseconds: GroupCommit.maximumWaitNanoseconds))
    }

    // MARK: in the store

    private func navigate(_ store: WindowStore, seq: UInt64) throws {
        let browser = store.regular
        try store.apply(seq: seq) {
            try browser.webStateList.insert(
                WebState(id: browser.profile.makeWebStateID(), creationTime: .zero), InsertionParams(activate: true))
        }
    }

    /// Commands arriving one at a time, 10 µs apart, each followed by a turn, on a device that
    /// lands each write `latencyTurns` turns after it was submitted, however many are in
    /// flight (a deep queue): how many saves started, every command made durable.
    private func savesStarted(commands: Int, groupCommit: GroupCommit?, latencyTurns: Int = 8) throws -> Int {
        let disk = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(disk, options: StoreOptions(groupCommit: groupCommit), clock: clock)
        try navigate(store, seq: 1)
        try store.waitUntilDurable(1)
        var started: Set<UInt64> = []
        var turn = 0
        var submittedAt: [Int] = []
        disk.completionOrder = { _ in
            guard let oldest = submittedAt.first, turn - oldest >= latencyTurns else { return nil }
            submittedAt.removeFirst()
            return 0
        }
        for seq in 2...UInt64(commands + 1) {
            try navigate(store, seq: seq)
            clock.now += 10_000
            turn += 1
            try store.turn()
            submittedAt += Array(repeating: turn, count: max(0, disk.inFlight - submittedAt.count))
            if let saving = store.savingSeq { started.insert(saving) }
        }
        disk.completionOrder = nil
        try store.settle()
        #expect(store.durableSeq == UInt64(commands + 1), "every command durable")
        return started.count
    }

    /// Under load (a command every 10 µs, each write landing 80 µs after it went), saves
    /// started at every turn carry one command each, eight in flight; with group commit each
    /// carries several, and the window still makes every command durable.
    @Test func commandsPerWriteRiseUnderLoad() throws {
        let atOnce = try savesStarted(commands: 200, groupCommit: nil)
        let grouped = try savesStarted(commands: 200, groupCommit: GroupCommit(flushNanoseconds: 300_000))
        #expect(atOnce >= 190, "at once: \(atOnce) saves for 200 commands")
        #expect(grouped <= 40, "grouped: \(grouped) saves for 200 commands")
    }

    /// Commands that keep coming faster than a flush still go out within a flush: the oldest
    /// waiting past the estimate starts a save beside the one in flight.
    @Test func aCommandWaitsNoLongerThanAFlushForTheSaveInFlight() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(
            disk, options: StoreOptions(groupCommit: GroupCommit(flushNanoseconds: 300_000)), clock: clock)
        try navigate(store, seq: 1)
        try store.waitUntilDurable(1)
        disk.completionOrder = { _ in nil }
        try navigate(store, seq: 2)
        try store.turn()
        #expect(store.savingSeq == 2 && disk.inFlight == 1, "nothing in flight: save 2 starts at once")
        // The estimate moved with save 1, which ran alone (in no time on this clock).
        let flush = try #require(store.groupCommit?.flushNanoseconds)
        #expect(flush < 300_000 && flush > 200_000)
        try navigate(store, seq: 3)
        clock.now += flush - 1
        try store.turn()
        #expect(store.savingSeq == 2, "command 3 waits for save 2")
        clock.now += 1
        try store.turn()
        #expect(store.savingSeq == 3 && disk.inFlight == 2, "a flush waited: save 3 starts beside 2")
        disk.completionOrder = nil
        try store.settle()
        #expect(store.durableSeq == 3)
    }

    /// An explicit save (`ctl save`, a durable wait) does not wait for group commit.
    @Test func anExplicitSaveStartsAtOnce() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(disk, options: StoreOptions(groupCommit: GroupCommit()), clock: clock)
        try navigate(store, seq: 1)
        try store.waitUntilDurable(1)
        disk.completionOrder = { _ in nil }
        try navigate(store, seq: 2)
        try store.turn()
        try navigate(store, seq: 3)
        try store.turn()
        #expect(store.savingSeq == 2)
        try store.save()
        #expect(store.savingSeq == 3 && disk.inFlight == 2)
        disk.completionOrder = nil
        try store.settle()
        #expect(store.durableSeq == 3)
    }
}
