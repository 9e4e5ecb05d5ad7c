import BrowserModel
import Testing

@testable import SessionFormat

/// Journal replay restores tabs unrealized, as a snapshot does: whatever mix of snapshot and
/// journal holds a list, every tab comes back unrealized, answers its title, URL, item count and
/// times from what was stored, and realizes to the history the live list had. A new snapshot
/// of the replayed list carries each journal tab's stored bytes without realizing it.
@Suite struct LazyReplayTests {
    static let seeds: [UInt64] = [1, 7, 28, 2026]

    /// What a tab answers without its history, and its identity.
    static func shown(_ list: WebStateList) -> [WebStateMetadata] { list.webStates.map(\.metadata) }

    @Test(arguments: seeds) func aJournalAloneReplaysEveryTabUnrealized(seed: UInt64) throws {
        var session = BrowsingSession(seed: seed)
        try session.run(commands: 400)
        let replayed = try replay(session.records)
        #expect(!replayed.webStates.isEmpty)
        #expect(
            replayed.webStates.allSatisfy { !$0.isRealized },
            "replay realized \(replayed.webStates.filter(\.isRealized).map(\.id))")
        // Titles, URLs, counts and both times, answered from the kept bytes' metadata.
        #expect(Self.shown(replayed) == Self.shown(session.list))
        #expect(replayed.webStates.allSatisfy { !$0.isRealized }, "reading metadata realized nothing")
        #expect(try contents(replayed) == contents(session.list))
    }

    /// A snapshot, then a journal whose navigation records name tabs the snapshot holds: those
    /// are applied to the snapshot's stored histories, and the tabs stay unrealized.
    @Test(arguments: seeds) func aSnapshotAndAJournalReplayEveryTabUnrealized(seed: UInt64) throws {
        var session = BrowsingSession(seed: seed)
        try session.run(commands: 200)
        let snapshotSeq = UInt64(200)
        let snapshot = try snapshotBytes(session.list, seq: snapshotSeq)
        let recordsBefore = session.records.count
        try session.run(commands: 200, firstSeq: snapshotSeq + 1)
        let list = WebStateList()
        let profile = Profile(stateDirectory: "/unused")
        try SnapshotReader(InMemoryBytes(snapshot)).restore(into: list, profile: profile)
        let replayed = try replay(Array(session.records[recordsBefore...]), onto: list, profile: profile)
        let navigations = session.records[recordsBefore...].filter {
            if case .navigation = $0.storage.mutation { true } else { false }
        }
        #expect(!navigations.isEmpty, "the journal navigates tabs")
        #expect(
            replayed.webStates.allSatisfy { !$0.isRealized },
            "replay realized \(replayed.webStates.filter(\.isRealized).map(\.id))")
        #expect(Self.shown(replayed) == Self.shown(session.list))
        #expect(try contents(replayed) == contents(session.list))
    }

    /// A compaction of a replayed list writes each journal tab from its kept bytes: nothing is
    /// realized, and the new snapshot restores the same list.
    @Test(arguments: seeds) func aSnapshotOfReplayedTabsRealizesNone(seed: UInt64) throws {
        var session = BrowsingSession(seed: seed)
        try session.run(commands: 300)
        let replayed = try replay(session.records)
        let bytes = try SnapshotEncoder.encode(replayed, lastCommandSeq: 300) {
            (webState) throws(SessionFormatError) -> [UInt8] in
            guard let (stored, index) = webState.storedContent, let kept = stored as? JournalTabs else {
                throw .readFailed(offset: 0, reason: "tab \(webState.id) has no kept history")
            }
            return kept.historyPayload(at: index)
        }
        #expect(replayed.webStates.allSatisfy { !$0.isRealized })
        let again = WebStateList()
        try SnapshotReader(InMemoryBytes(bytes)).restore(into: again, profile: Profile(stateDirectory: "/unused"))
        #expect(Self.shown(again) == Self.shown(session.list))
        #expect(try contents(again) == contents(session.list))
    }

    /// A navigation record that does not fit the stored history is refused, as it is against a
    /// realized one, and leaves the tab as it was.
    @Test func aNavigationPastTheStoredHistoryIsRefused() throws {
        var session = BrowsingSession(seed: 5)
        try session.run(commands: 50)
        let replayed = try replay(session.records)
        let tab = try #require(replayed.webStates.first)
        let before = tab.metadata
        var storage = MutationStorage()
        storage.seq = 51
        storage.activeIdentifier = replayed.activeWebState?.id.rawValue ?? 0
        var navigation = Windowhost_Session_NavigationMutation()
        navigation.identifier = tab.id.rawValue
        navigation.itemIndex = Int64(tab.navigationItemCount) + 5
        storage.navigation = navigation
        #expect(throws: SessionFormatError.InvalidState.self) {
            try JournalReplayer.apply(
                JournalRecord(storage), to: replayed, profile: Profile(stateDirectory: "/unused"),
                keepingIn: JournalTabs())
        }
        #expect(!tab.isRealized && tab.metadata == before)
    }

    /// The activation record carries the tab's last-active time; one written before the field
    /// (0) leaves the time as it was.
    @Test func anActivationRecordRestoresTheLastActiveTime() throws {
        let profile = Profile(stateDirectory: "/unused")
        let list = WebStateList()
        let recorder = JournalRecorder(list: list)
        recorder.commandSeq = 1
        for second in 1...2 {
            let tab = WebState(
                id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: Int64(second)))
            try list.insert(tab, InsertionParams(index: nil, activate: true))
        }
        recorder.commandSeq = 2
        let first = try list.webState(at: 0)
        first.wasActivated(at: Timestamp(microsecondsSinceEpoch: 1_000))
        try list.activate(at: 0)
        var records = try recorder.takeRecords()
        let replayed = try replay(records)
        #expect(
            replayed.activeWebState?.id == first.id
                && replayed.activeWebState?.lastActiveTime.microsecondsSinceEpoch == 1_000)

        // The same activation as an older build wrote it.
        guard case .activate = records[records.count - 1].storage.mutation else {
            Issue.record("not an activation")
            return
        }
        var old = records[records.count - 1].storage
        old.activate = Windowhost_Session_ActivateMutation()
        records[records.count - 1] = JournalRecord(old)
        let older = try replay(records)
        #expect(
            older.activeWebState?.id == first.id && older.activeWebState?.lastActiveTime.microsecondsSinceEpoch == 1)
    }
}
