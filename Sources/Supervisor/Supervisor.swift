import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import Histogram
import HostControl
import HostCoordination
import HostLimits
import IOUring
import Logging
import Platform
import SessionStore
import SystemPackage

/// The supervisor: one thread, one poll(2) loop over the termination signals, the control
/// socket and its clients, every worker's pidfd and the doorbell workers ring; timers for
/// restarts and the watchdog. It owns the shared region, the window registry and the slots.
///
/// This file holds its state, its start and the loop, which only dispatches; the loop routes
/// by slot (a pidfd, the timers) or by UUID (a request) to the window's `WindowController`,
/// which holds every per-window state and carries out its lifecycle's actions, reaching the
/// loop's resources through `WindowHost`. The supervisor's own concerns are extensions:
/// `Supervisor+Workers` (slots, launches, strays, set-aside, timers), `Supervisor+WorkerMessages`
/// (each window serviced, the checks of what a worker publishes, a window's first configure and
/// its release), `Supervisor+Control` (requests routed, `kill`), `Supervisor+RootFiles`
/// (`windows.order`, `handed-out`), `Supervisor+SetAside`, `Supervisor+CloseWindow` and
/// `Supervisor+Reports` (`status`, `stats`, `dump`). The parts with no process behind them are
/// types of their own: `WindowController` (with its `SeqBook`), `WindowLifecycle`,
/// `RestartPolicy`, `WorkerProcess`, `ControlServer`.
public final class Supervisor {
    typealias ClientID = ControlServer.ClientID

    typealias Window = WindowController

    let configuration: SupervisorConfiguration
    var logger: Logger
    let files: SupervisorFiles
    let region: SharedRegion
    let bell: Doorbell
    var registry: WindowRegistry
    var windows: [Int: Window] = [:]
    var nextRequest: UInt64 = 1
    /// A window's reply ring still held replies past its budget this turn
    /// (`replyBudget`): the loop does not sleep until they are served.
    var repliesLeft = false
    /// When `runTimers` next looks for strays (`killStrays`).
    var strayScanAt: UInt64 = 0
    /// Strays sent SIGKILL and not yet reaped: each is logged once.
    var straysKilled: Set<pid_t> = []
    /// `ROOT/set-aside/`, by entry id (`Supervisor+SetAside`).
    var shelf: [String: ShelvedEntry] = [:]
    /// Closed windows deleted for good because more than `keepClosed` were kept.
    var closedWindowsEvicted: UInt64 = 0
    /// Windows this supervisor closed: only they count toward `keepClosed` and are evicted. A
    /// window on disk from an earlier run may have been open at its shutdown, and is never
    /// deleted without being closed.
    var closedThisRun: Set<UUID> = []
    /// The count of entries last said to be past `maxListedEntries`: said once per count.
    var shelfOverflowLogged = 0
    /// The one child reading an entry's summary now, if any.
    var summaryJob: SummaryJob?
    /// `set-aside` requests waiting for summaries being read, and until when.
    var setAsideWaiters: [(client: ClientID, deadline: UInt64)] = []
    /// Each window's ceilings and lost seqs as `handed-out` holds them on disk: no reply shows
    /// a seq or tab id above its window's ceilings (`recordHandedOut`).
    var handedOut: [UUID: HandedOutWindow] = [:]
    /// `handed-out` did not read at the start: windows on disk with no entry take the fallback
    /// floors (`WindowLifecycle.FloorProbe`).
    var handedOutDamaged = false
    let control: ControlServer
    let signals: Int32
    let rootLock: Int32
    let lock: Int32
    let startedAt = monotonicNanoseconds()
    var shutdownDeadline: UInt64?
    /// What shutdown could not save of windows gone since (`release`): the open ones keep
    /// their own (`WindowController.keptUnsaved`), named with these at the end.
    var keptUnsavedByWindowsGone: [(window: UUID, reason: String)] = []
    var initialScenesPending: Int

