import Foundation
import HostControl
import HostCoordination
import HostLimits
import SessionStore
import SystemPackage

public struct SupervisorConfiguration: Sendable {
    /// What `run` takes when not told otherwise: the one statement of each default.
    public enum Defaults {
        public static let scenes = 1
        /// Chrome's delay from a change to its save.
        public static let saveDelayMilliseconds: UInt64 = 2500
        public static let watchdogMilliseconds: UInt64 = 3000
        public static let capacity = 16
        /// Room for one waiting `ctl` (a `kill --wait`, a `wait-durable`) per window at the
        /// largest capacity, while an idle client costs only a descriptor until it is evicted.
        public static let maxClients = Limits.maxOpenWindows
        public static let clientTimeoutMilliseconds: UInt64 = 10_000
        /// Keep a spare worker started and waiting (`run --no-spare` turns it off).
        public static let keepsSpare = true
    }

    public var root: FilePath
    public var scenes: Int
    public var socketPath: FilePath
    public var saveDelayMilliseconds: UInt64
    /// Passed to every worker as `--io`.
    public var io: String
    /// The `windowhost` binary workers are spawned from.
    public var executable: String
    /// A worker whose heartbeat is older than this is hung: killed and restarted.
    public var watchdogMilliseconds = Defaults.watchdogMilliseconds
    /// A worker that has not restored its window by then is killed (a failed start).
    public var startTimeoutMilliseconds: UInt64 = 60_000
    public var restartPolicy = RestartPolicy()
    /// Windows that may be open at once (slots in the region).
    public var capacity = Defaults.capacity
    /// Closed windows kept on disk (nil: `capacity`); past it the least recently closed is
    /// deleted for good.
    public var keepClosed: Int?
    /// Passed to every worker: compact a journal past this many records (the store's default
    /// when nil). Small values make compaction happen under a stress campaign's kills.
    public var compactAfterRecords: Int?
    /// Control connections at once (`ControlServer`): at the cap, the longest-idle one is
    /// dropped for a new one.
    public var maxClients = Defaults.maxClients
    /// A control client that sends no complete request, or does not read its reply, for this
    /// long is dropped.
    public var clientTimeoutMilliseconds = Defaults.clientTimeoutMilliseconds
    /// Where the loop publishes its status, events and metrics for other threads (`run
    /// --http`); nil: nowhere.
    public var observation: HostObservation?
    /// Keep one worker started with no window, handed the next window that needs a worker
    /// (`SpareLifecycle`).
    public var keepsSpare = Defaults.keepsSpare

    public init(
        root: FilePath, scenes: Int, socketPath: FilePath, saveDelayMilliseconds: UInt64, io: String, executable: String
    ) {
        self.root = root
        self.scenes = scenes
        self.socketPath = socketPath
        self.saveDelayMilliseconds = saveDelayMilliseconds
        self.io = io
        self.executable = executable
    }
}

public enum SupervisorError: Error, CustomStringConvertible {
    case alreadyRunning(FilePath)
    /// `windows/`, `windows.order` or `supervisor.lock` is not what the host needs there:
    /// refused before anything is written, for the user to move away. Each one found.
    case misplacedEntries([MisplacedEntry])
    /// `supervisor.lock` still held once every holder found was killed and
    /// `Supervisor.workerExitWaitNanoseconds` passed: `pids` are the holders still found (none
    /// when the descriptor sits where no `/proc/<pid>/fd` shows it, in a unix socket's queue).
    /// No supervisor runs: the root's own lock was free.
    case lockHeldByLeftovers(FilePath, pids: [Int32])
    case setup(String, Errno)
    case region(RegionError)
    case socket(ControlSocketError)

    public var description: String {
        switch self {
        case .alreadyRunning(let root): "another supervisor runs on \(root)"
        case .misplacedEntries(let entries): entries.map(\.description).joined(separator: "\n")
        case .lockHeldByLeftovers(let lock, let pids) where pids.isEmpty:
            "\(lock) is held by no process this host can find (its descriptor may sit unreceived in a unix socket's queue), and no supervisor runs; try again later, and if it stays held once no process of an earlier supervisor is left, remove \(lock) and start again"
        case .lockHeldByLeftovers(let lock, let pids):
            "\(lock) is still held by \(pids.map { "pid \($0)" }.joined(separator: ", ")), after SIGKILL (refused, or not done yet: see the log), and no supervisor runs; once they are gone, start again"
        case .setup(let step, let errno): "\(step): \(errno)"
        case .region(let error): "\(error)"
        case .socket(let error): "\(error)"
        }
    }
}

extension SpareLaunch {
    /// What every worker of a supervisor run with `configuration` is told alike: a spare's
    /// whole launch, and the part of a window's launch that is no one window's.
    init(_ configuration: SupervisorConfiguration) {
        self.init(
            root: configuration.root, saveDelayMilliseconds: configuration.saveDelayMilliseconds,
            io: configuration.io, supervisorPID: getpid(), compactAfterRecords: configuration.compactAfterRecords)
    }
}
