import BrowserModel
import Foundation
import HostControl
import HostCoordination
import HostLimits
import Platform
import SessionStore

/// What the window's worker publishes and answers: its stats read from the slot (untrusted:
/// checked, a violation kills the worker), its readiness, and its replies matched to the
/// requests pending.
extension WindowController {
    /// Everything the worker published since the last look: readiness, replies, durable seqs.
    /// True when its reply ring still holds replies past this turn's budget.
    func service(in host: any WindowHost) -> Bool {
        let view = host.sharedSlot(slot)
        guard !killedForMisbehaving else { return false }
        if isLive, let stats = view.readStats() {
            if let violation = stats.violation {
                misbehaved(violation, in: host)
                return false
            }
            accept(stats)
        }
        let justReady =
            isLive && lifecycle.state == .starting && view.readyGeneration == generation
        if justReady, floorProbe == nil { becameReady(in: host) }
        let repliesLeft = drainReplies(budget: .perTurn, in: host)
        seqs.apply(lastStats.appliedSeq)
        let durable = lastStats.durableSeq
        assert(durable <= seqs.applied, "stats are accepted only with durable ≤ applied (`violation`)")
        let failures = view.saveFailures
        let (done, failed) = takeDurableWaiters(
            durable: durable, saveFailures: failures, failing: failures > 0 && lastStats.failingErrno != 0)
        if justReady { afterRestore(in: host) }
        for waiter in done { host.answer(waiter.client, durableAnswer(durable: durable, target: waiter.seq)) }
        for waiter in failed { host.answer(waiter.client, .failure(.ioError, saveFailureMessage)) }
        return repliesLeft
    }

    /// The worker restored the window: a background scene is told again, so its saves follow
    /// case 1; an adopted session saves; a window whose floors are probed asks its worker what
    /// it restored.
    private func afterRestore(in host: any WindowHost) {
        switch floorProbe {
        case nil:
            if inBackground { _ = send(.scene(.background), client: nil, in: host) }
            // The adopted window restored: it saves now, and the adoption ends once that is durable.
            if adoption != nil { _ = send(.adoptionSave, client: nil, in: host) }
        case .needed?:
            if send(.floorProbe, client: nil, in: host) { dispatch(.probeAsked, in: host) }
        case .asked?:
            break
        }
    }

    /// A worker broke the protocol: it is killed, and its death is handled as a crash (before
    /// ready, a failed start: repeated, the window is set aside). Nothing of it is trusted
    /// meanwhile.
    func misbehaved(_ violation: String, in host: any WindowHost) {
        guard isLive, !killedForMisbehaving else { return }
        host.logger.error(
            "worker misbehaved: killed", metadata: ["window": "\(id)", "pid": "\(pid)", "violation": "\(violation)"])
        dispatch(.misbehaved, in: host)
        assert(killedForMisbehaving, "a misbehaving worker is killed")
    }

    func becameReady(in host: any WindowHost) {
        let now = monotonicNanoseconds()
        let view = host.sharedSlot(slot)
        assert(worker.map { $0.pidfd >= 0 } == true, "a ready window has a live pidfd")
        restoreFailedOnStorage = nil
        startWatching(heartbeat: view.heartbeat, now: now)
        dispatch(.becameReady, in: host)
        assert(lifecycle.state == .ready && workerRestored, "a restored window whose floors need no probe is ready")
        if let stats = view.readStats(), stats.violation == nil { accept(stats) }
        nameWhatRestoreLost(in: host)
        if let died = diedAt {
            lastRecoveryNanoseconds = now - died
            host.configuration.observation?.recovered(id, nanoseconds: now - died, at: host.secondsSinceStart(now))
        }
        diedAt = nil
        if !configured {
            configured = true
            host.configured(self)
        }
        host.logger.info("window ready", metadata: ["window": "\(id)", "pid": "\(pid)", "seq": "\(seqs.applied)"])
        let waiters = readyWaiters
        readyWaiters = []
        for waiter in waiters {
            switch waiter {
            case .connect(let client):
                host.answer(client, .ok(ConnectReply(window: id.uuidString, pid: pid)))
            case .restart(let client, var reply, _, _):
                (reply.pid, reply.recoveryMs) = (pid, Double(lastRecoveryNanoseconds ?? 0) / 1e6)
                host.answer(client, .ok(reply))
            }
        }
    }

    /// What the window restored sets its seqs (`restored`): a lost range it contradicts is
    /// logged, and the seqs a client may have seen above it are named lost.
    private func nameWhatRestoreLost(in host: any WindowHost) {
        let (contradicted, lostAboveRestored) = restored()
        if let contradicted {
            let believed = adoption != nil ? "only that seq is taken out (an adopted session)" : "not believed"
            host.logger.error(
                "lost seqs \(contradicted.lowerBound)…\(contradicted.upperBound) hold the seq the window restored: \(believed)",
                metadata: ["window": "\(id)", "seq": "\(seqs.applied)"])
        }
        // Seqs a client may have seen above what it restored named commands lost with the last
        // worker: waits for them end here (a wait asked while no worker ran still had the dead
        // one's seq, and waited for a save that never comes), and no durable answer covers them.
        guard let lost = lostAboveRestored else { return }
        // Kept for the supervisors after this one (a failed write is logged; the next one,
        // at the window's next raise of its ceiling, carries them).
        _ = host.recordHandedOut(self, covering: .zero)
        for waiter in takeDurableWaiters(above: seqs.applied) {
            host.answer(waiter.client, .failure(.temporary, Self.lostMessage(lost)))
        }
    }

    /// What the probing worker restored sets the window's floors a `fallbackJump` above it, kept
    /// in `handed-out`; the worker is then replaced (a requested kill: no failed start counted)
    /// by one numbering above them, whose `becameReady` names the jump lost.
    func probeFloors(_ dump: WindowDump, in host: any WindowHost) {
        let tabs = (dump.regular.tabs + dump.incognito.tabs).map(\.id)
        guard Limits.isValidCommandSeq(dump.appliedSeq), tabs.allSatisfy({ (1...Limits.maxWebStateID).contains($0) })
        else {
            misbehaved(
                "a dump with applied seq \(dump.appliedSeq) or a tab id outside 1...\(Limits.maxWebStateID)", in: host)
            return
        }
        let jump = HandedOutCeiling.fallbackJump
        seqs.jumpFloors(restoredSeq: dump.appliedSeq, restoredTab: tabs.max() ?? 0, by: jump)
        _ = host.recordHandedOut(self, covering: HandedOutCeiling(seq: seqs.floor, tab: seqs.tab))
        host.logger.warning(
            "no \(DiskLayout.handedOut) entry to trust: the window numbers \(jump) above what it restored; its worker restarts with those floors",
            metadata: ["window": "\(id)", "seq_floor": "\(seqs.floor)", "tab_floor": "\(seqs.tab)"])
        dispatch(.floorsProbed, in: host)
    }
}
