import CLinuxShims
import Foundation
import HostControl
import HostCoordination
import Logging
import Platform
import SystemPackage

/// The supervisor: one thread, one poll(2) loop over the termination signals, the control
/// socket and its clients, every worker's pidfd and the doorbell workers ring. It owns the
/// shared region, the registry, the slots and the root's files. The loop only dispatches: by
/// slot (a pidfd, a timer) or by UUID (a request) to the window's `WindowController`, which
/// holds every per-window state and reaches the loop through `WindowHost`. What has no loop
/// behind it is a type of its own (`SetAsideService`, `HandedOutBook`, `RootLocks`,
/// `StrayReaper`, `ControlServer`, `WindowLifecycle`); `docs/architecture.md` maps the files.
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
    /// What dead workers left running, killed and reaped (`killStrays`).
    var strays = StrayReaper()
    /// `ROOT/set-aside/` as listed, its summaries read (`Supervisor+SetAside`).
    let shelf: SetAsideService
    /// Closed windows deleted for good because more than `keepClosed` were kept.
    var closedWindowsEvicted: UInt64 = 0
    /// Windows this supervisor closed: only they count toward `keepClosed` and are evicted. A
    /// window on disk from an earlier run may have been open at its shutdown, and is never
    /// deleted without being closed.
    var closedThisRun: Set<UUID> = []
    /// `handed-out`: each window's ceilings and lost seqs, as on disk.
    let handedOut: HandedOutBook
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

    let orderFile: OrderFile
    /// When the loop next publishes its status to `configuration.observation`.
    var publishAt: UInt64 = 0
    /// The spare worker (`SpareWorker+Loop`); nil with `run --no-spare`.
    let spare: SpareWorker?
    /// Moves of tabs between windows, and `ROOT/moves`.
    let moves: MoveCoordinator

    /// Takes the root (one supervisor per root), binds the socket, creates the region. Call
    /// before any other thread starts: it blocks the termination signals for the process.
    public init(configuration: SupervisorConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        // Lines about no one window carry Firefox's `unavailable` UUID; the others name theirs.
        self.logger[metadataKey: "window"] = "\(WindowRegistry.unavailable)"
        files = SupervisorFiles(root: configuration.root, logger: logger)
        orderFile = OrderFile(files: files, logger: self.logger)
        shelf = SetAsideService(files: files, executable: configuration.executable, logger: logger)
        signals = wh_termination_signalfd()
        guard signals >= 0 else { throw SupervisorError.setup("signalfd", Errno(rawValue: errno)) }
        (rootLock, lock) = try RootLocks.take(configuration.root, files: files, logger: self.logger)
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
        handedOut = try HandedOutBook(files: files, onDisk: scan.windows, details: &details, logger: logger)
        moves = MoveCoordinator(book: try MoveBook(files: files, logger: logger), now: startedAt)
        do {
            control = try ControlServer(
                path: configuration.socketPath, maxClients: configuration.maxClients,
                idleTimeout: configuration.clientTimeoutMilliseconds * 1_000_000, logger: logger)
        } catch {
            throw SupervisorError.socket(error)
        }
        initialScenesPending = configuration.scenes
        spare = SpareWorker(configuration, now: startedAt, bell: bell, lock: lock, logger: logger)
        shelf.load(details: details)
        finishClosesUnderWay()
        files.revokeRecords(of: files.discardedLeftovers())
        files.removeDiscarded(files.discardedLeftovers())
    }

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
        handedOut.lowerToShown(of: Array(windows.values))
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
            + (spare?.descriptors() ?? [])
        if poll(&descriptors, nfds_t(descriptors.count), timeoutMilliseconds()) < 0, errno != EINTR {
            // Nothing is ready then: the turn goes on to the timers, and the next waits again.
            logger.error("poll: \(Errno(rawValue: errno))")
        }
        let clients = Array(descriptors[2..<(2 + controlDescriptors.count)])
        let deaths = descriptors[(2 + controlDescriptors.count)..<(2 + controlDescriptors.count + workers.count)]
        if descriptors[0].revents != 0 { handleSignal() }
        // Before the deaths: a spare ready this turn takes a window that restarts in it.
        spare?.service(descriptors[(2 + controlDescriptors.count + workers.count)...])
        for (worker, polled) in zip(workers, deaths) where polled.revents != 0 { windows[worker.slot]?.reap(in: self) }
        handleWorkerBell()
        for (client, request) in control.service(clients, now: monotonicNanoseconds()) { handle(request, from: client) }
        runTimers()
        moves.tend(in: self)
        publishStatus()
    }

    /// At most every `publishNanoseconds` (the loop turns at least every 100 ms), the status
    /// readers on other threads see.
    func publishStatus(now immediately: Bool = false) {
        guard let observation = configuration.observation else { return }
        let now = monotonicNanoseconds()
        guard immediately || now >= publishAt else { return }
        publishAt = now + Self.publishNanoseconds
        observation.publish(statusReply())
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
        for at in [orderFile.retry?.at, handedOut.retry?.at, moves.aimedKills.nextDeadline].compactMap({ $0 }) {
            timeout = min(timeout, at > now ? at - now : 0)
        }
        if let due = control.nextDeadline(now: now) { timeout = min(timeout, due) }
        // An aimed kill looks at its window's slot again every millisecond.
        if windows.values.contains(where: { !$0.aimedKills.isEmpty }) { timeout = min(timeout, 1_000_000) }
        if repliesLeft { timeout = 0 }
        return Int32((timeout + 999_999) / 1_000_000)
    }
}

/// The loop's resources a window's controller reaches (`WindowHost`), and the move coordinator.
extension Supervisor: MoveHost {
    var isStopping: Bool { shutdownDeadline != nil }

    func sharedSlot(_ index: Int) -> WindowSlot { region.slot(index) }

    func holds(_ window: Window) -> Bool { windows[window.slot] === window }

    func isConnected(_ client: ClientID) -> Bool { control.isConnected(client) }

    func openWindow(_ id: UUID) -> Window? { windows.values.first { $0.id == id } }

    func moveStepAnswered(_ window: Window, _ step: MoveStep, _ outcome: MoveStepOutcome) {
        moves.answered(window, step, outcome, in: self)
    }

    func moveWorkerDied(_ window: Window) { moves.workerDied(window, in: self) }

    func movesTake(_ request: WindowRequest, to window: Window, from client: ClientID) -> Bool {
        moves.take(request, to: window, from: client, in: self)
    }
}
