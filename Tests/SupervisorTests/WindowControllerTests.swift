import Foundation
import HostControl
import HostCoordination
import Testing

@testable import Supervisor

/// One window's controller without processes: what it decides alone, as the supervisor drives
/// it between spawns, stats, saves and kills.
@Suite struct WindowControllerTests {
    typealias Waiter = WindowController.DurableWaiter
    /// A kill's reply as at its signal: worker 40 killed.
    static let killed = KillReply(window: "w", killedPid: 40, whileSaving: false)

    func controller() -> WindowController {
        WindowController(id: UUID(), slot: 3, policy: RestartPolicy(), reservedAt: 0)
    }

    func stats(applied: UInt64, durable: UInt64, memoryOnlySince: UInt64 = 0) -> WorkerStats {
        var stats = WorkerStats()
        stats.appliedSeq = applied
        stats.durableSeq = durable
        stats.memoryOnlySince = memoryOnlySince
        return stats
    }

    /// Each spawn is a new generation numbering above every seq shown, the dead worker's last
    /// published seq included, with the last worker's kills cleared; a probe asked of a worker
    /// that died is asked again.
    @Test func aSpawnStartsANewGenerationAboveEverySeqShown() {
        let window = WindowController(id: UUID(), slot: 0, policy: RestartPolicy(), reservedAt: 0, probingFloors: true)
        window.prepareSpawn()
        #expect(window.generation == 1 && window.seqs.floor == 0)
        #expect(window.handle(.spawnBegan, now: 0) == [] && window.handle(.spawned, now: 0) == [])
        window.seqs.apply(4)
        #expect(window.seqs.show(4) == 4)
        window.accept(stats(applied: 6, durable: 2))
        #expect(window.handle(.probeAsked, now: 0) == [] && window.floorProbe == .asked)
        #expect(window.handle(.misbehaved, now: 0) == [.kill])
        #expect(window.handle(.misbehaved, now: 0) == [], "killed once")
        #expect(window.handle(.watchdogFired, now: 0) == [.kill])
        #expect(window.handle(.watchdogFired, now: 0) == [], "killed once")
        #expect(window.killedForMisbehaving && window.killedByWatchdog)
        _ = window.handle(.workerDied(cleanExit: false, noFault: false), now: 0)
        #expect(window.killedForMisbehaving, "nothing it left is read until the next worker")
        window.prepareSpawn()
        #expect(window.generation == 2 && window.seqs.floor == 6, "status showed 6")
        #expect(!window.workerRestored)
        _ = window.handle(.spawnBegan, now: 0)
        #expect(!window.killedForMisbehaving && !window.killedByWatchdog)
        #expect(window.floorProbe == .needed, "the probe is asked of the next worker")
    }

