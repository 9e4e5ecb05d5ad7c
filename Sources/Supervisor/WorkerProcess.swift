import CLinuxShims
import Glibc
import HostCoordination
import Platform
import SystemPackage

/// One worker process the supervisor started: its pid, the pidfd it is watched, signalled and
/// reaped through, and the doorbell that tells it a command waits. A class, so the copies of a
/// `Window` share it and its descriptors are closed once (`close`, or the deinit).
final class WorkerProcess {
    let pid: pid_t
    /// Polled for the worker's end; -1 once closed.
    private(set) var pidfd: Int32
    /// Rung after a command is put in the worker's ring.
    let doorbell: Doorbell

    /// Why a worker was not started: the call that failed and its errno. Every descriptor made
    /// for it is closed again, and a child already spawned is killed and reaped.
    struct SpawnFailure: Error {
        let call: String
        let errno: Errno
    }

    /// How a worker ended, as `waitid` reports it.
    enum End: Equatable {
        case exited(status: Int32)
        case signaled(Int32)
    }

    private init(pid: pid_t, pidfd: Int32, doorbell: Doorbell) {
        self.pid = pid
        self.pidfd = pidfd
        self.doorbell = doorbell
    }

    /// Starts `launch` from `executable` with `inheriting` at the numbers `WorkerLaunch.Descriptor`
    /// names (the command doorbell is made here) and opens its pidfd.
    static func spawn(
        _ launch: WorkerLaunch, executable: String, inheriting inherited: [WorkerLaunch.Descriptor: Int32]
    ) throws(SpawnFailure) -> WorkerProcess {
        try spawn(arguments: launch.arguments(executable: executable), inheriting: inherited)
    }

    /// Starts a spare (`SpareLaunch`): as a worker, with its hand-over socket where a worker's
    /// slot memory is.
    static func spawnSpare(
        _ launch: SpareLaunch, executable: String, handOver socket: Int32,
        inheriting inherited: [WorkerLaunch.Descriptor: Int32]
    ) throws(SpawnFailure) -> WorkerProcess {
        assert(inherited[SpareLaunch.handOverDescriptor] == nil, "a spare holds no slot's memory")
        return try spawn(
            arguments: launch.arguments(executable: executable),
            inheriting: inherited.merging([SpareLaunch.handOverDescriptor: socket]) { $1 })
    }

    private static func spawn(
        arguments: [String], inheriting inherited: [WorkerLaunch.Descriptor: Int32]
    ) throws(SpawnFailure) -> WorkerProcess {
        let doorbell: Doorbell
        do {
            doorbell = try Doorbell()
        } catch {
            switch error {
            case .system(let call, let errno): throw SpawnFailure(call: "cannot make a doorbell: \(call)", errno: errno)
            case .mismatch(let reason): preconditionFailure("a new eventfd is checked against no layout: \(reason)")
            }
        }
        // `spawnProcess` hands `inherit[i]` over as 3 + i: the descriptors in their numbers' order.
        assert(
            WorkerLaunch.Descriptor.allCases.map(\.rawValue)
                == Array(3..<3 + Int32(WorkerLaunch.Descriptor.allCases.count)))
        let inherit = WorkerLaunch.Descriptor.allCases.map { descriptor in
            if descriptor == .commands { return doorbell.descriptor.rawValue }
            guard let given = inherited[descriptor] else {
                preconditionFailure("no \(descriptor) given for the worker to inherit")
            }
            return given
        }
        let pid: pid_t
        // A group of its own: a terminal's Ctrl-C to `run` is the supervisor's to take (every
        // window saves, then exits), not a worker's to die of before it saves.
        switch spawnProcess(arguments, inheriting: inherit, ownProcessGroup: true) {
        case .success(let spawned):
            pid = spawned
        case .failure(let error):
            doorbell.close()
            throw SpawnFailure(call: "posix_spawn", errno: error)
        }
        // The child cannot be reaped before we wait on it, so the pid still names it.
        let pidfd = wh_pidfd_open(pid)
        guard pidfd >= 0 else {
            // Without a pidfd the worker cannot be watched: it goes, and is started again.
            let error = Errno(rawValue: errno)
            // Our own child, not yet reaped: the kill cannot fail, so the wait ends.
            let killed = Glibc.kill(pid, SIGKILL)
            assert(killed == 0, "kill \(pid): \(Errno(rawValue: errno))")
            _ = retryingOnInterrupt { waitpid(pid, nil, 0) }
            doorbell.close()
            throw SpawnFailure(call: "pidfd_open", errno: error)
        }
        return WorkerProcess(pid: pid, pidfd: pidfd, doorbell: doorbell)
    }

    /// Sends `signal` through the pidfd, which names this worker even once its pid is reused.
    /// ESRCH: it has exited already, and its pidfd says so.
    func signal(_ signal: Int32) throws(Errno) {
        guard pidfd >= 0 else {
            assertionFailure("worker \(pid) is signalled after it was closed")
            throw .badFileDescriptor
        }
        guard wh_pidfd_send_signal(pidfd, signal) == 0 else { throw Errno(rawValue: errno) }
    }

    /// How it ended, once it has (it is then reaped); nil while it runs.
    func reap() throws(Errno) -> End? {
        guard pidfd >= 0 else {
            assertionFailure("worker \(pid) is reaped after it was closed")
            throw .badFileDescriptor
        }
        var code: Int32 = 0
        var signaled: Int32 = 0
        switch wh_pidfd_reap(pidfd, &code, &signaled) {
        case 1: return signaled != 0 ? .signaled(code) : .exited(status: code)
        case 0: return nil
        default: throw Errno(rawValue: errno)
        }
    }

    /// Releases the pidfd and the doorbell; later calls do nothing.
    func close() {
        guard pidfd >= 0 else { return }
        let closed = Glibc.close(pidfd)
        // EINTR still closes it (Linux); EBADF would be a descriptor closed twice.
        assert(closed == 0 || errno == EINTR, "pidfd \(pidfd): \(Errno(rawValue: errno))")
        pidfd = -1
        doorbell.close()
    }

    deinit { close() }
}
