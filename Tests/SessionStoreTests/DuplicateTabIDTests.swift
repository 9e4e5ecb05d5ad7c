import BrowserModel
import Foundation
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionFormat
@testable import SessionStore

/// Tab ids are unique across a window (commands address tabs by id alone, in either Browser).
/// A journal that brings into one Browser an id the other holds does not fit, like any record
/// that does not: replay stops before it, the journal is set aside, and the Browser restored
/// first (regular) keeps its tab. Before, both tabs came back under one id.
@Suite struct DuplicateTabIDTests {
    @Test func anIncognitoRecordThatReusesARegularTabsIDIsDamage() throws {
        try withTemporaryDirectory { root in
            // Regular tab 5, incognito tab 7, then incognito tab 5, in the journals.
            try writeWindowWithATabIDInBothBrowsers(root, windowID: windowID, compactAfterRecords: nil)

            let again = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            let recovery = try again.recover()
            #expect(again.regular.webStateList.webStates.map(\.id.rawValue) == [5])
            #expect(
                again.incognito.webStateList.webStates.map(\.id.rawValue) == [7],
                "the record that reused id 5 is not applied")
            #expect(recovery.regular.damaged.isEmpty)
            let damaged = try #require(
                recovery.incognito.damaged.first, "the incognito journal is set aside: \(recovery)")
            guard case .invalidState(_, .duplicateIdentifier(5)) = damaged.error else {
                Issue.record("set aside for \(damaged.error), not the duplicate id")
                return
            }
            #expect(damaged.setAsideAt != nil, "moved to damaged/, never deleted")

            // What restored is what the next start reads, without the damage again. Recovery
            // comes back at the last save it applied whole (2), not the snapshot's seq (0): the
            // snapshot it rewrites says 2, and the next start keeps the regular save at 1 (a
            // seq of 0 there made it take regular tab 5, acknowledged, for a save the incognito
            // Browser never had, and drop it).
            let third = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            let next = try third.recover()
            #expect(next.regular.damaged.isEmpty && next.incognito.damaged.isEmpty, "\(next)")
            #expect(third.incognito.webStateList.webStates.map(\.id.rawValue) == [7])
            #expect(recovery.incognito.seq == 2)
            #expect(third.regular.webStateList.webStates.map(\.id.rawValue) == [5], "\(next)")
        }
    }

    /// The same through snapshots: both compacted, each holding tab 5. The incognito snapshot
    /// (restored second) does not fit, and neither does its journal chain's record that brought
    /// tab 5 in: the incognito Browser comes back without it, the regular keeps it, and no
    /// id is held twice. Before, both tabs came back under one id.
    @Test func anIncognitoSnapshotThatHoldsARegularTabsIDIsDamage() throws {
        try withTemporaryDirectory { root in
            let options = StoreOptions(compactAfterRecords: 1)
            try writeWindowWithATabIDInBothBrowsers(root, windowID: windowID, compactAfterRecords: 1)

            let again = WindowStore(
                root: root, windowID: windowID, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
            let recovery = try again.recover()
            let regular = again.regular.webStateList.webStates.map(\.id.rawValue)
            let incognito = again.incognito.webStateList.webStates.map(\.id.rawValue)
            #expect(Set(regular).isDisjoint(with: incognito), "no id in both Browsers: \(regular) \(incognito)")
            #expect(regular == [5, 9], "the regular Browser, restored first, keeps its tabs: \(recovery)")
            #expect(!recovery.incognito.damaged.isEmpty && recovery.regular.damaged.isEmpty, "\(recovery)")
            #expect(
                recovery.incognito.damaged.contains {
                    if case .invalidState(_, .duplicateIdentifier(5)) = $0.error { true } else { false }
                }, "\(recovery.incognito.damaged)")
        }
    }

    /// The check is the profile family's: an id in the other Browser of the window, never the
    /// list being replayed (which refuses its own duplicates itself).
    @Test func theFamilyKnowsWhichListHoldsAnID() throws {
        let profile = Profile(stateDirectory: FilePath("/nowhere"))
        let regular = profile.browserList.browser(for: windowID).webStateList
        let incognito = profile.offTheRecordProfile.browserList.browser(for: windowID).webStateList
        try regular.insert(try onePageTab(5, "https://regular.example/"))
        let id = try #require(WebStateID(rawValue: 5))
        #expect(profile.offTheRecordProfile.holdsWebState(id, outside: incognito))
        #expect(profile.holdsWebState(id, outside: incognito))
        #expect(!profile.holdsWebState(id, outside: regular))
        #expect(!profile.offTheRecordProfile.holdsWebState(try #require(WebStateID(rawValue: 6)), outside: incognito))
    }
}
