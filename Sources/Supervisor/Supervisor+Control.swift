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

/// Control requests: each one checked against the window's state, sent to its worker through
/// the command ring, and answered when the reply comes.
extension Supervisor {
    func takeRequestID() -> UInt64 {
        defer { nextRequest += 1 }
        return nextRequest
    }

    /// Puts what `kind` asks to the worker's ring, its reply awaited as `kind`. False when it
    /// cannot be sent now.
    func send(_ kind: Pending.Kind, to slot: Int, client: ClientID?) -> Bool {
        guard let window = windows[slot], let doorbell = window.worker?.doorbell else { return false }
        let request = takeRequestID()
        guard let bytes = try? kind.command.message(request: request).serializedBytes() as [UInt8],
            (try? region.slot(slot).commandRing.send(bytes)) != nil
        else {
            return false
        }
        window.pending[request] = Pending(client: client, kind: kind, failuresBefore: region.slot(slot).saveFailures)
        doorbell.ring()
        return true
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

    func handle(_ request: WindowRequest, window id: UUID, from client: ClientID) {
        guard let slot = windows.first(where: { $0.value.id == id })?.key, let window = windows[slot] else {
            answer(client, .failure(.badData, "no open window \(id)"))
            return
        }
        let kind: Pending.Kind
        switch request {
        case .kill(let signal, let wait, let aim):
            kill(slot, KillRequest(signal: signal, wait: wait, aim: aim), client)
            return
        case .waitDurable(let seq):
            let target = seq ?? window.seqs.applied
            if let lost = window.seqs.lost.range(holding: target) {
                answer(client, .failure(.temporary, Window.lostMessage(lost)))
                return
            }
            if target > window.seqs.highest {
                answer(
                    client,
                    .failure(
                        .badData, "window \(id) has no command \(target) yet: its highest seq is \(window.seqs.highest)"
                    ))
                return
            }
            if window.lastStats.durableSeq >= target {
                answer(client, window.durableAnswer(durable: window.lastStats.durableSeq, target: target))
                return
            }
            if let refusal = window.failedRestoreReply {
                answer(client, refusal)
                return
            }
            let failures = region.slot(slot).saveFailures
            windows[slot]?.durableWaiters.append(DurableWaiter(seq: target, client: client, failuresBefore: failures))
            // Saves are failing: a durable wait is an explicit request, so the worker tries again
            // now rather than after its backoff; the wait ends with that attempt.
            if window.lastStats.failingErrno != 0, window.isReady {
                _ = send(.save(wait: false), to: slot, client: nil)
            }
            return
        case .scene(.disconnect) where !window.isReady:
            // Gone before it finished configuring (or while restarting): the worker is stopped
            // and a reservation that never configured is released.
            windows[slot]?.exitWaiters.append(client)
            dispatch(slot, .disconnectRequested, description: "stopped before it was ready")
            return
        case .tab(let command): kind = .tab(command)
        case .scene(let change): kind = .scene(change)
        case .save(let wait): kind = .save(wait: wait)
        case .dump: kind = .dump
        }
        guard window.isReady else {
            let refusal = kind.command == .save ? window.failedRestoreReply : nil
            answer(
                client, refusal ?? .failure(.temporary, "window \(id) is \(window.state) (worker restarting); retry"))
            return
        }
        // A full Browser refuses here, before a seq is taken, from what the worker published
        // after its last command; the list's own refusal is the backstop for opens in flight.
        if case .tab(.open(_, let incognito, _, _, _)) = request {
            let tabs = incognito ? window.lastStats.incognitoTabs : window.lastStats.regularTabs
            if UInt64(tabs) >= UInt64(Limits.maxTabsPerBrowser) {
                answer(
                    client,
                    .failure(
                        .badData,
                        "the Browser already holds \(tabs) tabs, the most a Browser holds (Limits.maxTabsPerBrowser \(Limits.maxTabsPerBrowser))"
                    ))
                return
            }
        }
        guard reserveSeq(for: kind, window, client) else { return }
        guard send(kind, to: slot, client: client) else {
            answer(client, .failure(.temporary, "the worker's command ring is full; retry"))
            return
        }
        if kind == .scene(.disconnect) {
            dispatch(slot, .disconnectRequested, description: "disconnected")
        }
    }

    /// Records, before `kind` is sent, the seq (and tab id) it may take, so no reply shows one
    /// above what `handed-out` holds: the highest the worker can reach with every change in
    /// flight applied. A tab command past `Limits.maxCommandSeq` is refused; a foreground there
    /// goes unstamped and needs nothing. False when `client` was answered with a refusal. Both
    /// seqs are at most `Limits.maxCommandSeq`, so the sum cannot overflow.
    private func reserveSeq(for kind: Pending.Kind, _ window: Window, _ client: ClientID) -> Bool {
        guard kind.mayTakeSeq else { return true }
        let inFlight = window.pending.values.filter(\.kind.mayTakeSeq)
        let base = max(window.seqs.applied, window.seqs.floor) + UInt64(inFlight.count)
        guard base < Limits.maxCommandSeq else {
            guard case .tab = kind else { return true }
            answer(client, .failure(.seqExhausted, Window.seqExhaustedMessage(window.id)))
            return false
        }
        let newTabs = inFlight.filter(\.kind.createsTab).count + (kind.createsTab ? 1 : 0)
        let needed = HandedOutCeiling(seq: base + 1, tab: min(window.seqs.tab + Int64(newTabs), Limits.maxWebStateID))
        if let failure = recordHandedOut(window, covering: needed) {
            answer(
                client,
                .failure(
                    .ioError,
                    "cannot record the seqs window \(window.id) may hand out (\(RootLayout.handedOut)), so the command was not sent: \(failure)"
                ))
            return false
        }
        return true
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
        dispatch(slot, .killRequested)
        if !request.wait {
            answer(
                client, .ok(KillReply(window: window.id.uuidString, killedPid: window.pid, whileSaving: whileSaving)))
        } else {
            // A stopped worker is the watchdog's to kill: the wait covers its period too.
            let wait =
                Self.killWaitNanoseconds
                + (SignalName.stopping.contains(signal) ? configuration.watchdogMilliseconds * 1_000_000 : 0)
            window.readyWaiters.append(
                .restart(
                    client, oldPID: window.pid, whileSaving: whileSaving, signal: label,
                    deadline: monotonicNanoseconds() + wait))
        }
    }

    /// How long a `kill` waits for the signalled worker to die (one that catches the signal,
    /// like SEGV under a handler, never does) before it is answered 75; after a signal that
    /// stops it, the watchdog's period more.
    static let killWaitNanoseconds: UInt64 = 5_000_000_000

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
