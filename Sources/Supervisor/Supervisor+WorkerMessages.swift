import BrowserModel
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
import SessionFormat
import SessionStore
import SystemPackage

/// What the workers publish and answer: stats read from shared memory (untrusted: checked,
/// a violation kills the worker), readiness, and replies matched to the requests pending.
extension Supervisor {
    /// Everything workers published since the last look: readiness, replies, durable seqs.
    func serviceWorkers() {
        repliesLeft = false
        for slot in windows.keys.sorted() {
            guard let window = windows[slot] else { continue }
            let view = region.slot(slot)
            guard !window.killedForMisbehaving else { continue }
            if window.isLive, let stats = view.readStats() {
                if let violation = Self.violation(in: stats) {
                    misbehaved(window, violation)
                    continue
                }
                window.accept(stats)
            }
            let justReady =
                window.isLive && window.readyAt == nil && window.lifecycle.state == .starting
                && view.readyGeneration == window.generation
            if justReady, window.floorProbe == nil { becameReady(window) }
            if drainReplies(window, budget: .perTurn) { repliesLeft = true }
            window.seqs.apply(window.lastStats.appliedSeq)
            let durable = window.lastStats.durableSeq
            assert(durable <= window.seqs.applied, "stats are accepted only with durable ≤ applied (`violation`)")
            let failures = view.saveFailures
            let (done, failed) = window.takeDurableWaiters(
                durable: durable, saveFailures: failures, failing: failures > 0 && window.lastStats.failingErrno != 0)
            // A restarted background scene is told again, so its saves follow case 1.
            if justReady, window.floorProbe == nil, window.inBackground {
                _ = send(.scene(.background), to: slot, client: nil)
            }
            if justReady, window.floorProbe == nil { adoptionRestored(slot) }
            if justReady, window.floorProbe == .needed, send(.floorProbe, to: slot, client: nil) {
                dispatch(slot, .probeAsked)
            }
            for waiter in done { answer(waiter.client, window.durableAnswer(durable: durable, target: waiter.seq)) }
            for waiter in failed { answer(waiter.client, .failure(.ioError, window.saveFailureMessage)) }
        }
    }

    /// The slot's stats now, unless they are impossible (`violation`): reports show only stats
    /// the supervisor would act on.
    func checkedStats(_ view: WindowSlot) -> WorkerStats? {
        view.readStats().flatMap { Self.violation(in: $0) == nil ? $0 : nil }
    }

    /// What makes a dump impossible, if anything: numbers a client's tools compute with are
    /// within the model's bounds before any reply shows them.
    static func violation(in dump: WindowDump) -> String? {
        for tab in dump.regular.tabs + dump.incognito.tabs {
            guard (0...Int32(Limits.maxNavigationEntries)).contains(tab.historyCount) else {
                return
                    "tab \(tab.id) with \(tab.historyCount) history entries, outside 0...\(Limits.maxNavigationEntries)"
            }
            guard !tab.hasHistoryIndex || (0..<tab.historyCount).contains(tab.historyIndex) else {
                return "tab \(tab.id) at history entry \(tab.historyIndex) of \(tab.historyCount)"
            }
        }
        return nil
    }

    /// What makes a worker's published stats impossible, if anything: a worker that publishes
    /// them misbehaves (a bug, or damage it read and did not refuse).
    static func violation(in stats: WorkerStats) -> String? {
        guard Limits.isValidCommandSeq(stats.appliedSeq) else {
            return "applied seq \(stats.appliedSeq) above \(Limits.maxCommandSeq)"
        }
        guard stats.durableSeq <= stats.appliedSeq else {
            return "durable seq \(stats.durableSeq) above applied seq \(stats.appliedSeq)"
        }
        guard JournalWrites(rawValue: stats.journalWrites) != nil else {
            return "journal writes \(stats.journalWrites), no such mode"
        }
        guard IncognitoStorage(rawValue: stats.incognitoStorage) != nil else {
            return "incognito storage \(stats.incognitoStorage), no such mode"
        }
        guard stats.memoryOnlySince <= stats.appliedSeq else {
            return "memory-only seq \(stats.memoryOnlySince) above applied seq \(stats.appliedSeq)"
        }
        return nil
    }

