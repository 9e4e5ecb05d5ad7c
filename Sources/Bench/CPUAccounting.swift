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
        func microseconds(_ time: timeval) -> UInt64 { UInt64(max(0, time.tv_sec)) * 1_000_000 + UInt64(max(0, time.tv_usec)) }
        return CPUTime(user: microseconds(usage.ru_utime), system: microseconds(usage.ru_stime))
    }

    public static func + (a: CPUTime, b: CPUTime) -> CPUTime { CPUTime(user: a.user + b.user, system: a.system + b.system) }

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

/// What a saving window's CPU came to: its own time inside the saves, and the machine's over
/// the same stretch.
struct CPUMeter {
    private let processStart = CPUTime.ofThisProcess()
    private let machineStart = MachineTicks.now()
    private var saving = CPUTime.zero
    private var saveStart = CPUTime.zero

    mutating func saveBegins() { saveStart = CPUTime.ofThisProcess() }
    mutating func saveEnds() { saving = saving + (CPUTime.ofThisProcess() - saveStart) }

    /// The process's time inside the saves, and the machine's busy time since the meter was
    /// made less what this process spent outside the saves (preparing changes, timing them):
    /// nil for the machine where `/proc/stat` cannot be read.
    func finish() -> (saving: CPUTime, machine: CPUTime?) {
        let process = CPUTime.ofThisProcess() - processStart
        guard let machineStart, let machineEnd = MachineTicks.now() else { return (saving, nil) }
        return (saving, Self.machine(machineEnd.since(machineStart, ticksPerSecond: MachineTicks.ticksPerSecond), process: process, saving: saving))
    }

    /// The machine's busy time less the part of `process` that was not saving.
    static func machine(_ busy: CPUTime, process: CPUTime, saving: CPUTime) -> CPUTime { busy - (process - saving) }
}
