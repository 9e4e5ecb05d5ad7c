import CLinuxShims
import Foundation
import Glibc
import HostLimits
import IOUring
import Platform
import SystemPackage

/// One fio case: an I/O engine, jobs writing at once (each its own file, like a window), and
/// the writes each keeps in flight.
public struct FioCase: Sendable, Equatable {
    public var engine: String
    public var jobs: Int
    public var depth: Int
}

/// What fio measured in one case, or why it did not.
public struct FioResult: Codable, Sendable, Equatable {
    public var engine: String
    public var jobs: Int
    public var depth: Int
    /// Bytes per write: the direct I/O block of the bench's directory (the store's).
    public var block: Int?
    /// Durable writes per second, summed over the jobs.
    public var writesPerSecond: Double?
    /// Submission → completion, over every write of every job.
    public var p50: UInt64?
    public var p99: UInt64?
    public var failure: String?

    public init(_ fioCase: FioCase, block: Int?, outcome: Result<FioMeasurement, FioError>) {
        (engine, jobs, depth, self.block) = (fioCase.engine, fioCase.jobs, fioCase.depth, block)
        switch outcome {
        case .success(let measured):
            (writesPerSecond, p50, p99) = (measured.writesPerSecond, measured.p50, measured.p99)
        case .failure(let error): failure = "\(error)"
        }
    }

    enum CodingKeys: String, CodingKey {
        case block = "block_bytes"
        case writesPerSecond = "writes_per_s"
        case p50 = "p50_us"
        case p99 = "p99_us"
        case engine, jobs, depth, failure
    }
}

/// One fio run's figures, checked.
public struct FioMeasurement: Sendable, Equatable {
    public var writesPerSecond: Double
    /// Microseconds.
    public var p50: UInt64
    public var p99: UInt64
}

public enum FioError: Error, Equatable, CustomStringConvertible {
    case notOnPath
    case setup(String)
    case spawn(Errno)
    case timedOut(seconds: Double)
    case exited(status: Int32, message: String)
    case killed(signal: Int32)
    case malformed(String)
    /// fio ran and its job reported this errno.
    case jobFailed(errno: Int)

    public var description: String {
        switch self {
        case .notOnPath: "fio is not on PATH (Debian: apt-get install fio)"
        case .setup(let why): "setting fio's files up: \(why)"
        case .spawn(let errno): "starting fio: \(errno)"
        case .timedOut(let seconds): "fio did not finish within \(format(seconds, 0)) s and was killed"
        case .exited(let status, let message):
            "fio exited with status \(status)\(message.isEmpty ? "" : ": \(message)")"
        case .killed(let signal): "fio was killed by signal \(signal)"
        case .malformed(let why): "fio's JSON output: \(why)"
        case .jobFailed(let errno): "fio's job failed: \(Errno(rawValue: Int32(clamping: errno)))"
        }
    }
}

/// The outside referee: fio writing with the floor's semantics (each write an aligned
/// `O_DIRECT` block of the store's size, durable on return: `O_DSYNC`) into pre-written files
/// under the bench's directory, each case a child process with a timeout.
public enum FioBench {
    /// pvsync2 at depth 1 (the floor's way), io_uring at depth 1 and at the store's depth, at 1
    /// job and at 8.
    public static let cases: [FioCase] = [1, 8].flatMap { jobs in
        [
            FioCase(engine: "pvsync2", jobs: jobs, depth: 1), FioCase(engine: "io_uring", jobs: jobs, depth: 1),
            FioCase(engine: "io_uring", jobs: jobs, depth: Limits.maxSavesInFlight),
        ]
    }

    /// Runs `cases` for `seconds` each in a private directory made under `directory` (removed
    /// afterwards), telling `progress` which case starts. Every failure is a result: only
    /// `progress` throws, to stop the run.
    public static func run(
        _ cases: [FioCase], seconds: Double, directory: FilePath,
        progress: (_ index: Int, _ what: String) throws -> Void
    ) rethrows -> (results: [FioResult], problem: String?) {
        guard let executable = locate() else { return ([], "\(FioError.notOnPath)") }
        let scratch: FilePath
        do { scratch = try makePrivateDirectory(under: directory) } catch { return ([], "\(error)") }
        defer { try? FileManager.default.removeItem(atPath: scratch.string) }
        let block: Int
        do { block = try prepareFiles(in: scratch, jobs: cases.map(\.jobs).max() ?? 1) } catch {
            return (cases.map { FioResult($0, block: nil, outcome: .failure(error)) }, nil)
        }
        let results = try cases.enumerated().map { index, fioCase in
            try progress(
                index,
                "fio \(fioCase.engine), \(fioCase.jobs) job\(fioCase.jobs == 1 ? "" : "s"), depth \(fioCase.depth)")
            let arguments = [executable] + Self.arguments(fioCase, directory: scratch, block: block, seconds: seconds)
            // Layout is done already; fio starts in well under a second, unless the disk stalls.
            let outcome = Result { () throws(FioError) in
                try parse(try runChild(arguments, in: scratch, timeout: seconds * 3 + 20))
            }
            return FioResult(fioCase, block: block, outcome: outcome)
        }
        return (results, nil)
    }

