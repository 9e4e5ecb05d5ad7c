import BrowserModel
import SessionFormat

/// A window's part in moves of tabs between windows (`SceneWindow` serves the steps): the
/// records that carry a move, the moves its Browsers remember receiving, a tab's history as
/// it is stored.
extension WindowStore {
    /// `apply(seq:_:)`, the records `body` makes carrying `move` (an insert as `moved_in`, a
    /// detach as `moved_out`).
    @discardableResult
    public func apply<T>(seq: UInt64, move: UInt64, _ body: () throws -> T) rethrows -> T {
        for store in stores { store.recorder?.move = move }
        defer { for store in stores { store.recorder?.move = 0 } }
        return try apply(seq: seq, body)
    }

    /// The tab this window made for move `move`, if either Browser remembers it.
    public func tab(madeBy move: UInt64) -> WebStateID? {
        for store in stores {
            if let tab = store.movesReceived.tab(madeBy: move) { return tab }
        }
        return nil
    }

    /// Browser `kind` received `move` (its insert applied): remembered from now, in its
    /// snapshots too.
    public func noteMoveReceived(_ move: ReceivedMove, in kind: BrowserKind) {
        assert(browser(kind).webStateList.index(of: move.tab) != nil, "a move is noted once its tab is in")
        stores[kind == .regular ? 0 : 1].movesReceived.note(move)
    }

    /// Tab `webState`'s history as Browser `kind` stores it: an unrealized tab's payload as
    /// restored (or moved in), unread; a realized tab's encoded from memory. A payload that
    /// fails its checks realizes the tab from the generation before, as any realization does
    /// (docs/recovery.md): its history is then in memory, and that is what is given.
    public func storedHistoryBytes(of webState: WebState, in kind: BrowserKind) throws(SessionFormatError) -> [UInt8] {
        if let history = webState.loadedHistory { return history.storageBytes(as: webState.id) }
        do {
            return try stores[kind == .regular ? 0 : 1].storedHistory(webState)
        } catch {
            guard let history = webState.loadedHistory else { throw error }
            return history.storageBytes(as: webState.id)
        }
    }
}
