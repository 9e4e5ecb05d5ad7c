import CLinuxShims
import Foundation
import Glibc
import Histogram
import IOUring
import Platform
import SessionStore
import Stress
import SystemPackage

/// What one worker process measured: its saves, the bytes they wrote, and each save's latency
/// from request to durable, in microseconds.
public struct WorkerResult: Codable, Sendable {
    public var saves: UInt64 = 0
    public var bytes: UInt64 = 0
    public var seconds: Double = 0
    public var latency = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    public var failure: String?
    /// This process's CPU inside its saves (closed loop only).
    public var cpu = CPUTime.zero
    /// The whole machine's busy time while this window saved, less this process's time outside
    /// its saves; nil when not measured (open loop, no `/proc/stat`). Only a lone window's is
    /// its own: with several, each one's overlaps the others'.
    public var machineCPU: CPUTime?
    /// Kernel threads' time while this window saved, in µs (closed loop only; a lone window's
    /// is its own, as for `machineCPU`).
    public var kernelThreadsCPU: UInt64 = 0
    /// The store's durable writes (saves completed) within the seconds: open loop only.
    public var writes: UInt64 = 0

    public init() {}

    /// The same window's next round added to this one.
    public mutating func add(_ other: WorkerResult) {
        // The first round's machine time as it is; after that a round without one leaves none.
        let isEmpty = saves == 0 && seconds == 0
        machineCPU = isEmpty ? other.machineCPU : machineCPU.flatMap { mine in other.machineCPU.map { mine + $0 } }
        cpu = cpu + other.cpu
        kernelThreadsCPU += other.kernelThreadsCPU
        writes += other.writes
        saves += other.saves
        bytes += other.bytes
        seconds += other.seconds
        latency.add(other.latency)
        failure = failure ?? other.failure
    }

    /// Saves back to back (one outstanding save per window, like a tab that waits for each
    /// save) until `seconds` have passed.
    public static func measure(_ workload: any SaveWorkload, seconds: Double) -> WorkerResult {
        var result = WorkerResult()
        let bytesBefore = workload.bytesWritten
        let start = monotonicNanoseconds()
        let end = start + UInt64(seconds * 1e9)
        var now = start
        var busy: UInt64 = 0
        var meter = CPUMeter()
        while now < end {
            let saveStart: UInt64
            do {
                try workload.prepare()
                meter.saveBegins()
                saveStart = monotonicNanoseconds()
                try workload.save()
            } catch {
                result.failure = "\(error)"
                break
            }
            let done = monotonicNanoseconds()
            meter.saveEnds()
            _ = result.latency.record(max(1, (done - saveStart) / 1000))
            busy += done - saveStart
            result.saves += 1
            now = done
        }
        // Throughput over the time spent saving: preparing the next change is the workload's
        // cost, not the contender's.
        result.seconds = Double(busy) / 1e9
        result.bytes = workload.bytesWritten - bytesBefore
        let reading = meter.finish()
        (result.cpu, result.machineCPU, result.kernelThreadsCPU) = (
            reading.saving, reading.machine, reading.kernelThreads
        )
        return result
    }
}

/// One row of the side-by-side table: a contender, a number of windows saving at once, a save
/// size.
public struct SaveResult: Codable, Sendable, Equatable {
    public var engine: String
    public var windows: Int
    public var size: String
    public var saves: UInt64
    public var savesPerSecond: Double
    public var megabytesPerSecond: Double
    public var p50: UInt64
    public var p99: UInt64
    public var p999: UInt64
    public var max: UInt64
    /// Latency at each of `PercentilePoint.percentiles`: the curve the HTML report draws.
    public var curve: [PercentilePoint]
    /// This row's p99 over the floor's at the same size and windows (set by the report).
    public var p99OverFloor: Double?
    /// This row's saves/s over the rewrite's at the same size and windows (set by the report).
    public var savesOverRewrite: Double?
    /// The saving processes' CPU per save, inside the saves.
    public var cpu: CPUPerSave?
    /// The whole machine's CPU per save, kernel threads and anything else running included:
    /// at 1 window only.
    public var machineCPU: CPUPerSave?
    /// The saving process's CPU per save plus the kernel threads' (all system time): what a
    /// save costs, its flush's kworker included, without the rest of a shared machine. At 1
    /// window only.
    public var withKernelThreads: CPUPerSave?

