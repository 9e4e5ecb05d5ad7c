import Foundation
import HostCoordination
import Platform

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
        let record = handedOut.windows[id]
        let probing = record == nil && (handedOut.damaged && files.hasSession(id) || adoption?.asNewWindow == false)
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
    /// The spare, when one waits, is handed the window instead (`SpareWorker.take`).
    func launchWorker(for window: Window) throws(WorkerProcess.SpawnFailure) -> WorkerProcess {
        assert(windows[window.slot] === window, "a worker is launched for a window in its slot")
        let assignment = WindowAssignment(
            slot: window.slot, generation: window.generation, window: window.id, seqFloor: window.seqs.floor,
            tabFloor: window.seqs.tab, inBackground: window.inBackground)
        if let handed = spare?.take(assignment, memory: region.descriptor(ofSlot: assignment.slot).rawValue) {
            return handed
        }
        // Its own slot's memfd only: no descriptor the worker holds reaches another window.
        return try WorkerProcess.spawn(
            WorkerLaunch(SpareLaunch(configuration), assignment: assignment), executable: configuration.executable,
            inheriting: [
                .slotMemory: region.descriptor(ofSlot: window.slot).rawValue,
                .supervisorBell: bell.descriptor.rawValue, .supervisorLock: lock,
            ])
    }

    /// What a window's dead worker left running: killed, and waited for a little.
    func killStrays(leftBy window: Window) {
        killStrays(cameFrom: window.id, waitingUpTo: StrayReaper.exitWaitNanoseconds)
    }

    /// Moves the window's session to `set-aside/` (`SetAsideService.setAside`).
    func setAside(_ window: Window, reason: String) -> String? {
        shelf.setAside(window.id, reason: reason)
    }

    func runTimers() {
        let now = monotonicNanoseconds()
        if strays.scanDue(now) { killStrays(cameFrom: nil, waitingUpTo: 0) }
        runSetAsideWork(now)
        completeAdoptions()
        for slot in windows.keys.sorted() { windows[slot]?.expireKillWaiters(now: now, in: self) }
        if let retry = orderFile.retry, retry.at <= now { saveOrder() }
        if let retry = handedOut.retry, retry.at <= now { handedOut.writeAgain(Array(windows.values)) }
        for slot in windows.keys.sorted() { windows[slot]?.runTimers(now: now, in: self) }
        // Last: a spare is spawned after this turn's restarts, not in their way.
        spare?.tend(windowsStarting: windows.values.contains { [.spawning, .starting].contains($0.lifecycle.state) })
    }

    /// Kills and reaps every child of the supervisor that is no current worker, nor the spare,
    /// nor the set-aside summary's reader (`StrayReaper`), waiting up to `wait` for them to be gone.
    func killStrays(cameFrom window: UUID?, waitingUpTo wait: UInt64) {
        let ours = Set(
            windows.values.compactMap { $0.worker?.pid } + [shelf.readerPID, spare?.process?.pid].compactMap { $0 })
        strays.reap(sparing: ours, cameFrom: window, waitingUpTo: wait, logger: logger)
    }

    /// How long a shutdown waits for the workers to save and exit before it kills the ones left
    /// (their unsaved changes are then named, and `run` exits 75): recovery.md's "15 s deadline".
    static let shutdownGraceNanoseconds: UInt64 = 15_000_000_000

    func beginShutdown() {
        guard shutdownDeadline == nil else { return }
        shutdownDeadline = monotonicNanoseconds() + Self.shutdownGraceNanoseconds
        spare?.dispatch(.shutdown)
        for slot in windows.keys.sorted() { windows[slot]?.beginShutdown(in: self) }
        assert(windows.values.allSatisfy { $0.lifecycle.stopping }, "every window stops, none restarts")
    }
}
