import HostControl
import HostLimits
import Platform
import SessionStore
import SystemPackage

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
        let shelved: SetAsideService.ShelvedEntry
        switch shelf.entry(id) {
        case .failure(let refusal): return answer(client, .failure(refusal.code, refusal.message))
        case .success(let found): shelved = found
        }
        let away: FilePath
        do {
            away = try files.discard(shelved.entry)
        } catch {
            answer(client, .failure(.ioError, "cannot discard \(id): \(error); it stays set aside"))
            return
        }
        shelf.forget(id)
        files.removeDiscarded([away])
        logger.warning(
            "set-aside entry discarded",
            metadata: ["entry": "\(id)", "window": "\(shelved.entry.window?.uuidString ?? "-")"])
        answer(client, .ok(DiscardReply(discarded: shelved.status)))
    }

    func adopt(_ id: String, asNewWindow: Bool, for client: ClientID) {
        let shelved: SetAsideService.ShelvedEntry
        switch shelf.entry(id) {
        case .failure(let refusal): return answer(client, .failure(refusal.code, refusal.message))
        case .success(let found): shelved = found
        }
        guard shutdownDeadline == nil else { return answer(client, .failure(.temporary, "shutting down")) }
        guard let own = shelved.entry.window, shelved.entry.holdsWindowSession else {
            return answer(
                client,
                .failure(
                    .badData,
                    "entry \(id) holds no window session (a \(shelved.entry.kind), \(shelved.entry.reason.rawValue)): nothing to adopt"
                ))
        }
        guard let slot = (0..<configuration.capacity).first(where: { windows[$0] == nil }) else {
            return answer(client, .failure(.temporary, "all \(configuration.capacity) window slots are in use"))
        }
        // An adoption undone sends the adopting window's key back with the session: begun only
        // when its record has room for it, or the undo could not send the session back.
        do {
            guard try SessionKeyRecords.hasRoom(root: files.root, directory: shelved.entry.path) else {
                return answer(
                    client,
                    .failure(
                        .badData,
                        "entry \(id) was adopted and undone until its key record is full (\(Limits.maxKeysPerSessionRecord) keys): "
                            + "it cannot be adopted again; `windowhost inspect` reads it"))
            }
        } catch {
            return answer(
                client, .failure(.temporary, "cannot read the key record of entry \(id): \(error); it stays set aside"))
        }
        // Its own UUID only when nothing else has it: an open or reserved window, or a session
        // on disk (a closed window), which adopting over would lose.
        let returning = asNewWindow || files.hasSession(own) ? nil : registry.reserve(returning: own)
        let target = returning ?? registry.reserveNew()
        do {
            try files.beginAdoption(shelved.entry, as: target)
        } catch {
            registry.release(target)
            answer(
                client,
                .failure(
                    .ioError, "cannot move \(id) to \(files.windowDirectory(target)): \(error); it stays set aside"))
            return
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
        assert(
            shelf.entries[adoption.entry]?.adoptingAs.map { $0 == window.id } ?? true,
            "an entry is adopted as one window")
        window.dispatch(.adoptionEnded, in: self)
        assert(!window.lifecycle.adopting, "the adoption ended with its data")
        do {
            try files.endAdoption(adoption.entry, as: window.id, returning: false)
            // Decided: the window's restore wrote the session again under its own key, so the
            // keys that came with the entry go (a kill first leaves them to the next start).
            try SessionKeyRecords.revoke(root: configuration.root, directory: files.windowDirectory(window.id))
        } catch {
            // The window is restored and saved; only the marker (or the record) stays: the next
            // start sends the session back to its entry (or revokes the record), losing nothing.
            logger.error("cannot end the adoption", metadata: ["entry": "\(adoption.entry)", "error": "\(error)"])
        }
        shelf.forget(adoption.entry)
        logger.warning("set-aside entry adopted", metadata: ["entry": "\(adoption.entry)", "window": "\(window.id)"])
        if let client = adoption.client {
            answer(
                client,
                .ok(
                    AdoptReply(
                        entry: adoption.entry, window: window.id.uuidString, pid: window.pid,
                        asNewWindow: adoption.asNewWindow,
                        regularTabs: exactInJSON(window.lastStats.regularTabs),
                        incognitoTabs: exactInJSON(window.lastStats.incognitoTabs),
                        durableSeq: window.lastStats.durableSeq)))
        }
    }

    /// The adopted window could not restore or went before it saved: its session goes back to
    /// its entry, as it is now (a restore's repairs included), and the window goes. `why` is
    /// said to the one who asked.
    func abandonAdoption(_ window: Window, why: String) {
        guard let adoption = window.endAdoption() else { return }
        window.dispatch(.adoptionEnded, in: self)
        assert(!window.lifecycle.adopting, "the adoption ended with its data")
        var said = "entry \(adoption.entry) was not adopted: \(why); it is set aside again, as it was"
        do {
            try files.endAdoption(adoption.entry, as: window.id, returning: true)
        } catch {
            said =
                "entry \(adoption.entry) was not adopted: \(why); its session stays as window \(window.id) (cannot move it back: \(error))"
        }
        shelf.adoptionUndone(adoption.entry)
        logger.error(
            "adoption abandoned", metadata: ["entry": "\(adoption.entry)", "window": "\(window.id)", "why": "\(why)"])
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
