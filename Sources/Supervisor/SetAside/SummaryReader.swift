import CLinuxShims
import Foundation
import Glibc
import HostCoordination
import Platform
import SessionStore
import SystemPackage

/// A `windowhost inspect ROOT --set-aside ID --summary` child and what it printed so far: an
/// entry's session is read in a process of its own, which dies with the supervisor, so a
/// crafted entry can cost the supervisor neither memory nor a hang.
struct SummaryReader {
    let id: String
    let pid: pid_t
    private let output: Int32
    private var bytes: [UInt8] = []
    /// Its output ended (closed, or past `maxSummaryBytes`): only its exit is awaited.
    private var ended = false
    /// Its entry was discarded or adopted meanwhile: what it says is of no entry now.
    var stale = false
    private let deadline: UInt64

    /// How long a summary child may take before it is killed and the entry shown unreadable.
    static let timeoutNanoseconds: UInt64 = 20_000_000_000
    /// The most a summary child may print: a summary is a few numbers.
    static let maxSummaryBytes = 64 * 1024

    private init(id: String, pid: pid_t, output: Int32, deadline: UInt64) {
        (self.id, self.pid, self.output, self.deadline) = (id, pid, output, deadline)
    }

    /// Starts the child reading entry `id`; the errno when it could not be started.
    static func start(entry id: String, executable: String, root: FilePath, now: UInt64) -> Result<Self, Errno> {
        var pipe: [Int32] = [-1, -1]
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { if devNull >= 0 { close(devNull) } }
        // Every child is spawned closing all but its three descriptors, so the moment before
        // the flags are set leaks none.
        guard devNull >= 0, Glibc.pipe(&pipe) == 0,
            fcntl(pipe[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(pipe[1], F_SETFD, FD_CLOEXEC) == 0,
            fcntl(pipe[0], F_SETFL, O_NONBLOCK) == 0
        else {
            let failure = Errno(rawValue: errno)
            for fd in pipe where fd >= 0 { close(fd) }
            return .failure(failure)
        }
        let arguments = [executable, "inspect", root.string, "--set-aside", id, "--summary"]
        var pid: pid_t = 0
        let pointers = arguments.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        let result = pointers.withUnsafeBufferPointer { argv in
            wh_spawn_dying_with_parent(arguments[0], argv.baseAddress!, environ, pipe[1], devNull, &pid)
        }
        close(pipe[1])
        guard result == 0 else {
            close(pipe[0])
            return .failure(Errno(rawValue: result))
        }
        assert(pid > 0, "a spawned child has a pid")
        return .success(SummaryReader(id: id, pid: pid, output: pipe[0], deadline: now + timeoutNanoseconds))
    }

    /// Reads what the child printed and, once it is done (or past its deadline: killed), what
    /// it says of the entry; nil while it runs. Its output descriptor is closed then.
    mutating func poll(now: UInt64) -> SetAsideService.SummaryState? {
        if !ended { ended = readOutput() }
        // Reaped without blocking: a child that closed its output may still be running.
        var status: Int32 = 0
        let reaped = ended ? waitpid(pid, &status, WNOHANG) : 0
        if reaped == pid || reaped < 0 {
            close(output)
            return outcome(status: reaped == pid ? status : nil)
        }
        guard now >= deadline else { return nil }
        // Killed whatever it is doing, then reaped: SIGKILL ends it within the turn.
        Glibc.kill(pid, SIGKILL)
        _ = retryingOnInterrupt { waitpid(pid, nil, 0) }
        close(output)
        return .unreadable("its reader took longer than \(Self.timeoutNanoseconds / 1_000_000_000) s")
    }

    /// Reads what the child printed; true at its end (or past the bound).
    private mutating func readOutput() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while bytes.count <= Self.maxSummaryBytes {
            let count = read(output, &chunk, chunk.count)
            if count > 0 {
                bytes += chunk[..<count]
            } else if count == 0 {
                return true
            } else {
                return errno != EAGAIN && errno != EINTR
            }
        }
        return true
    }

    /// `status`: the child's wait status, nil when it could not be had.
    private func outcome(status: Int32?) -> SetAsideService.SummaryState {
        let status = status ?? -1
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
        if let summary = try? JSONDecoder().decode(SetAsideSummary.self, from: Data(bytes)), summary.isPlausible,
            exit == 0 || exit == ControlCode.badData.rawValue
        {
            return .read(summary)
        }
        let how = exit >= 0 ? "exited \(exit)" : "killed by signal \(status & 0x7f)"
        return .unreadable(
            "its reader \(how) without a summary that checks (`windowhost inspect --set-aside \(id)` says more)")
    }
}
