import BrowserModel
import Foundation
import Testing

/// Issue 30's cuts to the per-tab work of a restore: helpers without a table per tab, a list's
/// observers told of its tabs' navigations (no registration per tab), and the identifiers
/// checked once (`UniqueWebStateIDs`). What the seed requires stays: every restored tab has its
/// helpers and answers its getters, and whoever watches hears every navigation.
@Suite struct RestorePathTests {
    /// Tells of every navigation a list passes on, by tab and index.
    final class NavigationLog: WebStateListObserver {
        var lines: [String] = []
        func webStateList(_ list: WebStateList, didChange change: WebStateListChange, status: WebStateListStatus) {}
        func webStateList(_ list: WebStateList, webState: WebState, didCommitNavigationAt index: Int, newItem: Bool) {
            lines.append("\(webState.id) \(index)\(newItem ? " new" : "")")
        }
    }

    final class Helper: TabHelper {
        let name: String
        let log: Log
        init(_ name: String, _ log: Log) {
            self.name = name
            self.log = log
        }
        func webStateRealized(_ webState: WebState) { log.lines.append("\(name) realized") }
        func shutdown() { log.lines.append("\(name) shutdown") }
    }

    final class OtherHelper: TabHelper {
        let log: Log
        init(_ log: Log) { self.log = log }
        func webStateRealized(_ webState: WebState) { log.lines.append("other realized") }
        func shutdown() { log.lines.append("other shutdown") }
    }

    final class Log { var lines: [String] = [] }

    private static let metadata = WebStateMetadata(
        creationTime: .zero, lastActiveTime: .zero, activePageTitle: "B", activePageURL: "https://b.example/",
        navigationItemCount: 1)

    private static func history() -> NavigationHistory {
        var history = NavigationHistory()
        history.commit(NavigationItem(url: "https://b.example/", title: "B", timestamp: .zero))
        return history
    }

    private static func item(_ page: Int) -> NavigationItem {
        NavigationItem(url: "https://c.example/\(page)", title: "C\(page)", timestamp: .zero)
    }

    /// The list's observers hear each navigation of a tab while it is in the list, after the
    /// tab's own observers; never one of a tab detached from it, nor one of a tab replaced.
    @Test func aListPassesOnItsTabsNavigationsWhileTheyAreInIt() throws {
        let list = WebStateList()
        let log = NavigationLog()
        list.addObserver(log)
        let first = makeTab(1)
        let second = makeTab(2)
        let third = makeTab(3)
        try list.insert(first)
        try list.insert(second)
        let own = RealizationCounter()
        first.addObserver(own)
        try first.commitNavigation(to: Self.item(1))
        try first.goToItem(at: 0)
        try second.commitNavigation(to: Self.item(2), at: 1)
        #expect(log.lines == ["1 1 new", "1 0", "2 1 new"])
        #expect(own.navigations == [1, 0], "the tab's own observers still hear it")
        let detached = try list.detach(at: 1)
        try detached.commitNavigation(to: Self.item(3))
        let replaced = try list.replace(at: 0, with: third)
        try replaced.commitNavigation(to: Self.item(4))
        try third.commitNavigation(to: Self.item(5))
        #expect(log.lines == ["1 1 new", "1 0", "2 1 new", "3 1 new"])
        list.removeObserver(log)
        try third.commitNavigation(to: Self.item(6))
        #expect(log.lines.count == 4, "a removed observer hears nothing more")
    }

    /// Restored unrealized tabs: each has its FindTabHelper, answers its getters without
    /// realizing, and its helper hears its realization; a navigation after it reaches the list.
    @Test func restoredTabsHaveTheirHelpersAndAnswerTheirGetters() throws {
        // The list holds its delegate weakly, as a Browser's does its BrowserList's.
        let attacher = TabHelperAttacher()
        let list = WebStateList(delegate: attacher)
        let log = NavigationLog()
        list.addObserver(log)
        var loads = 0
        let tabs = (1...50).map { id in
            unrealizedTab(Int64(id), Self.metadata) {
                loads += 1
                return Self.history()
            }
        }
        let opener = WebStateOpener(openerID: tabs[49].id, navigationIndex: 0)
        let restored = tabs.enumerated().map { RestoredTab(webState: $1, opener: $0 == 0 ? opener : nil) }
        try list.restore(restored, identifiers: try UniqueWebStateIDs(tabs.map(\.id)), activeIndex: 3, pinnedCount: 2)
        for tab in tabs {
            let helper = try #require(tab.helper(FindTabHelper.self))
            #expect(helper.controller == nil && !tab.isRealized)
            #expect(tab.title == "B" && tab.url == "https://b.example/" && tab.navigationItemCount == 1)
        }
        #expect(loads == 0 && list.invariantViolations().isEmpty)
        #expect(try list.opener(at: 0) == opener)
        try tabs[3].commitNavigation(to: Self.item(1))
        #expect(tabs[3].helper(FindTabHelper.self)?.controller != nil, "the helper heard the realization")
        #expect(loads == 1 && log.lines == ["4 1 new"])
        withExtendedLifetime(attacher) {}
    }

