import BrowserModel
import Foundation
import HostCoordination
import HostLimits
import SessionStore

/// What the supervisor handed out for the window before this worker started: the highest
/// command seq and tab id clients may have seen. A worker killed before its save was durable
/// comes back at an older seq, with older tab ids free; numbering from there would hand a seq or
/// a tab id out twice. The worker numbers above the floor instead (seqs then have a gap: the
/// commands in it were lost with the worker that applied them). The window's own seqs (applied,
/// durable) stay what it holds: the floor is no state, and a durable seq is one on disk.
public struct WorkerFloor: Sendable, Equatable {
    public let seq: UInt64
    public let tab: Int64

    /// Nil when a number is outside what a window can reach (`Limits`): a floor is passed on a
    /// command line, so it is checked like any input.
    public init?(seq: UInt64, tab: Int64) {
        guard Limits.isValidCommandSeq(seq), (0...Limits.maxWebStateID).contains(tab) else { return nil }
        self.seq = seq
        self.tab = tab
    }

    public static let none = WorkerFloor(seq: 0, tab: 0)!
}

/// One scene's window inside its worker: both Browsers behind a `WindowStore`, and the ring's
/// commands applied to them. The window numbers its commands: a command that changes the window
/// takes the next seq, one that changes nothing (an empty `close-all`, activating the active tab)
/// or is refused takes none (the store's `apply` decides, from the records the command made).
/// Every command gets exactly one reply; a command that does not fit the window (an unknown tab,
/// an index out of range) is refused with `BAD_DATA` and changes nothing.
///
/// A foreground scene displays each Browser's active tab, and a displayed tab is realized (the
/// seed: displaying needs what only a realized tab has). Restore leaves every tab unrealized;
/// `displayActiveTabs` realizes the displayed ones after restore, after each command and when
/// the scene comes to the foreground. Nothing else the window answers (a dump) realizes a tab.
public final class SceneWindow {
    public let store: WindowStore
    private let floor: WorkerFloor
    private let now: () -> Timestamp
    /// Whether the scene is in the foreground: its Browsers' active tabs are displayed.
    public private(set) var isForeground: Bool

    /// `floor`: the seq and tab id numbering continues above (tab ids below it are reserved).
    /// `foreground`: the scene the worker starts in (a background scene displays no tab).
    public init(
        store: WindowStore, floor: WorkerFloor = .none, foreground: Bool = true,
        now: @escaping () -> Timestamp = SceneWindow.wallClock
    ) {
        self.store = store
        self.floor = floor
        self.isForeground = foreground
        self.now = now
        if let tab = WebStateID(rawValue: floor.tab) { store.profile.reserveWebStateID(tab) }
    }

    private var lists: [WebStateList] { [store.regular.webStateList, store.incognito.webStateList] }

    /// Realizes each Browser's active tab when the scene is in the foreground (its helpers are
    /// told: `TabHelper.webStateRealized`). A history that does not read now (the worker short
    /// of memory or descriptors; damage falls back inside the stored tabs) leaves the tab
    /// unrealized, shown from its metadata, and the next display tries again.
    public func displayActiveTabs() {
        guard isForeground else { return }
        for list in lists {
            guard let active = list.activeWebState, !active.isRealized else { continue }
            try? active.forceRealized()
        }
    }

    /// The next change takes the seq after this one: the last change's, or the floor when that
    /// is higher (the seqs up to it named commands lost with the last worker).
    public var nextSeqBase: UInt64 { max(store.appliedSeq, floor.seq) }

