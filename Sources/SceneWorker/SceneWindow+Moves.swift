import BrowserModel
import Foundation
import HostCoordination
import HostLimits
import SessionFormat
import SessionStore

/// A window's steps in a move of a tab between windows, as the supervisor drives them (see
/// docs/recovery.md, "Moving a tab between windows"): the source exports the tab, the
/// destination imports it (the commit: its insert record carries the move), the source drops it.
/// The tab's bytes come from another window through the supervisor: every number is checked
/// here as untrusted, and a step that does not fit changes nothing.
extension SceneWindow {
    func serve(_ step: MoveStep, into reply: inout WorkerReply) throws {
        switch step {
        case .export(let tab):
            reply.movedTab = try export(tab)
        case .import(let move, let tab, let index):
            let made = try importTab(tab, as: move, at: index)
            // Saved at once, whatever the save delay: the supervisor waits for it to be durable
            // before the move goes on (a failed save answers IO, and the move asks again).
            try store.save()
            reply.done = done(tab: made.rawValue)
        case .drop(let tab, let move):
            try drop(tab, as: move)
            try store.save()
            reply.done = done()
        case .held(let move):
            reply.done = done(tab: store.tab(madeBy: move.rawValue)?.rawValue)
        }
    }

    /// Tab `tab` as it is, its history as stored: nothing changes.
    private func export(_ tab: Int64) throws -> MovedTab {
        let (list, index) = try locate(tab)
        let webState = try list.webState(at: index)
        let kind: BrowserKind = list === store.incognito.webStateList ? .incognito : .regular
        // Before the history is read: a damaged stored copy realizes the tab from an older one.
        let realized = webState.isRealized
        let history = try store.storedHistoryBytes(of: webState, in: kind)
        guard history.count <= Limits.maxMovedTabBytes else {
            throw Refusal(
                "tab \(tab)'s history is \(history.count) bytes, past the \(Limits.maxMovedTabBytes) a move carries "
                    + "(Limits.maxMovedTabBytes): it stays in this window")
        }
        var moved = MovedTab()
        moved.tab = tab
        moved.incognito = kind == .incognito
        moved.pinned = list.isPinned(at: index)
        moved.realized = realized
        moved.creationTimeUs = webState.creationTime.microsecondsSinceEpoch
        moved.lastActiveTimeUs = webState.lastActiveTime.microsecondsSinceEpoch
        moved.navigation = Data(history)
        return moved
    }

    /// Makes `moved` a tab of this window with an id of its own, at `index` of the Browser
    /// `moved.incognito` names (nil: the end), not activated, its record carrying `move`; a
    /// pinned tab lands among the pinned ones (`index` clamped into them, as the list clamps
    /// every insert into its region). A move already received answers the tab it made.
    private func importTab(_ moved: MovedTab, as move: MoveID, at index: Int?) throws -> WebStateID {
        if let made = store.tab(madeBy: move.rawValue) { return made }
        let browser = moved.incognito ? store.incognito : store.regular
        let list = browser.webStateList
        if let index, index < 0 || index > list.count { throw Refusal("index \(index) outside 0...\(list.count)") }
        guard moved.creationTimeUs >= 0, moved.lastActiveTimeUs >= 0 else {
            throw Refusal(
                "a moved tab's times (created \(moved.creationTimeUs), last active \(moved.lastActiveTimeUs) µs) are before 1970"
            )
        }
        let history = try MovedHistory(checking: [UInt8](moved.navigation), tab: moved.tab)
        let seq = try nextSeq()
        let webState = try history.makeTab(
            as: try newTabID(browser.profile), creationTime: Timestamp(microsecondsSinceEpoch: moved.creationTimeUs),
            lastActiveTime: Timestamp(microsecondsSinceEpoch: moved.lastActiveTimeUs), realized: moved.realized)
        try checkWindowText(replacing: 0, with: webState.textBytes)
        try store.apply(seq: seq, move: move.rawValue) {
            try list.insert(webState, InsertionParams(index: index, activate: false, pinned: moved.pinned))
        }
        // A move is a bounded, nonzero id: the type's own check cannot fail.
        if let received = ReceivedMove(move: move.rawValue, tab: webState.id) {
            store.noteMoveReceived(received, in: browser.kind)
        }
        return webState.id
    }

    /// Removes tab `tab`, gone to another window by `move`: detached, its record carrying the
    /// move; the tab that takes an active one's place as `close` picks it. Not there (dropped
    /// before a restart): done, nothing changes.
    private func drop(_ tab: Int64, as move: MoveID) throws {
        guard let id = WebStateID(rawValue: tab) else { throw Refusal("no tab \(tab)") }
        guard let found = try? locate(tab) else { return }
        let (list, index) = found
        try store.apply(seq: try nextSeq(), move: move.rawValue) {
            try activateSuccessor(removing: index, from: list)
            try list.detach(at: index).destroy()
        }
        assert(list.index(of: id) == nil, "a dropped tab is gone")
    }
}
