import BrowserModel
import Foundation
import HostControl
import HostCoordination
import HostLimits
import SessionStore

/// A control client's request to this window: checked against the window's state, sent to its
/// worker, and answered when the reply comes (`WindowController+Replies`).
extension WindowController {
    /// `request` from `client`.
    func handle(_ request: WindowRequest, from client: ClientID, in host: any WindowHost) {
        // A move under way holds what could undo it, restarting or not (`MoveCoordinator`).
        if host.movesTake(request, to: self, from: client) { return }
        let kind: Pending.Kind
        switch request {
        case .kill(let signal, let wait, let aim):
            kill(KillRequest(signal: signal, wait: wait, aim: aim), client, in: host)
            return
        case .waitDurable(let seq):
            waitDurable(seq ?? seqs.applied, for: client, in: host)
            return
        case .scene(.disconnect) where !isReady:
            // Gone before it finished configuring (or while restarting): the worker is stopped
            // and a reservation that never configured is released.
            exitWaiters.append(client)
            dispatch(.disconnectRequested, description: "stopped before it was ready", in: host)
            return
        case .tab(let command): kind = .tab(command)
        case .scene(let change): kind = .scene(change)
        case .save(let wait): kind = .save(wait: wait)
        case .dump: kind = .dump
        }
        guard isReady else {
            let refusal = kind.command == .save ? failedRestoreReply : nil
            host.answer(client, refusal ?? .failure(.temporary, "window \(id) is \(state) (worker restarting); retry"))
            return
        }
        if let refusal = tabLimitRefusal(request) { return host.answer(client, refusal) }
        guard reserveSeq(for: kind, client, in: host) else { return }
        guard send(kind, client: client, in: host) else {
            host.answer(client, .failure(.temporary, "the worker's command ring is full; retry"))
            return
        }
        if kind == .scene(.disconnect) { dispatch(.disconnectRequested, description: "disconnected", in: host) }
    }

    /// A full Browser refuses an open here, before a seq is taken, from what the worker
    /// published after its last command; the list's own refusal is the backstop for opens in
    /// flight.
    private func tabLimitRefusal(_ request: WindowRequest) -> ControlReply? {
        guard case .tab(.open(_, let incognito, _, _, _)) = request else { return nil }
        let tabs = incognito ? lastStats.incognitoTabs : lastStats.regularTabs
        guard UInt64(tabs) >= UInt64(Limits.maxTabsPerBrowser) else { return nil }
        return .failure(
            .badData,
            "the Browser already holds \(tabs) tabs, the most a Browser holds (Limits.maxTabsPerBrowser \(Limits.maxTabsPerBrowser))"
        )
    }

    /// `wait-durable` up to `target`: answered now when it is lost, unknown, durable or its
    /// restore failed on storage; else waited for.
    private func waitDurable(_ target: UInt64, for client: ClientID, in host: any WindowHost) {
        if let lost = seqs.lost.range(holding: target) {
            return host.answer(client, .failure(.temporary, Self.lostMessage(lost)))
        }
        if target > seqs.highest {
            return host.answer(
                client,
                .failure(.badData, "window \(id) has no command \(target) yet: its highest seq is \(seqs.highest)"))
        }
        if lastStats.durableSeq >= target {
            return host.answer(client, durableAnswer(durable: lastStats.durableSeq, target: target))
        }
        if let refusal = failedRestoreReply { return host.answer(client, refusal) }
        let failures = host.sharedSlot(slot).saveFailures
        durableWaiters.append(DurableWaiter(seq: target, client: client, failuresBefore: failures))
        // Saves are failing: a durable wait is an explicit request, so the worker tries again
        // now rather than after its backoff; the wait ends with that attempt.
        if lastStats.failingErrno != 0, isReady { _ = send(.save(wait: false), client: nil, in: host) }
    }

    /// Records, before `kind` is sent, the seq (and tab id) it may take, so no reply shows one
    /// above what `handed-out` holds: the highest the worker can reach with every change in
    /// flight applied. A tab command past `Limits.maxCommandSeq` is refused; a foreground there
    /// goes unstamped and needs nothing. False when `client` was answered with a refusal. Both
    /// seqs are at most `Limits.maxCommandSeq`, so the sum cannot overflow.
    private func reserveSeq(for kind: Pending.Kind, _ client: ClientID?, in host: any WindowHost) -> Bool {
        guard kind.mayTakeSeq else { return true }
        let inFlight = pending.values.filter(\.kind.mayTakeSeq)
        let base = max(seqs.applied, seqs.floor) + UInt64(inFlight.count)
        guard base < Limits.maxCommandSeq else {
            guard case .tab = kind else { return true }
            if let client { host.answer(client, .failure(.seqExhausted, Self.seqExhaustedMessage(id))) }
            return false
        }
        let newTabs = inFlight.filter(\.kind.createsTab).count + (kind.createsTab ? 1 : 0)
        let needed = HandedOutCeiling(seq: base + 1, tab: min(seqs.tab + Int64(newTabs), Limits.maxWebStateID))
        if let failure = host.recordHandedOut(self, covering: needed) {
            guard let client else { return false }
            host.answer(
                client,
                .failure(
                    .ioError,
                    "cannot record the seqs window \(id) may hand out (\(DiskLayout.handedOut)), so the command was not sent: \(failure)"
                ))
            return false
        }
        return true
    }

    /// Sends a step of a move between windows (`MoveCoordinator`, no client's), its seq and tab id
    /// reserved first as a tab command's are. False when it cannot be sent now.
    func sendMoveStep(_ step: MoveStep, in host: any WindowHost) -> Bool {
        guard isReady else { return false }
        let kind = Pending.Kind.move(step)
        guard reserveSeq(for: kind, nil, in: host) else { return false }
        return send(kind, client: nil, in: host)
    }

    /// Whether a move's export sent to this worker is still unanswered.
    var owesMoveExport: Bool {
        pending.values.contains {
            if case .move(.export) = $0.kind { true } else { false }
        }
    }

    /// `close-window` of this open window: it disconnects (it saves), then is deleted.
    func closeForGood(for client: ClientID, in host: any WindowHost) {
        guard isReady, closingForGood == nil, exitWaiters.isEmpty else {
            return host.answer(
                client, .failure(.temporary, "window \(id) is \(state); retry once it is ready or closed"))
        }
        guard send(.scene(.disconnect), client: nil, in: host) else {
            return host.answer(client, .failure(.temporary, "the worker's command ring is full; retry"))
        }
        closingForGood = client
        dispatch(.disconnectRequested, description: "closed for good", in: host)
    }
}