    /// A worker broke the protocol: it is killed, and its death is handled as a crash (before
    /// ready, a failed start: repeated, the window is set aside). The supervisor trusts nothing
    /// of it meanwhile.
    func misbehaved(_ window: Window, _ violation: String) {
        guard window.isLive, !window.killedForMisbehaving else { return }
        logger.error(
            "worker misbehaved: killed",
            metadata: ["window": "\(window.id)", "pid": "\(window.pid)", "violation": "\(violation)"])
        dispatch(window.slot, .misbehaved)
    }

    func noteKeptUnsaved(_ window: UUID, _ reason: String) {
        keptUnsaved.append((window, reason))
    }

    func becameReady(_ window: Window) {
        let now = monotonicNanoseconds()
        let view = region.slot(window.slot)
        assert(window.worker.map { $0.pidfd >= 0 } == true, "a ready window has a live pidfd")
        window.readyAt = now
        window.restoreFailedOnStorage = nil
        window.startWatching(heartbeat: view.heartbeat, now: now)
        dispatch(window.slot, .becameReady)
        if let stats = view.readStats(), Self.violation(in: stats) == nil { window.accept(stats) }
        let (contradicted, lostAboveRestored) = window.restored()
        if let contradicted {
            let believed = window.adoption != nil ? "only that seq is taken out (an adopted session)" : "not believed"
            logger.error(
                "lost seqs \(contradicted.lowerBound)…\(contradicted.upperBound) hold the seq the window restored: \(believed)",
                metadata: ["window": "\(window.id)", "seq": "\(window.seqs.applied)"])
        }
        // Seqs a client may have seen above what it restored named commands lost with the last
        // worker: waits for them end here (a wait asked while no worker ran still had the dead
        // one's seq, and waited for a save that never comes), and no durable answer covers them.
        if let lost = lostAboveRestored {
            // Kept for the supervisors after this one (a failed write is logged; the next one,
            // at the window's next raise of its ceiling, carries them).
            _ = recordHandedOut(window)
            for waiter in window.takeDurableWaiters(above: window.seqs.applied) {
                answer(waiter.client, .failure(.temporary, Window.lostMessage(lost)))
            }
        }
        if let died = window.diedAt {
            window.lastRecoveryNanoseconds = now - died
            configuration.observation?.recovered(window.id, nanoseconds: now - died, at: secondsSinceStart(now))
        }
        window.diedAt = nil
        if !window.configured {
            window.configured = true
            registry.configured(window.id)
            saveOrder()
            if initialScenesPending > 0 { initialScenesPending -= 1 }
        }
        logger.info(
            "window ready",
            metadata: ["window": "\(window.id)", "pid": "\(window.pid)", "seq": "\(window.seqs.applied)"])
        let waiters = window.readyWaiters
        window.readyWaiters = []
        for waiter in waiters {
            switch waiter {
            case .connect(let client):
                answer(client, .ok(ConnectReply(window: window.id.uuidString, pid: window.pid)))
            case .restart(let client, let oldPID, let whileSaving, _, _):
                answer(
                    client,
                    .ok(
                        KillReply(
                            window: window.id.uuidString, killedPid: oldPID, whileSaving: whileSaving, pid: window.pid,
                            recoveryMs: Double(window.lastRecoveryNanoseconds ?? 0) / 1e6)))
            }
        }
    }

    /// What the probing worker restored sets the window's floors a `fallbackJump` above it, kept
    /// in `handed-out`; the worker is then replaced (a requested kill: no failed start counted)
    /// by one numbering above them, whose `becameReady` names the jump lost.
    func probeFloors(_ dump: WindowDump, _ window: Window) {
        let tabs = (dump.regular.tabs + dump.incognito.tabs).map(\.id)
        guard Limits.isValidCommandSeq(dump.appliedSeq), tabs.allSatisfy({ (1...Limits.maxWebStateID).contains($0) })
        else {
            misbehaved(
                window, "a dump with applied seq \(dump.appliedSeq) or a tab id outside 1...\(Limits.maxWebStateID)")
            return
        }
        let jump = HandedOutCeiling.fallbackJump
        window.seqs.jumpFloors(restoredSeq: dump.appliedSeq, restoredTab: tabs.max() ?? 0, by: jump)
        _ = recordHandedOut(window, covering: HandedOutCeiling(seq: window.seqs.floor, tab: window.seqs.tab))
        logger.warning(
            "no \(RootLayout.handedOut) entry to trust: the window numbers \(jump) above what it restored; its worker restarts with those floors",
            metadata: [
                "window": "\(window.id)", "seq_floor": "\(window.seqs.floor)", "tab_floor": "\(window.seqs.tab)",
            ])
        dispatch(window.slot, .floorsProbed)
    }

