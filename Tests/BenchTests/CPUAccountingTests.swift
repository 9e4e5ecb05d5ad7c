import Foundation
import Glibc
import Testing

@testable import Bench

/// Burns `microseconds` of this thread's CPU (not of wall time: a shared machine may
/// preempt it).
private func spin(microseconds: UInt64) {
    func threadCPU() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
    let end = threadCPU() + microseconds
    while threadCPU() < end {}
}

@Suite struct CPUAccountingTests {
    @Test func procStatsFirstLineIsUserAndSystemWithoutIdleIOWaitStealOrGuestTwice() throws {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let ticks = try #require(
            MachineTicks(procStat: "cpu  100 20 300 9000 50 7 3 11 13 17\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 5\n"))
        #expect(
            ticks.user == 120 && ticks.system == 310, "guest is inside user already; steal is not this machine's work")
        let later = try #require(MachineTicks(procStat: "cpu  150 20 310 9100 60 7 4 90 40 17\n"))
        #expect(later.since(ticks, ticksPerSecond: 100) == CPUTime(user: 500_000, system: 110_000))
        // A counter that went back (another boot's reading) gives nothing, not a wrapped figure.
        #expect(ticks.since(later, ticksPerSecond: 100) == .zero)
        // The live file parses.
        #expect(MachineTicks.now() != nil)
    }

    @Test func aProcStatThatIsNotTheKernelsIsRefused() {
        for text in [
            "", "intr 5\ncpu  1 2 3 4 5 6 7\n", "cpu  1 2 3\n", "cpu  1 2 x 4 5 6 7\n", "cpu  -1 2 3 4 5 6 7\n",
            "cpu  18446744073709551615 2 3 4 5 6 7\n", "cpu0 1 2 3 4 5 6 7\n",
        ] {
            #expect(MachineTicks(procStat: text) == nil, "\(text.debugDescription)")
        }
    }

    @Test func cpuPerSaveIsTheTimeOverTheSavesAndTheMachineLessTheWorkersOwnOverhead() {
        let perSave = CPUPerSave(CPUTime(user: 3000, system: 9000), saves: 100)
        #expect(perSave == CPUPerSave(CPUTime(user: 3000, system: 9000), saves: 100))
        #expect(perSave?.user == 30 && perSave?.system == 90 && perSave?.total == 120)
        #expect(CPUPerSave(CPUTime(user: 5, system: 5), saves: 0) == nil, "no saves: no figure, not infinity")
        // The machine was busy 50 ms + 80 ms; the worker spent 20 + 30 of it, 12 + 25 inside its
        // saves: its 8 + 5 outside them (preparing changes) are not the saves'.
        let machine = CPUMeter.machine(
            CPUTime(user: 50_000, system: 80_000), process: CPUTime(user: 20_000, system: 30_000),
            saving: CPUTime(user: 12_000, system: 25_000))
        #expect(machine == CPUTime(user: 42_000, system: 75_000))
        // The kernel's split may move between two readings: floored, never wrapped.
        #expect(CPUTime(user: 10, system: 5) - CPUTime(user: 4, system: 9) == CPUTime(user: 6, system: 0))
    }

    @Test func kernelThreadsAreToldByTheirFlagAndTheirRuntimesAddUp() throws {
        #expect(
            KernelThreads.isKernelThread(stat: "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0") == true)
        // A name with spaces and a parenthesis: the fields count from the last one.
        #expect(
            KernelThreads.isKernelThread(stat: "77 (a) b (c)) S 1 77 77 0 -1 4194560 9 0 0 0 5 3 0 0 20 0 1 0") == false
        )
        #expect(
            KernelThreads.isKernelThread(stat: "garbage") == nil
                && KernelThreads.isKernelThread(stat: "1 (x) S 1 2") == nil)
        #expect(KernelThreads.runtime(schedstat: "8184833 14138660 186\n") == 8_184_833)
        #expect(KernelThreads.runtime(schedstat: "x 1 2") == nil)
        // 5 ms more for pid 10, 2 ms for a thread that appeared, pid 30 ended, pid 40 reused
        // (its new runtime counts from zero).
        let start: [Int32: UInt64] = [10: 1_000_000, 30: 9_000_000, 40: 50_000_000]
        let end: [Int32: UInt64] = [10: 6_000_000, 20: 2_000_000, 40: 1_000_000]
        #expect(KernelThreads.microseconds(from: start, to: end) == 5000 + 2000 + 1000)
        // This machine has kernel threads, and pid 2 (kthreadd) is one.
        #expect(KernelThreads.runtimes()[2] != nil)
    }

    /// Rounds add up; a round whose machine time is unknown leaves the sum unknown; the row's
    /// machine figure is a lone window's only.
    @Test func roundsAndWindowsAddUpAndOnlyALoneWindowHasTheMachines() {
        func worker(saves: UInt64, cpu: UInt64, machine: UInt64?) -> WorkerResult {
            var result = WorkerResult()
            result.saves = saves
            result.seconds = 1
            for _ in 0..<saves { _ = result.latency.record(100) }
            result.cpu = CPUTime(user: cpu, system: cpu)
            result.machineCPU = machine.map { CPUTime(user: $0, system: 2 * $0) }
            result.kernelThreadsCPU = cpu
            return result
        }
        var total = WorkerResult()
        total.add(worker(saves: 10, cpu: 100, machine: 300))
        total.add(worker(saves: 30, cpu: 300, machine: 500))
        #expect(total.cpu == CPUTime(user: 400, system: 400) && total.machineCPU == CPUTime(user: 800, system: 1600))
        let row = SaveResult(engine: .uring, windows: 1, size: .small, workers: [total])
        #expect(row.cpu == CPUPerSave(CPUTime(user: 400, system: 400), saves: 40) && row.cpu?.total == 20)
        #expect(row.machineCPU?.total == 60)
        #expect(
            row.withKernelThreads == CPUPerSave(CPUTime(user: 400, system: 800), saves: 40),
            "the kernel threads' time is system time")
        var unknown = total
        unknown.add(worker(saves: 10, cpu: 100, machine: nil))
        #expect(unknown.machineCPU == nil)
        let eight = SaveResult(engine: .uring, windows: 8, size: .small, workers: Array(repeating: total, count: 8))
        #expect(eight.cpu?.total == 20, "every window's time over every window's saves")
        #expect(
            eight.machineCPU == nil && eight.withKernelThreads == nil,
            "with 8 windows each one's machine time overlaps the others'")
    }

    /// A real loop: the CPU a save burns is counted, the CPU preparing the next change burns
    /// is not, and the machine's busy time covers at least the saves'.
    @Test func theSaveLoopCountsTheSavesCPUAndNotThePreparations() throws {
        final class Burner: SaveWorkload {
            var bytesWritten: UInt64 = 0
            func prepare() throws { spin(microseconds: 20_000) }
            func save() throws { spin(microseconds: 2000) }
        }
        let result = WorkerResult.measure(Burner(), seconds: 0.3)
        #expect(result.saves >= 1, "at least one save, however busy the machine")
        let perSave = try #require(CPUPerSave(result.cpu, saves: result.saves))
        // The process's time counts every thread: tests running beside this one on the other
        // core may add up to a core's worth, never the 20 ms each preparation burns.
        #expect(
            perSave.total >= 1900 && perSave.total < 15_000,
            "\(perSave.total) µs a save, for 2,000 burnt in it and 20,000 before it")
        let machine = try #require(result.machineCPU)
        // The machine's clock ticks are 10 ms: allow two of them on each of two CPUs.
        #expect(machine.total + 40_000 >= result.cpu.total, "machine \(machine.total) µs, saves \(result.cpu.total) µs")
    }
}
