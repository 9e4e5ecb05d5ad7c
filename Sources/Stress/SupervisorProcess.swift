import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import HostControl
import Platform
import SystemPackage

/// A `windowhost run` the campaign starts, kills and starts again on the same root. Its
/// stdout and stderr go to `ROOT.stress-stdout` and `ROOT.stress-log` beside the root. The
/// benchmark's `ctl` round trips use one too.
public final class SupervisorProcess {
    /// The supervisor's pid, and a pidfd for it: signalled and reaped through the pidfd, so a
    /// reused pid is never hit.
    private let pid: pid_t
    private let pidfd: Int32
    /// Its exit status once reaped (the signal's number when a signal ended it).
    private var exitStatus: Int32?
    public let socket: FilePath
    private let stdout: URL

    /// How long a reply may take: longer is a hang, and a campaign never waits forever.
    private let replyTimeoutSeconds: Int

    /// Starts it and waits until it says `ready` (at most 60 s); one that does not is killed.
    /// It dies with the thread that starts it (`PR_SET_PDEATHSIG`): a campaign killed with
    /// SIGKILL leaves no supervisor (nor workers, which die with their supervisor) behind.
    public init(
        executable: String, root: FilePath, arguments: [String], environment: [String: String],
        replyTimeoutSeconds: Int = 60
    ) throws {
        self.replyTimeoutSeconds = replyTimeoutSeconds
        socket = DiskLayout.defaultControlSocket(root: root)
        stdout = URL(fileURLWithPath: root.string + ".stress-stdout")
        let log = URL(fileURLWithPath: root.string + ".stress-log")
        let privateFile: [FileAttributeKey: Any] = [.posixPermissions: 0o600]
        _ = FileManager.default.createFile(atPath: stdout.path, contents: nil, attributes: privateFile)
        if !FileManager.default.fileExists(atPath: log.path) {
            _ = FileManager.default.createFile(atPath: log.path, contents: nil, attributes: privateFile)
        }
        let stdoutHandle = try FileHandle(forWritingTo: stdout)
        let logHandle = try FileHandle(forWritingTo: log)
        defer {
            try? stdoutHandle.close()
            try? logHandle.close()
        }
        logHandle.seekToEndOfFile()
        let argv = [executable, "run", "--root", root.string] + arguments
        let environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0)=\($1)" }
        var pid: pid_t = 0
        let result = withCStrings(argv) { argv in
            withCStrings(environment) { envp in
                wh_spawn_dying_with_parent(
                    executable, argv, envp, stdoutHandle.fileDescriptor, logHandle.fileDescriptor, &pid)
            }
        }
        guard result == 0 else {
            throw StressError.supervisor("cannot start \(executable): \(Errno(rawValue: result))")
        }
        self.pid = pid
        pidfd = wh_pidfd_open(pid)
        guard pidfd >= 0 else {
            // Said before the kill and the wait set errno again.
            let error = Errno(rawValue: errno)
            Glibc.kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = retryingOnInterrupt { waitpid(pid, &status, 0) }
            throw StressError.supervisor("pidfd_open: \(error)")
        }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, isRunning {
            if let text = try? String(contentsOf: stdout, encoding: .utf8), text.hasPrefix("ready ") { return }
            usleep(2_000)
        }
        if isRunning { kill() }
        // Its own words, in the error: a campaign on a temporary root removes the log on its way out.
        let exit = exitStatus.map { " (exit \($0))" } ?? " (killed after 60 s)"
        throw StressError.supervisor(
            "the supervisor did not get ready\(exit): \(Self.lastLines(of: log)) (its log: \(log.path))")
    }

    /// The last few lines of `log`, read from its last 4 KiB at most, on one line.
    private static func lastLines(of log: URL, count: Int = 3) -> String {
        guard let handle = try? FileHandle(forReadingFrom: log) else { return "no log" }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: size - min(size, 4096))
        let text = String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
        let lines = text.split(separator: "\n").suffix(count)
        return lines.isEmpty ? "its log is empty" : lines.joined(separator: "; ")
    }

    deinit {
        if isRunning { kill() }
        close(pidfd)
    }

    /// Whether it still runs; reaps it once it has ended.
    private var isRunning: Bool {
        guard exitStatus == nil else { return false }
        var code: Int32 = 0
        var signaled: Int32 = 0
        switch wh_pidfd_reap(pidfd, &code, &signaled) {
        case 0: return true
        case 1: exitStatus = code
        default: exitStatus = -1  // not ours to wait for any more (ECHILD): gone all the same
        }
        return false
    }

    /// A window that does not answer within the timeout is a finding.
    public func call(_ request: ControlRequest) -> ControlReply {
        ControlClient.call(request, socket: socket, timeout: replyTimeoutSeconds)
    }

    /// `call`, with the client's own failures typed (a hang is `.timedOut(.reply…)`).
    public func exchange(_ request: ControlRequest) throws(ControlClientError) -> ControlReply {
        try ControlClient.exchange(request, socket: socket, timeout: replyTimeoutSeconds)
    }

    /// `request` sent, its reply read later (`ControlClient.Pending`): a second request under
    /// way while another waits.
    public func send(_ request: ControlRequest) throws(ControlClientError) -> ControlClient.Pending {
        try ControlClient.send(request, socket: socket, timeout: replyTimeoutSeconds)
    }

    public func kill() {
        // ESRCH: it has exited already (reaped or not), and `isRunning` says so at once. Any
        // other failure would leave it running, and this wait would never end.
        guard wh_pidfd_send_signal(pidfd, SIGKILL) == 0 || errno == ESRCH else { return }
        while isRunning { usleep(1_000) }
    }

    /// Asks it to shut down and waits for its exit status; nil when it has not exited within
    /// the reply timeout (it is then killed: a campaign never waits forever).
    public func shutdown() -> Int32? {
        _ = call(.shutdown)
        let deadline = Date().addingTimeInterval(Double(replyTimeoutSeconds))
        while isRunning, Date() < deadline { usleep(10_000) }
        guard !isRunning else {
            kill()
            return nil
        }
        return exitStatus
    }
}

/// `strings` as a NULL-terminated array of C strings, for the duration of `body`.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> T) -> T {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { for pointer in pointers { free(pointer) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

public enum StressError: Error, CustomStringConvertible {
    case supervisor(String)
    /// The campaign could not do what `--hostile` asked of it (a mount, a planted entry).
    case hostile(String)

    public var description: String {
        switch self {
        case .supervisor(let message): message
        case .hostile(let message): "hostile: \(message)"
        }
    }
}