    public static func wallClock() -> Timestamp {
        Timestamp(microsecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1_000_000))
    }

    /// Applies the ring message `message` and says how it went. Disconnect is the loop's (it
    /// ends the process).
    public func handle(_ message: WorkerCommand) -> WorkerReply {
        var reply = WorkerReply()
        reply.request = message.request
        do {
            switch try WindowCommand(message) {
            case .dump:
                // Answered from metadata: showing the window displays nothing new.
                try checkDumpable()
                reply.dump = dump()
                return reply
            case .probe:
                reply.dump = dump(withText: false)
                return reply
            case .move(let step):
                try serve(step, into: &reply)
            case .save:
                try store.save()
                reply.done = done()
            case .scene(let change):
                try changeScene(change)
                reply.done = done()
            case .tab(let command):
                let tab = try store.apply(seq: try nextSeq()) { () throws -> Int64? in try apply(command) }
                reply.done = done(tab: tab)
            }
        } catch let undecodable as UndecodableCommand {
            reply.failure = failure(.badData, undecodable.description)
        } catch let refusal as Refusal {
            reply.failure = failure(.badData, refusal.message)
        } catch let error as WebStateListError {
            reply.failure = failure(.badData, "\(error)")
        } catch let error as StoreError {
            reply.failure = failure(.io, "\(error)")
        } catch {
            reply.failure = failure(.badData, "\(error)")
        }
        displayActiveTabs()
        return reply
    }

    /// A scene coming to the foreground displays its active tabs again: each is stamped active
    /// now, a change like any command's, so it takes the next seq and its journal record makes
    /// the time durable (the supervisor counts a foreground in flight as one seq it may hand
    /// out). A window at the highest seq takes no change: it comes to the foreground unstamped.
    /// Going to the background saves at once.
    private func changeScene(_ change: SceneChange) throws(StoreError) {
        switch change {
        case .background:
            isForeground = false
            try store.background()
        case .foreground:
            isForeground = true
            let seq = nextSeqBase
            guard seq < Limits.maxCommandSeq else { return }
            let time = now()
            store.apply(seq: seq + 1) {
                for list in lists { list.activeWasShown(at: time) }
            }
        case .disconnect:
            break
        }
    }

    /// The seq the next tab-changing command takes; refused at the highest a window reaches.
    func nextSeq() throws(Refusal) -> UInt64 {
        // Both bounded by `Limits.maxCommandSeq` (the store's from checked files, the floor by
        // its init), so one more cannot overflow.
        let seq = nextSeqBase
        guard seq < Limits.maxCommandSeq else {
            throw Refusal(
                "the window's seq is \(seq), the highest a window reaches (\(Limits.maxCommandSeq)): it takes no tab command"
            )
        }
        return seq + 1
    }

    struct Refusal: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }

    /// The UTF-8 bytes of the URLs and titles the window shows, in both Browsers: what
    /// `Limits.maxWindowTextBytes` bounds, counted by the lists as their tabs change.
    public var textBytes: Int { lists.reduce(0) { $0 + $1.textBytes } }

    /// Refuses, before anything changes, a command that makes a tab showing `before` bytes of
    /// URL and title (0 for a new tab) show `after` and takes the window past
    /// `Limits.maxWindowTextBytes`. A window already past it (restored from a file written
    /// elsewhere) may still shrink.
    func checkWindowText(replacing before: Int, with after: Int) throws(Refusal) {
        guard after > before else { return }
        let total = textBytes - before + after
        guard total > Limits.maxWindowTextBytes else { return }
        throw Refusal(
            "the window would show \(total) bytes of URLs and titles, past the \(Limits.maxWindowTextBytes) a window holds "
                + "(Limits.maxWindowTextBytes): refused, nothing was done; close tabs or use shorter URLs")
    }

    /// A window past `Limits.maxWindowTextBytes` (only one restored from a file written elsewhere
    /// gets there) keeps every tab, but its dump would be past every reply's bound: refused.
    private func checkDumpable() throws(Refusal) {
        let total = textBytes
        guard total > Limits.maxWindowTextBytes else { return }
        throw Refusal(
            "the window shows \(total) bytes of URLs and titles, past the \(Limits.maxWindowTextBytes) a dump carries "
                + "(Limits.maxWindowTextBytes); every tab is kept: read them from disk with `windowhost inspect ROOT --window \(store.windowID)`, "
                + "or close tabs until the window fits")
    }

    private func apply(_ command: TabCommand) throws -> Int64? {
        switch command {
        case .open(let url, let incognito, let index, let openerID, let background):
            let browser = incognito ? store.incognito : store.regular
            let list = browser.webStateList
            var params = InsertionParams(index: index, activate: !background)
            if let openerID {
                let (openerList, index) = try locate(openerID)
                guard openerList === list else { throw Refusal("tab \(openerID) is in the other Browser") }
                let opener = try list.webState(at: index)
                // Read without realizing the opener: opening a tab does not display it.
                let history = try opener.loadedHistory ?? opener.storedHistory()
                params.opener = WebStateOpener(openerID: opener.id, navigationIndex: history?.currentIndex ?? 0)
            }
            if let index = params.index, index < 0 || index > list.count {
                throw Refusal("index \(index) outside 0...\(list.count)")
            }
            try checkWindowText(replacing: 0, with: url.utf8.count)
            let tab = try newTab(url: url, profile: browser.profile)
            try list.insert(tab, params)
            return tab.id.rawValue
        case .navigate(let tab, let url):
            let (list, index) = try locate(tab)
            let webState = try list.webState(at: index)
            let item = try NavigationItem.checked(url: url, timestamp: now())
            try checkWindowText(replacing: webState.textBytes, with: item.textBytes)
            try webState.commitNavigation(to: item)
        case .close(let tab):
            let (list, index) = try locate(tab)
            try activateSuccessor(removing: index, from: list)
            try list.close(at: index)
            assert(list.activeWebState?.id.rawValue != tab, "the closed tab is not active")
        case .activate(let tab):
            let (list, index) = try locate(tab)
            // Stamped first: the activation's journal record carries the tab's new time.
            if list.activeIndex != index { try list.webState(at: index).wasActivated(at: now()) }
            try list.activate(at: index)
        case .move(let tab, let to):
            let (list, index) = try locate(tab)
            guard to >= 0, to < list.count else {
                throw Refusal("index \(to) outside 0..<\(list.count)")
            }
            _ = try list.move(from: index, to: to)
        case .replace(let tab, let url):
            let (list, index) = try locate(tab)
            let profile = list === store.incognito.webStateList ? store.incognito.profile : store.regular.profile
            try checkWindowText(replacing: try list.webState(at: index).textBytes, with: url.utf8.count)
            let replacement = try newTab(url: url, profile: profile)
            try list.replace(at: index, with: replacement).destroy()
            return replacement.id.rawValue
        case .closeAll(let incognito):
            (incognito ? store.incognito : store.regular).webStateList.closeAll()
        case .setPinned(let tab, let pinned):
            let (list, index) = try locate(tab)
            try list.setPinned(at: index, pinned)
        case .go(let tab, let direction):
            let (list, index) = try locate(tab)
            try step(try list.webState(at: index), direction)
        }
        return nil
    }

    /// When the tab at `index` is the active one, activates the tab that takes its place before
    /// it goes, as `.activate` does, so the journal record carries the stamp; the removal then
    /// leaves it active.
    func activateSuccessor(removing index: Int, from list: WebStateList) throws {
        guard list.activeIndex == index, let successor = list.successorForActive(removing: index),
            let next = list.index(of: successor)
        else { return }
        try list.webState(at: next).wasActivated(at: now())
        try list.activate(at: next)
    }

    /// Back or forward one entry through the model's navigation, which realizes the tab. With no
    /// entry that way nothing changes, so no record is made and the command takes no seq.
    private func step(_ webState: WebState, _ direction: HistoryDirection) throws {
        let history = try webState.navigationHistory()
        guard let current = history.currentIndex else { return }
        let target = current + direction.offset
        guard history.items.indices.contains(target) else { return }
        try checkWindowText(replacing: webState.textBytes, with: history.items[target].textBytes)
        try webState.goToItem(at: target)
        assert(webState.loadedHistory?.currentIndex == target, "a history step landed elsewhere")
    }

    private func newTab(url: String, profile: Profile) throws -> WebState {
        let time = now()
        var history = NavigationHistory()
        // A URL over Limits.maxURLBytes is refused (BAD_DATA), never stored truncated.
        _ = history.commit(try NavigationItem.checked(url: url, timestamp: time))
        return WebState(id: try newTabID(profile), creationTime: time, history: history)
    }

    /// A tab id of this window's numbering; refused once they are all handed out.
    func newTabID(_ profile: Profile) throws(Refusal) -> WebStateID {
        guard !profile.webStateIDsExhausted else {
            throw Refusal("this window's tab identifiers reached \(Limits.maxWebStateID): it opens no more tabs")
        }
        return profile.makeWebStateID()
    }

    /// The list holding tab `id` and its index there.
    func locate(_ id: Int64) throws -> (WebStateList, Int) {
        guard let webStateID = WebStateID(rawValue: id) else { throw Refusal("no tab \(id)") }
        for list in [store.regular.webStateList, store.incognito.webStateList] {
            if let index = list.index(of: webStateID) { return (list, index) }
        }
        throw Refusal("no tab \(id) in this window")
    }

    func done(tab: Int64? = nil) -> CommandDone {
        var done = CommandDone()
        done.appliedSeq = store.appliedSeq
        if let tab { done.tab = tab }
        return done
    }

    private func failure(_ kind: CommandFailure.Kind, _ message: String) -> CommandFailure {
        var failure = CommandFailure()
        failure.kind = kind
        failure.message = message
        return failure
    }

    // MARK: what the window shows

    public var digest: UInt64 {
        WindowDigest.digest(
            regular: WindowDigest.List(store.regular.webStateList),
            incognito: WindowDigest.List(store.incognito.webStateList))
    }

    /// Both Browsers' tabs from metadata (nothing is realized), the seqs and the digest of the
    /// window as it is now; `withText` false leaves every URL and title empty (`probe`).
    public func dump(withText: Bool = true) -> WindowDump {
        func browser(_ list: WebStateList) -> BrowserDump {
            var dump = BrowserDump()
            dump.tabs = list.webStates.enumerated().map { index, webState in
                var tab = TabDump()
                tab.id = webState.id.rawValue
                if withText {
                    tab.url = webState.url
                    tab.title = webState.title
                }
                tab.realized = webState.isRealized
                tab.lastActiveTimeUs = webState.lastActiveTime.microsecondsSinceEpoch
                tab.pinned = list.isPinned(at: index)
                if let opener = try? list.opener(at: index) { tab.opener = opener.openerID.rawValue }
                tab.historyCount = Int32(clamping: webState.navigationItemCount)
                if let current = webState.loadedHistory?.currentIndex { tab.historyIndex = Int32(clamping: current) }
                return tab
            }
            if let active = list.activeIndex { dump.activeIndex = Int32(active) }
            return dump
        }
        var dump = WindowDump()
        dump.regular = browser(store.regular.webStateList)
        dump.incognito = browser(store.incognito.webStateList)
        dump.appliedSeq = store.appliedSeq
        dump.durableSeq = store.durableSeq
        dump.digest = digest
        return dump
    }
}
