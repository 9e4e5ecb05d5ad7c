import Foundation
import HostControl
import HostCoordination
import HostLimits

/// The window's requests to its worker and the worker's replies: put on the command ring
/// (`send`), matched to the requests pending, and answered as what was asked decides.
extension WindowController {
    /// Puts what `kind` asks to the worker's ring, its reply awaited as `kind`. False when it
    /// cannot be sent now.
    func send(_ kind: Pending.Kind, client: ClientID?, in host: any WindowHost) -> Bool {
        guard let doorbell = worker?.doorbell else { return false }
        let view = host.sharedSlot(slot)
        let request = host.takeRequestID()
        guard let bytes = try? kind.command.message(request: request).serializedBytes() as [UInt8],
            (try? view.commandRing.send(bytes)) != nil
        else {
            return false
        }
        assert(pending[request] == nil, "a request id is never reused")
        pending[request] = Pending(client: client, kind: kind, failuresBefore: view.saveFailures)
        doorbell.ring()
        return true
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
    func drainReplies(budget: ReplyBudget, in host: any WindowHost) -> Bool {
        let ring = host.sharedSlot(slot).replyRing
        var (replies, bytesRead) = (0, 0)
        while replies < budget.replies, bytesRead < budget.bytes {
            let bytes: [UInt8]
            do {
                guard let next = try ring.receive() else { return false }
                bytes = next
            } catch {
                // Killed once (not on every turn until it is reaped), its death handled as a crash.
                misbehaved("reply ring corrupt: \(error)", in: host)
                return false
            }
            replies += 1
            bytesRead += bytes.count
            assert(replies <= budget.replies, "a turn handles at most its budget of replies")
            guard let message = try? WorkerReply(serializedBytes: bytes) else {
                misbehaved("a reply of \(bytes.count) bytes that does not decode", in: host)
                return false
            }
            let reply: WorkerReply
            do {
                guard let whole = try assembly.take(message, pending: pending[message.request] != nil) else { continue }
                reply = whole
            } catch {
                misbehaved("\(error)", in: host)
                return false
            }
            guard let asked = pending.removeValue(forKey: reply.request) else {
                misbehaved("a reply to request \(reply.request), which it was not sent or has answered", in: host)
                return false
            }
            handleReply(reply, asked, in: host)
        }
        return true
    }

    func handleReply(_ reply: WorkerReply, _ asked: Pending, in host: any WindowHost) {
        if case .move(let step) = asked.kind, let outcome = reply.moveOutcome {
            // A done's seq and tab id are recorded as any command's first (`handleDone`).
            if case .done(let done) = outcome { return handleDone(done, request: reply.request, asked, in: host) }
            return host.moveStepAnswered(self, step, outcome)
        }
        if case .move = asked.kind { return misbehaved("a reply to a move's step that is no answer to it", in: host) }
        switch reply.outcome {
        case .failure(let failure) where asked.kind.isDisconnect:
            disconnectFailed(failure, asked, in: host)
        case .failure(let failure):
            if let client = asked.client {
                host.answer(client, .failure(failure.kind == .io ? .ioError : .badData, failure.message))
            }
        case .dump(let dump) where asked.kind == .floorProbe:
            probeFloors(dump, in: host)
        case .dump(let dump):
            if let violation = dump.violation {
                if let client = asked.client {
                    host.answer(client, .failure(.software, "the worker misbehaved; it is restarting"))
                }
                misbehaved(violation, in: host)
                return
            }
            // A client gone costs no conversion (a dump may be thousands of tabs).
            if let client = asked.client, host.isConnected(client) {
                host.answer(client, .ok(DumpReply(dump, window: id)))
            }
        case .done(let done):
            handleDone(done, request: reply.request, asked, in: host)
        case .movedTab:
            // An export's is handed on above: no other request asks for a tab.
            if let client = asked.client {
                host.answer(client, .failure(.software, "the worker misbehaved; it is restarting"))
            }
            misbehaved("a moved tab in reply to a request that asks for none", in: host)
        case .none:
            if let client = asked.client { host.answer(client, .failure(.software, "an empty reply from the worker")) }
        case .part:
            // `ReplyAssembly` hands on whole replies only.
            assertionFailure("a part reached handleReply")
            if let client = asked.client {
                host.answer(client, .failure(.software, "a reply part out of its assembly"))
            }
        }
    }

    /// The worker could not save for a disconnect and goes on serving: so does the window
    /// (killed if stopping, the exit status then saying what was lost).
    private func disconnectFailed(_ failure: CommandFailure, _ asked: Pending, in host: any WindowHost) {
        host.logger.error(
            "disconnect failed: the window goes on serving with its unsaved changes",
            metadata: ["window": "\(id)", "error": "\(failure.message)"])
        if asked.kind == .shutdownDisconnect || host.isStopping {
            keptUnsaved.append(failure.message)
        }
        dispatch(.disconnectFailed, description: "could not save for its disconnect", in: host)
        if let client = asked.client {
            host.answer(
                client,
                .failure(
                    failure.kind == .io ? .ioError : .badData,
                    "disconnect failed; the window goes on serving: \(failure.message)"))
        }
        if let client = closingForGood {
            closingForGood = nil
            host.answer(
                client,
                .failure(
                    .ioError,
                    "window \(id) could not save on its way out; it goes on serving, whole: \(failure.message)"
                ))
        }
    }

    /// A command done: its seq (and tab id) checked, recorded and shown, and its client answered
    /// as what it asked decides.
    func handleDone(_ done: CommandDone, request: UInt64, _ asked: Pending, in host: any WindowHost) {
        if let violation = done.violation {
            if let client = asked.client {
                host.answer(client, .failure(.software, "the worker misbehaved; it is restarting"))
            }
            misbehaved(violation, in: host)
            return
        }
        seqs.apply(done.appliedSeq)
        // A new tab's id above what `handle` reserved (the worker restored tabs with higher
        // ids than any reply showed): recorded before the reply shows it, or not shown.
        if done.hasTab {
            seqs.showTab(done.tab)
            let failure = host.recordHandedOut(self, covering: HandedOutCeiling(seq: done.appliedSeq, tab: done.tab))
            // A move's import is applied either way: the move goes on (its reply shows the id
            // only once settled, by when a later write has recorded it or the id was logged).
            if case .move(let step) = asked.kind { return host.moveStepAnswered(self, step, .done(done)) }
            if let failure {
                if let client = asked.client {
                    host.answer(
                        client,
                        .failure(
                            .ioError,
                            "window \(id) applied the command, but its tab id cannot be recorded, so it is not shown: \(failure)"
                        ))
                }
                return
            }
        }
        var result = CommandReply(
            window: id.uuidString, seq: seqs.show(done.appliedSeq), tab: done.hasTab ? done.tab : nil)
        assert(result.seq >= done.appliedSeq, "no reply shows a seq below the one its worker applied")
        switch asked.kind {
        case .move(let step):
            return host.moveStepAnswered(self, step, .done(done))
        case .scene(.background), .scene(.foreground):
            dispatch(.sceneChanged(asked.kind == .scene(.background) ? .background : .foreground), in: host)
            result.state = state.description
        case .scene(.disconnect):
            // Answered when the worker has exited.
            pending[request] = asked
            return
        case .adoptionSave:
            adoption?.savedSeq = done.appliedSeq
            return
        case .save(wait: true):
            if let client = asked.client {
                durableWaiters.append(
                    DurableWaiter(seq: done.appliedSeq, client: client, failuresBefore: asked.failuresBefore))
            }
            return
        default:
            break
        }
        if let client = asked.client { host.answer(client, .ok(result)) }
    }
}

extension WorkerReply {
    /// The reply as a move's step reads it; nil for one that is no answer at all (empty, a part).
    fileprivate var moveOutcome: MoveStepOutcome? {
        switch outcome {
        case .movedTab(let tab): .exported(tab)
        case .done(let done): .done(done)
        case .failure(let failure): .failed(failure)
        case .dump, .part, .none: nil
        }
    }
}