    enum CodingKeys: String, CodingKey {
        case engine, windows, size, saves, curve
        case cpu = "cpu_per_save"
        case machineCPU = "machine_cpu_per_save"
        case withKernelThreads = "with_kernel_threads_cpu_per_save"
        case p99OverFloor = "p99_x_floor"
        case savesOverRewrite = "saves_x_rewrite"
        case savesPerSecond = "saves_per_s"
        case megabytesPerSecond = "mb_per_s"
        case p50 = "p50_us"
        case p99 = "p99_us"
        case p999 = "p999_us"
        case max = "max_us"
    }

    /// The row for `workers`' results: saves/s and MB/s summed over the windows (each over its
    /// own running time), percentiles over every save.
    public init(engine: Contender, windows: Int, size: SaveSize, workers: [WorkerResult]) {
        let latency = workers.latency
        self.engine = engine.rawValue
        self.windows = windows
        self.size = size.rawValue
        saves = workers.reduce(0) { $0 + $1.saves }
        savesPerSecond = workers.savesPerSecond
        megabytesPerSecond = workers.reduce(0) { $0 + ($1.seconds > 0 ? Double($1.bytes) / $1.seconds / 1e6 : 0) }
        p50 = latency.valueAtPercentile(50)
        p99 = latency.valueAtPercentile(99)
        p999 = latency.valueAtPercentile(99.9)
        max = latency.totalCount > 0 ? latency.maxRecorded : 0
        curve = PercentilePoint.curve(of: latency)
        cpu = CPUPerSave(workers.reduce(CPUTime.zero) { $0 + $1.cpu }, saves: saves)
        let lone = windows == 1 && workers.count == 1 ? workers.first : nil
        machineCPU = lone?.machineCPU.flatMap { CPUPerSave($0, saves: saves) }
        withKernelThreads = lone.flatMap {
            CPUPerSave($0.cpu + CPUTime(user: 0, system: $0.kernelThreadsCPU), saves: saves)
        }
    }
}

extension [WorkerResult] {
    /// Every save's latency, over all the windows.
    var latency: Histogram<UInt64> {
        var latency = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        for worker in self { latency.add(worker.latency) }
        return latency
    }

    /// Saves a second summed over the windows, each over its own running time.
    var savesPerSecond: Double { reduce(0) { $0 + ($1.seconds > 0 ? Double($1.saves) / $1.seconds : 0) } }
}

public enum BenchError: Error, CustomStringConvertible {
    case worker(String)
    case system(String, Errno)

    public var description: String {
        switch self {
        case .worker(let message): message
        case .system(let call, let errno): "\(call): \(errno)"
        }
    }
}

