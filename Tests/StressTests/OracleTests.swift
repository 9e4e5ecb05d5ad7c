import BrowserModel
import Foundation
import HostControl
import HostCoordination
import HostLimits
import Stress
import Supervisor
import Testing

/// The oracle's verdicts, on histories built by hand: each kind of outcome is told apart.
@Suite struct OracleTests {
    /// A window after `count` opens of tabs 1…count, one command each.
    private func history(opens count: Int, acknowledged: UInt64) -> (WindowHistory, [OracleWindow]) {
        var history = WindowHistory(start: OracleWindow(), seq: 0)
        var windows = [OracleWindow()]
        var window = OracleWindow()
        for id in 1...count {
            _ = window.apply(
                .open(
                    url: "https://\(id).example/", incognito: id % 3 == 0, index: nil, opener: nil, background: false),
                tab: Int64(id))
            history.applied(seq: UInt64(id), window: window)
            windows.append(window)
        }
        history.acknowledge(acknowledged)
        return (history, windows)
    }

    @Test func everythingAcknowledgedAndMoreIsIntactAndCountsTheRecovered() {
        var (history, windows) = history(opens: 6, acknowledged: 3)
        #expect(history.recovered(digest: windows[5].digest, dump: nil, appliedSeq: 5) == .intact(recovered: 2))
        #expect(history.current == windows[5] && history.lastSeq == 5)
    }

    @Test func aStateBeforeTheAcknowledgedOneIsLoss() {
        var (history, windows) = history(opens: 6, acknowledged: 4)
        #expect(history.recovered(digest: windows[1].digest, dump: nil, appliedSeq: 1) == .lost(count: 3))
        #expect(history.acknowledged == 1, "the campaign goes on from what came back")
    }

    @Test func theAcknowledgedStateAtALowerSeqWentBack() {
        var (history, windows) = history(opens: 4, acknowledged: 4)
        #expect(history.recovered(digest: windows[4].digest, dump: nil, appliedSeq: 3) == .wentBack(seq: 3))
        #expect(history.lastSeq == 3 && history.acknowledged == 3, "the model takes the seq the host came back at")
        #expect(history.recovered(digest: windows[4].digest, dump: nil, appliedSeq: 3) == .intact(recovered: 0))
    }

    @Test func tabsNoCommandCreatedAreUnexpectedAndAnyOtherStateIsTorn() {
        var (history, windows) = history(opens: 4, acknowledged: 2)
        var stranger = windows[2]
        _ = stranger.apply(
            .open(url: "https://never.example/", incognito: false, index: nil, opener: nil, background: false), tab: 99)
        #expect(history.recovered(digest: stranger.digest, dump: dumpShowing(stranger), appliedSeq: 3) == .unexpected)

        (history, windows) = self.history(opens: 4, acknowledged: 2)
        // Tabs 1 and 3 without 2: every id was sent, but no prefix looks like this.
        var torn = windows[3]
        _ = torn.apply(.close(tab: 2), tab: nil)
        #expect(history.recovered(digest: torn.digest, dump: dumpShowing(torn), appliedSeq: 3) == .torn)
        #expect(history.current.digest == torn.digest, "the model takes what came back")
    }

