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

/// The loop's half of spawns, deaths and restarts: slots taken, workers launched, strays
/// killed, sessions set aside, and the timers that drive every window. Each window's own half
/// is its controller's (`WindowController+Lifecycle`, `+Timers`).
extension Supervisor {
    /// Reserves a UUID, takes a slot and spawns the scene's worker. Nil when every slot is taken.
    func connectScene(waiter: ClientID?) -> UUID? {
        guard let slot = (0..<configuration.capacity).first(where: { windows[$0] == nil }) else { return nil }
        let id = registry.reserve()
        assert(!windows.values.contains { $0.id == id }, "a reserved UUID is no open window's")
        assert(registry.reserved.contains(id), "a new scene's UUID is reserved until it is configured")
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
        // A window overwritten in its slot would lose its worker and its clients' waits.
        precondition(windows[slot] == nil, "a slot holds one window")
        windows[slot] = window
        window.spawn(in: self)
        logger.info("scene connected", metadata: ["window": "\(id)", "slot": "\(slot)"])
    }

    /// Starts `window`'s worker from the configuration, numbering above the window's floors.
    /// The spare, when one waits, is handed the window instead (`handSpare`).
    func launchWorker(for window: Window) throws(WorkerProcess.SpawnFailure) -> WorkerProcess {
        assert(windows[window.slot] === window, "a worker is launched for a window in its slot")
        let assignment = WindowAssignment(
            slot: window.slot, generation: window.generation, window: window.id, seqFloor: window.seqs.floor,
            tabFloor: window.seqs.tab, inBackground: window.inBackground)
        if let handed = handSpare(assignment) { return handed }
        // Its own slot's memfd only: no descriptor the worker holds reaches another window.
        return try WorkerProcess.spawn(
            WorkerLaunch(spareLaunch, assignment: assignment), executable: configuration.executable,
            inheriting: [
                .slotMemory: region.descriptor(ofSlot: window.slot).rawValue,
                .supervisorBell: bell.descriptor.rawValue, .supervisorLock: lock,
            ])
    }

    /// What a window's dead worker left running: killed, and waited for a little.
    func killStrays(leftBy window: Window) {
        killStrays(cameFrom: window.id, waitingUpTo: Self.strayExitWaitNanoseconds)
    }

    /// Moves the window's session to `set-aside/`. Nil when done (or nothing was on disk); else
    /// why it could not be, naming any fixed entry of the root that is not what it should be.
    func setAside(_ window: Window, reason: String) -> String? {
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
        for slot in windows.keys.sorted() { windows[slot]?.expireKillWaiters(now: now, in: self) }
        if let retry = orderRetry, retry.at <= now { saveOrder() }
        if let retry = handedOutRetry, retry.at <= now { retryHandedOut() }
        for slot in windows.keys.sorted() { windows[slot]?.runTimers(now: now, in: self) }
        // Last: a spare is spawned after this turn's restarts, not in their way.
        tendSpare()
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
            let workers = Set(
                windows.values.compactMap { $0.worker?.pid } + [summaryJob?.pid, spare?.process?.pid].compactMap { $0 })
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
        dispatchSpare(.shutdown)
        for slot in windows.keys.sorted() { windows[slot]?.beginShutdown(in: self) }
        assert(windows.values.allSatisfy { $0.lifecycle.stopping }, "every window stops, none restarts")
    }
}