    /// `handed-out`, held open for writes in place (`SupervisorFiles.writeHandedOut`): a full
    /// disk or a shortage of descriptors cannot stop them. Nil until the file is made.
    var handedOutFile: FileDescriptor?
    /// When a `handed-out` write that failed for want of space or of the supervisor's own
    /// resources is tried again, and how many failed in a row: nil while none is behind.
    var handedOutRetry: (at: UInt64, failures: Int)?
    /// When a failed `windows.order` write is tried again, and how many attempts failed in a
    /// row: nil while the file on disk is the registry's order.
    var orderRetry: (at: UInt64, failures: Int)?
    /// When the loop next publishes its status to `configuration.observation`.
    var publishAt: UInt64 = 0
    /// The spare worker (`Supervisor+Spare`); nil with `run --no-spare`.
    let spare: SpareWorker?

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
        (rootLock, lock) = try Self.takeRoot(configuration.root, files: files, logger: self.logger)
        guard wh_set_child_subreaper(1) == 0 else {
            throw SupervisorError.setup("PR_SET_CHILD_SUBREAPER", Errno(rawValue: errno))
        }
        do {
            region = try SharedRegion(slotCount: configuration.capacity, supervisorPID: getpid())
            bell = try Doorbell()
        } catch {
            throw SupervisorError.region(error)
        }
        configuration.observation?.attach(region, startedAt: startedAt)
        // Adoptions a supervisor before left unfinished go back to their entries first, so no
        // half-adopted session is taken for a window.
        let adoptions = try files.recoverAdoptions()
        for (id, target) in adoptions.returned {
            logger.warning(
                "an adoption left unfinished: the session is set aside again",
                metadata: ["entry": "\(id)", "window": "\(target)"])
        }
        let scan = try files.windowsOnDisk(at: Date())
        files.revokeLeftoverRecords(scan.windows, sparing: adoptions.unfinished)
        var details: [String: String] = [:]
        for entry in scan.setAside {
            if let name = entry.path?.lastComponent?.string { details[name] = entry.detail }
            logger.error(
                "window entry set aside",
                metadata: [
                    "window": "\(entry.window)", "path": "\(entry.path?.string ?? "-")", "reason": "\(entry.detail)",
                ])
        }
        registry = WindowRegistry(onDisk: scan.windows, savedOrder: try files.savedOrder())
        (handedOut, handedOutDamaged) = try Self.readHandedOut(
            files: files, onDisk: scan.windows, details: &details, logger: logger)
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
        spare = configuration.keepsSpare ? SpareWorker(policy: configuration.restartPolicy, now: startedAt) : nil
        loadShelf(details: details)
        finishClosesUnderWay()
        files.revokeRecords(of: files.discardedLeftovers())
        files.removeDiscarded(files.discardedLeftovers())
    }

    /// Takes the root for this supervisor: its directories made, nothing misplaced in them, the
    /// root's own lock (one supervisor per root) and `supervisor.lock`, once no worker of a dead
    /// supervisor can still write. The two locks' descriptors.
    private static func takeRoot(
        _ root: FilePath, files: SupervisorFiles, logger: Logger
    ) throws -> (rootLock: Int32, lock: Int32) {
        try SupervisorFiles.makeDirectory(root)
        // Before the lock is opened or anything made: a symlink there is never followed.
        let misplaced = RootLayout.misplacedEntries(root: root)
        guard misplaced.isEmpty else { throw SupervisorError.misplacedEntries(misplaced) }
        try SupervisorFiles.makeDirectory(files.windows)
        // The lock is the root directory itself (flock: the kernel drops it when the holder
        // dies, so a killed supervisor leaves none). A file under the root can be swapped under
        // its holder by anyone who can write the root, and a second supervisor would then lock
        // the new file; the directory cannot be swapped without writing its parent.
        let rootLock: Int32
        do {
            rootLock = try NoFollow.openDirectory(root).rawValue
        } catch {
            throw SupervisorError.setup("open \(root)", error)
        }
        guard flock(rootLock, LOCK_EX | LOCK_NB) == 0 else { throw SupervisorError.alreadyRunning(root) }
        // supervisor.lock too: what supervisors of earlier versions lock, and what every worker
        // holds (inherited, read-only) until its last thread is gone. A supervisor killed takes
        // its workers with it (PR_SET_PDEATHSIG), but not at once: a worker's io_uring writes in
        // flight finish in its io-wq threads first. The next supervisor waits for them here, so
        // no write of a dead window's worker lands over what a new worker restored and saved.
        let lock = open(files.lock.string, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw SupervisorError.setup("open \(files.lock)", Errno(rawValue: errno)) }
        do {
            try NoFollow.setPrivateMode(lock, 0o600)
        } catch {
            throw SupervisorError.setup("fchmod \(files.lock)", error)
        }
        try Self.takeLockFromLeftovers(lock, path: files.lock, logger: logger)
        return (rootLock, lock)
    }

    /// `handed-out` as read at the start: each window's entry whose session is still on disk
    /// or set aside, and whether the file was damaged (set aside, and not trusted).
    private static func readHandedOut(
        files: SupervisorFiles, onDisk: [UUID], details: inout [String: String], logger: Logger
    ) throws -> (record: [UUID: HandedOutWindow], damaged: Bool) {
        switch try files.handedOutRecord(at: Date()) {
        case .missing:
            return ([:], false)
        case .read(let record):
            // A window with no session left is gone for good: the next write drops it. One with
            // a session set aside is not: adopted back under its UUID, it numbers above these.
            let kept = Set(
                onDisk
                    + ((try? SetAsideShelf.entries(root: files.root).entries) ?? []).compactMap(\.window))
            return (record.filter { kept.contains($0.key) }, false)
        case .damaged(let reason, let path):
            if let name = path?.lastComponent?.string { details[name] = reason }
            logger.error(
                "\(DiskLayout.handedOut) does not read: set aside, not trusted; each window's seqs and tab ids continue \(HandedOutCeiling.fallbackJump) above what it restores",
                metadata: ["path": "\(path?.string ?? "-")", "reason": "\(reason)"])
            return ([:], true)
        }
    }

    /// Takes `supervisor.lock`. The root's own lock is ours, so no supervisor of this version
    /// runs: whoever holds supervisor.lock is a leftover of one that died, its workers still
    /// finishing their writes or whatever a worker forked or handed the descriptor to. Workers
    /// are waited for; what holds it after `leftoverGraceNanoseconds` is killed, or one
    /// compromised worker's child would keep every later start out. Killing loses nothing: the
    /// kernel drops the lock only once the killed process's io_uring writes are done, and this
    /// waits for that (`workerExitWaitNanoseconds`), scanning again for holders a forking one
    /// makes meanwhile.
    static func takeLockFromLeftovers(_ lock: Int32, path: FilePath, logger: Logger) throws(SupervisorError) {
        if try takeLock(lock, path: path, before: monotonicNanoseconds() + leftoverGraceNanoseconds) { return }
        let holders: LockHolders
        do {
            holders = try LockHolders(of: lock)
        } catch {
            throw .setup("fstat \(path)", error)
        }
        let deadline = monotonicNanoseconds() + workerExitWaitNanoseconds
        var killed: Set<Int32> = []
        func cannotKill(_ pid: Int32, _ error: Errno) {
            logger.error("cannot kill a leftover holding \(path)", metadata: ["pid": "\(pid)", "error": "\(error)"])
        }
        while true {
            // Every holder is stopped before any is killed: none can fork a new holder meanwhile.
            let stopped = holders.stopAll(failed: cannotKill)
            for holder in stopped where killed.insert(holder.pid).inserted {
                logger.error(
                    "killed a leftover of a dead supervisor holding \(path)",
                    metadata: ["pid": "\(holder.pid)", "cmdline": "\(holder.command)"])
            }
            holders.kill(stopped, failed: cannotKill)
            if try takeLock(lock, path: path, before: min(deadline, monotonicNanoseconds() + leftoverScanNanoseconds)) {
                return
            }
            guard monotonicNanoseconds() < deadline else { throw .lockHeldByLeftovers(path, pids: holders.pids()) }
        }
    }

    /// Tries `flock(LOCK_EX)` on `lock` until `deadline`: whether it was taken.
    static func takeLock(_ lock: Int32, path: FilePath, before deadline: UInt64) throws(SupervisorError) -> Bool {
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
                // What readers see from the ready line on is every initial window ready.
                publishStatus(now: true)
                ready(configuration.socketPath)
                logger.info(
                    "ready", metadata: ["socket": "\(configuration.socketPath)", "windows": "\(windows.count)"])
            }
            killWorkersPastShutdownDeadline()
            waitForEvents()
        }
        control.stop()
        lowerHandedOutToShown()
        let keptUnsaved =
            keptUnsavedByWindowsGone
            + windows.keys.sorted().compactMap { windows[$0] }.flatMap { window in
                window.keptUnsaved.map { (window: window.id, reason: $0) }
            }
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
    var stopped: Bool {
        shutdownDeadline != nil && windows.values.allSatisfy { !$0.isLive }
    }

    /// Past the shutdown deadline, the workers still running are killed, once; what they had
    /// not saved is named at the end.
    func killWorkersPastShutdownDeadline() {
        guard let deadline = shutdownDeadline, monotonicNanoseconds() > deadline else { return }
        for slot in windows.keys.sorted() { windows[slot]?.shutdownDeadlinePassed(in: self) }
        shutdownDeadline = .max
    }

    /// The exit status when shutdown could not save some window (EX_TEMPFAIL): what was
    /// unsaved is gone with its worker; the storage needs attention before the next start.
    public static let exitKeptUnsaved = ControlCode.temporary

    /// One turn: waits for any source, then hands each its events, in this order: signals,
    /// workers' deaths, what workers published, control clients, timers.
    func waitForEvents() {
        let controlDescriptors = control.pollDescriptors(
            accepting: shutdownDeadline == nil, now: monotonicNanoseconds())
        let workers = windows.compactMap { slot, window in window.worker.map { (slot: slot, pidfd: $0.pidfd) } }
        var descriptors =
            [
                pollfd(fd: signals, events: Int16(POLLIN), revents: 0),
                pollfd(fd: bell.descriptor.rawValue, events: Int16(POLLIN), revents: 0),
            ]
            + controlDescriptors + workers.map { pollfd(fd: $0.pidfd, events: Int16(POLLIN), revents: 0) }
            + spareDescriptors()
        if poll(&descriptors, nfds_t(descriptors.count), timeoutMilliseconds()) < 0, errno != EINTR {
            // Nothing is ready then: the turn goes on to the timers, and the next waits again.
            logger.error("poll: \(Errno(rawValue: errno))")
        }
        let clients = Array(descriptors[2..<(2 + controlDescriptors.count)])
        let deaths = descriptors[(2 + controlDescriptors.count)..<(2 + controlDescriptors.count + workers.count)]
        if descriptors[0].revents != 0 { handleSignal() }
        // Before the deaths: a spare ready this turn takes a window that restarts in it.
        serviceSpare(descriptors[(2 + controlDescriptors.count + workers.count)...])
        for (worker, polled) in zip(workers, deaths) where polled.revents != 0 { windows[worker.slot]?.reap(in: self) }
        handleWorkerBell()
        for (client, request) in control.service(clients, now: monotonicNanoseconds()) { handle(request, from: client) }
        runTimers()
        publishStatus()
    }

    /// At most every `publishNanoseconds` (the loop turns at least every 100 ms), the status
    /// readers on other threads see.
    func publishStatus(now immediately: Bool = false) {
        guard let observation = configuration.observation else { return }
        let now = monotonicNanoseconds()
        guard immediately || now >= publishAt else { return }
        publishAt = now + Self.publishNanoseconds
        observation.publish(statusWithSpare())
    }

    static let publishNanoseconds: UInt64 = 100_000_000

    /// Seconds since this supervisor started, as events carry them.
    func secondsSinceStart(_ now: UInt64) -> Double { Double(now &- startedAt) / 1e9 }

    /// SIGTERM, SIGINT or SIGHUP: every window saves, and the supervisor stops.
    func handleSignal() {
        let signal = wh_signalfd_read(signals)
        guard signal > 0 else { return }
        logger.info("signal \(signal): saving every window and stopping")
        beginShutdown()
    }

    /// Whatever workers published since the last turn (the bell rings after each), and the
    /// aimed kills waiting for a save to start.
    func handleWorkerBell() {
        bell.clear()
        serviceWorkers()
        for slot in windows.keys.sorted() { windows[slot]?.retryAimedKills(in: self) }
    }

    func timeoutMilliseconds() -> Int32 {
        let now = monotonicNanoseconds()
        var timeout: UInt64 = 100_000_000
        for window in windows.values {
            if let at = window.restartAt { timeout = min(timeout, at > now ? at - now : 0) }
        }
        for at in [orderRetry?.at, handedOutRetry?.at].compactMap({ $0 }) {
            timeout = min(timeout, at > now ? at - now : 0)
        }
        if let due = control.nextDeadline(now: now) { timeout = min(timeout, due) }
        // An aimed kill looks at its window's slot again every millisecond.
        if windows.values.contains(where: { !$0.aimedKills.isEmpty }) { timeout = min(timeout, 1_000_000) }
        if repliesLeft { timeout = 0 }
        return Int32((timeout + 999_999) / 1_000_000)
    }
}

/// The loop's resources a window's controller reaches (`WindowHost`).
extension Supervisor: WindowHost {
    var isStopping: Bool { shutdownDeadline != nil }

    func sharedSlot(_ index: Int) -> WindowSlot { region.slot(index) }

    func holds(_ window: Window) -> Bool { windows[window.slot] === window }

    func isConnected(_ client: ClientID) -> Bool { control.isConnected(client) }
}
