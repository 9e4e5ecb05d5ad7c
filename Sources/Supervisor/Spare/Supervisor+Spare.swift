import CLinuxShims
import Glibc
import HostControl
import HostCoordination
import Platform
import SystemPackage

/// The loop's half of the spare worker (`SpareWorker`, `SpareLifecycle`): it is spawned, heard,
/// reaped and handed over here, each outcome an event of its lifecycle (`dispatchSpare`).
extension Supervisor {
    /// What every worker of this supervisor is told alike: a spare's whole launch.
    var spareLaunch: SpareLaunch {
        SpareLaunch(
            root: configuration.root, saveDelayMilliseconds: configuration.saveDelayMilliseconds,
            io: configuration.io, supervisorPID: getpid(), compactAfterRecords: configuration.compactAfterRecords)
    }

    /// Feeds the spare's lifecycle `event` and carries out what it returns, then what those
    /// lead to: the one way the spare moves.
    func dispatchSpare(_ event: SpareLifecycle.Event) {
        guard let spare else { return }
        var events = [event]
        while !events.isEmpty {
            let actions = spare.lifecycle.handle(events.removeFirst(), now: monotonicNanoseconds())
            for action in actions {
                switch action {
                case .spawn: events.append(startSpare(spare))
                case .kill: killSpare(spare)
                }
            }
        }
        assert(spare.lifecycle.hasProcess == (spare.process != nil), "the spare's process is there while it runs")
        assert(
            spare.socket < 0 || [.starting, .waiting].contains(spare.lifecycle.shown),
            "only a spare starting or waiting is heard")
    }

    /// Spawns a spare with what every worker holds (its own command doorbell, the supervisor's
    /// bell and `supervisor.lock`) and its hand-over socket: no window's memory.
    private func startSpare(_ spare: SpareWorker) -> SpareLifecycle.Event {
        var pair: [Int32] = [-1, -1]
        guard wh_seqpacket_pair(&pair) == 0 else {
            logger.error("cannot start a spare worker: socketpair: \(Errno(rawValue: errno))")
            return .spawnFailed
        }
        // The spare's end is inherited by it alone: ours closes once it is spawned.
        defer { close(pair[1]) }
        let spawnStart = monotonicNanoseconds()
        do throws(WorkerProcess.SpawnFailure) {
            let process = try WorkerProcess.spawnSpare(
                spareLaunch, executable: configuration.executable, handOver: pair[1],
                inheriting: [.supervisorBell: bell.descriptor.rawValue, .supervisorLock: lock])
            spare.started(process, socket: pair[0])
            logger.info(
                "spare worker spawned",
                metadata: ["pid": "\(process.pid)", "spawn_us": "\((monotonicNanoseconds() - spawnStart) / 1000)"])
            return .spawned
        } catch {
            close(pair[0])
            logger.error(
                "cannot start a spare worker", metadata: ["call": "\(error.call)", "error": "\(error.errno)"])
            return .spawnFailed
        }
    }

    /// Kills the spare through its pidfd; its death is reaped as any. Nothing more is heard.
    private func killSpare(_ spare: SpareWorker) {
        spare.closeSocket()
        guard let process = spare.process else { return }
        do throws(Errno) {
            try process.signal(SIGKILL)
        } catch {
            // Gone already: its pidfd says so.
            guard error != .noSuchProcess else { return }
            logger.error("cannot kill the spare worker", metadata: ["pid": "\(process.pid)", "error": "\(error)"])
        }
    }

    /// Hands the waiting spare `assignment` and its slot's memfd: its process, now the window's
    /// worker; nil when no spare waits or it could not take it (the window's worker is spawned).
    func handSpare(_ assignment: WindowAssignment) -> WorkerProcess? {
        guard let spare, spare.lifecycle.isWaiting else { return nil }
        let memory = region.descriptor(ofSlot: assignment.slot).rawValue
        guard SpareHandOver.send(assignment, memory: memory, over: spare.socket) else {
            logger.warning(
                "the spare worker could not be handed a window (it is gone): one is spawned for it",
                metadata: ["pid": "\(spare.process?.pid ?? 0)", "window": "\(assignment.window)"])
            dispatchSpare(.handOverFailed)
            return nil
        }
        let process = spare.handOver()
        dispatchSpare(.handedOver)
        return process
    }

    /// The spare's pidfd and, while it is heard, its socket: to poll.
    func spareDescriptors() -> [pollfd] {
        guard let spare, let process = spare.process else { return [] }
        return [pollfd(fd: process.pidfd, events: Int16(POLLIN), revents: 0)]
            + (spare.socket >= 0 ? [pollfd(fd: spare.socket, events: Int16(POLLIN), revents: 0)] : [])
    }

    /// What `spareDescriptors` polled: the spare's end first (a dead spare's socket reads
    /// closed, which is no misbehaviour), then what it said.
    func serviceSpare(_ polled: ArraySlice<pollfd>) {
        guard let spare, let process = spare.process else { return }
        for descriptor in polled where descriptor.revents != 0 && descriptor.fd == process.pidfd {
            reapSpare(spare, process)
        }
        // Reaped, the spare's socket is closed: nothing more is heard from it.
        for descriptor in polled where descriptor.revents != 0 && descriptor.fd == spare.socket {
            hearSpare(spare)
        }
    }

    private func hearSpare(_ spare: SpareWorker) {
        switch SpareHandOver.hear(on: spare.socket) {
        case .ready:
            dispatchSpare(.saidReady)
        case .closed:
            logger.warning("the spare worker closed its hand-over socket: killed")
            dispatchSpare(.misbehaved)
        case .misbehaved(let what):
            logger.error("the spare worker broke the hand-over protocol: killed", metadata: ["what": "\(what)"])
            dispatchSpare(.misbehaved)
        }
    }

    private func reapSpare(_ spare: SpareWorker, _ process: WorkerProcess) {
        let how: String
        do throws(Errno) {
            guard let end = try process.reap() else { return }
            how = "\(end)"
        } catch {
            // It cannot be waited for: the stray scan kills and reaps it.
            how = "could not be waited for (\(error))"
        }
        let shown = spare.lifecycle.shown
        spare.ended()
        dispatchSpare(.died)
        // One killed was meant to go; any other death is the spare's own.
        logger.log(
            level: shown == .stopping ? .info : .warning, "spare worker ended before it was handed a window",
            metadata: [
                "pid": "\(process.pid)", "how": "\(how)", "was": "\(shown)",
                "failures": "\(spare.lifecycle.failures)",
            ])
    }

    /// At the end of each turn: a spare due is started once no window's worker is restoring.
    func tendSpare() {
        let windowsStarting = windows.values.contains { [.spawning, .starting].contains($0.lifecycle.state) }
        dispatchSpare(.tick(windowsStarting: windowsStarting))
    }

    /// `status` with the spare's state.
    func statusWithSpare() -> StatusReply {
        var reply = statusReply()
        reply.spare = spare?.lifecycle.shown ?? .off
        return reply
    }
}