    /// Helpers of two types on one tab: each kept, replaced in place by one of its own type,
    /// told of realization in the order they came, and all shut down on detach.
    @Test func helpersOfSeveralTypesWithoutATable() throws {
        let log = Log()
        let webState = unrealizedTab(7, Self.metadata) { Self.history() }
        let first = Helper("first", log)
        webState.attach(first)
        webState.attach(OtherHelper(log))
        let second = Helper("second", log)
        webState.attach(second)
        #expect(log.lines == ["first shutdown"])
        #expect(webState.helper(Helper.self) === second)
        #expect(webState.helper(OtherHelper.self) != nil && webState.helper(FindTabHelper.self) == nil)
        try webState.forceRealized()
        #expect(log.lines == ["first shutdown", "second realized", "other realized"])
        webState.detachHelpers()
        #expect(log.lines.suffix(2) == ["second shutdown", "other shutdown"])
        #expect(webState.helper(Helper.self) == nil && webState.helper(OtherHelper.self) == nil)
        webState.attach(first)
        #expect(webState.helper(Helper.self) === first, "a tab takes helpers again after a detach")
    }

    /// The identifiers are checked once: a duplicate is refused with the lowest one doubled,
    /// whatever the order; membership answers for every identifier, present or not.
    @Test func uniqueIdentifiersRefuseDuplicatesAndAnswerMembership() throws {
        func ids(_ raw: [Int64]) -> [WebStateID] { raw.map { WebStateID(rawValue: $0)! } }
        let duplicate = #expect(throws: UniqueWebStateIDs.Duplicate.self) {
            try UniqueWebStateIDs(ids([9, 3, 5, 9, 3, 1]))
        }
        #expect(duplicate?.id == WebStateID(rawValue: 3))
        let present: [Int64] = [40, 2, 17, 1, 1_000_000, 5, 3]
        let unique = try UniqueWebStateIDs(ids(present))
        #expect(unique.count == present.count && !unique.isEmpty)
        for raw in Int64(1)...60 {
            #expect(unique.contains(WebStateID(rawValue: raw)!) == present.contains(raw), "membership of \(raw)")
        }
        #expect(unique.contains(WebStateID(rawValue: 1_000_000)!) && !unique.contains(WebStateID(rawValue: 999_999)!))
        #expect(try UniqueWebStateIDs([]).isEmpty)
        let list = WebStateList()
        #expect(throws: WebStateListError.duplicateWebState(WebStateID(rawValue: 4)!)) {
            try list.restore(
                [makeTab(4), makeTab(6), makeTab(4)].map { RestoredTab(webState: $0, opener: nil) }, activeIndex: nil,
                pinnedCount: 0)
        }
        #expect(list.isEmpty)
    }

    /// A restore's identifiers against the profile family's other lists: the tab held there is
    /// named, in that list's order; none held, none named.
    @Test func theOtherListsAreCheckedAgainstTheRestoredIdentifiers() throws {
        let profile = Profile(stateDirectory: "/unused")
        let window = UUID()
        let regular = profile.browserList.browser(for: window).webStateList
        let incognito = profile.offTheRecordProfile.browserList.browser(for: window).webStateList
        for id in [10, 11, 12] as [Int64] { try regular.insert(makeTab(id)) }
        let restoring = try UniqueWebStateIDs([12, 20, 11].map { WebStateID(rawValue: $0)! })
        #expect(
            profile.offTheRecordProfile.firstWebStateHeld(among: restoring, outside: incognito)
                == WebStateID(rawValue: 11))
        #expect(profile.firstWebStateHeld(among: restoring, outside: regular) == nil)
        #expect(profile.firstWebStateHeld(among: try UniqueWebStateIDs([]), outside: incognito) == nil)
    }
}
