import BrowserModel
import Foundation
import IOUring
import SessionStore
import SystemPackage

/// The commands behind the committed format-1 fixture (`Fixtures/format1-window`), written by
/// the code at 01a7bb8, before histories had a cap: a snapshot, then a journal in which one
/// tab's history goes back, forward and past 75 entries. Running them again on today's model
/// gives what reading the fixture must give.
enum FormatOneScenario {
    /// Compaction after 60 records: the fixture's last snapshot holds part of tab A's history,
    /// its journal the rest.
    static let options = StoreOptions(compactAfterRecords: 60, compactAfterBytes: 1 << 20)
    static let window = UUID(uuidString: "0B0E5C0D-F0A1-4C1E-9A1D-F0F0F0F0F001")!

    private static func time(_ n: Int) -> Timestamp {
        Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000 + Int64(n))
    }

    /// Back to the entry numbered `number` counted from the tab's first entry ever. The code
    /// that made the fixture called `goToItem(at: number)`: it dropped no entry, so there the
    /// number was the index.
    private static func goBack(_ tab: WebState, toEntry number: Int64) throws {
        try tab.goToItem(at: tab.navigationHistory().index(ofItemNumber: number) ?? -1)
    }

    /// Applies the commands to `store`, one seq each; the last seq.
    @discardableResult
    static func run(_ store: WindowStore) throws -> UInt64 {
        var seq: UInt64 = 0
        func command(_ body: () throws -> Void) throws {
            seq += 1
            try store.apply(seq: seq, body)
            _ = try store.poll()
        }
        let regular = store.regular.webStateList
        let profile = store.regular.profile
        func newTab(_ url: String, _ n: Int) -> WebState {
            var history = NavigationHistory()
            history.commit(NavigationItem(url: url, title: "title \(n)", timestamp: time(n)))
            return WebState(id: profile.makeWebStateID(), creationTime: time(n), history: history)
        }
        let a = newTab("https://a.example/0", 0)
        try command { try regular.insert(a, InsertionParams(activate: true)) }
        let b = newTab("https://b.example/", 1)
        try command {
            try regular.insert(
                b, InsertionParams(pinned: true, opener: WebStateOpener(openerID: a.id, navigationIndex: 0)))
        }
        let c = newTab("https://c.example/", 2)
        try command { try regular.insert(c, InsertionParams()) }
        for n in 1...70 {
            try command {
                try a.commitNavigation(
                    to: NavigationItem(url: "https://a.example/\(n)", title: "A \(n)", timestamp: time(100 + n)))
            }
        }
        try command { try goBack(a, toEntry: 60) }
        for n in 71...100 {
            try command {
                try a.commitNavigation(
                    to: NavigationItem(url: "https://a.example/\(n)", title: "A \(n)", timestamp: time(100 + n)))
            }
        }
        try command { try goBack(a, toEntry: 85) }
        try command { try regular.close(at: regular.index(of: c.id) ?? -1) }
        let incognito = store.incognito.webStateList
        var history = NavigationHistory()
        history.commit(NavigationItem(url: "https://private.example/", title: "private", timestamp: time(500)))
        let i = WebState(id: store.incognito.profile.makeWebStateID(), creationTime: time(500), history: history)
        try command { try incognito.insert(i, InsertionParams(activate: true)) }
        try command {
            try i.commitNavigation(
                to: NavigationItem(url: "https://private.example/2", title: "private 2", timestamp: time(501)))
        }
        return seq
    }
}
