import Glibc
import HostCoordination
import Logging

/// The supervisor's spare worker: its lifecycle (`SpareLifecycle`, the one place it moves), and
/// while it has them, its process and the supervisor's end of its hand-over socket. The loop's
/// half, which carries out what the lifecycle returns, is `SpareWorker+Loop`.
final class SpareWorker {
    var lifecycle: SpareLifecycle
    /// What every worker of the supervisor is told alike: the spare's whole launch.
    let launch: SpareLaunch
    let executable: String
    /// What every worker inherits: the supervisor's bell and `supervisor.lock`.
    let inherited: [WorkerLaunch.Descriptor: Int32]
    let logger: Logger
    /// The spare's process, from its spawn until it is handed over or reaped.
    private(set) var process: WorkerProcess?
    /// The supervisor's end of the hand-over socket (`SpareHandOver`); -1 when none.
    private(set) var socket: Int32 = -1

    init(
        policy: RestartPolicy, now: UInt64, launch: SpareLaunch, executable: String,
        inheriting inherited: [WorkerLaunch.Descriptor: Int32], logger: Logger
    ) {
        lifecycle = SpareLifecycle(policy: policy, now: now)
        (self.launch, self.executable, self.inherited, self.logger) = (launch, executable, inherited, logger)
    }

    func started(_ process: WorkerProcess, socket: Int32) {
        assert(self.process == nil && self.socket < 0, "one spare at a time")
        self.process = process
        self.socket = socket
    }

    /// The spare of a supervisor run with `configuration`, whose bell and `supervisor.lock`
    /// every worker inherits; nil with `run --no-spare`.
    convenience init?(
        _ configuration: SupervisorConfiguration, now: UInt64, bell: Doorbell, lock: Int32, logger: Logger
    ) {
        guard configuration.keepsSpare else { return nil }
        self.init(
            policy: configuration.restartPolicy, now: now, launch: SpareLaunch(configuration),
            executable: configuration.executable,
            inheriting: [.supervisorBell: bell.descriptor.rawValue, .supervisorLock: lock], logger: logger)
    }

    /// Nothing more is heard from the spare (it is killed, or gone).
    func closeSocket() {
        guard socket >= 0 else { return }
        Glibc.close(socket)
        socket = -1
    }

    /// The spare is handed over: its process is the window's from now on.
    func releaseProcess() -> WorkerProcess? {
        closeSocket()
        defer { process = nil }
        return process
    }

    /// Its process is reaped (or can no longer be waited for).
    func ended() {
        closeSocket()
        process?.close()
        process = nil
    }

    deinit { ended() }
}
