import Foundation
import Glibc
import HostControl
import HostCoordination
import Platform
import SystemPackage

/// The window's half of spawns, deaths and restarts: the lifecycle table's actions carried out
/// (`dispatch`), its worker started and reaped, and what its timers drive (restarts, the
/// watchdog, kill waits, shutdown). What needs the loop's resources it asks of its host.
extension WindowController {
    /// Spawns the window's worker: a new generation in its slot, numbering above every seq a
    /// client may have seen (replied, or shown by `status`: the dead worker's last words
    /// included, read when it died).
    func spawn(in host: any WindowHost) {
        let view = host.sharedSlot(slot)
        prepareSpawn()
        view.resetWorkerFields(keepingCounters: true)
        view.generation = generation
        view.windowID = id
        dispatch(.spawnBegan, in: host)
        let spawnStart = monotonicNanoseconds()
        let started: WorkerProcess
        do throws(WorkerProcess.SpawnFailure) {
            started = try host.launchWorker(for: self)
        } catch {
            startFailed(error.call, error.errno, in: host)
            return
        }
        worker = started
        dispatch(.spawned, in: host)
        spawnedAt = monotonicNanoseconds()
        view.pid = started.pid
        assert(isLive && lifecycle.state == .starting, "a spawned worker starts")
        host.logger.info(
            "worker spawned",
            metadata: [
                "window": "\(id)", "pid": "\(started.pid)", "generation": "\(generation)",
                "spawn_us": "\((spawnedAt - spawnStart) / 1000)",
            ])
    }

    /// Starting the worker failed at `call`. For want of the supervisor's own descriptors,
    /// memory or processes (`RestartPolicy.isShortage`) the start is tried again after a
    /// backoff and counts nothing against the window; any other failure is a failed start.
    func startFailed(_ call: String, _ error: Errno, in host: any WindowHost) {
        guard RestartPolicy.isShortage(error) else {
            host.logger.error("spawn failed", metadata: ["window": "\(id)", "call": "\(call)", "error": "\(error)"])
            workerDied(description: "not spawned: \(call): \(error)", spawned: false, in: host)
            return
        }
        let now = monotonicNanoseconds()
        dispatch(.spawnFailed(shortage: true), in: host)
        let delay = (restartAt ?? now) &- now
        host.logger.error(
            "the supervisor is short of resources: the worker is started again later; the window is not at fault",
            metadata: [
                "window": "\(id)", "call": "\(call)", "error": "\(error)", "attempt": "\(history.shortages)",
                "retry_ms": "\(delay / 1_000_000)",
            ])
    }

    /// The worker's pidfd is readable: it has ended, and is reaped.
    func reap(in host: any WindowHost) {
        guard let worker else { return }
        let end: WorkerProcess.End
        do throws(Errno) {
            guard let ended = try worker.reap() else { return }
            end = ended
        } catch {
            // It cannot be waited for, so it cannot be watched: it goes, and is started again
            // (as when its pidfd could not be had), not polled again and again.
            host.logger.error(
                "waitid on the worker's pidfd: \(error); killed", metadata: ["window": "\(id)", "pid": "\(worker.pid)"])
            dispatch(.reapFailed, in: host)
            workerDied(description: "could not be waited for (\(error))", in: host)
            return
        }
        switch end {
        case .exited(let status): exited(status: status, in: host)
        case .signaled(let signal): workerDied(description: "killed by signal \(signal)", in: host)
        }
    }

    /// The worker exited with `status`: what that says of the window's storage, then its death.
    private func exited(status: Int32, in host: any WindowHost) {
        let beforeReady = !workerRestored
        // An adoption whose storage does not answer is judged as a failed restore: after the
        // failed-start limit it is undone and its client answered, not left adopting for as
        // long as the storage is away.
        let adoptionMeetsNoStorage = adoption != nil && status == WorkerExit.restoreStorageUnavailable.status
        let shortage =
            RestartPolicy.diedOfNoFaultOfTheSession(workerExitStatus: status, signaled: false, beforeReady: beforeReady)
            && !adoptionMeetsNoStorage
        if beforeReady, status == WorkerExit.restoreFailed.status {
            restoreFailedOnStorage =
                "its worker's restore failed on a storage error (exit \(status); the log says which)"
        } else if beforeReady, status == WorkerExit.restoreStorageUnavailable.status {
            restoreFailedOnStorage =
                "its worker's restore could not reach the storage (exit \(status); the log says which)"
        }
        workerDied(
            description: "exited with status \(status)", cleanExit: status == WorkerExit.disconnected.status,
            shortOfResources: shortage, in: host)
    }

