import BrowserModel
import Foundation
import HostCoordination
import HostLimits
import SessionStore

/// One scene's window inside its worker: both Browsers behind a `WindowStore`, and the ring's
/// commands applied to them with the sequence numbers the supervisor gave. Every command gets
/// exactly one reply; a command that does not fit the window (an unknown tab, an index out of
/// range) is refused with `BAD_DATA` and changes nothing.
public final class SceneWindow {
    public let store: WindowStore
    private let now: () -> Timestamp

    public init(store: WindowStore, now: @escaping () -> Timestamp = SceneWindow.wallClock) {
        self.store = store
        self.now = now
    }

    public static func wallClock() -> Timestamp {
        Timestamp(microsecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1_000_000))
    }

    /// Applies `command` and says how it went. Disconnect is the loop's (it ends the process).
    public func handle(_ command: WorkerCommand) -> WorkerReply {
        var reply = WorkerReply()
        reply.request = command.request
        do {
            switch command.action {
            case .dump:
                reply.dump = dump()
            case .save:
                try store.save()
                reply.done = done()
            case .scene(let event):
                if event.kind == .background { try store.background() }
                reply.done = done()
            case .none:
                throw Refusal("a command with no action")
            default:
                guard Limits.isValidCommandSeq(command.seq) else {
                    throw Refusal("command seq \(command.seq) is above the highest a window reaches (\(Limits.maxCommandSeq))")
                }
                guard command.seq > store.appliedSeq else {
                    throw Refusal("command seq \(command.seq) is not after \(store.appliedSeq)")
                }
                let tab = try store.apply(seq: command.seq) { () throws -> Int64? in try apply(command.action) }
                reply.done = done(tab: tab)
            }
        } catch let refusal as Refusal {
            reply.failure = failure(.badData, refusal.message)
        } catch let error as WebStateListError {
            reply.failure = failure(.badData, "\(error)")
        } catch let error as StoreError {
            reply.failure = failure(.io, "\(error)")
        } catch {
            reply.failure = failure(.badData, "\(error)")
        }
        return reply
    }

    private struct Refusal: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }

    private func apply(_ action: WorkerCommand.OneOf_Action?) throws -> Int64? {
        switch action {
        case .open(let open):
            let browser = open.incognito ? store.incognito : store.regular
            let list = browser.webStateList
            var params = InsertionParams(index: open.hasIndex ? Int(open.index) : nil, activate: !open.inBackground)
            if open.hasOpener {
                let (openerList, index) = try locate(open.opener)
                guard openerList === list else { throw Refusal("tab \(open.opener) is in the other Browser") }
                let opener = try list.webState(at: index)
                params.opener = WebStateOpener(openerID: opener.id, navigationIndex: try opener.navigationHistory().currentIndex ?? 0)
            }
            if let index = params.index, index < 0 || index > list.count {
                throw Refusal("index \(index) outside 0...\(list.count)")
            }
            let tab = try newTab(url: open.url, profile: browser.profile)
            try list.insert(tab, params)
            return tab.id.rawValue
        case .navigate(let navigate):
            let (list, index) = try locate(navigate.tab)
            try list.webState(at: index).commitNavigation(to: try NavigationItem.checked(url: navigate.url, timestamp: now()))
        case .close(let close):
            let (list, index) = try locate(close.tab)
            try list.close(at: index)
        case .activate(let activate):
            let (list, index) = try locate(activate.tab)
            try list.activate(at: index)
        case .move(let move):
            let (list, index) = try locate(move.tab)
            guard move.index >= 0, Int(move.index) < list.count else {
                throw Refusal("index \(move.index) outside 0..<\(list.count)")
            }
            _ = try list.move(from: index, to: Int(move.index))
        case .replace(let replace):
            let (list, index) = try locate(replace.tab)
            let profile = list === store.incognito.webStateList ? store.incognito.profile : store.regular.profile
            let tab = try newTab(url: replace.url, profile: profile)
            try list.replace(at: index, with: tab).destroy()
            return tab.id.rawValue
        case .closeAll(let closeAll):
            (closeAll.incognito ? store.incognito : store.regular).webStateList.closeAll()
        default:
            throw Refusal("not a tab command")
        }
        return nil
    }

    private func newTab(url: String, profile: Profile) throws -> WebState {
        guard !profile.webStateIDsExhausted else {
            throw Refusal("this window's tab identifiers reached \(Limits.maxWebStateID): it opens no more tabs")
        }
        let time = now()
        var history = NavigationHistory()
        // A URL over Limits.maxURLBytes is refused (BAD_DATA), never stored truncated.
        _ = history.commit(try NavigationItem.checked(url: url, timestamp: time))
        return WebState(id: profile.makeWebStateID(), creationTime: time, history: history)
    }

    /// The list holding tab `id` and its index there.
    private func locate(_ id: Int64) throws -> (WebStateList, Int) {
        guard let webStateID = WebStateID(rawValue: id) else { throw Refusal("no tab \(id)") }
        for list in [store.regular.webStateList, store.incognito.webStateList] {
            if let index = list.index(of: webStateID) { return (list, index) }
        }
        throw Refusal("no tab \(id) in this window")
    }

    private func done(tab: Int64? = nil) -> CommandDone {
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
        WindowDigest.digest(regular: WindowDigest.List(store.regular.webStateList), incognito: WindowDigest.List(store.incognito.webStateList))
    }

    /// Both Browsers' tabs from metadata (nothing is realized), the seqs and the digest of the
    /// window as it is now.
    public func dump() -> WindowDump {
        func browser(_ list: WebStateList) -> BrowserDump {
            var dump = BrowserDump()
            dump.tabs = list.webStates.enumerated().map { index, webState in
                var tab = TabDump()
                tab.id = webState.id.rawValue
                tab.url = webState.url
                tab.title = webState.title
                tab.realized = webState.isRealized
                tab.pinned = list.isPinned(at: index)
                if let opener = try? list.opener(at: index) { tab.opener = opener.openerID.rawValue }
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