    /// A navigation and a back show the page before them again: a window that came back
    /// before both (they were not acknowledged) has the same digest as the model after them,
    /// but a shorter history. Matched by its history it is intact; by its digest alone the
    /// later state was taken, and the next forward made the model and the host part.
    @Test func aStateIsMatchedByItsHistoriesNotItsPagesAlone() {
        var window = OracleWindow()
        _ = window.apply(
            .open(url: "https://a.example/", incognito: false, index: nil, opener: nil, background: false), tab: 1)
        var history = WindowHistory(start: OracleWindow(), seq: 0)
        history.applied(seq: 1, window: window)
        history.acknowledge(1)
        let beforeBoth = window
        _ = window.apply(.navigate(tab: 1, url: "https://b.example/"), tab: nil)
        history.applied(seq: 2, window: window)
        _ = window.apply(.go(tab: 1, .back), tab: nil)
        history.applied(seq: 3, window: window)
        #expect(window.digest == beforeBoth.digest && window != beforeBoth)
        #expect(
            history.recovered(digest: beforeBoth.digest, dump: dumpShowing(beforeBoth), appliedSeq: 1)
                == .intact(recovered: 0))
        #expect(history.current == beforeBoth, "the model goes on from the state that came back")
        var forward = history.current
        _ = forward.apply(.go(tab: 1, .forward), tab: nil)
        #expect(forward == beforeBoth, "nothing ahead, as on the host")
    }

    @Test func theModelRefusesWhatTheHostMustRefuse() {
        var window = OracleWindow()
        let closedUnknown = window.apply(.close(tab: 5), tab: nil)
        let openedPastTheEnd = window.apply(
            .open(url: "x", incognito: false, index: 3, opener: nil, background: false), tab: 1)
        let opened = window.apply(.open(url: "x", incognito: false, index: 0, opener: nil, background: false), tab: 1)
        let openedFromAStranger = window.apply(
            .open(url: "y", incognito: false, index: nil, opener: 42, background: false), tab: 2)
        #expect(!closedUnknown && !openedPastTheEnd && opened && !openedFromAStranger)
        #expect(window.digest == OracleWindow(dump: dumpShowing(window)).digest, "a dump reads back to the same model")
    }

    @Test func theSameSeedMakesTheSameDecisions() {
        func decisions(_ seed: UInt64) -> [StressCommand] {
            var random = SeededGenerator(seed: seed)
            var window = OracleWindow()
            var next: Int64 = 1
            return (0..<300).map { _ in
                let command = StressCommand.next(for: window, using: &random)
                if case .tab(let change) = command, window.apply(change, tab: next) { next += 1 }
                return command
            }
        }
        #expect(decisions(5) == decisions(5))
        #expect(decisions(5) != decisions(6))
    }

    /// The oracle's history of pages steps as a real tab's does, through its bounds: navigations
    /// drop the entries ahead and, past `Limits.maxNavigationEntries`, the oldest; back and
    /// forward at an end change nothing.
    @Test func theOraclesHistoryStepsAsARealTabsDoes() throws {
        var random = SeededGenerator(seed: 3)
        var window = OracleWindow()
        let opened = window.apply(
            .open(url: "https://0.example/", incognito: false, index: nil, opener: nil, background: false), tab: 1)
        #expect(opened)
        let time = Timestamp(microsecondsSinceEpoch: 1)
        var history = NavigationHistory()
        history.commit(try NavigationItem.checked(url: "https://0.example/", timestamp: time))
        let tab = WebState(id: try #require(WebStateID(rawValue: 1)), creationTime: time, history: history)
        var stepsThatChanged = 0
        var longest = 0
        for step in 1...600 {
            let command: TabCommand
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<6: command = .navigate(tab: 1, url: "https://\(step).example/")
            case 6..<9: command = .go(tab: 1, .back)
            default: command = .go(tab: 1, .forward)
            }
            let before = window
            let applied = window.apply(command, tab: nil)
            #expect(applied)
            switch command {
            case .navigate(_, let url):
                try tab.commitNavigation(to: try NavigationItem.checked(url: url, timestamp: time))
            case .go(_, let direction):
                let target = try #require(try tab.navigationHistory().currentIndex) + direction.offset
                if try tab.navigationHistory().items.indices.contains(target) { try tab.goToItem(at: target) }
            default: break
            }
            let page = try #require(window.pages[1])
            let current = try tab.navigationHistory().currentIndex
            #expect(page.url == tab.url && page.current == current, "step \(step): \(command)")
            #expect(page.urls.count == tab.navigationItemCount, "step \(step)")
            if case .go = command, window != before { stepsThatChanged += 1 }
            longest = max(longest, page.urls.count)
        }
        #expect(longest == Limits.maxNavigationEntries, "the bound was reached")
        #expect(stepsThatChanged > 100)
    }

    /// A tab learned from a dump shows its current page only: the oracle cannot know where a
    /// step lands, so it refuses one and the campaign never sends one; every other verb it does.
    @Test func aTabLearnedFromADumpIsSentNoStepAndEveryOtherVerbIs() {
        var window = OracleWindow()
        for id in 1...4 as ClosedRange<Int64> {
            _ = window.apply(
                .open(url: "https://\(id).example/", incognito: id == 4, index: nil, opener: nil, background: false),
                tab: id)
        }
        let learned = OracleWindow(dump: dumpShowing(window))
        var copy = learned
        #expect(!copy.apply(.go(tab: 1, .back), tab: nil) && copy == learned)
        var random = SeededGenerator(seed: 8)
        let decisions = (0..<2000).map { _ in StressCommand.next(for: learned, using: &random) }
        #expect(!decisions.contains { if case .tab(.go) = $0 { true } else { false } })
        let sent = (0..<2000).map { _ in StressCommand.next(for: window, using: &random) }
        for verb in ["pin", "unpin", "back", "forward"] {
            #expect(sent.contains { $0.description.hasPrefix(verb + " ") }, "\(verb) is in the mix")
        }
    }

    @Test func aWindowTheOracleCannotExplainIsDescribedFieldByField() {
        var window = OracleWindow()
        for id in 1...3 as ClosedRange<Int64> {
            _ = window.apply(
                .open(
                    url: "https://\(id).example/", incognito: false, index: nil, opener: id == 3 ? 1 : nil,
                    background: false), tab: id)
        }
        #expect(window.differences(from: dumpShowing(window)).isEmpty)
        var shown = dumpShowing(window)
        shown.regular.activeIndex = 0
        shown.regular.tabs[2].opener = nil
        shown.regular.tabs[1].url = "https://other.example/"
        #expect(
            window.differences(from: shown) == [
                "regular active 1, the model 3", "tab 2 shows https://other.example/, the model https://2.example/",
                "tab 3 opener -, the model 1",
            ])
    }
}

/// What a host whose window is `window` would dump: digest, tabs, pages and histories, at `seq`.
func dumpShowing(_ window: OracleWindow, seq: UInt64 = 0) -> DumpReply {
    func browser(_ list: ReferenceList) -> DumpReply.BrowserContents {
        DumpReply.BrowserContents(
            activeIndex: list.activeID.flatMap(list.index(of:)).map { Int32($0) },
            tabs: list.tabs.enumerated().map { index, tab in
                DumpReply.Tab(
                    id: tab.id, url: window.urls[tab.id] ?? "", title: "", realized: true,
                    pinned: index < list.pinnedCount, opener: tab.openerID,
                    historyIndex: window.pages[tab.id].map { Int32($0.current) },
                    historyCount: Int32(window.pages[tab.id]?.urls.count ?? 0), lastActiveTimeUs: 0)
            })
    }
    return DumpReply(
        window: "", appliedSeq: seq, durableSeq: seq, digest: String(format: "%016llx", window.digest),
        regular: browser(window.regular), incognito: browser(window.incognito))
}