    /// What one window's replies may cost one turn of the loop: past either bound the rest
    /// wait in its ring for the next turn, so no worker (a compromised one's junk, or twenty
    /// dumps of a big window) holds up other windows' clients and deaths. The reply that
    /// crosses the byte bound is still handled: every turn makes progress.
    struct ReplyBudget {
        let replies: Int
        let bytes: Int

        static let perTurn = ReplyBudget(replies: 64, bytes: 256 * 1024)
    }

    /// Handles the replies in the window's ring, within `budget`: true when it ran out (the
    /// ring may hold more). A reply too long for one message comes in parts, assembled across
    /// turns (`ReplyAssembly`, each part counted against the budget). A message that does not
    /// decode, parts out of order, or a reply to a request this worker was not sent or has
    /// answered (`pending` holds every request sent to the worker now serving and not yet
    /// answered: its ring starts empty, and its predecessor's are answered at its death), is a
    /// protocol violation.
    func drainReplies(_ window: Window, budget: ReplyBudget) -> Bool {
        let ring = region.slot(window.slot).replyRing
        var (replies, bytesRead) = (0, 0)
        while replies < budget.replies, bytesRead < budget.bytes {
            let bytes: [UInt8]
            do {
                guard let next = try ring.receive() else { return false }
                bytes = next
            } catch {
                // Killed once (not on every turn until it is reaped), its death handled as a crash.
                misbehaved(window, "reply ring corrupt: \(error)")
                return false
            }
            replies += 1
            bytesRead += bytes.count
            guard let message = try? WorkerReply(serializedBytes: bytes) else {
                misbehaved(window, "a reply of \(bytes.count) bytes that does not decode")
                return false
            }
            let reply: WorkerReply
            do {
                guard let whole = try window.assembly.take(message, pending: window.pending[message.request] != nil)
                else { continue }
                reply = whole
            } catch {
                misbehaved(window, "\(error)")
                return false
            }
            guard let pending = window.pending.removeValue(forKey: reply.request) else {
                misbehaved(window, "a reply to request \(reply.request), which it was not sent or has answered")
                return false
            }
            handleReply(reply, pending, window)
        }
        return true
    }

    func handleReply(_ reply: WorkerReply, _ pending: Pending, _ window: Window) {
        switch reply.outcome {
        case .failure(let failure) where pending.kind.isDisconnect:
            logger.error(
                "disconnect failed: the window goes on serving with its unsaved changes",
                metadata: ["window": "\(window.id)", "error": "\(failure.message)"])
            if pending.kind == .shutdownDisconnect || shutdownDeadline != nil {
                // Stopping anyway: the worker goes, and the exit status says what was lost.
                noteKeptUnsaved(window.id, failure.message)
            }
            // The worker could not save and goes on serving: so does the window (killed if stopping).
            dispatch(window.slot, .disconnectFailed, description: "could not save for its disconnect")
            if let client = pending.client {
                answer(
                    client,
                    .failure(
                        failure.kind == .io ? .ioError : .badData,
                        "disconnect failed; the window goes on serving: \(failure.message)"))
            }
            if let client = window.closingForGood {
                window.closingForGood = nil
                answer(
                    client,
                    .failure(
                        .ioError,
                        "window \(window.id) could not save on its way out; it goes on serving, whole: \(failure.message)"
                    ))
            }
        case .failure(let failure):
            if let client = pending.client {
                answer(client, .failure(failure.kind == .io ? .ioError : .badData, failure.message))
            }
        case .dump(let dump) where pending.kind == .floorProbe:
            probeFloors(dump, window)
        case .dump(let dump):
            if let violation = Self.violation(in: dump) {
                if let client = pending.client {
                    answer(client, .failure(.software, "the worker misbehaved; it is restarting"))
                }
                misbehaved(window, violation)
                return
            }
            // A client gone costs no conversion (a dump may be thousands of tabs).
            if let client = pending.client, control.isConnected(client) {
                answer(client, .ok(Self.dumpReply(dump, window: window.id)))
            }
        case .done(let done):
            handleDone(done, request: reply.request, pending, window)
        case .none:
            if let client = pending.client { answer(client, .failure(.software, "an empty reply from the worker")) }
        case .part:
            // `ReplyAssembly` hands on whole replies only.
            assertionFailure("a part reached handleReply")
            if let client = pending.client { answer(client, .failure(.software, "a reply part out of its assembly")) }
        }
    }