    /// `shortOfResources`: the worker said its restore ran short of its own resources; it is
    /// started again after the shortage backoff, and the death counts for nothing. Not
    /// `spawned`: the worker could not be started, for a reason that is no shortage.
    func workerDied(
        description: String, cleanExit: Bool = false, shortOfResources: Bool = false, spawned: Bool = true,
        in host: any WindowHost
    ) {
        worker?.close()
        // What the dead worker left behind goes first: nothing of it writes into its ring
        // while it is read, or into the slot of the worker started next. Its pid is still the
        // window's while strays are looked for: no stray of it, even unreaped.
        host.killStrays(leftBy: self)
        worker = nil
        // Everything it answered before it died, but no more than its ring holds at once.
        _ = drainReplies(budget: ReplyBudget(replies: .max, bytes: host.sharedSlot(slot).replyRing.capacity), in: host)
        // A reply it left in parts is never completed: its request is answered below.
        assembly = ReplyAssembly()
        let now = monotonicNanoseconds()
        answerWaitsEndedByDeath(description, in: host)
        host.moveWorkerDied(self)
        // A worker that disconnected exited 0 after saving; any other death while stopping is
        // judged by what it last published (read again: its last words may be unread yet).
        if !cleanExit, !killedForMisbehaving, let stats = host.sharedSlot(slot).readStats(),
            stats.violation == nil
        {
            accept(stats)
        }
        if host.isStopping, !cleanExit, workerRestored, lastStats.durableSeq < seqs.applied, keptUnsaved.isEmpty {
            keptUnsaved.append(
                "its worker \(description) with commands up to \(seqs.applied) applied and \(lastStats.durableSeq) durable"
            )
        }
        let diedBeforeReady = !workerRestored
        let reason: RestartReason = lifecycle.killRequested ? .kill : killedByWatchdog ? .watchdog : .crash
        let event: WindowLifecycle.Event =
            spawned ? .workerDied(cleanExit: cleanExit, noFault: shortOfResources) : .spawnFailed(shortage: false)
        dispatch(event, description: description, now: now, in: host) { actions in
            self.noteDeath(
                actions, description: description, reason: reason, spawned: spawned, beforeReady: diedBeforeReady,
                now: now, in: host)
        }
    }

    /// The requests and waits a worker's death ends: answered now, but a disconnect's, which its
    /// exit answers.
    private func answerWaitsEndedByDeath(_ description: String, in host: any WindowHost) {
        for (_, pending) in pending where pending.kind != .scene(.disconnect) {
            if let client = pending.client {
                host.answer(client, .failure(.temporary, "the worker died (\(description)); it is restarting"))
            }
        }
        pending = pending.filter { $0.value.kind == .scene(.disconnect) }
        let failedRestore = failedRestoreReply
        for waiter in durableWaiters {
            host.answer(
                waiter.client,
                failedRestore ?? .failure(.temporary, "the worker died (\(description)) before the save was durable"))
        }
        durableWaiters = []
        // A restore the storage refused: a `kill` waiting for the restart is told now, not left
        // to its timeout while restarts meet the same storage. (A `connect` is told why the
        // window cannot start once setting it aside fails too: `reportCannotStart`.)
        if let failedRestore {
            readyWaiters.removeAll { waiter in
                guard case .restart(let client, _, _, _) = waiter else { return false }
                host.answer(client, failedRestore)
                return true
            }
        }
    }

    /// Says what a worker's death led to (`workerDied`), before it is carried out: when the
    /// window restarts, or nothing when it goes or the supervisor stops.
    private func noteDeath(
        _ actions: [WindowLifecycle.Action], description: String, reason: RestartReason, spawned: Bool,
        beforeReady diedBeforeReady: Bool, now: UInt64, in host: any WindowHost
    ) {
        // Disconnecting, or stopping: no restart.
        guard case .restartPending(let at, let wait) = lifecycle.state else { return }
        diedAt = now
        if spawned { host.configuration.observation?.restarting(id, reason, at: host.secondsSinceStart(now)) }
        if wait == .workerShortage {
            host.logger.error(
                "the worker could not restore for want of its own resources or of storage that answers: it is started again later; the window is not at fault",
                metadata: [
                    "window": "\(id)", "how": "\(description)", "attempt": "\(history.shortages)",
                    "retry_ms": "\((at &- now) / 1_000_000)",
                ])
            return
        }
        let next =
            actions.contains(.spawn)
            ? "restart now" : (wait == .setAside ? "set aside, " : "") + "restart in \((at &- now) / 1_000_000) ms"
        host.logger.warning(
            "worker died",
            metadata: [
                "window": "\(id)", "how": "\(description)", "restoring": "\(diedBeforeReady)", "next": "\(next)",
            ])
    }

