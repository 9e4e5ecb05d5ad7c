import BrowserModel
import Testing

@testable import SessionFormat

/// A journal replay reads and writes each tab's stored history a fixed number of times,
/// whatever number of navigation records the tab has: decoded at its first navigation record,
/// changed in memory by the later ones, stored as bytes once the replay ends
/// (`JournalTabs.storeReplayed`). Decoding and storing it again at each record made a window's
/// restore quadratic in a tab's history bytes.
@Suite struct LinearReplayTests {
    /// A tab inserted, then navigated `navigations` times (every fourth a step back), each a
    /// command of its own; the live list and its records.
    static func navigatedTab(_ navigations: Int) throws -> (WebStateList, [JournalRecord]) {
        let profile = Profile(stateDirectory: "/unused")
        let list = WebStateList()
        let recorder = JournalRecorder(list: list)
        recorder.commandSeq = 1
        let tab = WebState(id: profile.makeWebStateID(), creationTime: .zero)
        try list.insert(tab, InsertionParams(index: nil, activate: true))
        for step in 0..<navigations {
            recorder.commandSeq = UInt64(step) + 2
            let current = try tab.navigationHistory().currentIndex ?? 0
            if step % 4 == 3, current > 0 {
                try tab.goToItem(at: current - 1)
            } else {
                try tab.commitNavigation(
                    to: NavigationItem(
                        url: "https://example.com/\(step)", title: "page \(step)",
                        timestamp: Timestamp(microsecondsSinceEpoch: Int64(step))))
            }
        }
        return (list, try recorder.takeRecords())
    }

    /// Replays `records` onto a new list through one `JournalTabs`, then stores what it holds
    /// in memory, as recovery does.
    static func replayed(_ records: [JournalRecord]) throws -> (WebStateList, JournalTabs) {
        let list = WebStateList()
        let stored = JournalTabs()
        let profile = Profile(stateDirectory: "/unused")
        for record in records { try JournalReplayer.apply(record, to: list, profile: profile, keepingIn: stored) }
        stored.storeReplayed()
        return (list, stored)
    }

    /// Past `Limits.maxNavigationEntries` (75) too, where the bounds drop the oldest entries.
    @Test(arguments: [4, 40, 200]) func aTabsHistoryIsDecodedOnceAndStoredTwiceWhateverItsRecords(
        navigations: Int
    ) throws {
        let (live, records) = try Self.navigatedTab(navigations)
        #expect(
            records.filter { if case .navigation = $0.storage.mutation { true } else { false } }.count == navigations)
        let (list, stored) = try Self.replayed(records)
        // Encoded at its insert and once the replay ended; decoded at its first navigation.
        #expect(stored.historiesDecoded == 1 && stored.historiesEncoded == 2)
        let tab = try #require(list.webStates.first)
        let kept = try #require(tab.storedContent)
        #expect(!tab.isRealized && !stored.isReplaying(at: kept.index))
        #expect(LazyReplayTests.shown(list) == LazyReplayTests.shown(live))
        #expect(try contents(list) == contents(live))
    }

    /// A navigation record that does not fit a history held in memory is refused and leaves it
    /// as it was: the record is checked before the history changes in place.
    @Test func aRefusedRecordLeavesAHistoryHeldInMemoryAsItWas() throws {
        let (live, records) = try Self.navigatedTab(10)
        let list = WebStateList()
        let stored = JournalTabs()
        let profile = Profile(stateDirectory: "/unused")
        for record in records { try JournalReplayer.apply(record, to: list, profile: profile, keepingIn: stored) }
        let tab = try #require(list.webStates.first)
        let kept = try #require(tab.storedContent)
        #expect(stored.isReplaying(at: kept.index))
        for itemIndex in [Int64(tab.navigationItemCount), Int64(tab.navigationItemCount) + 5, -1] {
            var storage = MutationStorage()
            storage.seq = 20
            storage.activeIdentifier = tab.id.rawValue
            var navigation = Windowhost_Session_NavigationMutation()
            navigation.identifier = tab.id.rawValue
            navigation.itemIndex = itemIndex
            storage.navigation = navigation
            #expect(throws: SessionFormatError.InvalidState.self) {
                try JournalReplayer.apply(JournalRecord(storage), to: list, profile: profile, keepingIn: stored)
            }
        }
        stored.storeReplayed()
        #expect(!tab.isRealized && LazyReplayTests.shown(list) == LazyReplayTests.shown(live))
        #expect(try contents(list) == contents(live))
    }
}
