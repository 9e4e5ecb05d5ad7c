import CLinuxShims
import Foundation
import Glibc
import HostCoordination
import HostLimits
import Histogram
import IOUring
import Logging
import SessionStore
import SystemPackage

public struct SupervisorConfiguration: Sendable {
    public var root: FilePath
    public var scenes: Int
    public var socketPath: FilePath
    public var saveDelayMilliseconds: UInt64
    /// Passed to every worker as `--io`.
    public var io: String
    /// The `windowhost` binary workers are spawned from.
    public var executable: String
    /// A worker whose heartbeat is older than this is hung: killed and restarted.
    public var watchdogMilliseconds: UInt64 = 3000
    /// A worker that has not restored its window by then is killed (a failed start).
    public var startTimeoutMilliseconds: UInt64 = 60_000
    public var restartPolicy = RestartPolicy()
    /// Windows that may be open at once (slots in the region).
    public var capacity = 16
    /// Passed to every worker: compact a journal past this many records (the store's default
    /// when nil). Small values make compaction happen under a stress campaign's kills.
    public var compactAfterRecords: Int?
    /// Control connections at once (`ControlServer`): at the cap, the longest-idle one is
    /// dropped for a new one.
    public var maxClients = 64
    /// A control client that sends no complete request, or does not read its reply, for this
    /// long is dropped.
    public var clientTimeoutMilliseconds: UInt64 = 10_000

