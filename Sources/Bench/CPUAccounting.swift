import Foundation
import Glibc

/// CPU time, user and system apart, in microseconds.
public struct CPUTime: Codable, Sendable, Equatable {
    public var user: UInt64
    public var system: UInt64

    public init(user: UInt64, system: UInt64) {
        self.user = user
        self.system = system
    }

    public static let zero = CPUTime(user: 0, system: 0)

    public var total: UInt64 { user + system }

    /// The calling process's, every thread included (`getrusage(RUSAGE_SELF)`): the sum is
    /// the scheduler's exact runtime; the kernel splits it into user and system by tick samples.
    static func ofThisProcess() -> CPUTime {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func microseconds(_ time: timeval) -> UInt64 {
            UInt64(max(0, time.tv_sec)) * 1_000_000 + UInt64(max(0, time.tv_usec))
        }
        return CPUTime(user: microseconds(usage.ru_utime), system: microseconds(usage.ru_stime))
    }

    public static func + (a: CPUTime, b: CPUTime) -> CPUTime {
        CPUTime(user: a.user + b.user, system: a.system + b.system)
    }

    /// `a` less `b`, each part floored at zero: the kernel's user/system split of a process's
    /// time may shift between two readings, and the machine's figure less the worker's own
    /// overhead must not wrap.
    public static func - (a: CPUTime, b: CPUTime) -> CPUTime {
        CPUTime(user: a.user > b.user ? a.user - b.user : 0, system: a.system > b.system ? a.system - b.system : 0)
    }
}

/// The whole machine's busy time so far, from `/proc/stat`'s first line: every CPU, every
/// process and kernel thread (the flush's kworker included), interrupts included; idle,
/// iowait and time stolen by a hypervisor left out.
public struct MachineTicks: Sendable, Equatable {
    /// user + nice, in clock ticks.
    public var user: UInt64
    /// system + irq + softirq, in clock ticks.
    public var system: UInt64

    /// The `cpu` line of `/proc/stat`'s text (`cpu  user nice system idle iowait irq softirq
    /// steal guest guest_nice`, guest time already inside user and nice); nil when it is not there
    /// or not numbers.
    public init?(procStat text: String) {
        guard let line = text.split(separator: "\n", maxSplits: 1).first, line.hasPrefix("cpu ") else { return nil }
        let fields = line.split(separator: " ").dropFirst().map { UInt64($0) }
        guard fields.count >= 7, fields.allSatisfy({ $0 != nil }) else { return nil }
        let ticks = fields.compactMap { $0 }
        let (user, nice, system, irq, softirq) = (ticks[0], ticks[1], ticks[2], ticks[5], ticks[6])
        // A counter near the top of UInt64 is no clock's: refuse it rather than overflow.
        guard [user, nice, system, irq, softirq].allSatisfy({ $0 < 1 << 56 }) else { return nil }
        self.user = user + nice
        self.system = system + irq + softirq
    }

    /// Now; nil where `/proc/stat` cannot be read.
    static func now() -> MachineTicks? {
        guard let data = FileManager.default.contents(atPath: "/proc/stat") else { return nil }
        return MachineTicks(procStat: String(decoding: data.prefix(4096), as: UTF8.self))
    }

    /// The busy time between `earlier` and this reading, at `ticksPerSecond` (`_SC_CLK_TCK`).
    public func since(_ earlier: MachineTicks, ticksPerSecond: Int) -> CPUTime {
        let microsecondsPerTick = UInt64(1_000_000 / max(1, ticksPerSecond))
        func delta(_ now: UInt64, _ then: UInt64) -> UInt64 { now > then ? (now - then) * microsecondsPerTick : 0 }
        return CPUTime(user: delta(user, earlier.user), system: delta(system, earlier.system))
    }

    static var ticksPerSecond: Int { sysconf(Int32(_SC_CLK_TCK)) }
}

/// Kernel threads' time on a CPU (`/proc/<pid>/schedstat`, exact, in ns), by pid: the
/// kworkers that complete a direct write's flush, the block layer's and the file system's
/// threads. Unlike `/proc/stat`, it leaves out whatever else user space runs meanwhile.
enum KernelThreads {
    /// `PF_KTHREAD` in `/proc/<pid>/stat`'s flags.
    static let flag: UInt64 = 0x0020_0000

