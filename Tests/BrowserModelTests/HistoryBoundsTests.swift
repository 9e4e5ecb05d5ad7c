import BrowserModel
import HostLimits
import Testing

/// A history is bounded as a browser bounds it, and a tab takes no entry it could not save.
@Suite struct HistoryBoundsTests {
    private func item(_ n: Int, url: String? = nil) -> NavigationItem {
        NavigationItem(
            url: url ?? "https://site.example/\(n)", title: "page \(n)",
            timestamp: Timestamp(microsecondsSinceEpoch: Int64(n)))
    }

    /// Past `Limits.maxNavigationEntries` each navigation drops the oldest entry; entries keep
    /// their numbers, so an index recorded before a drop still names its entry.
    @Test func aNavigationPastTheCapDropsTheOldestEntry() throws {
        let tab = WebState(id: WebStateID(rawValue: 1)!, creationTime: .zero)
        for n in 0..<100 { try tab.commitNavigation(to: item(n)) }
        let history = try tab.navigationHistory()
        #expect(Limits.maxNavigationEntries == 75)
        #expect(history.items.count == 75)
        #expect(history.items.first?.url == "https://site.example/25", "the oldest 25 went")
        #expect(history.currentItem?.url == "https://site.example/99")
        #expect(history.currentIndex == 74)
        #expect(history.droppedItemCount == 25)
        #expect(history.itemNumber(at: 0) == 25)
        #expect(history.index(ofItemNumber: 99) == 74)
        #expect(history.index(ofItemNumber: 24) == nil, "a dropped entry has no index")
        #expect(tab.navigationItemCount == 75)
    }

    /// Back, then a navigation: the forward entries go first (as always), then the oldest.
    @Test func goingBackThenNavigatingKeepsTheCap() throws {
        let tab = WebState(id: WebStateID(rawValue: 1)!, creationTime: .zero)
        for n in 0..<75 { try tab.commitNavigation(to: item(n)) }
        try tab.goToItem(at: 10)
        try tab.commitNavigation(to: item(1000))
        var history = try tab.navigationHistory()
        #expect(history.items.count == 12 && history.droppedItemCount == 0)
        for n in 0..<70 { try tab.commitNavigation(to: item(2000 + n)) }
        history = try tab.navigationHistory()
        #expect(history.items.count == 75)
        #expect(history.droppedItemCount == 7)
        #expect(history.currentItem?.url == "https://site.example/2069")
    }

    /// Long URLs: the text budget drops the oldest entries before the count does, so a whole
    /// history (and a journal record carrying it) always fits one stored record.
    @Test func urlAndTitleBytesAreBoundedPerHistory() throws {
        let tab = WebState(id: WebStateID(rawValue: 1)!, creationTime: .zero)
        let longURL = "https://long.example/" + String(repeating: "x", count: Limits.maxURLBytes - 21)
        #expect(longURL.utf8.count == Limits.maxURLBytes)
        for n in 0..<40 { try tab.commitNavigation(to: item(n, url: String(longURL.dropLast()) + "\(n % 10)")) }
        let history = try tab.navigationHistory()
        let textBytes = history.items.reduce(0) { $0 + $1.url.utf8.count + $1.title.utf8.count }
        #expect(textBytes <= Limits.maxHistoryTextBytes)
        #expect(history.items.count < 40 && history.items.count >= 25, "\(history.items.count) entries")
        #expect(history.droppedItemCount == 40 - history.items.count)
        #expect(history.currentIndex == history.items.count - 1)
    }

    /// A URL or title over the bound is refused with a typed error, and nothing changes.
    @Test func aURLOverTheBoundIsRefusedNotTruncated() throws {
        let tab = WebState(id: WebStateID(rawValue: 1)!, creationTime: .zero)
        try tab.commitNavigation(to: item(0))
        let tooLong = String(repeating: "u", count: Limits.maxURLBytes + 1)
        #expect(
            throws: WebStateError.invalidItem(
                tab.id, .urlTooLong(bytes: Limits.maxURLBytes + 1, limit: Limits.maxURLBytes))
        ) {
            try tab.commitNavigation(to: NavigationItem(url: tooLong, timestamp: .zero))
        }
        #expect(
            throws: WebStateError.invalidItem(
                tab.id, .titleTooLong(bytes: Limits.maxTitleBytes + 1, limit: Limits.maxTitleBytes))
        ) {
            try tab.commitNavigation(
                to: NavigationItem(
                    url: "https://ok.example/", title: String(repeating: "t", count: Limits.maxTitleBytes + 1),
                    timestamp: .zero))
        }
        #expect(throws: NavigationItemError.urlTooLong(bytes: Limits.maxURLBytes + 1, limit: Limits.maxURLBytes)) {
            try NavigationItem.checked(url: tooLong, timestamp: .zero)
        }
        #expect(try tab.navigationHistory().items == [item(0)])
    }

    /// A history made over the bounds (as stored before they existed) is cut keeping the entries
    /// nearest the current one: the oldest first, then the forward entries from the far end.
    @Test func aHistoryOverTheBoundsIsCutAroundTheCurrentEntry() throws {
        let items = (0..<100).map { item($0) }
        let late = try #require(NavigationHistory(items: items, currentIndex: 90))
        #expect(late.items.count == 75 && late.droppedItemCount == 25 && late.currentItem == items[90])
        #expect(late.items.last == items[99], "forward entries stay while the oldest can go")
        let early = try #require(NavigationHistory(items: items, currentIndex: 5))
        #expect(early.items.count == 75 && early.droppedItemCount == 5 && early.currentIndex == 0)
        #expect(early.items.last == items[79], "then the forward entries furthest away went")
        let middle = try #require(NavigationHistory(items: items, currentIndex: 20, droppedItemCount: 3))
        #expect(middle.items.first == items[20] && middle.droppedItemCount == 23 && middle.currentIndex == 0)
        #expect(NavigationHistory(items: items, currentIndex: 0, droppedItemCount: -1) == nil)
        #expect(
            NavigationHistory(items: items, currentIndex: 0, droppedItemCount: Int(Limits.maxCommandSeq) + 1) == nil)
    }
}
