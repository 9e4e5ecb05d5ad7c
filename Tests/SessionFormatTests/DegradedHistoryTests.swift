import BrowserModel
import HostLimits
import Testing

@testable import SessionFormat

/// A degraded tab (its history lost in two generations) replays the journal's navigations by
/// entry number: past `Limits.maxNavigationEntries` the bounds drop its oldest entries, and a
/// later back/forward or commit still lands on the entry the journal names.
@Suite struct DegradedHistoryTests {
    static func page(_ number: Int64) -> NavigationItem {
        NavigationItem(
            url: "https://example.com/\(number)", title: "page \(number)",
            timestamp: Timestamp(microsecondsSinceEpoch: number))
    }

    /// The lost history had 3 entries (numbers 0...2, the current one last); the journal then
    /// committed entries 3...(3 + count − 1) one after another.
    static func degradedTab(committing count: Int64) throws -> (DegradedHistories, WebStateID, NavigationHistory) {
        let degraded = DegradedHistories()
        let id = try #require(WebStateID(rawValue: 1))
        let metadata = WebStateMetadata(
            creationTime: .zero, lastActiveTime: .zero, activePageTitle: "page 2",
            activePageURL: "https://example.com/2", navigationItemCount: 3)
        var history = degraded.degrade(id, metadata: metadata, reason: .readFailed(offset: 0, reason: "test"))
        for number in 3..<(3 + count) {
            degraded.replayNavigation(of: id, on: &history, item: page(number), number: number)
        }
        return (degraded, id, history)
    }

    @Test func backAfterTheBoundsDroppedEntriesLandsOnTheNamedEntry() throws {
        let count = Int64(Limits.maxNavigationEntries) + 10
        var (degraded, id, history) = try Self.degradedTab(committing: count)
        #expect(history.items.count == Limits.maxNavigationEntries)
        #expect(history.droppedItemCount > 0)
        let last = 2 + count
        degraded.replayNavigation(of: id, on: &history, item: nil, number: last - 5)
        #expect(history.currentItem == Self.page(last - 5))
    }

    @Test func aCommitAfterGoingBackTruncatesAtTheNamedEntry() throws {
        let count = Int64(Limits.maxNavigationEntries) + 3
        var (degraded, id, history) = try Self.degradedTab(committing: count)
        let last = 2 + count
        degraded.replayNavigation(of: id, on: &history, item: nil, number: last - 2)
        degraded.replayNavigation(of: id, on: &history, item: Self.page(1000), number: last - 1)
        #expect(history.currentItem == Self.page(1000))
        #expect(history.items.suffix(2) == [Self.page(last - 2), Self.page(1000)])
        #expect(history.currentIndex == history.items.count - 1)
    }
}