/// Runs `windows` worker processes (`windowhost bench-worker`) saving at once on `contender`:
/// each sets its window up, says so on the ready pipe, and starts when the go pipe closes, so
/// every window saves during the same seconds. With `perSecond`, each is offered that many
/// small commands a second instead (`OpenLoop`).
public enum SaveBench {
    public static func run(
        executable: String, contender: Contender, size: SaveSize, windows: Int, seconds: Double, directory: FilePath,
        perSecond: Double? = nil
    ) throws -> [WorkerResult] {
        var ready = try makePipe()
        var go = try makePipe()
        var pids: [pid_t] = []
        var results: [FilePath] = []
        defer {
            for fd in [ready.read, ready.write, go.read, go.write] where fd >= 0 { close(fd) }
        }
        for index in 0..<windows {
            let result = directory.appending("worker-\(index).json")
            results.append(result)
            let arguments =
                [
                    executable, "bench-worker", "--contender", contender.rawValue, "--size", size.rawValue,
                    "--directory", directory.appending("window-\(index)").string, "--seconds", "\(seconds)",
                    "--result", result.string,
                ] + (perSecond.map { ["--rate", "\($0)"] } ?? [])
            switch spawnProcess(arguments, inheriting: [ready.write, go.read], ownProcessGroup: true) {
            case .success(let pid): pids.append(pid)
            case .failure(let errno):
                release(pids)
                throw BenchError.system("posix_spawn", errno)
            }
        }
        close(ready.write)
        ready.write = -1
        var readyCount = 0
        var byte: UInt8 = 0
        while readyCount < windows, read(ready.read, &byte, 1) == 1 { readyCount += 1 }
        close(go.write)  // EOF on every worker's go pipe: start.
        go.write = -1
        var failures: [String] = []
        for pid in pids {
            var status: Int32 = 0
            _ = retryingOnInterrupt { waitpid(pid, &status, 0) }
            if status != 0 { failures.append("worker \(pid) exited with status \(status)") }
        }
        var workers: [WorkerResult] = []
        for path in results {
            guard let data = FileManager.default.contents(atPath: path.string),
                let result = try? JSONDecoder().decode(WorkerResult.self, from: data)
            else {
                failures.append("no result in \(path)")
                continue
            }
            if let failure = result.failure { failures.append(failure) }
            workers.append(result)
        }
        guard failures.isEmpty, readyCount == windows else {
            throw BenchError.worker(
                "\(contender.rawValue) \(size.rawValue) ×\(windows): "
                    + (failures.first ?? "\(readyCount) of \(windows) workers got ready"))
        }
        return workers
    }

    /// The worker's side: set up, say ready on descriptor 3, wait for descriptor 4 to close,
    /// save for `seconds` (back to back, or open loop at `perSecond` commands a second on a
    /// store contender), write the result.
    public static func work(
        contender: Contender, size: SaveSize, directory: FilePath, seconds: Double, result: FilePath,
        perSecond: Double? = nil
    ) throws {
        let readyDescriptor: Int32 = 3
        let goDescriptor: Int32 = 4
        var outcome = WorkerResult()
        var workload: (any SaveWorkload)?
        var openLoop: StoreOpenLoopWindow?
        do {
            if let perSecond {
                guard perSecond > 0, contender == .uring || contender == .sync else {
                    throw BenchError.worker("the open loop runs the store (uring or sync) at a positive rate")
                }
                try FileManager.default.createDirectory(
                    atPath: directory.string, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                openLoop = try StoreOpenLoopWindow(
                    engine: contender == .uring ? try UringEngine() : SyncEngine(), directory: directory)
            } else {
                workload = try Workloads.make(contender, size: size, directory: directory)
            }
        } catch {
            outcome.failure = "setting up \(contender.rawValue) \(size.rawValue): \(error)"
        }
        var byte: UInt8 = 1
        // A ready that cannot be said (the runner gone) would let the runner count a worker
        // short and this one measure for nobody.
        guard write(readyDescriptor, &byte, 1) == 1 else {
            throw BenchError.system("write to the ready pipe", Errno(rawValue: errno))
        }
        close(readyDescriptor)
        while read(goDescriptor, &byte, 1) > 0 {}
        if let workload { outcome = WorkerResult.measure(workload, seconds: seconds) }
        if let openLoop, let perSecond {
            outcome = OpenLoop.measure(openLoop, perSecond: perSecond, seconds: seconds, firstSeq: 2)
        }
        let data = try JSONEncoder().encode(outcome)
        guard
            FileManager.default.createFile(
                atPath: result.string, contents: data, attributes: [.posixPermissions: 0o600])
        else {
            throw BenchError.worker("cannot write \(result)")
        }
    }

    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard wh_pipe_cloexec(&fds) == 0 else { throw BenchError.system("pipe2", Errno(rawValue: errno)) }
        return (fds[0], fds[1])
    }

    private static func release(_ pids: [pid_t]) {
        for pid in pids {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = retryingOnInterrupt { waitpid(pid, &status, 0) }
        }
    }
}
