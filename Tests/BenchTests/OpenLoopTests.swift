import Foundation
import Glibc
import HostLimits
import IOUring
import Platform
import Testing

@testable import Bench

/// A window whose saves finish at once, except the first, which blocks the loop for
/// `stallMilliseconds` (a slow save on a blocking engine); or none ever finishes.
private final class StallingWindow: OpenLoopWindow {
    let stallMilliseconds: UInt32
    let savesFinish: Bool
    var appliedSeq: UInt64 = 0
    /// One write per advance that made new commands durable, however many it carried.
    private(set) var writesCompleted: UInt64 = 0
    private var durableSeq: UInt64 = 0
    private var stalled = false

    init(stallMilliseconds: UInt32, savesFinish: Bool = true) {
        self.stallMilliseconds = stallMilliseconds
        self.savesFinish = savesFinish
    }

    func apply(seq: UInt64) throws {
        precondition(seq == appliedSeq + 1 || appliedSeq == 0, "commands in order, none skipped")
        appliedSeq = seq
    }

    func advance() throws -> UInt64 {
        guard savesFinish else { return 0 }
        if !stalled, appliedSeq > 0 {
            stalled = true
            usleep(stallMilliseconds * 1000)
        }
        if appliedSeq > durableSeq { writesCompleted += 1 }
        durableSeq = appliedSeq
        return appliedSeq
    }

    func wait(until deadline: UInt64) throws {
        let now = monotonicNanoseconds()
        if deadline > now { usleep(UInt32(min((deadline - now) / 1000, 1_000_000))) }
    }
}

/// A window whose saves finish at once, counting the commands applied between two advances
/// (a turn of the store), after a first advance that stalls.
private final class CountingWindow: OpenLoopWindow {
    private(set) var writesCompleted: UInt64 = 0
    private(set) var mostAppliedPerTurn = 0
    private var appliedSinceAdvance = 0
    private var appliedSeq: UInt64 = 0
    private var stalled = false

    func apply(seq: UInt64) throws {
        appliedSeq = seq
        appliedSinceAdvance += 1
    }

    func advance() throws -> UInt64 {
        mostAppliedPerTurn = max(mostAppliedPerTurn, appliedSinceAdvance)
        appliedSinceAdvance = 0
        if !stalled, appliedSeq > 0 {
            stalled = true
            usleep(50_000)
        }
        writesCompleted += 1
        return appliedSeq
    }

    func wait(until deadline: UInt64) throws {
        let now = monotonicNanoseconds()
        if deadline > now { usleep(UInt32(min((deadline - now) / 1000, 1_000_000))) }
    }
}

@Suite struct OpenLoopTests {
    /// A backlog (the ~500 commands that arrived during a 50 ms stall at 10,000/s) is applied
    /// a turn's worth at a time, the store turned between, as a worker takes its ring: applied
    /// whole first, it left the saves in flight unreaped and the next unstarted meanwhile.
    @Test func aBacklogIsAppliedATurnsWorthAtATime() {
        let window = CountingWindow()
        let result = OpenLoop.measure(window, perSecond: 10_000, seconds: 0.2, firstSeq: 2)
        #expect(result.failure == nil && result.latency.totalCount == 2_000)
        #expect(
            window.mostAppliedPerTurn == Limits.maxCommandsPerTurn, "at most a turn's worth, and the backlog filled one"
        )
        #expect(
            window.writesCompleted >= 500 / UInt64(Limits.maxCommandsPerTurn),
            "the backlog took a turn per \(Limits.maxCommandsPerTurn)")
    }

    /// Commands that arrived while the first save blocked the loop were applied only after it:
    /// their latency from arrival holds that wait (measured from when they were applied, each
    /// would be near zero). And every command offered is counted: the arrivals do not slow
    /// down with the saves.
    @Test func latencyRunsFromArrivalSoItHoldsTheWaitBehindASlowSave() {
        let window = StallingWindow(stallMilliseconds: 40)
        let result = OpenLoop.measure(window, perSecond: 1000, seconds: 0.3, firstSeq: 2)
        #expect(result.failure == nil)
        #expect(result.latency.totalCount == 300, "every command offered has a latency")
        #expect(window.appliedSeq == 301, "all 300 applied, seqs 2...301")
        // About 40 commands arrived during the 40 ms stall, waiting 40 ms down to 0: the
        // slowest tenth waited at least 10 ms.
        #expect(result.latency.valueAtPercentile(95) >= 10_000, "p95 \(result.latency.valueAtPercentile(95)) µs")
        #expect(result.latency.maxRecorded >= 35_000)
        #expect(result.saves >= 290 && result.saves <= 300, "durable within the 0.3 s: \(result.saves)")
        #expect(result.seconds == 0.3)
        // The ~40 commands that arrived during the stall became durable in one write.
        #expect(
            result.writes > 0 && result.writes <= window.writesCompleted && result.writes < result.saves - 30,
            "\(result.writes) writes")
        let point = OpenLoopResult(engine: .uring, windows: 1, offeredPerSecond: 1000, workers: [result])
        #expect(abs(point.writesPerSecond - Double(result.writes) / 0.3) < 0.001)
    }

    /// A store that never makes a command durable achieves nothing, and its commands still
    /// count, with at least the time they waited (not left out of the percentiles).
    @Test func commandsNeverMadeDurableCountWithTheirWaitSoFar() {
        let result = OpenLoop.measure(
            StallingWindow(stallMilliseconds: 0, savesFinish: false), perSecond: 100, seconds: 0.1, firstSeq: 2,
            drainSeconds: 0.05)
        #expect(result.saves == 0)
        #expect(result.latency.totalCount == 10)
        #expect(result.latency.min >= 49_000, "each waited at least until the drain ended")
    }

    @Test func aPointKeptUpWhenNinetyFivePercentOfTheOfferedRateWasMadeDurable() {
        func point(achieved: UInt64) -> OpenLoopResult {
            var worker = WorkerResult()
            worker.saves = achieved
            worker.seconds = 1
            return OpenLoopResult(engine: .sync, windows: 2, offeredPerSecond: 1000, workers: [worker, worker])
        }
        #expect(
            point(achieved: 950).keptUp && point(achieved: 950).achievedPerSecond == 950,
            "per window: the mean of the windows")
        #expect(!point(achieved: 949).keptUp)
    }
}