    /// A probe answered is a requested kill: the window's next worker starts at once and the
    /// death counts for nothing; only that worker may become ready.
    @Test func anAnsweredProbeMakesWayForTheNextWorker() {
        let window = WindowController(id: UUID(), slot: 0, policy: RestartPolicy(), reservedAt: 0, probingFloors: true)
        for event in [WindowLifecycle.Event.spawnBegan, .spawned, .probeAsked] { _ = window.handle(event, now: 0) }
        #expect(window.handle(.floorsProbed, now: 0) == [.kill])
        #expect(window.floorProbe == nil && window.lifecycle.killRequested)
        #expect(window.handle(.workerDied(cleanExit: false, noFault: false), now: 5) == [.spawn])
        #expect(
            window.lifecycle.state == .restartPending(at: 5, .crash) && window.lifecycle.history.failedStarts == 0,
            "no failed start counted")
        for event in [WindowLifecycle.Event.spawnBegan, .spawned, .becameReady] { _ = window.handle(event, now: 5) }
        #expect(window.lifecycle.state == .ready)
    }

    /// The first memory-only seq any of the window's workers published is kept: a later worker's
    /// higher one, or none, does not hide it.
    @Test func theFirstMemoryOnlySeqIsKeptAcrossWorkers() {
        let window = controller()
        window.accept(stats(applied: 9, durable: 3, memoryOnlySince: 7))
        window.accept(stats(applied: 12, durable: 12, memoryOnlySince: 0))
        window.accept(stats(applied: 14, durable: 12, memoryOnlySince: 13))
        #expect(window.memoryOnlySince == 7 && window.lastStats.appliedSeq == 14)
    }

    /// A look at the slot answers the waits its durable seq covers, fails those asked before a
    /// save that failed, and keeps the rest.
    @Test func durableWaitsEndByTheirSeqOrAFailureAfterThem() {
        let window = controller()
        window.durableWaiters = [
            Waiter(seq: 5, client: 1, failuresBefore: 0), Waiter(seq: 9, client: 2, failuresBefore: 0),
            Waiter(seq: 9, client: 3, failuresBefore: 2),
        ]
        let quiet = window.takeDurableWaiters(durable: 5, saveFailures: 2, failing: false)
        #expect(quiet.done.map(\.client) == [1] && quiet.failed.isEmpty, "saves not failing now: a count is no failure")
        let failing = window.takeDurableWaiters(durable: 5, saveFailures: 2, failing: true)
        #expect(
            failing.done.isEmpty && failing.failed.map(\.client) == [2], "client 3 asked after the failures counted")
        #expect(window.durableWaiters.map(\.client) == [3])
        #expect(window.takeDurableWaiters(above: 8).map(\.client) == [3] && window.durableWaiters.isEmpty)
    }

    /// Connect waiters are answered apart from kills waiting for the restart, which stay.
    @Test func connectWaitersAreTakenAndKillWaitersStay() {
        let window = controller()
        window.readyWaiters = [
            .connect(1), .restart(2, reply: Self.killed, signal: "KILL", deadline: 100), .connect(3),
        ]
        #expect(window.takeConnectWaiters() == [1, 3])
        #expect(window.readyWaiters.count == 1 && window.waitsForRestart)
    }

    /// A kill's wait expires only once its deadline passed with the worker it signalled still
    /// serving; none expires while no worker runs (the signalled one died: a restart comes).
    @Test func aKillWaitExpiresOnlyPastItsDeadlineWithNoWorkerChange() {
        let window = controller()
        window.readyWaiters = [.restart(2, reply: Self.killed, signal: "SEGV", deadline: 100)]
        #expect(window.takeExpiredKillWaiters(now: 200).isEmpty, "no worker runs: its death was seen, a restart comes")
        #expect(window.takeExpiredKillWaiters(now: 50).isEmpty)
        #expect(window.waitsForRestart)
    }

    /// Ready only once the lifecycle says so and a worker serves; what the worker restored is
    /// the lifecycle's until the next worker is spawned.
    @Test func readyIsTheLifecyclesReadyWithAWorker() {
        let window = controller()
        #expect(!window.isReady && !window.isLive && window.state == .reserved)
        _ = window.handle(.spawnBegan, now: 0)
        _ = window.handle(.spawned, now: 0)
        #expect(!window.isReady, "starting, and no process behind it")
        #expect(window.handle(.becameReady, now: 1) == [])
        #expect(!window.isReady, "no worker process: not live")
        #expect(window.state == .foreground && window.workerRestored)
        _ = window.handle(.workerDied(cleanExit: false, noFault: false), now: 2)
        #expect(window.workerRestored, "its death follows a restore: no failed start")
        #expect(window.history.failedStarts == 0)
        _ = window.handle(.restartTimerFired, now: .max)
        _ = window.handle(.spawnBegan, now: .max)
        #expect(!window.workerRestored, "the next worker has restored nothing yet")
    }

    /// A restore names the seqs shown above it lost, and does not believe a lost range holding
    /// the seq it restored (a crafted `handed-out`); durable answers then say which seqs below
    /// them were lost, and one covering a memory-only change is 71.
    @Test func aRestoreNamesTheLostSeqsAndDurableAnswersSayThem() {
        var lost = LostSeqs()
        lost.insert(3...4)
        let window = controller()
        window.seqs = SeqBook(handedOut: HandedOutWindow(ceiling: HandedOutCeiling(seq: 9, tab: 0), lost: lost))
        window.accept(stats(applied: 4, durable: 4))
        let (contradicted, named) = window.restored()
        #expect(contradicted == 3...4 && named == 5...9)
        #expect(window.seqs.lost.ranges == [5...9])
        #expect(window.durableReply(durable: 4).lostSeqs == nil, "lost seqs above the durable one are not its")
        #expect(window.durableReply(durable: 12).lostSeqs?.count == 1)
        #expect(window.durableAnswer(durable: 4, target: 4).code == .ok)
        window.accept(stats(applied: 6, durable: 6, memoryOnlySince: 6))
        #expect(
            window.durableAnswer(durable: 6, target: 5).code == .ok,
            "the memory-only change is after the seq waited for")
        #expect(window.durableAnswer(durable: 6, target: 6).code == .memoryOnly)
    }

    /// The watchdog counts from the last time the heartbeat word moved, by the supervisor's
    /// clock: a word left at any value is no heartbeat; a worker starting is judged by the start
    /// timeout instead.
    @Test func theWatchdogCountsFromTheLastMoveOfTheHeartbeatWord() {
        let window = controller()
        window.spawnedAt = 100
        for event in [WindowLifecycle.Event.spawnBegan, .spawned] { _ = window.handle(event, now: 100) }
        #expect(window.watch(heartbeat: 0, now: 150, watchdogNanoseconds: 10, startTimeoutNanoseconds: 60) == nil)
        #expect(
            window.watch(heartbeat: 0, now: 161, watchdogNanoseconds: 10, startTimeoutNanoseconds: 60) == .notRestored)
        _ = window.handle(.becameReady, now: 161)
        window.startWatching(heartbeat: 7, now: 161)
        #expect(
            window.watch(heartbeat: 7, now: 171, watchdogNanoseconds: 10, startTimeoutNanoseconds: 60) == nil,
            "not past the watchdog")
        #expect(
            window.watch(heartbeat: 7, now: 172, watchdogNanoseconds: 10, startTimeoutNanoseconds: 60)
                == .silent(nanoseconds: 11))
        #expect(
            window.watch(heartbeat: 8, now: 180, watchdogNanoseconds: 10, startTimeoutNanoseconds: 60) == nil,
            "it moved")
        #expect(window.watch(heartbeat: 8, now: 190, watchdogNanoseconds: 10, startTimeoutNanoseconds: 60) == nil)
        #expect(
            window.watch(heartbeat: 8, now: 191, watchdogNanoseconds: 10, startTimeoutNanoseconds: 60)
                == .silent(nanoseconds: 11))
    }

    /// Once the watchdog has killed a worker, it does not look at it again until its death is
    /// reaped: a worker slow to die (in uninterruptible sleep) is not killed and logged anew at
    /// every turn of the loop.
    @Test(arguments: [false, true]) func theWatchdogKillsAWorkerOnce(restored: Bool) {
        let window = controller()
        window.spawnedAt = 100
        for event in [WindowLifecycle.Event.spawnBegan, .spawned] { _ = window.handle(event, now: 100) }
        if restored {
            _ = window.handle(.becameReady, now: 100)
            window.startWatching(heartbeat: 7, now: 100)
        }
        let late = { (now: UInt64) in
            window.watch(heartbeat: 7, now: now, watchdogNanoseconds: 10, startTimeoutNanoseconds: 60)
        }
        #expect(late(200) == (restored ? .silent(nanoseconds: 100) : .notRestored))
        #expect(window.handle(.watchdogFired, now: 200) == [.kill])
        #expect(late(300) == nil && late(400) == nil, "its death comes next, not another kill")
        _ = window.handle(.workerDied(cleanExit: false, noFault: false), now: 500)
        window.prepareSpawn()
        _ = window.handle(.spawnBegan, now: 600)
        #expect(!window.killedByWatchdog, "the next worker is watched anew")
    }
}
