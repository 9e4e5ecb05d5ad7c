import BrowserModel
import Foundation
import Glibc
import Histogram
import HostLimits
import IOUring
import Platform
import SessionStore
import SystemPackage

/// A window commands arrive at, for the open-loop driver: what it needs of a store.
public protocol OpenLoopWindow: AnyObject {
    /// Applies command `seq`: one small change (a navigation in the active tab).
    func apply(seq: UInt64) throws
    /// Takes the saves that finished and starts one when the store allows (a blocking engine
    /// saves right here); returns the highest seq durable now.
    func advance() throws -> UInt64
    /// Returns at `deadline` (monotonic ns) or sooner, when a save in flight finishes.
    func wait(until deadline: UInt64) throws
    /// Durable writes (saves completed) so far: at saturation one carries many commands.
    var writesCompleted: UInt64 { get }
}

/// Commands arriving at a fixed rate, whatever the saves do: command i arrives at
/// start + i / rate, decided in advance. A closed loop (the next command only once the last is
/// durable) lets a slow save hold back the commands behind it and never times their wait: it
/// measures the service time and hides the queue (coordinated omission). Here each command's
/// latency runs from its arrival time, not from when the loop got round to applying it, to
/// when the store reports it durable.
public enum OpenLoop {
    /// Offers `perSecond` commands a second for `seconds` to `window`, seqs from `firstSeq`.
    /// `saves` in the result: the commands made durable within the `seconds` (the achieved
    /// rate is saves over seconds), `writes` the saves that made them so; the latency histogram holds every command offered: one
    /// still not durable `drainSeconds` after the end counts with its wait until then, a
    /// lower bound, rather than being left out.
    public static func measure(
        _ window: some OpenLoopWindow, perSecond: Double, seconds: Double, firstSeq: UInt64, drainSeconds: Double = 2
    ) -> WorkerResult {
        precondition(perSecond > 0 && seconds > 0, "a rate and a duration")
        var result = WorkerResult()
        let offered = Int(perSecond * seconds)
        let start = monotonicNanoseconds()
        let end = start + UInt64(seconds * 1e9)
        let drainEnd = end + UInt64(drainSeconds * 1e9)
        func arrival(_ index: Int) -> UInt64 { start + UInt64(Double(index) * 1e9 / perSecond) }
        func seq(_ index: Int) -> UInt64 { firstSeq + UInt64(index) }
        var applied = 0
        var durable = 0
        let writesBefore = window.writesCompleted
        do {
            while durable < offered {
                var now = monotonicNanoseconds()
                if now >= drainEnd { break }
                // A backlog is applied a turn's worth at a time, as a worker takes its ring:
                // applying all of it first would leave the saves in flight unreaped and the
                // next one unstarted for as long as that takes.
                var turnApplied = 0
                while applied < offered, arrival(applied) <= now, turnApplied < Limits.maxCommandsPerTurn {
                    try window.apply(seq: seq(applied))
                    applied += 1
                    turnApplied += 1
                }
                let durableSeq = try window.advance()
                now = monotonicNanoseconds()
                if now <= end { result.writes = window.writesCompleted - writesBefore }
                while durable < applied, seq(durable) <= durableSeq {
                    _ = result.latency.record(max(1, (now - arrival(durable)) / 1000))
                    if now <= end { result.saves += 1 }
                    durable += 1
                }
                let backlog = applied < offered && arrival(applied) <= now
                if durable < offered, !backlog {
                    try window.wait(until: applied < offered ? arrival(applied) : drainEnd)
                }
            }
        } catch {
            result.failure = "\(error)"
        }
        for index in durable..<offered {
            _ = result.latency.record(max(1, (Swift.max(drainEnd, arrival(index)) - arrival(index)) / 1000))
        }
        result.seconds = seconds
        return result
    }
}

/// The session store as an open-loop window: a 20-tab window (the small workload's), each
/// command a navigation in its active tab, saves started as soon as the store allows.
final class StoreOpenLoopWindow: OpenLoopWindow {
    let store: WindowStore