    public init(root: FilePath, scenes: Int, socketPath: FilePath, saveDelayMilliseconds: UInt64, io: String, executable: String) {
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

/// The supervisor: one thread, one poll(2) loop over the termination signals, the control
/// socket and its clients, every worker's pidfd and the doorbell workers ring; timers for
/// restarts and the watchdog. It owns the shared region, the window registry and the slots.
public final class Supervisor {
    typealias ClientID = ControlServer.ClientID

    struct Window {
        let id: UUID
        let slot: Int
        /// Its state, restarts and deaths: the only place either changes (`step`).
        var lifecycle: WindowLifecycle
        var configured = false
        /// The worker serving it, from its spawn until its death is handled (`workerDied`).
        var worker: WorkerProcess?
        var generation: UInt32 = 0
        var spawnedAt: UInt64 = 0
        var readyAt: UInt64?
        var reservedAt: UInt64
        var diedAt: UInt64?
        var lastRecoveryNanoseconds: UInt64?
        /// The window's seq as its worker holds it (replies, shared memory): what durable waits
        /// wait for. A restarted worker's is the seq it restored.
        var appliedSeq: UInt64 = 0
        /// The highest seq a reply showed: no reply shows a lower one (`shownSeq`).
        var highestRepliedSeq: UInt64 = 0
        /// The seq floor the worker now serving was given (`WorkerFloor`): it numbers changes
        /// above it. Raised at each spawn to every seq a client may have seen; the first worker
        /// a supervisor starts gets the window's `handed-out` ceiling, above every seq a dead
        /// supervisor may have shown.
        var seqFloor: UInt64 = 0
        /// The highest tab id a reply carried (at first, the `handed-out` ceiling): a restarted
        /// worker never hands out one up to it.
        var highestTab: Int64 = 0
        /// Seqs replied to and then lost with the worker that applied them (killed before they
        /// were durable), oldest first: no durable answer covers them (`durableReply`).
        var lostSeqs = LostSeqs()
        /// Killed for breaking the protocol: nothing more it publishes is read.
        var killedForMisbehaving = false
        /// The window's `handed-out` entry went with a damaged file: its first worker only says
        /// what it restored (a dump, `probeFloors`), then makes way for one numbering
        /// `HandedOutCeiling.fallbackJump` above that.
        var floorProbe: FloorProbe?
        var lastStats = WorkerStats()
        /// Requests sent to the worker and not yet answered.
        var pending: [UInt64: Pending] = [:]
        var readyWaiters: [ReadyWaiter] = []
        var exitWaiters: [ClientID] = []
        var durableWaiters: [DurableWaiter] = []

        var isLive: Bool { worker != nil }
        /// The worker's pid, 0 while none serves.
        var pid: Int32 { worker?.pid ?? 0 }
        var state: SlotState { lifecycle.shown }
        /// Whether the scene is in the background (kept across restarts).
        var inBackground: Bool { lifecycle.scene == .background }
        var history: RestartPolicy.History { lifecycle.history }
        var restartAt: UInt64? { lifecycle.restartAt }

        /// The seq a reply shows for a worker's `appliedSeq`: the window's place in its order of
        /// commands. It is the worker's own but after a restart that lost replied commands (their
        /// seqs are above what it restored), when a command that changes nothing shows the highest
        /// seq shown before, so no reply shows a seq below one before. Updates the high mark.
        mutating func shownSeq(_ applied: UInt64) -> UInt64 {
            highestRepliedSeq = max(highestRepliedSeq, applied)
            return highestRepliedSeq
        }
        var isReady: Bool { isLive && readyAt != nil && lifecycle.state == .ready }
    }

    enum FloorProbe { case needed, asked }

    struct Pending {
        let client: ClientID?
        let kind: Kind
        /// The slot's failed-save count when the request was sent: a `save --wait` fails on
        /// a failure after it.
        let failuresBefore: UInt64

        /// What was asked, which decides how its reply is answered.
        enum Kind: Equatable {
            case tab(TabCommand)
            case scene(SceneChange)
            /// Shutdown's disconnect, no client's: its failure is noted as kept unsaved.
            case shutdownDisconnect
            /// `wait`: a `save --wait`, answered once the save is durable.
            case save(wait: Bool)
            case dump
            /// The dump of `Window.floorProbe`: never a client's.
            case floorProbe

            /// What the worker's ring carries for it.
            var command: WindowCommand {
                switch self {
                case .tab(let command): .tab(command)
                case .scene(let change): .scene(change)
                case .shutdownDisconnect: .scene(.disconnect)
                case .save: .save
                case .dump, .floorProbe: .dump
                }
            }

            var isDisconnect: Bool { self == .scene(.disconnect) || self == .shutdownDisconnect }
        }
    }

    /// A client waiting until every command up to `seq` is durable. A save failing after it
    /// asked (the slot's failure count passing `failuresBefore`) answers it with 74 at once.
    struct DurableWaiter {
        let seq: UInt64
        let client: ClientID
        let failuresBefore: UInt64
    }

    enum ReadyWaiter {
        case connect(ClientID)
        /// A `kill` waiting for the worker it signalled to be replaced; answered 75 at
        /// `deadline` if that worker is still alive then (the signal was caught or ignored).
        case restart(ClientID, oldPID: Int32, whileSaving: Bool, signal: String, deadline: UInt64)
    }

    struct SetAsideRecord {
        let window: UUID
        let path: FilePath
        let at: Date
        let reason: String
    }

    private let configuration: SupervisorConfiguration
    private var logger: Logger
    private let files: SupervisorFiles
    private let region: SharedRegion
    private let bell: Doorbell
    private var registry: WindowRegistry
    private var windows: [Int: Window] = [:]
    private var nextRequest: UInt64 = 1
    private var setAsideRecords: [SetAsideRecord] = []
    /// Each window's ceilings and lost seqs as `handed-out` holds them on disk: no reply shows
    /// a seq or tab id above its window's ceilings (`recordHandedOut`).
    private var handedOut: [UUID: HandedOutWindow] = [:]
    /// `handed-out` did not read at the start: windows on disk with no entry take the fallback
    /// floors (`Window.floorProbe`).
    private var handedOutDamaged = false
    private let control: ControlServer
    private let signals: Int32
    private let rootLock: Int32
    private let lock: Int32
    private let startedAt = monotonicNanoseconds()
    private var shutdownDeadline: UInt64?
    /// Windows whose unsaved changes shutdown could not save, and why: named at the end, and
    /// the exit status is then 75.
    private var keptUnsaved: [(window: UUID, reason: String)] = []
    private var initialScenesPending: Int

    /// Takes the root (one supervisor per root), binds the socket, creates the region. Call
    /// before any other thread starts: it blocks the termination signals for the process.
    public init(configuration: SupervisorConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        // Lines about no one window carry Firefox's `unavailable` UUID; the others name theirs.
        self.logger[metadataKey: "window"] = "\(WindowRegistry.unavailable)"
        files = SupervisorFiles(root: configuration.root, logger: logger)
        signals = wh_termination_signalfd()
        guard signals >= 0 else { throw SupervisorError.setup("signalfd", Errno(rawValue: errno)) }
        try SupervisorFiles.makeDirectory(configuration.root)
        // Before the lock is opened or anything made: a symlink there is never followed.
        let misplaced = RootLayout.misplacedEntries(root: configuration.root)
        guard misplaced.isEmpty else { throw SupervisorError.misplacedEntries(misplaced) }
        try SupervisorFiles.makeDirectory(files.windows)
        // The lock is the root directory itself (flock: the kernel drops it when the holder
        // dies, so a killed supervisor leaves none). A file under the root can be swapped under
        // its holder by anyone who can write the root, and a second supervisor would then lock
        // the new file; the directory cannot be swapped without writing its parent.
        do {
            rootLock = try NoFollow.openDirectory(configuration.root).rawValue
        } catch {
            throw SupervisorError.setup("open \(configuration.root)", error)
        }
        guard flock(rootLock, LOCK_EX | LOCK_NB) == 0 else { throw SupervisorError.alreadyRunning(configuration.root) }
        // supervisor.lock too: what supervisors of earlier versions lock, and what every worker
        // holds (inherited, read-only) until its last thread is gone. A supervisor killed takes
        // its workers with it (PR_SET_PDEATHSIG), but not at once: a worker's io_uring writes in
        // flight finish in its io-wq threads first. The next supervisor waits for them here, so
        // no write of a dead window's worker lands over what a new worker restored and saved.
        lock = open(files.lock.string, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw SupervisorError.setup("open \(files.lock)", Errno(rawValue: errno)) }
        do {
            try NoFollow.setPrivateMode(lock, 0o600)
        } catch {
            throw SupervisorError.setup("fchmod \(files.lock)", error)
        }
        try Self.takeLockFromLeftovers(lock, path: files.lock, logger: self.logger)
        guard wh_set_child_subreaper(1) == 0 else { throw SupervisorError.setup("PR_SET_CHILD_SUBREAPER", Errno(rawValue: errno)) }
        do {
            region = try SharedRegion(slotCount: configuration.capacity, supervisorPID: getpid())
            bell = try Doorbell()
        } catch {
            throw SupervisorError.region(error)
        }
        let scan = try files.windowsOnDisk(at: Date())
        for entry in scan.setAside {
            if let path = entry.path { setAsideRecords.append(SetAsideRecord(window: entry.window, path: path, at: Date(), reason: entry.reason)) }
            logger.error("window entry set aside", metadata: ["window": "\(entry.window)", "path": "\(entry.path?.string ?? "-")", "reason": "\(entry.reason)"])
        }
        registry = WindowRegistry(onDisk: scan.windows, savedOrder: try files.savedOrder())
        switch try files.handedOutRecord(at: Date()) {
        case .missing:
            break
        case .read(let record):
            // A window with no session left is gone for good: the next write drops it.
            let onDisk = Set(scan.windows)
            handedOut = record.filter { onDisk.contains($0.key) }
        case .damaged(let reason, let path):
            handedOutDamaged = true
            if let path { setAsideRecords.append(SetAsideRecord(window: WindowRegistry.unavailable, path: path, at: Date(), reason: reason)) }
            logger.error(
                "\(RootLayout.handedOut) does not read: set aside, not trusted; each window's seqs and tab ids continue \(HandedOutCeiling.fallbackJump) above what it restores",
                metadata: ["path": "\(path?.string ?? "-")", "reason": "\(reason)"])
        }
        // Held from the start, so later writes need neither space nor a descriptor; one of an
        // older form (or none) is made anew now, while there is room. Not after damage: the
        // windows' fallback floors are written as their probes answer.
        if !handedOutDamaged { handedOutFile = (try? files.openHandedOut()) ?? (try? files.makeHandedOut(handedOut)) }
        do {
            control = try ControlServer(
                path: configuration.socketPath, maxClients: configuration.maxClients,
                idleTimeout: configuration.clientTimeoutMilliseconds * 1_000_000, logger: logger)
        } catch {
            throw SupervisorError.socket(error)
        }
        initialScenesPending = configuration.scenes
    }

    /// Takes `supervisor.lock`. The root's own lock is ours, so no supervisor of this version
    /// runs: whoever holds supervisor.lock is a leftover of one that died, its workers still
    /// finishing their writes or whatever a worker forked or handed the descriptor to. Workers
    /// are waited for; what holds it after `leftoverGraceNanoseconds` is killed, or one
    /// compromised worker's child would keep every later start out. Killing loses nothing: the
    /// kernel drops the lock only once the killed process's io_uring writes are done, and this
    /// waits for that (`workerExitWaitNanoseconds`), scanning again for holders a forking one
    /// makes meanwhile.
    private static func takeLockFromLeftovers(_ lock: Int32, path: FilePath, logger: Logger) throws(SupervisorError) {
        if try takeLock(lock, path: path, before: monotonicNanoseconds() + leftoverGraceNanoseconds) { return }
        let holders: LockHolders
        do {
            holders = try LockHolders(of: lock)
        } catch {
            throw .setup("fstat \(path)", error)
        }
        let deadline = monotonicNanoseconds() + workerExitWaitNanoseconds
        var killed: Set<Int32> = []
        while true {
            for pid in holders.pids() {
                do {
                    guard let command = try holders.kill(pid) else { continue }
                    if killed.insert(pid).inserted {
                        logger.error("killed a leftover of a dead supervisor holding \(path)", metadata: ["pid": "\(pid)", "cmdline": "\(command)"])
                    }
                } catch {
                    logger.error("cannot kill a leftover holding \(path)", metadata: ["pid": "\(pid)", "error": "\(error)"])
                }
            }
            if try takeLock(lock, path: path, before: min(deadline, monotonicNanoseconds() + leftoverScanNanoseconds)) { return }
            guard monotonicNanoseconds() < deadline else { throw .lockHeldByLeftovers(path, pids: holders.pids()) }
        }
    }

    /// Tries `flock(LOCK_EX)` on `lock` until `deadline`: whether it was taken.
    private static func takeLock(_ lock: Int32, path: FilePath, before deadline: UInt64) throws(SupervisorError) -> Bool {
        while flock(lock, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { throw .setup("flock \(path)", Errno(rawValue: errno)) }
            guard monotonicNanoseconds() < deadline else { return false }
            usleep(10_000)
        }
        return true
    }

    /// How long a new supervisor gives the dying workers of the last one before it kills what
    /// still holds supervisor.lock: they exit within milliseconds of its death, once their
    /// writes in flight are done; a second spares one finishing a slow write a needless kill.
    static let leftoverGraceNanoseconds: UInt64 = 1_000_000_000

    /// How long after killing leftovers it waits for the lock before scanning again.
    static let leftoverScanNanoseconds: UInt64 = 100_000_000

    /// How long a new supervisor waits, once it has killed what held supervisor.lock, for the
    /// lock: the killed processes' writes in flight finish first.
    static let workerExitWaitNanoseconds: UInt64 = 5_000_000_000

    deinit {
        close(signals)
        close(lock)
        close(rootLock)
        bell.close()
    }

    // MARK: the loop

    /// Starts the initial scenes and serves until SIGTERM, SIGINT or `ctl shutdown`; `ready`
    /// is called once, when the initial scenes are restored. Returns the exit status.
    public func run(ready: (FilePath) -> Void) -> ControlCode {
        for _ in 0..<configuration.scenes { _ = connectScene(waiter: nil) }
        var announced = false
        while !stopped {
            if !announced, initialScenesPending == 0 {
                announced = true
                ready(configuration.socketPath)
                logger.info("ready", metadata: ["socket": "\(configuration.socketPath)", "windows": "\(windows.count)"])
            }
            killWorkersPastShutdownDeadline()
            waitForEvents()
        }
        control.stop()
        lowerHandedOutToShown()
        guard keptUnsaved.isEmpty else {
            for (window, reason) in keptUnsaved {
                logger.error("window kept unsaved changes", metadata: ["window": "\(window)", "reason": "\(reason)"])
            }
            logger.error(
                "stopped: \(keptUnsaved.count) window(s) kept unsaved changes",
                metadata: ["windows": "\(keptUnsaved.map(\.window.uuidString).joined(separator: ","))"])
            return Self.exitKeptUnsaved
        }
        logger.info("stopped: every window saved")
        return .ok
    }

    /// Shutting down, and every worker has exited.
    private var stopped: Bool {
        shutdownDeadline != nil && windows.values.allSatisfy { !$0.isLive }
    }

    /// Past the shutdown deadline, the workers still running are killed, once; what they had
    /// not saved is named at the end.
    private func killWorkersPastShutdownDeadline() {
        guard let deadline = shutdownDeadline, monotonicNanoseconds() > deadline else { return }
        for window in windows.values where window.isLive {
            logger.warning("worker did not exit in time: killed", metadata: ["window": "\(window.id)"])
            if window.lastStats.durableSeq < window.appliedSeq {
                noteKeptUnsaved(window.id, "its worker did not finish saving in time")
            }
            signalWorker(window, SIGKILL)
        }
        shutdownDeadline = .max
    }

    /// Sends `signal` to the window's worker, if it has one. One already dead (ESRCH) is fine:
    /// its pidfd reports the death; any other failure is logged.
    private func signalWorker(_ window: Window, _ signal: Int32) {
        guard let worker = window.worker else { return }
        do throws(Errno) {
            try worker.signal(signal)
        } catch {
            guard error != .noSuchProcess else { return }
            logger.error("cannot signal the worker", metadata: ["window": "\(window.id)", "pid": "\(worker.pid)", "signal": "\(signal)", "error": "\(error)"])
        }
    }

    /// The exit status when shutdown could not save some window (EX_TEMPFAIL): what was
    /// unsaved is gone with its worker; the storage needs attention before the next start.
    public static let exitKeptUnsaved = ControlCode.temporary

    /// One turn: waits for any source, then hands each its events, in this order: signals,
    /// workers' deaths, what workers published, control clients, timers.
    private func waitForEvents() {
        let controlDescriptors = control.pollDescriptors(accepting: shutdownDeadline == nil, now: monotonicNanoseconds())
        let workers = windows.compactMap { slot, window in window.worker.map { (slot: slot, pidfd: $0.pidfd) } }
        var descriptors =
            [pollfd(fd: signals, events: Int16(POLLIN), revents: 0), pollfd(fd: bell.descriptor.rawValue, events: Int16(POLLIN), revents: 0)]
            + controlDescriptors + workers.map { pollfd(fd: $0.pidfd, events: Int16(POLLIN), revents: 0) }
        if poll(&descriptors, nfds_t(descriptors.count), timeoutMilliseconds()) < 0, errno != EINTR {
            // Nothing is ready then: the turn goes on to the timers, and the next waits again.
            logger.error("poll: \(Errno(rawValue: errno))")
        }
        let clients = Array(descriptors[2..<(2 + controlDescriptors.count)])
        let deaths = descriptors[(2 + controlDescriptors.count)...]
        if descriptors[0].revents != 0 { handleSignal() }
        for (worker, polled) in zip(workers, deaths) where polled.revents != 0 { reapWorker(worker.slot) }
        handleWorkerBell()
        for (client, request) in control.service(clients, now: monotonicNanoseconds()) { handle(request, from: client) }
        runTimers()
    }

    /// SIGTERM or SIGINT: every window saves, and the supervisor stops.
    private func handleSignal() {
        let signal = wh_signalfd_read(signals)
        guard signal > 0 else { return }
        logger.info("signal \(signal): saving every window and stopping")
        beginShutdown()
    }

    /// Whatever workers published since the last turn (the bell rings after each), and the
    /// aimed kills waiting for a save to start.
    private func handleWorkerBell() {
        bell.clear()
        serviceWorkers()
        retryAimedKills()
    }

    private func timeoutMilliseconds() -> Int32 {
        let now = monotonicNanoseconds()
        var timeout: UInt64 = 100_000_000
        for window in windows.values {
            if let at = window.restartAt { timeout = min(timeout, at > now ? at - now : 0) }
        }
        for at in [orderRetry?.at, handedOutRetry?.at].compactMap({ $0 }) { timeout = min(timeout, at > now ? at - now : 0) }
        if let due = control.nextDeadline(now: now) { timeout = min(timeout, due) }
        // An aimed kill looks at its window's slot again every millisecond.
        if !aimedKills.isEmpty { timeout = min(timeout, 1_000_000) }
        return Int32((timeout + 999_999) / 1_000_000)
    }

    // MARK: workers

    /// Reserves a UUID, takes a slot and spawns the scene's worker. Nil when every slot is taken.
    private func connectScene(waiter: ClientID?) -> UUID? {
        guard let slot = (0..<configuration.capacity).first(where: { windows[$0] == nil }) else { return nil }
        let id = registry.reserve()
        var window = Window(id: id, slot: slot, lifecycle: WindowLifecycle(policy: configuration.restartPolicy), reservedAt: monotonicNanoseconds())
        // What a supervisor before may have handed out: its first worker numbers above it, and
        // `becameReady` names what it did not restore lost, beside what was lost before.
        if let record = handedOut[id] {
            window.seqFloor = record.ceiling.seq
            window.highestTab = record.ceiling.tab
            window.lostSeqs = record.lost
        } else if handedOutDamaged, files.hasSession(id) {
            window.floorProbe = .needed
        }
        if let waiter { window.readyWaiters.append(.connect(waiter)) }
        // A new reservation starts with no save counters; spawn writes the rest of the slot.
        region.slot(slot).resetWorkerFields(keepingCounters: false)
        windows[slot] = window
        spawn(slot)
        logger.info("scene connected", metadata: ["window": "\(id)", "slot": "\(slot)"])
        return id
    }

    private func spawn(_ slot: Int) {
        guard var window = windows[slot] else { return }
        let view = region.slot(slot)
        // Every seq a client may have seen: replied, or shown by `status` (the dead worker's
        // last words included, read when it died).
        window.seqFloor = max(window.seqFloor, window.highestRepliedSeq, window.appliedSeq, window.lastStats.appliedSeq)
        window.generation += 1
        // A probe that died unanswered is asked of the next worker.
        if window.floorProbe == .asked { window.floorProbe = .needed }
        window.readyAt = nil
        window.killedForMisbehaving = false
        view.resetWorkerFields(keepingCounters: true)
        view.generation = window.generation
        view.windowID = window.id
        _ = step(&window, .spawnBegan)
        assert(window.worker == nil, "a window has one worker at a time")
        assert(window.appliedSeq <= window.seqFloor && window.lastStats.durableSeq <= window.seqFloor, "applied < the next seq a worker may take: the new worker numbers above every seq applied")
        let launch = WorkerLaunch(
            slot: slot, generation: window.generation, window: window.id, root: configuration.root,
            saveDelayMilliseconds: configuration.saveDelayMilliseconds, io: configuration.io, supervisorPID: getpid(),
            seqFloor: window.seqFloor, tabFloor: window.highestTab, compactAfterRecords: configuration.compactAfterRecords)
        let spawnStart = monotonicNanoseconds()
        let worker: WorkerProcess
        do throws(WorkerProcess.SpawnFailure) {
            // Its own slot's memfd only: no descriptor the worker holds reaches another window.
            worker = try WorkerProcess.spawn(
                launch, executable: configuration.executable,
                inheriting: [.slotMemory: region.descriptor(ofSlot: slot).rawValue, .supervisorBell: bell.descriptor.rawValue, .supervisorLock: lock])
        } catch {
            windows[slot] = window
            startFailed(slot, error.call, error.errno)
            return
        }
        window.worker = worker
        _ = step(&window, .spawned)
        window.spawnedAt = monotonicNanoseconds()
        view.pid = worker.pid
        windows[slot] = window
        logger.info(
            "worker spawned",
            metadata: [
                "window": "\(window.id)", "pid": "\(worker.pid)", "generation": "\(window.generation)",
                "spawn_us": "\((window.spawnedAt - spawnStart) / 1000)",
            ])
    }

    /// Starting the worker failed at `call`. For want of the supervisor's own descriptors,
    /// memory or processes (`RestartPolicy.isShortage`) the start is tried again after a
    /// backoff and counts nothing against the window; any other failure is a failed start.
    private func startFailed(_ slot: Int, _ call: String, _ error: Errno) {
        guard var window = windows[slot] else { return }
        guard RestartPolicy.isShortage(error) else {
            logger.error("spawn failed", metadata: ["window": "\(window.id)", "call": "\(call)", "error": "\(error)"])
            workerDied(slot, description: "not spawned: \(call): \(error)", spawned: false)
            return
        }
        let now = monotonicNanoseconds()
        _ = step(&window, .spawnFailed(shortage: true))
        let delay = (window.restartAt ?? now) &- now
        logger.error(
            "the supervisor is short of resources: the worker is started again later; the window is not at fault",
            metadata: [
                "window": "\(window.id)", "call": "\(call)", "error": "\(error)", "attempt": "\(window.history.shortages)",
                "retry_ms": "\(delay / 1_000_000)",
            ])
        windows[slot] = window
    }

    /// The worker's pidfd is readable: it has ended, and is reaped.
    private func reapWorker(_ slot: Int) {
        guard let window = windows[slot], let worker = window.worker else { return }
        let end: WorkerProcess.End
        do throws(Errno) {
            guard let ended = try worker.reap() else { return }
            end = ended
        } catch {
            // It cannot be waited for, so it cannot be watched: it goes, and is started again
            // (as when its pidfd could not be had), not polled again and again.
            logger.error("waitid on the worker's pidfd: \(error); killed", metadata: ["window": "\(window.id)", "pid": "\(worker.pid)"])
            signalWorker(window, SIGKILL)
            workerDied(slot, description: "could not be waited for (\(error))")
            return
        }
        let beforeReady = window.readyAt == nil
        switch end {
        case .exited(let status):
            let shortage = RestartPolicy.diedOfNoFaultOfTheSession(workerExitStatus: status, signaled: false, beforeReady: beforeReady)
            workerDied(slot, description: "exited with status \(status)", cleanExit: status == WorkerExit.disconnected.status, shortOfResources: shortage)
        case .signaled(let signal):
            workerDied(slot, description: "killed by signal \(signal)")
        }
    }

    /// `shortOfResources`: the worker said its restore ran short of its own resources; it is
    /// started again after the shortage backoff, and the death counts for nothing. Not
    /// `spawned`: the worker could not be started, for a reason that is no shortage.
    private func workerDied(_ slot: Int, description: String, cleanExit: Bool = false, shortOfResources: Bool = false, spawned: Bool = true) {
        guard var window = windows[slot] else { return }
        window.worker?.close()
        window.worker = nil
        drainReplies(&window)
        let now = monotonicNanoseconds()
        for (_, pending) in window.pending where pending.kind != .scene(.disconnect) {
            if let client = pending.client { answer(client, .failure(.temporary, "the worker died (\(description)); it is restarting")) }
        }
        window.pending = window.pending.filter { $0.value.kind == .scene(.disconnect) }
        for waiter in window.durableWaiters {
            answer(waiter.client, .failure(.temporary, "the worker died (\(description)) before the save was durable"))
        }
        window.durableWaiters = []
        // A worker that disconnected exited 0 after saving; any other death while stopping is
        // judged by what it last published (read again: its last words may be unread yet).
        if !cleanExit, !window.killedForMisbehaving, let stats = region.slot(slot).readStats(), Self.violation(in: stats) == nil {
            window.lastStats = stats
        }
        if shutdownDeadline != nil, !cleanExit, window.readyAt != nil, window.lastStats.durableSeq < window.appliedSeq,
            !keptUnsaved.contains(where: { $0.window == window.id })
        {
            noteKeptUnsaved(window.id, "its worker \(description) with commands up to \(window.appliedSeq) applied and \(window.lastStats.durableSeq) durable")
        }
        let diedBeforeReady = window.readyAt == nil
        let actions = step(&window, spawned ? .workerDied(cleanExit: cleanExit, noFault: shortOfResources) : .spawnFailed(shortage: false), now: now)
        switch window.lifecycle.state {
        case .restartPending(let at, let wait):
            window.diedAt = now
            if wait == .workerShortage {
                logger.error(
                    "the worker was short of resources while restoring: it is started again later; the window is not at fault",
                    metadata: ["window": "\(window.id)", "how": "\(description)", "attempt": "\(window.history.shortages)", "retry_ms": "\((at &- now) / 1_000_000)"])
            } else {
                let next = actions.contains(.spawn) ? "restart now" : (wait == .setAside ? "set aside, " : "") + "restart in \((at &- now) / 1_000_000) ms"
                logger.warning(
                    "worker died", metadata: ["window": "\(window.id)", "how": "\(description)", "restoring": "\(diedBeforeReady)", "next": "\(next)"])
            }
        default:
            // Disconnecting, or stopping: no restart.
            break
        }
        windows[slot] = window
        carryOut(actions, slot, description: description)
    }

    /// Feeds `window`'s lifecycle `event` and shows where it leads in the window's slot; the
    /// caller carries out the actions returned (`carryOut`), after storing the window.
    private func step(_ window: inout Window, _ event: WindowLifecycle.Event, now: UInt64? = nil) -> [WindowLifecycle.Action] {
        let actions = window.lifecycle.handle(event, now: now ?? monotonicNanoseconds())
        // A window gone frees its slot (`finishDisconnect`).
        if window.lifecycle.state != .gone { region.slot(window.slot).state = window.lifecycle.shown }
        return actions
    }

    /// `step` for the window in `slot`, stored again before anything is carried out.
    private func step(_ slot: Int, _ event: WindowLifecycle.Event) -> [WindowLifecycle.Action] {
        guard var window = windows[slot] else { return [] }
        let actions = step(&window, event)
        windows[slot] = window
        return actions
    }

    /// Does what the window's lifecycle decided. `description`: how its worker went, for the
    /// messages that say so.
    private func carryOut(_ actions: [WindowLifecycle.Action], _ slot: Int, description: String) {
        for action in actions {
            guard let window = windows[slot] else { return }
            switch action {
            case .spawn:
                spawn(slot)
            case .setAside:
                let reason = "the worker died \(configuration.restartPolicy.failedStartLimit) times in a row while restoring (last: \(description))"
                guard let failure = setAside(slot, reason: reason) else {
                    carryOut(step(slot, .setAsideDone), slot, description: description)
                    continue
                }
                for case .reportCannotStart(let retry) in step(slot, .setAsideFailed) {
                    // Whoever waits for it to connect is told why instead of waiting for good.
                    answerConnectWaiters(slot, .failure(.ioError, "window \(window.id) cannot start: \(reason); \(failure); retried every \(retry / 1_000_000_000) s"))
                }
            case .reportCannotStart:
                assertionFailure("reportCannotStart follows only setAsideFailed, carried out with it")
            case .finishDisconnect(let clean):
                finishDisconnect(slot, cleanExit: clean, description: description)
            case .kill:
                signalWorker(window, SIGKILL)
            case .terminate:
                signalWorker(window, SIGTERM)
            case .sendShutdownDisconnect:
                _ = send(.shutdownDisconnect, to: slot, client: nil)
            }
        }
    }

    /// Why a window at `Limits.maxCommandSeq` refuses a tab command, and what to do instead:
    /// no seq is renumbered (nothing could prove a renumbered window loses nothing).
    static func seqExhaustedMessage(_ window: UUID) -> String {
        "window \(window) has reached the highest command seq (\(Limits.maxCommandSeq)), which no window reaches by use "
            + "(its files were crafted or damaged): it takes no more tab commands, and retrying will not help. Its tabs "
            + "still read (ctl dump) and save; to go on, open them in a new window (ctl connect, then ctl open for each "
            + "URL ctl dump lists) and disconnect this one"
    }

    private func answerConnectWaiters(_ slot: Int, _ reply: ControlReply) {
        guard var window = windows[slot] else { return }
        var connecting: [ClientID] = []
        window.readyWaiters.removeAll { waiter in
            guard case .connect(let client) = waiter else { return false }
            connecting.append(client)
            return true
        }
        windows[slot] = window
        for client in connecting { answer(client, reply) }
    }

    /// Moves the window's session to `set-aside/`. Nil when done (or nothing was on disk); else
    /// why it could not be, naming any fixed entry of the root that is not what it should be.
    private func setAside(_ slot: Int, reason: String) -> String? {
        guard let window = windows[slot] else { return nil }
        do {
            if let path = try files.setAside(window.id, at: Date()) {
                setAsideRecords.append(SetAsideRecord(window: window.id, path: path, at: Date(), reason: reason))
                logger.error("window set aside; it restarts empty", metadata: ["window": "\(window.id)", "path": "\(path)", "reason": "\(reason)"])
            }
            return nil
        } catch {
            let misplaced = RootLayout.misplacedEntries(root: configuration.root).map { "\($0)" }
            let failure = "cannot set it aside: \(error)" + (misplaced.isEmpty ? "" : " (\(misplaced.joined(separator: "; ")))")
            logger.error("\(failure)", metadata: ["window": "\(window.id)"])
            return failure
        }
    }

    /// Everything workers published since the last look: readiness, replies, durable seqs.
    private func serviceWorkers() {
        for slot in windows.keys.sorted() {
            guard var window = windows[slot] else { continue }
            let view = region.slot(slot)
            guard !window.killedForMisbehaving else { continue }
            if window.isLive, let stats = view.readStats() {
                if let violation = Self.violation(in: stats) {
                    misbehaved(&window, violation)
                    windows[slot] = window
                    continue
                }
                window.lastStats = stats
            }
            let justReady = window.isLive && window.readyAt == nil && window.lifecycle.state == .starting && view.readyGeneration == window.generation
            if justReady, window.floorProbe == nil { becameReady(&window) }
            drainReplies(&window)
            window.appliedSeq = max(window.appliedSeq, window.lastStats.appliedSeq)
            let durable = window.lastStats.durableSeq
            assert(durable <= window.appliedSeq, "stats are accepted only with durable ≤ applied (`violation`)")
            let failures = view.saveFailures
            let failing = failures > 0 && window.lastStats.failingErrno != 0
            var done: [DurableWaiter] = []
            var failed: [DurableWaiter] = []
            var waiting: [DurableWaiter] = []
            for waiter in window.durableWaiters {
                if waiter.seq <= durable {
                    done.append(waiter)
                } else if failing, failures > waiter.failuresBefore {
                    failed.append(waiter)
                } else {
                    waiting.append(waiter)
                }
            }
            window.durableWaiters = waiting
            windows[slot] = window
            // A restarted background scene is told again, so its saves follow case 1.
            if justReady, window.floorProbe == nil, window.inBackground { _ = send(.scene(.background), to: slot, client: nil) }
            if justReady, window.floorProbe == .needed, send(.floorProbe, to: slot, client: nil) { windows[slot]?.floorProbe = .asked }
            for waiter in done { answer(waiter.client, .ok(Self.durableReply(window, durable: durable))) }
            for waiter in failed { answer(waiter.client, .failure(.ioError, saveFailureMessage(window))) }
        }
    }

    /// Why a durable wait failed: what shared memory says of the window's failing saves.
    private func saveFailureMessage(_ window: Window) -> String {
        let stats = window.lastStats
        let error = Self.describeErrno(stats.failingErrno)
        let browsers = [(1, "regular"), (2, "incognito")].filter { stats.failingBrowsers & $0.0 != 0 }.map(\.1)
        return "a save of window \(window.id) failed (\(browsers.joined(separator: " and ")) Browser): \(error); "
            + "durable through \(stats.durableSeq) of \(window.appliedSeq); the window retries by itself"
    }

    /// The slot's stats now, unless they are impossible (`violation`): reports show only stats
    /// the supervisor would act on.
    private func checkedStats(_ view: WindowSlot) -> WorkerStats? {
        view.readStats().flatMap { Self.violation(in: $0) == nil ? $0 : nil }
    }

    /// What makes a worker's published stats impossible, if anything: a worker that publishes
    /// them misbehaves (a bug, or damage it read and did not refuse).
    static func violation(in stats: WorkerStats) -> String? {
        guard Limits.isValidCommandSeq(stats.appliedSeq) else { return "applied seq \(stats.appliedSeq) above \(Limits.maxCommandSeq)" }
        guard stats.durableSeq <= stats.appliedSeq else { return "durable seq \(stats.durableSeq) above applied seq \(stats.appliedSeq)" }
        return nil
    }

    /// A worker broke the protocol: it is killed, and its death is handled as a crash (before
    /// ready, a failed start: repeated, the window is set aside). The supervisor trusts nothing
    /// of it meanwhile.
    private func misbehaved(_ window: inout Window, _ violation: String) {
        guard window.isLive, !window.killedForMisbehaving else { return }
        logger.error("worker misbehaved: killed", metadata: ["window": "\(window.id)", "pid": "\(window.pid)", "violation": "\(violation)"])
        window.killedForMisbehaving = true
        signalWorker(window, SIGKILL)
    }

    private func noteKeptUnsaved(_ window: UUID, _ reason: String) {
        keptUnsaved.append((window, reason))
    }

    private func becameReady(_ window: inout Window) {
        let now = monotonicNanoseconds()
        let view = region.slot(window.slot)
        assert(window.worker.map { $0.pidfd >= 0 } == true, "a ready window has a live pidfd")
        window.readyAt = now
        _ = step(&window, .becameReady)
        if let stats = view.readStats(), Self.violation(in: stats) == nil { window.lastStats = stats }
        // What it restored: below the seqs the last worker applied if it lost them (the floor
        // keeps them from being handed out again).
        window.appliedSeq = window.lastStats.appliedSeq
        assert(window.lastStats.durableSeq <= window.appliedSeq, "stats are accepted only with durable ≤ applied (`violation`)")
        // What a window restores is durable: a lost range holding it is no range this host
        // recorded (lost seqs lie above what was restored when they were lost, and everything
        // saved since is above them), but a crafted or mixed-up `handed-out`; believed, it made
        // acknowledged commands answer 75 (hostile round 5).
        if window.appliedSeq > 0, let contradicted = window.lostSeqs.range(holding: window.appliedSeq) {
            window.lostSeqs.remove(contradicted)
            logger.error(
                "lost seqs \(contradicted.lowerBound)…\(contradicted.upperBound) hold the seq the window restored: not believed",
                metadata: ["window": "\(window.id)", "seq": "\(window.appliedSeq)"])
        }
        // Seqs a client may have seen above what it restored named commands lost with the last
        // worker: waits for them end here (a wait asked while no worker ran still had the dead
        // one's seq, and waited for a save that never comes), and no durable answer covers them.
        if window.seqFloor > window.appliedSeq {
            let lost = (window.appliedSeq + 1)...window.seqFloor
            window.lostSeqs.insert(lost)
            // Kept for the supervisors after this one (a failed write is logged; the next one,
            // at the window's next raise of its ceiling, carries them).
            _ = recordHandedOut(window)
            let stale = window.durableWaiters.filter { $0.seq > window.appliedSeq }
            window.durableWaiters.removeAll { $0.seq > window.appliedSeq }
            for waiter in stale { answer(waiter.client, .failure(.temporary, Self.lostMessage(lost))) }
        }
        if let died = window.diedAt { window.lastRecoveryNanoseconds = now - died }
        window.diedAt = nil
        if !window.configured {
            window.configured = true
            registry.configured(window.id)
            saveOrder()
            if initialScenesPending > 0 { initialScenesPending -= 1 }
        }
        logger.info("window ready", metadata: ["window": "\(window.id)", "pid": "\(window.pid)", "seq": "\(window.appliedSeq)"])
        let waiters = window.readyWaiters
        window.readyWaiters = []
        for waiter in waiters {
            switch waiter {
            case .connect(let client):
                answer(client, .ok(ConnectReply(window: window.id.uuidString, pid: window.pid)))
            case .restart(let client, let oldPID, let whileSaving, _, _):
                answer(client, .ok(KillReply(
                    window: window.id.uuidString, killedPID: oldPID, whileSaving: whileSaving, pid: window.pid,
                    recoveryMilliseconds: Double(window.lastRecoveryNanoseconds ?? 0) / 1e6)))
            }
        }
    }

    /// What the probing worker restored sets the window's floors a `fallbackJump` above it, kept
    /// in `handed-out`; the worker is then replaced (a requested kill: no failed start counted)
    /// by one numbering above them, whose `becameReady` names the jump lost.
    private func probeFloors(_ dump: WindowDump, _ window: inout Window) {
        let tabs = (dump.regular.tabs + dump.incognito.tabs).map(\.id)
        guard Limits.isValidCommandSeq(dump.appliedSeq), tabs.allSatisfy({ (1...Limits.maxWebStateID).contains($0) }) else {
            misbehaved(&window, "a dump with applied seq \(dump.appliedSeq) or a tab id outside 1...\(Limits.maxWebStateID)")
            return
        }
        let jump = HandedOutCeiling.fallbackJump
        window.seqFloor = min(max(window.seqFloor, dump.appliedSeq).saturatingAdd(jump), Limits.maxCommandSeq)
        // Both at most 2^53 - 1: the sum cannot overflow.
        window.highestTab = min(max(window.highestTab, tabs.max() ?? 0) + Int64(jump), Limits.maxWebStateID)
        window.floorProbe = nil
        _ = recordHandedOut(window, covering: HandedOutCeiling(seq: window.seqFloor, tab: window.highestTab))
        logger.warning(
            "no \(RootLayout.handedOut) entry to trust: the window numbers \(jump) above what it restored; its worker restarts with those floors",
            metadata: ["window": "\(window.id)", "seq_floor": "\(window.seqFloor)", "tab_floor": "\(window.highestTab)"])
        _ = step(&window, .killRequested)
        signalWorker(window, SIGKILL)
    }

    private func drainReplies(_ window: inout Window) {
        let ring = region.slot(window.slot).replyRing
        while true {
            let bytes: [UInt8]
            do {
                guard let next = try ring.receive() else { return }
                bytes = next
            } catch {
                // Killed once (not on every turn until it is reaped), its death handled as a crash.
                misbehaved(&window, "reply ring corrupt: \(error)")
                return
            }
            guard let reply = try? WorkerReply(serializedBytes: bytes), let pending = window.pending.removeValue(forKey: reply.request) else {
                continue
            }
            handleReply(reply, pending, &window)
        }
    }

    private func handleReply(_ reply: WorkerReply, _ pending: Pending, _ window: inout Window) {
        switch reply.outcome {
        case .failure(let failure) where pending.kind.isDisconnect:
            // The worker could not save and goes on serving: so does the window (killed if stopping).
            let actions = step(&window, .disconnectFailed)
            logger.error(
                "disconnect failed: the window goes on serving with its unsaved changes",
                metadata: ["window": "\(window.id)", "error": "\(failure.message)"])
            if pending.kind == .shutdownDisconnect || shutdownDeadline != nil {
                // Stopping anyway: the worker goes, and the exit status says what was lost.
                noteKeptUnsaved(window.id, failure.message)
            }
            if actions.contains(.kill) { signalWorker(window, SIGKILL) }
            if let client = pending.client {
                answer(client, .failure(failure.kind == .io ? .ioError : .badData, "disconnect failed; the window goes on serving: \(failure.message)"))
            }
        case .failure(let failure):
            if let client = pending.client { answer(client, .failure(failure.kind == .io ? .ioError : .badData, failure.message)) }
        case .dump(let dump) where pending.kind == .floorProbe:
            probeFloors(dump, &window)
        case .dump(let dump):
            if let client = pending.client { answer(client, .ok(Self.dumpReply(dump, window: window.id))) }
        case .done(let done):
            guard Limits.isValidCommandSeq(done.appliedSeq) else {
                if let client = pending.client { answer(client, .failure(.software, "the worker misbehaved; it is restarting")) }
                misbehaved(&window, "reply with applied seq \(done.appliedSeq) above \(Limits.maxCommandSeq)")
                return
            }
            if done.hasTab, !(1...Limits.maxWebStateID).contains(done.tab) {
                if let client = pending.client { answer(client, .failure(.software, "the worker misbehaved; it is restarting")) }
                misbehaved(&window, "reply with tab id \(done.tab) outside 1...\(Limits.maxWebStateID)")
                return
            }
            window.appliedSeq = max(window.appliedSeq, done.appliedSeq)
            // A new tab's id above what `handle` reserved (the worker restored tabs with higher
            // ids than any reply showed): recorded before the reply shows it, or not shown.
            if done.hasTab {
                window.highestTab = max(window.highestTab, done.tab)
                if let failure = recordHandedOut(window, covering: HandedOutCeiling(seq: done.appliedSeq, tab: done.tab)) {
                    if let client = pending.client {
                        answer(client, .failure(.ioError, "window \(window.id) applied the command, but its tab id cannot be recorded, so it is not shown: \(failure)"))
                    }
                    return
                }
            }
            var result = CommandReply(window: window.id.uuidString, seq: window.shownSeq(done.appliedSeq), tab: done.hasTab ? done.tab : nil)
            switch pending.kind {
            case .scene(.background), .scene(.foreground):
                _ = step(&window, .sceneChanged(pending.kind == .scene(.background) ? .background : .foreground))
                result.state = window.state.description
            case .scene(.disconnect):
                // Answered when the worker has exited.
                window.pending[reply.request] = pending
                return
            case .save(wait: true):
                if let client = pending.client {
                    window.durableWaiters.append(DurableWaiter(seq: done.appliedSeq, client: client, failuresBefore: pending.failuresBefore))
                }
                return
            default:
                break
            }
            if let client = pending.client { answer(client, .ok(result)) }
        case .none:
            if let client = pending.client { answer(client, .failure(.software, "an empty reply from the worker")) }
        }
    }

    private func finishDisconnect(_ slot: Int, cleanExit: Bool, description: String) {
        guard let window = windows[slot] else { return }
        windows[slot] = nil
        let view = region.slot(slot)
        view.state = .free
        view.pid = 0
        if window.configured {
            registry.close(window.id, hasSession: files.hasSession(window.id))
        } else {
            registry.release(window.id)
        }
        saveOrder()
        logger.info("scene disconnected", metadata: ["window": "\(window.id)", "how": "\(description)"])
        let reply: ControlReply = cleanExit
            ? .ok(CommandReply(window: window.id.uuidString, seq: max(window.appliedSeq, window.highestRepliedSeq)))
            : .failure(.ioError, "the worker \(description) while disconnecting")
        for pending in window.pending.values { if let client = pending.client { answer(client, reply) } }
        for client in window.exitWaiters { answer(client, reply) }
    }

    private func runTimers() {
        let now = monotonicNanoseconds()
        expireKillWaiters(now)
        if let retry = orderRetry, retry.at <= now { saveOrder() }
        if let retry = handedOutRetry, retry.at <= now { retryHandedOut() }
        for slot in windows.keys.sorted() {
            guard let window = windows[slot] else { continue }
            // Between events: a worker's death moves its window out of `.ready` (`workerDied`).
            assert(window.lifecycle.state != .ready || window.isLive, "a ready window has a live pidfd")
            if let at = window.restartAt, at <= now {
                carryOut(step(slot, .restartTimerFired), slot, description: "restart")
                continue
            }
            guard window.isLive, window.state != .disconnecting else { continue }
            if window.isReady {
                let heartbeat = region.slot(slot).heartbeat
                if heartbeat > 0, now > heartbeat, now - heartbeat > configuration.watchdogMilliseconds * 1_000_000 {
                    logger.error("worker hung: no heartbeat for \((now - heartbeat) / 1_000_000) ms; killed", metadata: ["window": "\(window.id)"])
                    signalWorker(window, SIGKILL)
                }
            } else if window.readyAt == nil, now - window.spawnedAt > configuration.startTimeoutMilliseconds * 1_000_000 {
                logger.error("worker did not restore in \(configuration.startTimeoutMilliseconds) ms; killed", metadata: ["window": "\(window.id)"])
                signalWorker(window, SIGKILL)
            }
        }
    }

    /// Answers each `kill` whose worker outlived its wait: the signal did not kill, and no
    /// restart is coming. A worker that did die is waited for until it is ready again.
    private func expireKillWaiters(_ now: UInt64) {
        for slot in windows.keys.sorted() {
            guard var window = windows[slot], !window.readyWaiters.isEmpty else { continue }
            var expired = false
            let (id, pid, isLive) = (window.id, window.pid, window.isLive)
            window.readyWaiters.removeAll { waiter in
                guard case .restart(let client, let oldPID, _, let signal, let deadline) = waiter, deadline <= now, isLive, pid == oldPID
                else { return false }
                answer(
                    client,
                    .failure(
                        .temporary,
                        "the worker \(oldPID) of window \(id) is still alive \(Self.killWaitNanoseconds / 1_000_000_000) s after SIG\(signal): it caught or ignored the signal, and no restart follows"
                    ))
                expired = true
                return true
            }
            guard expired else { continue }
            if !window.readyWaiters.contains(where: { if case .restart = $0 { true } else { false } }) {
                // The kill did not happen: a later death is the window's own again.
                _ = step(&window, .killAbandoned)
            }
            windows[slot] = window
        }
    }

    private func beginShutdown() {
        guard shutdownDeadline == nil else { return }
        shutdownDeadline = monotonicNanoseconds() + 15_000_000_000
        for slot in windows.keys.sorted() {
            carryOut(step(slot, .shutdownBegan), slot, description: "shutdown")
        }
    }

    /// Writes `windows.order`. A failed write (a full disk) is retried by `runTimers` with
    /// backoff until one lands, with no order change needed; the episode is logged once, at
    /// its start and its end.
    private func saveOrder() {
        do {
            try files.saveOrder(registry.order)
            if let retry = orderRetry {
                logger.notice("windows.order written again", metadata: ["failed_attempts": "\(retry.failures)"])
                orderRetry = nil
            }
        } catch {
            if orderRetry == nil { logger.error("cannot write windows.order; retried with backoff until it lands: \(error)") }
            orderRetry = Self.retry(after: orderRetry)
        }
    }

    /// Writes `window`'s entry of `handed-out`, durably, when it changed: its ceilings raised to
    /// cover `needed` (by `HandedOutCeiling.block` past it, so one write serves thousands of
    /// commands), its lost seqs. Why it could not be, or nil.
    private func recordHandedOut(_ window: Window, covering needed: HandedOutCeiling = .zero) -> String? {
        let id = window.id
        let current = handedOut[id] ?? .none
        let entry: HandedOutWindow
        do {
            entry = HandedOutWindow(ceiling: try current.ceiling.covering(needed), lost: window.lostSeqs)
        } catch {
            return "\(error)"
        }
        guard entry != current else { return nil }
        var record = handedOut
        record[id] = entry
        do {
            try writeHandedOut(record)
        } catch let error as Errno where error == .noSpace || error == .diskQuotaExceeded || error.isResourceShortage {
            // A full disk, or the supervisor short of descriptors or memory: the host keeps
            // serving while saves fail (they retry by themselves), so this serves too, and is
            // written again with backoff (`runTimers`) and at the next need; only a supervisor
            // killed before it lands may then hand out a seq again, or forget a lost one
            // (docs/recovery.md, Known limits).
            if handedOutRetry == nil {
                logger.error("cannot write \(RootLayout.handedOut) (\(error)): serving on, written again with backoff until it lands", metadata: ["window": "\(id)"])
            }
            handedOutRetry = Self.retry(after: handedOutRetry)
            return nil
        } catch {
            logger.error("cannot write \(RootLayout.handedOut): \(error)", metadata: ["window": "\(id)"])
            return "\(error)"
        }
        if let retry = handedOutRetry { logger.notice("\(RootLayout.handedOut) written again", metadata: ["failed_attempts": "\(retry.failures)"]) }
        handedOutRetry = nil
        handedOut = record
        return nil
    }

    /// `handed-out`, held open for writes in place (`SupervisorFiles.writeHandedOut`): a full
    /// disk or a shortage of descriptors cannot stop them. Nil until the file is made.
    private var handedOutFile: FileDescriptor?

    /// Writes `handed-out` in place, or makes it anew (and holds it) when it is not open.
    private func writeHandedOut(_ record: [UUID: HandedOutWindow]) throws {
        if let fd = handedOutFile {
            do {
                try SupervisorFiles.writeHandedOut(record, inPlace: fd)
                return
            } catch {
                // Made anew at the next attempt (an I/O error, a file too full of windows).
                try? fd.close()
                handedOutFile = nil
                throw error
            }
        }
        handedOutFile = try files.makeHandedOut(record)
    }

    /// When a `handed-out` write that failed for want of space or of the supervisor's own
    /// resources is tried again, and how many failed in a row: nil while none is behind.
    private var handedOutRetry: (at: UInt64, failures: Int)?

    /// Every window's entry written again, its ceilings over everything shown.
    private func retryHandedOut() {
        for window in windows.values.sorted(by: { $0.slot < $1.slot }) {
            let failuresBefore = handedOutRetry?.failures ?? 0
            _ = recordHandedOut(window, covering: Self.shownCeiling(window))
            // Failed again: the backoff is set.
            if let retry = handedOutRetry, retry.failures > failuresBefore { return }
        }
        handedOutRetry = nil
    }

    /// The highest seq and tab id anything showed of `window` (its floor covers what a
    /// supervisor before showed).
    static func shownCeiling(_ window: Window) -> HandedOutCeiling {
        HandedOutCeiling(
            seq: max(window.seqFloor, window.highestRepliedSeq, window.appliedSeq, window.lastStats.appliedSeq), tab: window.highestTab)
    }

    /// At a stop, when no reply can come any more: each open window's ceiling comes down to
    /// the highest seq and tab id anything showed (and its floor, which covers what a supervisor
    /// before showed), so the next start continues at the next seq rather than a block above.
    /// Not written, the raised ceilings stay: as safe, only with a gap.
    private func lowerHandedOutToShown() {
        var record = handedOut
        for window in windows.values where record[window.id] != nil {
            record[window.id] = HandedOutWindow(ceiling: Self.shownCeiling(window), lost: window.lostSeqs)
        }
        guard record != handedOut else { return }
        do {
            try writeHandedOut(record)
            handedOut = record
        } catch {
            logger.warning("cannot lower the ceilings in \(RootLayout.handedOut) at the stop; the next start numbers above them: \(error)")
        }
    }

    /// When a failed `windows.order` write is tried again, and how many attempts failed in a
    /// row: nil while the file on disk is the registry's order.
    private var orderRetry: (at: UInt64, failures: Int)?

    /// The next attempt after one more failure of a root file's write, with the session stores'
    /// backoff (`SavePolicy`: 100 ms doubling to 3.2 s).
    private static func retry(after previous: (at: UInt64, failures: Int)?) -> (at: UInt64, failures: Int) {
        let failures = (previous?.failures ?? 0) + 1
        let delay = SavePolicy.retryDelayMilliseconds(afterFailures: failures) * 1_000_000
        return (at: monotonicNanoseconds() + delay, failures: failures)
    }

    private func takeRequestID() -> UInt64 {
        defer { nextRequest += 1 }
        return nextRequest
    }

    /// Puts what `kind` asks to the worker's ring, its reply awaited as `kind`. False when it
    /// cannot be sent now.
    private func send(_ kind: Pending.Kind, to slot: Int, client: ClientID?) -> Bool {
        guard var window = windows[slot], let doorbell = window.worker?.doorbell else { return false }
        let request = takeRequestID()
        guard let bytes = try? kind.command.message(request: request).serializedBytes() as [UInt8], (try? region.slot(slot).commandRing.send(bytes)) != nil else {
            return false
        }
        window.pending[request] = Pending(client: client, kind: kind, failuresBefore: region.slot(slot).saveFailures)
        windows[slot] = window
        doorbell.ring()
        return true
    }

    // MARK: control socket

    /// Replies through the control server: queued, sent as the client reads, then closed.
    private func answer(_ id: ClientID, _ reply: ControlReply) {
        control.answer(id, reply)
    }

    private func handle(_ request: ControlRequest, from client: ClientID) {
        switch request {
        case .status:
            answer(client, .ok(statusReply()))
        case .stats(let histogram):
            answer(client, .ok(statsReply(withHistogram: histogram)))
        case .connect:
            if shutdownDeadline != nil {
                answer(client, .failure(.temporary, "shutting down"))
            } else if connectScene(waiter: client) == nil {
                answer(client, .failure(.temporary, "all \(configuration.capacity) window slots are in use"))
            }
        case .shutdown:
            answer(client, .ok(ShutdownReply(stopping: true)))
            beginShutdown()
        case .window(let id, let asked):
            handle(asked, window: id, from: client)
        }
    }

    private func handle(_ request: WindowRequest, window id: UUID, from client: ClientID) {
        guard let slot = windows.first(where: { $0.value.id == id })?.key, let window = windows[slot] else {
            answer(client, .failure(.badData, "no open window \(id)"))
            return
        }
        let kind: Pending.Kind
        switch request {
        case .kill(let signal, let wait, let aim):
            kill(slot, KillRequest(signal: signal, wait: wait, aim: aim), client)
            return
        case .waitDurable(let seq):
            let target = seq ?? window.appliedSeq
            if let lost = window.lostSeqs.range(holding: target) {
                answer(client, .failure(.temporary, Self.lostMessage(lost)))
                return
            }
            if target > max(window.appliedSeq, window.highestRepliedSeq) {
                answer(client, .failure(.badData, "window \(id) has no command \(target) yet: its highest seq is \(max(window.appliedSeq, window.highestRepliedSeq))"))
                return
            }
            if window.lastStats.durableSeq >= target {
                answer(client, .ok(Self.durableReply(window, durable: window.lastStats.durableSeq)))
                return
            }
            let failures = region.slot(slot).saveFailures
            windows[slot]?.durableWaiters.append(DurableWaiter(seq: target, client: client, failuresBefore: failures))
            // Saves are failing: a durable wait is an explicit request, so the worker tries again
            // now rather than after its backoff; the wait ends with that attempt.
            if window.lastStats.failingErrno != 0, window.isReady {
                _ = send(.save(wait: false), to: slot, client: nil)
            }
            return
        case .scene(.disconnect) where !window.isReady:
            // Gone before it finished configuring (or while restarting): the worker is stopped
            // and a reservation that never configured is released.
            windows[slot]?.exitWaiters.append(client)
            carryOut(step(slot, .disconnectRequested), slot, description: "stopped before it was ready")
            return
        case .tab(let command): kind = .tab(command)
        case .scene(let change): kind = .scene(change)
        case .save(let wait): kind = .save(wait: wait)
        case .dump: kind = .dump
        }
        guard window.isReady else {
            answer(client, .failure(.temporary, "window \(id) is \(window.state) (worker restarting); retry"))
            return
        }
        // A full Browser refuses here, before a seq is taken, from what the worker published
        // after its last command; the list's own refusal is the backstop for opens in flight.
        if case .tab(.open(_, let incognito, _, _, _)) = request {
            let tabs = incognito ? window.lastStats.incognitoTabs : window.lastStats.regularTabs
            if UInt64(tabs) >= UInt64(Limits.maxTabsPerBrowser) {
                answer(client, .failure(.badData, "the Browser already holds \(tabs) tabs, the most a Browser holds (Limits.maxTabsPerBrowser \(Limits.maxTabsPerBrowser))"))
                return
            }
        }
        if case .tab(let command) = request {
            // The worker numbers the commands that change the window, above its floor; each tab
            // command in flight may take one. Both seqs are at most `Limits.maxCommandSeq`, so the
            // sum cannot overflow.
            let inFlight = window.pending.values.compactMap { if case .tab(let command) = $0.kind { command } else { nil } }
            guard max(window.appliedSeq, window.seqFloor) + UInt64(inFlight.count) < Limits.maxCommandSeq else {
                answer(client, .failure(.seqExhausted, Self.seqExhaustedMessage(id)))
                return
            }
            // The seq (and tab id) this command may take, recorded before it can be shown: the
            // highest the worker can reach with every tab command in flight applied (below
            // `Limits.maxCommandSeq`, checked above).
            let newTabs = inFlight.filter(\.createsTab).count + (command.createsTab ? 1 : 0)
            let needed = HandedOutCeiling(
                seq: max(window.appliedSeq, window.seqFloor) + UInt64(inFlight.count) + 1,
                tab: min(window.highestTab + Int64(newTabs), Limits.maxWebStateID))
            if let failure = recordHandedOut(window, covering: needed) {
                answer(client, .failure(.ioError, "cannot record the seqs window \(id) may hand out (\(RootLayout.handedOut)), so the command was not sent: \(failure)"))
                return
            }
        }
        guard send(kind, to: slot, client: client) else {
            answer(client, .failure(.temporary, "the worker's command ring is full; retry"))
            return
        }
        if kind == .scene(.disconnect) {
            carryOut(step(slot, .disconnectRequested), slot, description: "disconnected")
        }
    }

    /// A durable answer: the seq, and the seqs below it lost with a worker, which it does not cover.
    static func durableReply(_ window: Window, durable: UInt64) -> DurableReply {
        let lost = window.lostSeqs.ranges.filter { $0.lowerBound <= durable }.map(SeqRange.init)
        return DurableReply(window: window.id.uuidString, durableSeq: durable, lostSeqs: lost.isEmpty ? nil : lost)
    }

    static func lostMessage(_ lost: ClosedRange<UInt64>) -> String {
        "commands \(lost.lowerBound)…\(lost.upperBound) were lost with the worker that applied them (killed before they were durable); "
            + "`dump` shows what the window holds"
    }

    /// What a `kill` asks (`WindowRequest.kill`), kept while an aimed one waits.
    struct KillRequest {
        let signal: Int32
        let wait: Bool
        let aim: Bool
    }

    private func kill(_ slot: Int, _ request: KillRequest, _ client: ClientID, aimedUntil: UInt64? = nil) {
        guard var window = windows[slot], window.isLive else {
            answer(client, .failure(.temporary, "window \(windows[slot]?.id.uuidString ?? "?") has no worker now (restarting); retry"))
            return
        }
        let signal = request.signal
        let label = SignalName.name(signal)
        // What the worker's slot shows, read without a round trip.
        let whileSaving = region.slot(slot).savingSeq > 0
        if request.aim, !whileSaving {
            // Aimed at a save in flight: the loop looks again each millisecond, for 50 ms.
            let deadline = aimedUntil ?? monotonicNanoseconds() + 50_000_000
            if monotonicNanoseconds() < deadline {
                aimedKills.append(AimedKill(slot: slot, request: request, client: client, deadline: deadline))
                return
            }
        }
        do throws(Errno) {
            try window.worker?.signal(signal)
        } catch {
            answer(client, .failure(.software, "pidfd_send_signal: \(error)"))
            return
        }
        logger.info("killing a worker on request", metadata: ["window": "\(window.id)", "pid": "\(window.pid)", "signal": "\(label)"])
        guard !Self.signalsIgnoredByDefault.contains(signal) else {
            // Its default action is to ignore: waiting for a restart would be forever.
            answer(client, .ok(KillReply(
                window: window.id.uuidString, killedPID: window.pid, whileSaving: whileSaving, signal: label, restartExpected: false)))
            return
        }
        _ = step(&window, .killRequested)
        if !request.wait {
            windows[slot] = window
            answer(client, .ok(KillReply(window: window.id.uuidString, killedPID: window.pid, whileSaving: whileSaving)))
        } else {
            // A stopped worker is the watchdog's to kill: the wait covers its period too.
            let wait = Self.killWaitNanoseconds + (Self.signalsThatStop.contains(signal) ? configuration.watchdogMilliseconds * 1_000_000 : 0)
            window.readyWaiters.append(.restart(client, oldPID: window.pid, whileSaving: whileSaving, signal: label, deadline: monotonicNanoseconds() + wait))
            windows[slot] = window
        }
    }

    /// How long a `kill` waits for the signalled worker to die (one that catches the signal,
    /// like SEGV under a handler, never does) before it is answered 75; after a signal that
    /// stops it, the watchdog's period more.
    static let killWaitNanoseconds: UInt64 = 5_000_000_000

    /// Signals whose default action is to ignore (or continue): a `kill` with one is answered
    /// at once, with no restart expected.
    static let signalsIgnoredByDefault: Set<Int32> = [SIGCONT, SIGCHLD, SIGURG, SIGWINCH]
    /// Signals whose default action stops the worker: it dies when the watchdog sees it silent.
    static let signalsThatStop: Set<Int32> = [SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU]

    /// A `kill --aim` waiting for its window's slot to show a save in flight.
    struct AimedKill {
        let slot: Int
        let request: KillRequest
        let client: ClientID
        let deadline: UInt64
    }

    private var aimedKills: [AimedKill] = []

    /// Each turn of the loop: an aimed kill whose save started, or whose 50 ms passed, is sent.
    private func retryAimedKills() {
        let waiting = aimedKills
        aimedKills = []
        for aimed in waiting { kill(aimed.slot, aimed.request, aimed.client, aimedUntil: aimed.deadline) }
    }

    // MARK: reports

    private func statusReply() -> StatusReply {
        let now = monotonicNanoseconds()
        let list: [WindowStatus] = windows.keys.sorted().compactMap { slot in
            guard let window = windows[slot] else { return nil }
            let view = region.slot(slot)
            let stats = checkedStats(view) ?? window.lastStats
            let heartbeat = view.heartbeat
            return WindowStatus(
                uuid: window.id.uuidString, state: window.state.description, slot: slot, pid: window.isLive ? window.pid : 0,
                generation: window.generation,
                tabs: exactInJSON(stats.regularTabs.addingReportingOverflow(stats.incognitoTabs).partialValue),
                regularTabs: exactInJSON(stats.regularTabs), incognitoTabs: exactInJSON(stats.incognitoTabs),
                appliedSeq: stats.appliedSeq, durableSeq: stats.durableSeq, digest: String(format: "%016llx", stats.digest),
                saves: exactInJSON(view.savesCompleted), saveFailures: exactInJSON(view.saveFailures),
                compactionFailures: exactInJSON(view.compactionFailures), failing: failing(stats), restarts: window.history.restarts,
                savingSeq: exactInJSON(view.savingSeq),
                heartbeatAgeMilliseconds: heartbeat > 0 && window.isLive ? Double(now > heartbeat ? now - heartbeat : 0) / 1e6 : nil,
                lastRecoveryMilliseconds: window.lastRecoveryNanoseconds.map { Double($0) / 1e6 },
                lostSeqs: window.lostSeqs.ranges.map(SeqRange.init))
        }
        let asides = setAsideRecords.map { record in
            StatusReply.SetAside(
                uuid: record.window.uuidString, path: record.path.string, at: ISO8601DateFormatter().string(from: record.at), reason: record.reason)
        }
        return StatusReply(
            supervisorPID: getpid(), root: configuration.root.string, socket: configuration.socketPath.string, windows: list,
            setAside: asides, order: registry.order.map(\.uuidString))
    }

    private func statsReply(withHistogram: Bool) -> StatsReply {
        let now = monotonicNanoseconds()
        var total = Histogram<UInt64>(highestTrackableValue: LatencyBuckets.highestMicroseconds, numberOfSignificantValueDigits: .three)
        var totalSaves: UInt64 = 0
        var totalFailures: (saves: UInt64, compactions: UInt64) = (0, 0)
        func summary(_ histogram: Histogram<UInt64>, saves: UInt64, failures: (saves: UInt64, compactions: UInt64), seconds: Double)
            -> StatsReply.SaveSummary
        {
            StatsReply.SaveSummary(
                count: exactInJSON(saves), perSecond: seconds > 0 ? Double(saves) / seconds : 0,
                p50Microseconds: histogram.valueAtPercentile(50), p90Microseconds: histogram.valueAtPercentile(90),
                p99Microseconds: histogram.valueAtPercentile(99), p999Microseconds: histogram.valueAtPercentile(99.9),
                maxMicroseconds: histogram.totalCount > 0 ? histogram.maxRecorded : 0,
                failures: exactInJSON(failures.saves), compactionFailures: exactInJSON(failures.compactions))
        }
        let list: [StatsReply.WindowStats] = windows.keys.sorted().compactMap { slot in
            guard let window = windows[slot] else { return nil }
            let view = region.slot(slot)
            let histogram = view.latency.histogram()
            total.add(histogram)
            // Counters a worker writes in shared memory: summed without trapping.
            let saves = view.savesCompleted
            totalSaves &+= saves
            let failures = (saves: view.saveFailures, compactions: view.compactionFailures)
            totalFailures.saves &+= failures.saves
            totalFailures.compactions &+= failures.compactions
            return StatsReply.WindowStats(
                uuid: window.id.uuidString, saves: summary(histogram, saves: saves, failures: failures, seconds: Double(now - window.reservedAt) / 1e9),
                failing: failing(checkedStats(view) ?? window.lastStats))
        }
        let uptime = Double(now - startedAt) / 1e9
        let histogram = withHistogram ? (try? JSONEncoder().encode(total))?.base64EncodedString() : nil
        return StatsReply(
            windows: list, total: StatsReply.TotalStats(saves: summary(total, saves: totalSaves, failures: totalFailures, seconds: uptime), histogram: histogram),
            uptimeSeconds: uptime)
    }

    /// While a window's saves fail: the error and the Browsers failing; nil otherwise.
    private func failing(_ stats: WorkerStats) -> FailingSaves? {
        guard stats.failingErrno != 0 else { return nil }
        let browsers = [(1, "regular"), (2, "incognito")].filter { stats.failingBrowsers & $0.0 != 0 }.map(\.1)
        return FailingSaves(error: Self.describeErrno(stats.failingErrno), browsers: browsers)
    }

    /// An errno a worker published in shared memory, named; a number no errno has is shown as
    /// the worker wrote it, never clamped into a different one.
    private static func describeErrno(_ raw: UInt64) -> String {
        guard let code = Int32(exactly: raw) else { return "errno \(raw) (not an errno)" }
        return "\(Errno(rawValue: code))"
    }

    static func dumpReply(_ dump: WindowDump, window: UUID) -> DumpReply {
        func browser(_ browser: BrowserDump) -> DumpReply.BrowserContents {
            DumpReply.BrowserContents(
                activeIndex: browser.hasActiveIndex ? browser.activeIndex : nil,
                tabs: browser.tabs.map { tab in
                    DumpReply.Tab(
                        id: tab.id, url: tab.url, title: tab.title, realized: tab.realized, pinned: tab.pinned,
                        opener: tab.hasOpener ? tab.opener : nil)
                })
        }
        return DumpReply(
            window: window.uuidString, appliedSeq: dump.appliedSeq, durableSeq: dump.durableSeq,
            digest: String(format: "%016llx", dump.digest), regular: browser(dump.regular), incognito: browser(dump.incognito))
    }
}
