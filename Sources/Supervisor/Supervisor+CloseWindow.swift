import Foundation
import HostControl
import SessionStore
import SystemPackage

/// Windows closed for good (iOS's `application(_:didDiscardSceneSessions:)`, `ctl
/// close-window`), and the bound on closed windows kept (`run --keep-closed`). A close is one
/// rename of the window's directory to `set-aside/.discarding-<UUID>`, synced: before it the
/// window is whole, after it gone; the bytes go in the background, and a start finishes a close
/// a stopped supervisor left under way (`finishClosesUnderWay`).
///
/// | the window is                     | `close-window`                                          |
/// |-----------------------------------|---------------------------------------------------------|
/// | closed, on disk                   | deleted now; answered once the rename is durable        |
/// | open and ready                    | disconnected (it saves), then deleted; answered then    |
/// | starting, restarting, disconnecting | 75: retry once it is ready or closed                  |
/// | unknown, a sentinel, a set-aside entry's UUID, already deleted | 65, nothing changed |
extension Supervisor {
    func closeWindow(_ id: UUID, for client: ClientID) {
        // Open or not: a move it takes part in is asked about once both windows are back.
        if let busy = moves.refusal(.scene(.disconnect), to: id) { return answer(client, busy) }
        if let window = openWindow(id) {
            return window.closeForGood(for: client, in: self)
        }
        guard registry.isClosed(id) else {
            return answer(
                client, .failure(.badData, "no window \(id) to close (ctl status lists them under \"order\")"))
        }
        answerDeletion(of: id, to: client)
    }

    /// The disconnect a `close-window` asked for has ended: the window, closed now, is deleted.
    func finishCloseForGood(_ id: UUID, client: ClientID) {
        assert(!windows.values.contains { $0.id == id }, "a window closed for good holds no slot")
        guard registry.isClosed(id) else {
            // Nothing of it was on disk: the registry forgot it; its UUID is retired all the same.
            registry.retire(id)
            return answer(client, .ok(CloseWindowReply(window: id.uuidString)))
        }
        answerDeletion(of: id, to: client)
    }

    /// Closed window `id` deleted (`deleteClosedWindow`), and `client` told how that went.
    private func answerDeletion(of id: UUID, to client: ClientID) {
        switch deleteClosedWindow(id) {
        case .success: answer(client, .ok(CloseWindowReply(window: id.uuidString)))
        case .failure(let refusal): answer(client, .failure(refusal))
        }
    }

    /// Past `keepClosed` windows closed by this supervisor (`closedThisRun`), the least
    /// recently closed are deleted for good, each logged and counted (`status`'s
    /// `closed_windows_evicted`).
    func evictClosedWindows() {
        let keep = configuration.keepClosed ?? configuration.capacity
        var counted: [UUID] { registry.closed.filter(closedThisRun.contains) }
        while counted.count > keep, let oldest = counted.last {
            assert(registry.isClosed(oldest) && closedThisRun.contains(oldest))
            guard case .success = deleteClosedWindow(oldest) else { return }
            closedThisRun.remove(oldest)
            closedWindowsEvicted += 1
            logger.warning(
                "closed window deleted: more than --keep-closed \(keep) closed windows kept",
                metadata: ["window": "\(oldest)"])
        }
    }

    /// Deletes closed window `id` durably: its directory renamed away (the one step that
    /// decides), then it leaves the order, its key is revoked and its bytes removed.
    func deleteClosedWindow(_ id: UUID) -> Result<Void, ControlFailure> {
        assert(registry.isClosed(id))
        let discarded: (away: FilePath, unsynced: (any Error)?)
        do {
            discarded = try files.discardWindow(id)
        } catch {
            logger.error("cannot delete closed window \(id): \(error); it stays, whole", metadata: ["window": "\(id)"])
            return .failure(
                ControlFailure(code: .ioError, message: "cannot delete window \(id): \(error); it stays closed, whole"))
        }
        // Past the rename the window is gone from `windows/`: it is never handed out again, even
        // when the rename could not be made durable (a crash may then bring it back whole).
        registry.retire(id)
        assert(!registry.isClosed(id) && !registry.order.contains(id), "a retired window is in no order")
        saveOrder()
        revokeKey(of: id)
        files.removeDiscarded([discarded.away])
        if let unsynced = discarded.unsynced {
            logger.error("closed window \(id) deleted, but not durably: \(unsynced)", metadata: ["window": "\(id)"])
            return .failure(
                ControlFailure(
                    code: .ioError,
                    message:
                        "window \(id) is deleted but not durably (\(unsynced)): a crash before the disk answers may bring it back whole"
                ))
        }
        logger.notice("window closed for good", metadata: ["window": "\(id)"])
        return .success(())
    }

    /// At start: the closes a stopped supervisor left under way are finished (their keys
    /// revoked; their bytes removed with the other discarded leftovers).
    func finishClosesUnderWay() {
        for id in files.windowsBeingDiscarded() {
            revokeKey(of: id)
            logger.notice("a close for good left under way is finished", metadata: ["window": "\(id)"])
        }
    }

    private func revokeKey(of id: UUID) {
        do {
            try ClosedWindowKey.revoke(root: configuration.root, window: id)
        } catch {
            // Its sealed files are deleted with the directory; the key dies with the machine.
            logger.warning("cannot revoke closed window \(id)'s incognito key: \(error)", metadata: ["window": "\(id)"])
        }
    }
}
