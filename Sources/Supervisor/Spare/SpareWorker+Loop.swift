import CLinuxShims
import Glibc
import HostCoordination
import Logging
import Platform
import SystemPackage

/// The spare carried through its lifecycle (`SpareLifecycle`): spawned, heard, reaped and
/// handed over here, each outcome an event of its lifecycle (`dispatch`); the loop polls what
/// `descriptors` lists and hands back what it polled (`service`).
extension SpareWorker {
    /// Feeds the spare's lifecycle `event` and carries out what it returns, then what those
    /// lead to: the one way the spare moves.
    func dispatch(_ event: SpareLifecycle.Event) {
        var events = [event]
        while !events.isEmpty {
            let actions = lifecycle.handle(events.removeFirst(), now: monotonicNanoseconds())
            for action in actions {
                switch action {
                case .spawn: events.append(start())
                case .kill: kill()
                }
            }
        }
        assert(lifecycle.hasProcess == (process != nil), "the spare's process is there while it runs")
        assert(
            socket < 0 || [.starting, .waiting].contains(lifecycle.shown), "only a spare starting or waiting is heard")
    }

    /// Spawns a spare with what every worker holds (its own command doorbell, the supervisor's
    /// bell and `supervisor.lock`) and its hand-over socket: no window's memory.
    private func start() -> SpareLifecycle.Event {
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
                launch, executable: executable, handOver: pair[1], inheriting: inherited)
            started(process, socket: pair[0])
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
    private func kill() {
        closeSocket()
        guard let process else { return }
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
    func take(_ assignment: WindowAssignment, memory: Int32) -> WorkerProcess? {
        guard lifecycle.isWaiting else { return nil }
        guard SpareHandOver.send(assignment, memory: memory, over: socket) else {
            logger.warning(
                "the spare worker could not be handed a window (it is gone): one is spawned for it",
                metadata: ["pid": "\(process?.pid ?? 0)", "window": "\(assignment.window)"])
            dispatch(.handOverFailed)
            return nil
        }
        let handed = releaseProcess()
        dispatch(.handedOver)
        return handed
    }

    /// The spare's pidfd and, while it is heard, its socket: to poll.
    func descriptors() -> [pollfd] {
        guard let process else { return [] }
        return [pollfd(fd: process.pidfd, events: Int16(POLLIN), revents: 0)]
            + (socket >= 0 ? [pollfd(fd: socket, events: Int16(POLLIN), revents: 0)] : [])
    }

    /// What `spareDescriptors` polled: the spare's end first (a dead spare's socket reads
    /// closed, which is no misbehaviour), then what it said.
    func service(_ polled: ArraySlice<pollfd>) {
        guard let process else { return }
        for descriptor in polled where descriptor.revents != 0 && descriptor.fd == process.pidfd {
            reap(process)
        }
        // Reaped, the spare's socket is closed: nothing more is heard from it.
        for descriptor in polled where descriptor.revents != 0 && descriptor.fd == socket {
            hear()
        }
    }

    private func hear() {
        switch SpareHandOver.hear(on: socket) {
        case .ready:
            dispatch(.saidReady)
        case .closed:
            logger.warning("the spare worker closed its hand-over socket: killed")
            dispatch(.misbehaved)
        case .misbehaved(let what):
            logger.error("the spare worker broke the hand-over protocol: killed", metadata: ["what": "\(what)"])
            dispatch(.misbehaved)
        }
    }

    private func reap(_ process: WorkerProcess) {
        let how: String
        do throws(Errno) {
            guard let end = try process.reap() else { return }
            how = "\(end)"
        } catch {
            // It cannot be waited for: the stray scan kills and reaps it.
            how = "could not be waited for (\(error))"
        }
        let shown = lifecycle.shown
        ended()
        dispatch(.died)
        // One killed was meant to go; any other death is the spare's own.
        logger.log(
            level: shown == .stopping ? .info : .warning, "spare worker ended before it was handed a window",
            metadata: [
                "pid": "\(process.pid)", "how": "\(how)", "was": "\(shown)",
                "failures": "\(lifecycle.failures)",
            ])
    }

    /// At the end of each turn: a spare due is started once no window's worker is restoring.
    func tend(windowsStarting: Bool) {
        dispatch(.tick(windowsStarting: windowsStarting))
    }
}
