import Foundation
import HostControl
import Platform

/// `ROOT/set-aside/` served: the list (`SetAsideService`, which reads each entry's summary in
/// a child), and the moves: `adopt` (the window opened through the normal restore, ended once
/// its first save is durable, undone if it goes first) and `discard`. The entries' names are
/// `SetAsideShelf`'s; the moves on disk are `SupervisorFiles`'.
extension Supervisor {
    func listSetAside(for client: ClientID) {
        if let list = shelf.list(for: client, now: monotonicNanoseconds()) {
            answer(client, .ok(SetAsideReply(setAside: list)))
        }
    }

    /// Each turn: the summaries read, and the lists that waited for them answered.
    func runSetAsideWork(_ now: UInt64) {
        let due = shelf.run(now: now, stopping: shutdownDeadline != nil)
        guard !due.isEmpty else { return }
        let list = shelf.list()
        for client in due { answer(client, .ok(SetAsideReply(setAside: list))) }
    }

    func discard(_ id: String, for client: ClientID) {
        switch shelf.discard(id) {
        case .success(let discarded): answer(client, .ok(DiscardReply(discarded: discarded)))
        case .failure(let refusal): answer(client, .failure(refusal))
        }
    }

    /// Refused in this order: no entry (65) or one adopted (75), shutdown (75), no window
    /// session (65), no free slot (75), a full (65) or unreadable (75) key record.
    func adopt(_ id: String, asNewWindow: Bool, for client: ClientID) {
        let shelved: SetAsideService.ShelvedEntry
        switch shelf.entry(id) {
        case .failure(let refusal): return answer(client, .failure(refusal))
        case .success(let found): shelved = found
        }
        guard shutdownDeadline == nil else { return answer(client, .failure(.temporary, "shutting down")) }
        guard let own = shelved.entry.window, shelved.entry.holdsWindowSession else {
            let what = "a \(shelved.entry.kind), \(shelved.entry.reason.rawValue)"
            return answer(client, .failure(.badData, "entry \(id) holds no window session (\(what)): nothing to adopt"))
        }
        guard let slot = (0..<configuration.capacity).first(where: { windows[$0] == nil }) else {
            return answer(client, .failure(.temporary, "all \(configuration.capacity) window slots are in use"))
        }
        if let refusal = shelf.keyRecordRefusal(shelved) { return answer(client, .failure(refusal)) }
        // Its own UUID only when nothing else has it: an open or reserved window, or a session
        // on disk (a closed window), which adopting over would lose.
        let returning = asNewWindow || files.hasSession(own) ? nil : registry.reserve(returning: own)
        let target = returning ?? registry.reserveNew()
        do {
            try files.beginAdoption(shelved.entry, as: target)
        } catch {
            registry.release(target)
            let why = "cannot move \(id) to \(files.windowDirectory(target)): \(error); it stays set aside"
            return answer(client, .failure(.ioError, why))
        }
        shelf.beginAdoption(id, as: target)
        assert(registry.reserved.contains(target), "the adopted session's window is reserved")
        logger.warning("adopting a set-aside entry", metadata: ["entry": "\(id)", "window": "\(target)"])
        openWindow(target, slot: slot, adoption: Adoption(entry: id, client: client, asNewWindow: target != own))
    }

    // MARK: the adoption's course

    /// Each turn: an adoption whose save is durable ends, the entry leaving `set-aside/`.
    func completeAdoptions() {
        for slot in windows.keys.sorted() {
            guard let window = windows[slot], let adoption = window.adoption, let seq = adoption.savedSeq,
                window.lastStats.durableSeq >= seq, window.isReady
            else { continue }
            completeAdoption(window)
        }
    }

    /// The adopted window restored and saved durably: the entry leaves `set-aside/` for good.
    func completeAdoption(_ window: Window) {
        guard let adoption = window.endAdoption() else { return }
        window.dispatch(.adoptionEnded, in: self)
        assert(!window.lifecycle.adopting, "the adoption ended with its data")
        shelf.adopted(adoption.entry, as: window.id)
        if let client = adoption.client { answer(client, .ok(window.adoptReply(adoption))) }
    }

    /// The adopted window could not restore or went before it saved: its session goes back to
    /// its entry, as it is now (a restore's repairs included), and the window goes. `why` is
    /// said to the one who asked.
    func abandonAdoption(_ window: Window, why: String) {
        guard let adoption = window.endAdoption() else { return }
        window.dispatch(.adoptionEnded, in: self)
        assert(!window.lifecycle.adopting, "the adoption ended with its data")
        let said = shelf.undoAdoption(adoption.entry, as: window.id, why: why)
        if let client = adoption.client { answer(client, .failure(.badData, said)) }
    }
}

/// A set-aside entry being adopted as the window that has it (`Supervisor.adopt`).
struct Adoption {
    let entry: String
    /// Who asked: answered at the end, either way.
    var client: ControlServer.ClientID?
    /// Under a UUID of its own (asked, or the entry's was taken).
    let asNewWindow: Bool
    /// The seq of the save asked once the window restored: durable, the adoption ends.
    var savedSeq: UInt64?
}
