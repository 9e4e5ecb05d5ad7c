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

/// Control requests routed: the supervisor's own answered here, a window's handed to its
/// controller (`WindowController+Requests`); `kill`, aimed at a save in flight, is sent here.
extension Supervisor {
    func takeRequestID() -> UInt64 {
        defer { nextRequest += 1 }
        return nextRequest
    }

    // MARK: control socket

    /// Replies through the control server: queued, sent as the client reads, then closed.
    func answer(_ id: ClientID, _ reply: ControlReply) {
        control.answer(id, reply)
    }

    func handle(_ request: ControlRequest, from client: ClientID) {
        configuration.observation?.counted(request.verb)
        switch request {
        case .status:
            answer(client, .ok(statusReply()))
        case .stats(let histogram):
            answer(client, .ok(statsReply(withHistogram: histogram)))
        case .connect:
            if shutdownDeadline != nil {
                answer(client, .failure(.temporary, "shutting down"))
            } else if connectScene(waiter: client) == nil {
                answer(client, .failure(.temporary, "all \(configuration.capacity) window slots are in use"))
            }
        case .shutdown:
            answer(client, .ok(ShutdownReply(stopping: true)))
            beginShutdown()
        case .window(let id, let asked):
            handle(asked, window: id, from: client)
        case .setAside:
            listSetAside(for: client)
        case .adopt(let entry, let asNewWindow):
            adopt(entry, asNewWindow: asNewWindow, for: client)
        case .discard(let entry):
            discard(entry, for: client)
        case .closeWindow(let id):
            closeWindow(id, for: client)
        }
    }

    /// A request to one open window, routed by its UUID: a `kill` is aimed here, the rest are
    /// the window's own.
    func handle(_ request: WindowRequest, window id: UUID, from client: ClientID) {
        guard let window = windows.values.first(where: { $0.id == id }) else {
            answer(client, .failure(.badData, "no open window \(id)"))
            return
        }
        assert(windows[window.slot] === window, "a window is held in its own slot")
        guard case .kill(let signal, let wait, let aim) = request else {
            return window.handle(request, from: client, in: self)
        }
        kill(window.slot, KillRequest(signal: signal, wait: wait, aim: aim), client)
    }

    /// What a `kill` asks (`WindowRequest.kill`), kept while an aimed one waits.
    struct KillRequest {
        let signal: Int32
        let wait: Bool
        let aim: Bool
    }

    func kill(_ slot: Int, _ request: KillRequest, _ client: ClientID, aimedUntil: UInt64? = nil) {
        guard let window = windows[slot], window.isLive else {
            answer(
                client,
                .failure(
                    .temporary, "window \(windows[slot]?.id.uuidString ?? "?") has no worker now (restarting); retry"))
            return
        }
        let signal = request.signal
        let label = SignalName.name(signal)
        // What the worker's slot shows, read without a round trip.
        let whileSaving = region.slot(slot).savingSeq > 0
        if request.aim, !whileSaving {
            // Aimed at a save in flight: the loop looks again each millisecond, for 50 ms.
            let deadline = aimedUntil ?? monotonicNanoseconds() + 50_000_000
            if monotonicNanoseconds() < deadline {
                aimedKills.append(AimedKill(slot: slot, request: request, client: client, deadline: deadline))
                return
            }
        }
        do throws(Errno) {
            try window.worker?.signal(signal)
        } catch {
            answer(client, .failure(.software, "pidfd_send_signal: \(error)"))
            return
        }
        logger.info(
            "killing a worker on request",
            metadata: ["window": "\(window.id)", "pid": "\(window.pid)", "signal": "\(label)"])
        guard !SignalName.ignoredByDefault.contains(signal) else {
            // Its default action is to ignore: waiting for a restart would be forever.
            answer(
                client,
                .ok(
                    KillReply(
                        window: window.id.uuidString, killedPid: window.pid, whileSaving: whileSaving, signal: label,
                        restartExpected: false)))
            return
        }
        window.dispatch(.killRequested, in: self)
        if !request.wait {
            answer(
                client, .ok(KillReply(window: window.id.uuidString, killedPid: window.pid, whileSaving: whileSaving)))
        } else {
            // A stopped worker is the watchdog's to kill: the wait covers its period too.
            let wait =
                Window.killWaitNanoseconds
                + (SignalName.stopping.contains(signal) ? configuration.watchdogMilliseconds * 1_000_000 : 0)
            window.readyWaiters.append(
                .restart(
                    client, oldPID: window.pid, whileSaving: whileSaving, signal: label,
                    deadline: monotonicNanoseconds() + wait))
        }
    }

    /// A `kill --aim` waiting for its window's slot to show a save in flight.
    struct AimedKill {
        let slot: Int
        let request: KillRequest
        let client: ClientID
        let deadline: UInt64
    }

    /// Each turn of the loop: an aimed kill whose save started, or whose 50 ms passed, is sent.
    func retryAimedKills() {
        let waiting = aimedKills
        aimedKills = []
        for aimed in waiting { kill(aimed.slot, aimed.request, aimed.client, aimedUntil: aimed.deadline) }
    }
}