    /// Feeds the lifecycle `event`, shows where it leads in the window's slot, and carries out
    /// every action it returns, then what those lead to (a set-aside's outcome is an event of
    /// its own), until nothing is left: the one way a window's lifecycle moves, as
    /// s6-supervise's loop dispatches. `description`: how its worker went, for the messages
    /// that say so. `noting` sees the first event's actions before any is carried out (a
    /// death's log line says what comes next).
    func dispatch(
        _ event: WindowLifecycle.Event, description: String = "", now: UInt64? = nil, in host: any WindowHost,
        noting: ([WindowLifecycle.Action]) -> Void = { _ in }
    ) {
        var events = [event]
        // Why the last set-aside failed, for the `reportCannotStart` its failure returns.
        var cannotStart = ""
        var first = true
        while !events.isEmpty {
            let event = events.removeFirst()
            guard host.holds(self) else { return }
            let actions = handle(event, now: first ? now ?? monotonicNanoseconds() : monotonicNanoseconds())
            assert(
                (adoption != nil) == lifecycle.adopting, "an adoption's data lives as long as the lifecycle adopts")
            // A window gone frees its slot (`release`).
            if lifecycle.state != .gone { host.sharedSlot(slot).state = lifecycle.shown }
            if first { noting(actions) }
            first = false
            for action in actions {
                guard host.holds(self) else { return }
                if let next = carryOut(action, description: description, cannotStart: &cannotStart, in: host) {
                    events.append(next)
                }
            }
        }
    }

    /// Carries out one action of the lifecycle's: the event its outcome is, if it has one.
    private func carryOut(
        _ action: WindowLifecycle.Action, description: String, cannotStart: inout String, in host: any WindowHost
    ) -> WindowLifecycle.Event? {
        switch action {
        case .spawn:
            spawn(in: host)
        case .setAside:
            let reason = setAsideReason(description)
            guard let failure = host.setAside(self, reason: reason) else { return .setAsideDone }
            cannotStart = "\(reason); \(failure)"
            return .setAsideFailed
        case .abandonAdoption:
            host.abandonAdoption(self, why: setAsideReason(description))
            return .disconnectRequested
        case .reportCannotStart(let retry):
            // Whoever waits for it to connect is told why instead of waiting for good.
            assert(!cannotStart.isEmpty, "reportCannotStart follows only a failed set-aside")
            let reply = ControlReply.failure(
                .ioError, "window \(id) cannot start: \(cannotStart); retried every \(retry / 1_000_000_000) s")
            for client in takeConnectWaiters() { host.answer(client, reply) }
        case .finishDisconnect(let clean):
            finishDisconnect(cleanExit: clean, description: description, in: host)
        case .kill:
            signalWorker(SIGKILL, in: host)
        case .terminate:
            signalWorker(SIGTERM, in: host)
        case .sendShutdownDisconnect:
            _ = send(.shutdownDisconnect, client: nil, in: host)
        }
        return nil
    }

    /// Why a window's session is set aside (or an adopted one given back): `description`, how
    /// its last worker went.
    private func setAsideReason(_ description: String) -> String {
        "the worker died \(lifecycle.policy.failedStartLimit) times in a row while restoring (last: \(description))"
    }

    /// The window goes: its slot and place given up by the host, then every request waiting
    /// for its exit answered, with success when `cleanExit`.
    private func finishDisconnect(cleanExit: Bool, description: String, in host: any WindowHost) {
        assert(lifecycle.state == .gone && !isLive, "only a window with no worker left goes")
        host.release(self, cleanExit: cleanExit, description: description)
        assert(!host.holds(self), "a window gone holds no slot")
        let reply: ControlReply =
            cleanExit
            ? .ok(CommandReply(window: id.uuidString, seq: seqs.highest))
            : .failure(.ioError, "the worker \(description) while disconnecting")
        for pending in pending.values { if let client = pending.client { host.answer(client, reply) } }
        for client in exitWaiters { host.answer(client, reply) }
        answerAimedKillsAtExit(in: host)
    }

    /// Sends `signal` to the window's worker, if it has one. One already dead (ESRCH) is fine:
    /// its pidfd reports the death; any other failure is logged.
    func signalWorker(_ signal: Int32, in host: any WindowHost) {
        guard let worker else { return }
        do throws(Errno) {
            try worker.signal(signal)
        } catch {
            guard error != .noSuchProcess else { return }
            host.logger.error(
                "cannot signal the worker",
                metadata: ["window": "\(id)", "pid": "\(worker.pid)", "signal": "\(signal)", "error": "\(error)"])
        }
    }
}