    /// Every kernel thread's runtime now, by pid.
    static func runtimes() -> [Int32: UInt64] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [:] }
        var runtimes: [Int32: UInt64] = [:]
        for entry in entries {
            guard let pid = Int32(entry), let stat = FileManager.default.contents(atPath: "/proc/\(entry)/stat"),
                isKernelThread(stat: String(decoding: stat.prefix(1024), as: UTF8.self)) == true,
                let schedstat = FileManager.default.contents(atPath: "/proc/\(entry)/schedstat"),
                let runtime = runtime(schedstat: String(decoding: schedstat.prefix(256), as: UTF8.self))
            else { continue }
            runtimes[pid] = runtime
        }
        return runtimes
    }

    /// Whether a `/proc/<pid>/stat` line is a kernel thread's (flags, the 9th field, counted
    /// after the name in parentheses, which may hold spaces); nil when it is not such a line.
    static func isKernelThread(stat text: String) -> Bool? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 6, let flags = UInt64(fields[6]) else { return nil }
        return flags & flag != 0
    }

    /// The first field of `/proc/<pid>/schedstat`: ns on a CPU.
    static func runtime(schedstat text: String) -> UInt64? { text.split(separator: " ").first.flatMap { UInt64($0) } }

    /// Microseconds run between two readings: a thread that appeared counts from zero, one that
    /// went back (a pid reused) from its new start; one that ended takes its time with it.
    static func microseconds(from start: [Int32: UInt64], to end: [Int32: UInt64]) -> UInt64 {
        end.reduce(0) { total, entry in
            let before = start[entry.key] ?? 0
            return total + (entry.value >= before ? entry.value - before : entry.value) / 1000
        }
    }
}

/// CPU per save, in microseconds, user and system apart.
public struct CPUPerSave: Codable, Sendable, Equatable {
    public var user: Double
    public var system: Double
    public var total: Double { user + system }

    enum CodingKeys: String, CodingKey {
        case user = "user_us"
        case system = "system_us"
    }

    /// `time` spread over `saves`; nil for no saves.
    public init?(_ time: CPUTime, saves: UInt64) {
        guard saves > 0 else { return nil }
        user = Double(time.user) / Double(saves)
        system = Double(time.system) / Double(saves)
    }
}

/// What a saving window's CPU came to: its own time inside the saves, and the machine's and
/// the kernel threads' over the same stretch.
struct CPUMeter {
    struct Reading {
        var saving: CPUTime
        var machine: CPUTime?
        /// Microseconds.
        var kernelThreads: UInt64
    }

    private let kernelStart = KernelThreads.runtimes()
    private let processStart = CPUTime.ofThisProcess()
    private let machineStart = MachineTicks.now()
    private var saving = CPUTime.zero
    private var saveStart = CPUTime.zero

    mutating func saveBegins() { saveStart = CPUTime.ofThisProcess() }
    mutating func saveEnds() { saving = saving + (CPUTime.ofThisProcess() - saveStart) }

    /// The process's time inside the saves; the machine's busy time since the meter was made
    /// less what this process spent outside the saves (preparing changes, timing them), nil
    /// where `/proc/stat` cannot be read; the kernel threads' time.
    func finish() -> Reading {
        let process = CPUTime.ofThisProcess() - processStart
        let machineEnd = MachineTicks.now()
        let kernelThreads = KernelThreads.microseconds(from: kernelStart, to: KernelThreads.runtimes())
        let machine = machineStart.flatMap { start in
            machineEnd.map {
                Self.machine(
                    $0.since(start, ticksPerSecond: MachineTicks.ticksPerSecond), process: process, saving: saving)
            }
        }
        return Reading(saving: saving, machine: machine, kernelThreads: kernelThreads)
    }

    /// The machine's busy time less the part of `process` that was not saving.
    static func machine(_ busy: CPUTime, process: CPUTime, saving: CPUTime) -> CPUTime { busy - (process - saving) }
}