    /// Set up and saved once under `directory`, as command 1.
    init(engine: any IOEngine, directory: FilePath) throws {
        store = WindowStore(root: directory, windowID: UUID(), engine: engine, saveDelayMilliseconds: 0)
        _ = try store.recover()
        let browser = store.regular
        try store.apply(seq: 1) {
            try fill(browser.webStateList, tabs: SaveSize.small.windowTabs, profile: browser.profile, round: 0)
        }
        try store.waitUntilDurable(1)
    }

    func apply(seq: UInt64) throws {
        let list = store.regular.webStateList
        try store.apply(seq: seq) {
            _ = try list.activeWebState?.commitNavigation(to: page(0, round: seq))
        }
    }

    func advance() throws -> UInt64 {
        try store.turn(waiting: false)
        // A blocking engine wrote the save during that turn; the next one takes it.
        if store.engine.completionDescriptor == nil, store.savingSeq != nil { try store.turn(waiting: false) }
        for event in store.takeEvents() {
            if case .failed(let failure) = event {
                throw BenchError.worker("open loop on \(store.engine.name): \(failure)")
            }
        }
        return store.durableSeq
    }

    var writesCompleted: UInt64 { store.savesCompleted }

    func wait(until deadline: UInt64) throws {
        let now = monotonicNanoseconds()
        guard deadline > now else { return }
        var timeout = timespec(
            tv_sec: Int((deadline - now) / 1_000_000_000), tv_nsec: Int((deadline - now) % 1_000_000_000))
        guard let descriptor = store.engine.completionDescriptor, store.writesInFlight else {
            var remaining = timespec()
            while nanosleep(&timeout, &remaining) < 0, errno == EINTR { timeout = remaining }
            return
        }
        // pselect for its nanosecond timeout (poll(2)'s is in milliseconds, longer than the gap
        // between two arrivals; ppoll is not in Swift's Glibc).
        guard descriptor < FD_SETSIZE else {
            throw BenchError.worker("the ring's descriptor \(descriptor) is past FD_SETSIZE")
        }
        var readable = fd_set()
        withUnsafeMutableBytes(of: &readable) { bits in
            bits[Int(descriptor) / 8] |= UInt8(1 << (Int(descriptor) % 8))
        }
        guard pselect(descriptor + 1, &readable, nil, nil, &timeout, nil) >= 0 || errno == EINTR else {
            throw BenchError.system("pselect", Errno(rawValue: errno))
        }
    }
}

/// One point of an open-loop curve: an engine, a number of windows each offered `offered`
/// commands a second.
public struct OpenLoopResult: Codable, Sendable, Equatable {
    public var engine: String
    public var windows: Int
    /// Commands offered per second to each window.
    public var offeredPerSecond: Double
    /// Commands made durable per second, per window (the mean over the windows).
    public var achievedPerSecond: Double
    /// Durable writes (saves) per second, per window (the mean over the windows).
    public var writesPerSecond: Double
    /// Arrival → durable, over every command of every window.
    public var p50: UInt64
    public var p99: UInt64

    enum CodingKeys: String, CodingKey {
        case engine, windows
        case offeredPerSecond = "offered_per_s"
        case achievedPerSecond = "achieved_per_s"
        case writesPerSecond = "writes_per_s"
        case p50 = "p50_us"
        case p99 = "p99_us"
    }

    public init(engine: Contender, windows: Int, offeredPerSecond: Double, workers: [WorkerResult]) {
        let latency = workers.latency
        self.engine = engine.rawValue
        self.windows = windows
        self.offeredPerSecond = offeredPerSecond
        achievedPerSecond = workers.isEmpty ? 0 : workers.savesPerSecond / Double(workers.count)
        writesPerSecond =
            workers.isEmpty
            ? 0
            : workers.reduce(0) { $0 + ($1.seconds > 0 ? Double($1.writes) / $1.seconds : 0) } / Double(workers.count)
        p50 = latency.valueAtPercentile(50)
        p99 = latency.valueAtPercentile(99)
    }

    /// Whether the engine kept up: at least 95 % of the offered commands made durable in time.
    public var keptUp: Bool { achievedPerSecond >= 0.95 * offeredPerSecond }
}