    /// fio's path: the first executable `fio` in `searchPath`'s directories.
    static func locate(searchPath: String? = ProcessInfo.processInfo.environment["PATH"]) -> String? {
        for directory in (searchPath ?? "").split(separator: ":") where directory.hasPrefix("/") {
            let candidate = "\(directory)/fio"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Job `floor`'s files are `floor.<job>.0` in `directory` (fio's default names): written
    /// here and synced, so fio lays nothing out and no write meets an unwritten extent.
    static let fileSize = 4 << 20

    static func arguments(_ fioCase: FioCase, directory: FilePath, block: Int, seconds: Double) -> [String] {
        [
            "--name=floor", "--directory=\(directory.string)", "--size=\(fileSize)", "--bs=\(block)", "--direct=1",
            "--rw=write",
            "--ioengine=\(fioCase.engine)", "--iodepth=\(fioCase.depth)", "--sync=dsync", "--numjobs=\(fioCase.jobs)",
            // Threads, not processes: a kill of fio ends every job with it.
            "--thread", "--runtime=\(max(1, Int(seconds * 1000)))ms", "--time_based", "--lat_percentiles=1",
            "--group_reporting",
            "--output-format=json",
        ]
    }

    /// A new 0700 directory under `directory`.
    private static func makePrivateDirectory(under directory: FilePath) throws(FioError) -> FilePath {
        var template = Array(directory.appending("fio.XXXXXX").string.utf8CString)
        guard mkdtemp(&template) != nil else { throw .setup("mkdtemp under \(directory): \(Errno(rawValue: errno))") }
        return FilePath(String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Writes each job's file and returns the direct I/O block.
    private static func prepareFiles(in directory: FilePath, jobs: Int) throws(FioError) -> Int {
        var block: Int?
        for job in 0..<jobs {
            do {
                let file = try FloorFile(path: directory.appending("floor.\(job).0"), size: fileSize)
                guard let alignment = file.alignment else { throw FioError.setup("no direct I/O here: \(file.method)") }
                block = alignment.block
            } catch let error as FioError {
                throw error
            } catch {
                throw .setup("\(error)")
            }
        }
        guard let block else { throw .setup("no job") }
        return block
    }

    /// Runs `arguments` with its output into files in `directory`, killed after `timeout`
    /// seconds (and if this thread ends first); its standard output.
    static func runChild(_ arguments: [String], in directory: FilePath, timeout: Double) throws(FioError) -> Data {
        let output = directory.appending("fio.json")
        let errors = directory.appending("fio.err")
        let pid = try spawn(arguments, output: output, errors: errors)
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        var status: Int32 = 0
        while true {
            let reaped = retryingOnInterrupt { waitpid(pid, &status, WNOHANG) }
            if reaped == pid { break }
            if reaped < 0 { throw .setup("waitpid: \(Errno(rawValue: errno))") }
            if monotonicNanoseconds() >= deadline {
                kill(pid, SIGKILL)
                _ = retryingOnInterrupt { waitpid(pid, &status, 0) }
                throw .timedOut(seconds: timeout)
            }
            usleep(20_000)
        }
        if status & 0x7F != 0 { throw .killed(signal: status & 0x7F) }
        let code = (status >> 8) & 0xFF
        guard code == 0 else { throw .exited(status: code, message: firstLine(of: errors)) }
        // One byte past what `parse` takes is enough for it to refuse the output.
        guard let handle = FileHandle(forReadingAtPath: output.string),
            let data = try? handle.read(upToCount: maxOutputBytes + 1)
        else {
            throw .malformed("no output")
        }
        try? handle.close()
        return data
    }

    private static func spawn(_ arguments: [String], output: FilePath, errors: FilePath) throws(FioError) -> pid_t {
        let flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC
        let out = open(output.string, flags, 0o600)
        let err = open(errors.string, flags, 0o600)
        defer {
            if out >= 0 { close(out) }
            if err >= 0 { close(err) }
        }
        guard out >= 0, err >= 0 else { throw .setup("opening fio's output files: \(Errno(rawValue: errno))") }
        var pid: pid_t = 0
        let pointers = arguments.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        let result = pointers.withUnsafeBufferPointer { argv in
            wh_spawn_dying_with_parent(arguments[0], argv.baseAddress!, environ, out, err, &pid)
        }
        guard result == 0 else { throw .spawn(Errno(rawValue: result)) }
        return pid
    }

    /// The first line fio wrote to standard error, shortened: why it failed.
    private static func firstLine(of file: FilePath) -> String {
        guard let data = FileManager.default.contents(atPath: file.string) else { return "" }
        let line = String(decoding: data.prefix(4096), as: UTF8.self).split(separator: "\n").first ?? ""
        return String(line.prefix(300))
    }
}
