import Foundation
import HostControl
import Platform
import SystemPackage

/// `ctl kill` of the window's worker: plain, `--wait` (answered once the window is ready
/// again), `--aim` (held until the slot shows a save in flight, for at most 50 ms). A kill
/// aimed at a move's stage is held by the moves (`MoveAimedKills`), which send it here.
extension WindowController {
    /// What a `kill` asks (`WindowRequest.kill`), kept while an aimed one waits.
    struct KillRequest {
        let signal: Int32
        let wait: Bool
        let aim: KillAim?
    }

    /// A `kill --aim` waiting for the window's slot to show a save in flight.
    struct AimedKill {
        let request: KillRequest
        let client: ClientID
        let deadline: UInt64
    }

    /// Aimed at a save in flight, a kill waits at most this long for one to start.
    static let aimNanoseconds: UInt64 = 50_000_000
    /// Aimed at a move's stage, a kill waits at most this long for a move to enter it.
    static let aimMoveNanoseconds: UInt64 = 1_000_000_000

    /// What a kill is answered when the window has no worker to signal.
    static func noWorker(_ window: UUID) -> ControlReply {
        .failure(.temporary, "window \(window) has no worker now (restarting); retry")
    }

    /// Signals the worker, or holds a kill aimed at a save until one is in flight. `moveStage`:
    /// the stage of the move the window takes part in, for a kill aimed at one.
    func kill(
        _ request: KillRequest, _ client: ClientID, aimedUntil: UInt64? = nil, moveStage: MoveStage? = nil,
        in host: any WindowHost
    ) {
        guard isLive else { return host.answer(client, Self.noWorker(id)) }
        // What the worker's slot shows, read without a round trip.
        let whileSaving = host.sharedSlot(slot).savingSeq > 0
        if request.aim == .save, !whileSaving {
            // Aimed at a save in flight: the loop looks again each millisecond.
            let deadline = aimedUntil ?? monotonicNanoseconds() + Self.aimNanoseconds
            if monotonicNanoseconds() < deadline {
                aimedKills.append(AimedKill(request: request, client: client, deadline: deadline))
                return
            }
        }
        do throws(Errno) {
            try worker?.signal(request.signal)
        } catch {
            return host.answer(client, .failure(.software, "pidfd_send_signal: \(error)"))
        }
        let label = SignalName.name(request.signal)
        host.logger.info(
            "killing a worker on request",
            metadata: [
                "window": "\(id)", "pid": "\(pid)", "signal": "\(label)", "move_stage": "\(moveStage?.rawValue ?? "-")",
            ])
        var reply = KillReply(window: id.uuidString, killedPid: pid, whileSaving: whileSaving, moveStage: moveStage)
        guard !SignalName.ignoredByDefault.contains(request.signal) else {
            // Its default action is to ignore: waiting for a restart would be forever.
            (reply.signal, reply.restartExpected) = (label, false)
            return host.answer(client, .ok(reply))
        }
        dispatch(.killRequested, in: host)
        assert(lifecycle.killRequested, "a live worker's requested kill is noted")
        guard request.wait else { return host.answer(client, .ok(reply)) }
        // A stopped worker is the watchdog's to kill: the wait covers its period too.
        let stopped = SignalName.stopping.contains(request.signal)
        let wait = Self.killWaitNanoseconds + (stopped ? host.configuration.watchdogMilliseconds * 1_000_000 : 0)
        readyWaiters.append(
            .restart(client, reply: reply, signal: label, deadline: monotonicNanoseconds() + wait))
    }

    /// Each turn of the loop: an aimed kill whose save started, or whose time passed, is sent.
    func retryAimedKills(in host: any WindowHost) {
        let waiting = aimedKills
        aimedKills = []
        assert(waiting.allSatisfy { $0.request.aim == .save }, "only a kill aimed at a save waits here")
        for aimed in waiting { kill(aimed.request, aimed.client, aimedUntil: aimed.deadline, in: host) }
    }

    /// The window went with aimed kills waiting: no worker is left to kill.
    func answerAimedKillsAtExit(in host: any WindowHost) {
        for aimed in aimedKills {
            host.answer(aimed.client, Self.noWorker(id))
        }
        aimedKills = []
    }
}