    /// A command done: its seq (and tab id) checked, recorded and shown, and its client answered
    /// as what it asked decides.
    func handleDone(_ done: CommandDone, request: UInt64, _ pending: Pending, _ window: Window) {
        guard Limits.isValidCommandSeq(done.appliedSeq) else {
            if let client = pending.client {
                answer(client, .failure(.software, "the worker misbehaved; it is restarting"))
            }
            misbehaved(window, "reply with applied seq \(done.appliedSeq) above \(Limits.maxCommandSeq)")
            return
        }
        if done.hasTab, !(1...Limits.maxWebStateID).contains(done.tab) {
            if let client = pending.client {
                answer(client, .failure(.software, "the worker misbehaved; it is restarting"))
            }
            misbehaved(window, "reply with tab id \(done.tab) outside 1...\(Limits.maxWebStateID)")
            return
        }
        window.seqs.apply(done.appliedSeq)
        // A new tab's id above what `handle` reserved (the worker restored tabs with higher
        // ids than any reply showed): recorded before the reply shows it, or not shown.
        if done.hasTab {
            window.seqs.showTab(done.tab)
            if let failure = recordHandedOut(window, covering: HandedOutCeiling(seq: done.appliedSeq, tab: done.tab)) {
                if let client = pending.client {
                    answer(
                        client,
                        .failure(
                            .ioError,
                            "window \(window.id) applied the command, but its tab id cannot be recorded, so it is not shown: \(failure)"
                        ))
                }
                return
            }
        }
        var result = CommandReply(
            window: window.id.uuidString, seq: window.seqs.show(done.appliedSeq), tab: done.hasTab ? done.tab : nil)
        switch pending.kind {
        case .scene(.background), .scene(.foreground):
            dispatch(window.slot, .sceneChanged(pending.kind == .scene(.background) ? .background : .foreground))
            result.state = window.state.description
        case .scene(.disconnect):
            // Answered when the worker has exited.
            window.pending[request] = pending
            return
        case .adoptionSave:
            window.adoption?.savedSeq = done.appliedSeq
            return
        case .save(wait: true):
            if let client = pending.client {
                window.durableWaiters.append(
                    DurableWaiter(seq: done.appliedSeq, client: client, failuresBefore: pending.failuresBefore))
            }
            return
        default:
            break
        }
        if let client = pending.client { answer(client, .ok(result)) }
    }

    func finishDisconnect(_ slot: Int, cleanExit: Bool, description: String) {
        // An adoption ends with its window: complete if it restored and its disconnect saved.
        if windows[slot]?.adoption != nil {
            if cleanExit, windows[slot]?.readyAt != nil {
                completeAdoption(slot)
            } else {
                abandonAdoption(slot, why: "the window went (\(description)) before it had restored and saved")
            }
        }
        guard let window = windows[slot] else { return }
        windows[slot] = nil
        let view = region.slot(slot)
        view.state = .free
        view.pid = 0
        if window.configured {
            registry.close(window.id, hasSession: files.hasSession(window.id))
            if registry.isClosed(window.id) { closedThisRun.insert(window.id) }
        } else {
            registry.release(window.id)
        }
        saveOrder()
        if let client = window.closingForGood { finishCloseForGood(window.id, client: client) }
        evictClosedWindows()
        logger.info("scene disconnected", metadata: ["window": "\(window.id)", "how": "\(description)"])
        let reply: ControlReply =
            cleanExit
            ? .ok(CommandReply(window: window.id.uuidString, seq: window.seqs.highest))
            : .failure(.ioError, "the worker \(description) while disconnecting")
        for pending in window.pending.values { if let client = pending.client { answer(client, reply) } }
        for client in window.exitWaiters { answer(client, reply) }
    }
}
