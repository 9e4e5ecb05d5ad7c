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

/// Spawning, deaths and restarts: the lifecycle table's actions carried out, and the timers
/// that drive it (restarts, the watchdog, kill waits, shutdown).
extension Supervisor {
    /// Reserves a UUID, takes a slot and spawns the scene's worker. Nil when every slot is taken.
    func connectScene(waiter: ClientID?) -> UUID? {
        guard let slot = (0..<configuration.capacity).first(where: { windows[$0] == nil }) else { return nil }
        let id = registry.reserve()
        openWindow(id, slot: slot, waiter: waiter)
        return id
    }

    /// Takes `slot` for window `id`, reserved, and spawns its worker.
    func openWindow(_ id: UUID, slot: Int, waiter: ClientID? = nil, adoption: Adoption? = nil) {
        // What a supervisor before may have handed out: its first worker numbers above it, and
        // `becameReady` names what it did not restore lost, beside what was lost before. With
        // no ceilings to trust for seqs the window may have shown (a damaged `handed-out`, or a
        // session adopted back under its UUID whose record is gone: a root of a version
        // before), its first worker only says what it restored (`probeFloors`).
        let record = handedOut[id]
        let probing = record == nil && (handedOutDamaged && files.hasSession(id) || adoption?.asNewWindow == false)
        let window = WindowController(
            id: id, slot: slot, policy: configuration.restartPolicy, reservedAt: monotonicNanoseconds(),
            probingFloors: probing, adoption: adoption)
        if let record { window.seqs = SeqBook(handedOut: record) }
        if let waiter { window.readyWaiters.append(.connect(waiter)) }
        // A new reservation starts with no save counters; spawn writes the rest of the slot.
        region.slot(slot).resetWorkerFields(keepingCounters: false)
        windows[slot] = window
        spawn(slot)
        logger.info("scene connected", metadata: ["window": "\(id)", "slot": "\(slot)"])
    }

