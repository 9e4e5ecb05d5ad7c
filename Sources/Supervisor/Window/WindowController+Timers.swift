import Foundation
import HostControl
import HostCoordination

/// What the loop's timers and its shutdown drive in one window: a restart due, the watchdog,
/// `kill` waits that expired, the shutdown and its deadline.
extension WindowController {
    /// One look at the window by the loop's timers (`runTimers`): its restart when due, else
    /// the watchdog over its live worker.
    func runTimers(now: UInt64, in host: any WindowHost) {
        // Between events: a worker's death moves its window out of `.ready` (`workerDied`).
        assert(lifecycle.state != .ready || isLive, "a ready window has a live pidfd")
        if let at = restartAt, at <= now {
            dispatch(.restartTimerFired, description: "restart", in: host)
            return
        }
        guard isLive, state != .disconnecting else { return }
        let configuration = host.configuration
        let hang = watch(
            heartbeat: host.sharedSlot(slot).heartbeat, now: now,
            watchdogNanoseconds: configuration.watchdogMilliseconds * 1_000_000,
            startTimeoutNanoseconds: configuration.startTimeoutMilliseconds * 1_000_000)
        switch hang {
        case .silent(let quiet)?:
            host.logger.error(
                "worker hung: no heartbeat for \(quiet / 1_000_000) ms; killed", metadata: ["window": "\(id)"])
            dispatch(.watchdogFired, in: host)
        case .notRestored?:
            host.logger.error(
                "worker did not restore in \(configuration.startTimeoutMilliseconds) ms; killed",
                metadata: ["window": "\(id)"])
            dispatch(.watchdogFired, in: host)
        case nil:
            break
        }
    }

    /// Answers each `kill` whose worker outlived its wait: the signal did not kill, and no
    /// restart is coming. A worker that did die is waited for until it is ready again.
    func expireKillWaiters(now: UInt64, in host: any WindowHost) {
        guard !readyWaiters.isEmpty else { return }
        let expired = takeExpiredKillWaiters(now: now)
        for case .restart(let client, let killed, let signal, _) in expired {
            host.answer(
                client,
                .failure(
                    .temporary,
                    "the worker \(killed.killedPid) of window \(id) is still alive \(Self.killWaitNanoseconds / 1_000_000_000) s after SIG\(signal): it caught or ignored the signal, and no restart follows"
                ))
        }
        if !expired.isEmpty, !waitsForRestart {
            // The kill did not happen: a later death is the window's own again.
            dispatch(.killAbandoned, in: host)
        }
    }

    /// How long a `kill` waits for the signalled worker to die (one that catches the signal,
    /// like SEGV under a handler, never does) before it is answered 75; after a signal that
    /// stops it, the watchdog's period more.
    static let killWaitNanoseconds: UInt64 = 5_000_000_000

    /// Shutdown began: an adoption or a close for good under way is told it will not end, and
    /// the lifecycle decides how the worker goes.
    func beginShutdown(in host: any WindowHost) {
        assert(host.isStopping, "shutdown begins with the host stopping")
        // An adoption not yet ended is undone by the next start (its marker stays).
        if let client = adoption?.client {
            adoption?.client = nil
            host.answer(
                client,
                .failure(
                    .temporary,
                    "shutting down before the adoption ended: the next start sets the entry aside again, as it is then"
                ))
        }
        if let client = closingForGood {
            closingForGood = nil
            host.answer(client, .failure(.temporary, "shutting down before the close ended: the window stays, whole"))
        }
        // A `kill` waiting for its window's restart: none follows a shutdown.
        for case .restart(let client, let killed, let signal, _) in takeRestartWaiters() {
            host.answer(
                client,
                .failure(
                    .temporary,
                    "shutting down: the worker \(killed.killedPid) of window \(id) was sent SIG\(signal), and no restart follows"
                )
            )
        }
        dispatch(.shutdownBegan, description: "shutdown", in: host)
    }

    /// Past the shutdown deadline the worker still running is killed; what it had not saved is
    /// named at the end.
    func shutdownDeadlinePassed(in host: any WindowHost) {
        guard isLive else { return }
        host.logger.warning("worker did not exit in time: killed", metadata: ["window": "\(id)"])
        if lastStats.durableSeq < seqs.applied {
            keptUnsaved.append("its worker did not finish saving in time")
        }
        dispatch(.shutdownDeadlinePassed, in: host)
    }
}