    func spawn(_ slot: Int) {
        guard let window = windows[slot] else { return }
        let view = region.slot(slot)
        // Every seq a client may have seen: replied, or shown by `status` (the dead worker's
        // last words included, read when it died).
        window.prepareSpawn()
        view.resetWorkerFields(keepingCounters: true)
        view.generation = window.generation
        view.windowID = window.id
        dispatch(slot, .spawnBegan)
        let launch = WorkerLaunch(
            slot: slot, generation: window.generation, window: window.id, root: configuration.root,
            saveDelayMilliseconds: configuration.saveDelayMilliseconds, io: configuration.io, supervisorPID: getpid(),
            seqFloor: window.seqs.floor, tabFloor: window.seqs.tab,
            compactAfterRecords: configuration.compactAfterRecords,
            inBackground: window.inBackground)
        let spawnStart = monotonicNanoseconds()
        let worker: WorkerProcess
        do throws(WorkerProcess.SpawnFailure) {
            // Its own slot's memfd only: no descriptor the worker holds reaches another window.
            worker = try WorkerProcess.spawn(
                launch, executable: configuration.executable,
                inheriting: [
                    .slotMemory: region.descriptor(ofSlot: slot).rawValue, .supervisorBell: bell.descriptor.rawValue,
                    .supervisorLock: lock,
                ])
        } catch {
            startFailed(slot, error.call, error.errno)
            return
        }
        window.worker = worker
        dispatch(slot, .spawned)
        window.spawnedAt = monotonicNanoseconds()
        view.pid = worker.pid
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
    func startFailed(_ slot: Int, _ call: String, _ error: Errno) {
        guard let window = windows[slot] else { return }
        guard RestartPolicy.isShortage(error) else {
            logger.error("spawn failed", metadata: ["window": "\(window.id)", "call": "\(call)", "error": "\(error)"])
            workerDied(slot, description: "not spawned: \(call): \(error)", spawned: false)
            return
        }
        let now = monotonicNanoseconds()
        dispatch(slot, .spawnFailed(shortage: true))
        let delay = (window.restartAt ?? now) &- now
        logger.error(
            "the supervisor is short of resources: the worker is started again later; the window is not at fault",
            metadata: [
                "window": "\(window.id)", "call": "\(call)", "error": "\(error)",
                "attempt": "\(window.history.shortages)",
                "retry_ms": "\(delay / 1_000_000)",
            ])
    }

    /// The worker's pidfd is readable: it has ended, and is reaped.
    func reapWorker(_ slot: Int) {
        guard let window = windows[slot], let worker = window.worker else { return }
        let end: WorkerProcess.End
        do throws(Errno) {
            guard let ended = try worker.reap() else { return }
            end = ended
        } catch {
            // It cannot be waited for, so it cannot be watched: it goes, and is started again
            // (as when its pidfd could not be had), not polled again and again.
            logger.error(
                "waitid on the worker's pidfd: \(error); killed",
                metadata: ["window": "\(window.id)", "pid": "\(worker.pid)"])
            dispatch(slot, .reapFailed)
            workerDied(slot, description: "could not be waited for (\(error))")
            return
        }
        let beforeReady = window.readyAt == nil
        switch end {
        case .exited(let status):
            // An adoption whose storage does not answer is judged as a failed restore: after the
            // failed-start limit it is undone and its client answered, not left adopting for as
            // long as the storage is away.
            let adoptionMeetsNoStorage = window.adoption != nil && status == WorkerExit.restoreStorageUnavailable.status
            let shortage =
                RestartPolicy.diedOfNoFaultOfTheSession(
                    workerExitStatus: status, signaled: false, beforeReady: beforeReady) && !adoptionMeetsNoStorage
            if beforeReady, status == WorkerExit.restoreFailed.status {
                windows[slot]?.restoreFailedOnStorage =
                    "its worker's restore failed on a storage error (exit \(status); the log says which)"
            } else if beforeReady, status == WorkerExit.restoreStorageUnavailable.status {
                windows[slot]?.restoreFailedOnStorage =
                    "its worker's restore could not reach the storage (exit \(status); the log says which)"
            }
            workerDied(
                slot, description: "exited with status \(status)", cleanExit: status == WorkerExit.disconnected.status,
                shortOfResources: shortage)
        case .signaled(let signal):
            workerDied(slot, description: "killed by signal \(signal)")
        }
    }

    /// `shortOfResources`: the worker said its restore ran short of its own resources; it is
    /// started again after the shortage backoff, and the death counts for nothing. Not
    /// `spawned`: the worker could not be started, for a reason that is no shortage.
    func workerDied(
        _ slot: Int, description: String, cleanExit: Bool = false, shortOfResources: Bool = false, spawned: Bool = true
    ) {
        guard let window = windows[slot] else { return }
        window.worker?.close()
        // What the dead worker left behind goes first: nothing of it writes into its ring
        // while it is read, or into the slot of the worker started next. Its pid is still the
        // window's while strays are looked for: no stray of it, even unreaped.
        killStrays(cameFrom: window.id, waitingUpTo: Self.strayExitWaitNanoseconds)
        window.worker = nil
        // Everything it answered before it died, but no more than its ring holds at once.
        _ = drainReplies(window, budget: ReplyBudget(replies: .max, bytes: region.slot(slot).replyRing.capacity))
        // A reply it left in parts is never completed: its request is answered below.
        window.assembly = ReplyAssembly()
        let now = monotonicNanoseconds()
        for (_, pending) in window.pending where pending.kind != .scene(.disconnect) {
            if let client = pending.client {
                answer(client, .failure(.temporary, "the worker died (\(description)); it is restarting"))
            }
        }
        window.pending = window.pending.filter { $0.value.kind == .scene(.disconnect) }
        let failedRestore = window.failedRestoreReply
        for waiter in window.durableWaiters {
            answer(
                waiter.client,
                failedRestore ?? .failure(.temporary, "the worker died (\(description)) before the save was durable"))
        }
        window.durableWaiters = []
        // A restore the storage refused: a `kill` waiting for the restart is told now, not left
        // to its timeout while restarts meet the same storage. (A `connect` is told why the
        // window cannot start once setting it aside fails too: `reportCannotStart`.)
        if let failedRestore {
            window.readyWaiters.removeAll { waiter in
                guard case .restart(let client, _, _, _, _) = waiter else { return false }
                answer(client, failedRestore)
                return true
            }
        }
        // A worker that disconnected exited 0 after saving; any other death while stopping is
        // judged by what it last published (read again: its last words may be unread yet).
        if !cleanExit, !window.killedForMisbehaving, let stats = region.slot(slot).readStats(),
            Self.violation(in: stats) == nil
        {
            window.accept(stats)
        }
        if shutdownDeadline != nil, !cleanExit, window.readyAt != nil,
            window.lastStats.durableSeq < window.seqs.applied,
            !keptUnsaved.contains(where: { $0.window == window.id })
        {
            noteKeptUnsaved(
                window.id,
                "its worker \(description) with commands up to \(window.seqs.applied) applied and \(window.lastStats.durableSeq) durable"
            )
        }
        let diedBeforeReady = window.readyAt == nil
        let reason: RestartReason =
            window.lifecycle.killRequested ? .kill : window.killedByWatchdog ? .watchdog : .crash
        let event: WindowLifecycle.Event =
            spawned ? .workerDied(cleanExit: cleanExit, noFault: shortOfResources) : .spawnFailed(shortage: false)
        dispatch(slot, event, description: description, now: now) { actions in
            self.noteDeath(
                window, actions, description: description, reason: reason, spawned: spawned,
                beforeReady: diedBeforeReady, now: now)
        }
    }

    /// Says what a worker's death led to (`workerDied`), before it is carried out: when its
    /// window restarts, or nothing when it goes or the supervisor stops.
    private func noteDeath(
        _ window: Window, _ actions: [WindowLifecycle.Action], description: String, reason: RestartReason,
        spawned: Bool, beforeReady diedBeforeReady: Bool, now: UInt64
    ) {
        switch window.lifecycle.state {
        case .restartPending(let at, let wait):
            window.diedAt = now
            if spawned { configuration.observation?.restarting(window.id, reason, at: secondsSinceStart(now)) }
            if wait == .workerShortage {
                logger.error(
                    "the worker could not restore for want of its own resources or of storage that answers: it is started again later; the window is not at fault",
                    metadata: [
                        "window": "\(window.id)", "how": "\(description)", "attempt": "\(window.history.shortages)",
                        "retry_ms": "\((at &- now) / 1_000_000)",
                    ])
            } else {
                let next =
                    actions.contains(.spawn)
                    ? "restart now"
                    : (wait == .setAside ? "set aside, " : "") + "restart in \((at &- now) / 1_000_000) ms"
                logger.warning(
                    "worker died",
                    metadata: [
                        "window": "\(window.id)", "how": "\(description)", "restoring": "\(diedBeforeReady)",
                        "next": "\(next)",
                    ])
            }
        default:
            // Disconnecting, or stopping: no restart.
            break
        }
    }

    /// Feeds the lifecycle of the window in `slot` `event`, shows where it leads in the window's
    /// slot, and carries out every action it returns, then what those lead to (a set-aside's
    /// outcome is an event of its own), until nothing is left: the one way a window's
    /// lifecycle moves, as s6-supervise's loop dispatches. `description`: how its worker went,
    /// for the messages that say so. `noting` sees the first event's actions before any is
    /// carried out (a death's log line says what comes next).
    func dispatch(
        _ slot: Int, _ event: WindowLifecycle.Event, description: String = "", now: UInt64? = nil,
        noting: ([WindowLifecycle.Action]) -> Void = { _ in }
    ) {
        var events = [event]
        // Why the last set-aside failed, for the `reportCannotStart` its failure returns.
        var cannotStart = ""
        var first = true
        while !events.isEmpty {
            let event = events.removeFirst()
            guard let window = windows[slot] else { return }
            let actions = window.handle(event, now: first ? now ?? monotonicNanoseconds() : monotonicNanoseconds())
            assert(
                (window.adoption != nil) == window.lifecycle.adopting,
                "an adoption's data lives as long as the lifecycle adopts")
            // A window gone frees its slot (`finishDisconnect`).
            if window.lifecycle.state != .gone { region.slot(slot).state = window.lifecycle.shown }
            if first { noting(actions) }
            first = false
            for action in actions {
                guard let window = windows[slot] else { return }
                switch action {
                case .spawn:
                    spawn(slot)
                case .setAside:
                    let reason = setAsideReason(description)
                    if let failure = setAside(slot, reason: reason) {
                        events.append(.setAsideFailed)
                        cannotStart = "\(reason); \(failure)"
                    } else {
                        events.append(.setAsideDone)
                    }
                case .abandonAdoption:
                    abandonAdoption(slot, why: setAsideReason(description))
                    events.append(.disconnectRequested)
                case .reportCannotStart(let retry):
                    // Whoever waits for it to connect is told why instead of waiting for good.
                    assert(!cannotStart.isEmpty, "reportCannotStart follows only a failed set-aside")
                    answerConnectWaiters(
                        slot,
                        .failure(
                            .ioError,
                            "window \(window.id) cannot start: \(cannotStart); retried every \(retry / 1_000_000_000) s"
                        ))
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
    }

    /// Why a window's session is set aside (or an adopted one given back): `description`, how
    /// its last worker went.
    private func setAsideReason(_ description: String) -> String {
        "the worker died \(configuration.restartPolicy.failedStartLimit) times in a row while restoring (last: \(description))"
    }

    func answerConnectWaiters(_ slot: Int, _ reply: ControlReply) {
        guard let window = windows[slot] else { return }
        for client in window.takeConnectWaiters() { answer(client, reply) }
    }

    /// Moves the window's session to `set-aside/`. Nil when done (or nothing was on disk); else
    /// why it could not be, naming any fixed entry of the root that is not what it should be.
    func setAside(_ slot: Int, reason: String) -> String? {
        guard let window = windows[slot] else { return nil }
        do {
            if let path = try files.setAside(window.id, reason: .crashLoop, at: Date()) {
                shelve(path, detail: reason)
                logger.error(
                    "window set aside; it restarts empty",
                    metadata: ["window": "\(window.id)", "path": "\(path)", "reason": "\(reason)"])
            }
            return nil
        } catch {
            let misplaced = RootLayout.misplacedEntries(root: configuration.root).map { "\($0)" }
            let failure =
                "cannot set it aside: \(error)" + (misplaced.isEmpty ? "" : " (\(misplaced.joined(separator: "; ")))")
            logger.error("\(failure)", metadata: ["window": "\(window.id)"])
            return failure
        }
    }

    func runTimers() {
        let now = monotonicNanoseconds()
        if now >= strayScanAt {
            strayScanAt = now + Self.strayScanNanoseconds
            killStrays(cameFrom: nil, waitingUpTo: 0)
        }
        runSetAsideWork(now)
        completeAdoptions()
        expireKillWaiters(now)
        if let retry = orderRetry, retry.at <= now { saveOrder() }
        if let retry = handedOutRetry, retry.at <= now { retryHandedOut() }
        for slot in windows.keys.sorted() {
            guard let window = windows[slot] else { continue }
            // Between events: a worker's death moves its window out of `.ready` (`workerDied`).
            assert(window.lifecycle.state != .ready || window.isLive, "a ready window has a live pidfd")
            if let at = window.restartAt, at <= now {
                dispatch(slot, .restartTimerFired, description: "restart")
                continue
            }
            guard window.isLive, window.state != .disconnecting else { continue }
            let hang = window.watch(
                heartbeat: region.slot(slot).heartbeat, now: now,
                watchdogNanoseconds: configuration.watchdogMilliseconds * 1_000_000,
                startTimeoutNanoseconds: configuration.startTimeoutMilliseconds * 1_000_000)
            switch hang {
            case .silent(let quiet)?:
                logger.error(
                    "worker hung: no heartbeat for \(quiet / 1_000_000) ms; killed",
                    metadata: ["window": "\(window.id)"])
                dispatch(slot, .watchdogFired)
            case .notRestored?:
                logger.error(
                    "worker did not restore in \(configuration.startTimeoutMilliseconds) ms; killed",
                    metadata: ["window": "\(window.id)"])
                dispatch(slot, .watchdogFired)
            case nil:
                break
            }
        }
    }

    /// Answers each `kill` whose worker outlived its wait: the signal did not kill, and no
    /// restart is coming. A worker that did die is waited for until it is ready again.
    func expireKillWaiters(_ now: UInt64) {
        for slot in windows.keys.sorted() {
            guard let window = windows[slot], !window.readyWaiters.isEmpty else { continue }
            let expired = window.takeExpiredKillWaiters(now: now)
            for case .restart(let client, let oldPID, _, let signal, _) in expired {
                answer(
                    client,
                    .failure(
                        .temporary,
                        "the worker \(oldPID) of window \(window.id) is still alive \(Self.killWaitNanoseconds / 1_000_000_000) s after SIG\(signal): it caught or ignored the signal, and no restart follows"
                    ))
            }
            if !expired.isEmpty, !window.waitsForRestart {
                // The kill did not happen: a later death is the window's own again.
                dispatch(slot, .killAbandoned)
            }
        }
    }

    /// How often `runTimers` looks for strays: a zombie a worker left lasts at most this long.
    static let strayScanNanoseconds: UInt64 = 1_000_000_000

    /// How long a worker's death waits for the strays it killed to be gone before the window's
    /// next worker starts: a SIGKILLed process is gone in microseconds unless it sleeps
    /// uninterruptibly (then it is logged, and reaped at a later scan).
    static let strayExitWaitNanoseconds: UInt64 = 200_000_000

    /// Kills and reaps every child of the supervisor that is no current worker: a stray, left
    /// by a dead worker (the supervisor is its subreaper). Unreaped, strays pile up as zombies
    /// until no pid is left to spawn a worker; alive, one holding its window's slot memfd writes
    /// into the next worker's slot. `waitingUpTo`: how long to wait for them to be gone (at a
    /// worker's death, before its window's next worker starts); the timer's scan waits for none.
    /// A current worker is never waited for here: its pidfd's `waitid` reaps it.
    func killStrays(cameFrom window: UUID?, waitingUpTo wait: UInt64) {
        let deadline = monotonicNanoseconds() + wait
        while true {
            // A set-aside summary's reader is the supervisor's own child, no stray.
            let workers = Set(windows.values.compactMap { $0.worker?.pid } + [summaryJob?.pid].compactMap { $0 })
            let strays: [pid_t]
            do throws(Errno) {
                strays = try Strays.children(of: getpid()).filter { !workers.contains($0) }
            } catch {
                logger.error("cannot look for strays: opendir /proc: \(error)")
                return
            }
            for pid in strays {
                // An unreaped child: its pid names it still, so the kill reaches no one else.
                if straysKilled.insert(pid).inserted {
                    let killed = Glibc.kill(pid, SIGKILL)
                    logger.error(
                        "a stray child of the supervisor (left by a worker): killed",
                        metadata: [
                            "pid": "\(pid)", "window": "\(window ?? WindowRegistry.unavailable)",
                            "kill": "\(killed == 0 ? "sent" : "\(Errno(rawValue: errno))")",
                        ])
                }
                let reaped = waitpid(pid, nil, WNOHANG)
                if reaped == pid || (reaped < 0 && errno == ECHILD) { straysKilled.remove(pid) }
            }
            guard !strays.contains(where: straysKilled.contains) else {
                guard monotonicNanoseconds() < deadline else {
                    if wait > 0 {
                        logger.error(
                            "strays still alive after SIGKILL (in uninterruptible sleep?): the window's next worker starts anyway",
                            metadata: [
                                "pids": "\(strays.filter(straysKilled.contains))",
                                "window": "\(window ?? WindowRegistry.unavailable)",
                            ])
                    }
                    return
                }
                usleep(2_000)
                continue
            }
            // A stray killed may have left strays of its own: they are looked for again.
            guard !strays.isEmpty, monotonicNanoseconds() < deadline else { return }
        }
    }

    /// How long a shutdown waits for the workers to save and exit before it kills the ones left
    /// (their unsaved changes are then named, and `run` exits 75): recovery.md's "15 s deadline".
    static let shutdownGraceNanoseconds: UInt64 = 15_000_000_000

    func beginShutdown() {
        guard shutdownDeadline == nil else { return }
        shutdownDeadline = monotonicNanoseconds() + Self.shutdownGraceNanoseconds
        for slot in windows.keys.sorted() {
            // An adoption not yet ended is undone by the next start (its marker stays).
            if let client = windows[slot]?.adoption?.client {
                windows[slot]?.adoption?.client = nil
                answer(
                    client,
                    .failure(
                        .temporary,
                        "shutting down before the adoption ended: the next start sets the entry aside again, as it is then"
                    ))
            }
            if let client = windows[slot]?.closingForGood {
                windows[slot]?.closingForGood = nil
                answer(client, .failure(.temporary, "shutting down before the close ended: the window stays, whole"))
            }
            dispatch(slot, .shutdownBegan, description: "shutdown")
        }
    }
}
