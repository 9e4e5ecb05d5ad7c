import BrowserModel
import HostControl
import Testing

@testable import Stress

/// The oracle's judgement of a move between windows (`MoveObservation`, `WindowHistory.rewrite`),
/// on windows built by hand: each place a moved tab can end up in is told apart.
@Suite struct MoveOracleTests {
    /// A window of tabs `ids` (regular), each opened with one page, the last active.
    private static func window(_ ids: [Int64]) -> OracleWindow {
        var window = OracleWindow()
        for id in ids {
            _ = window.apply(
                .open(url: "https://\(id).example/", incognito: false, index: nil, opener: nil, background: false),
                tab: id)
        }
        return window
    }

    /// A window's history from empty (seq 0): tab `id` opened at seq `id`, for each of `ids`.
    private static func historyOpeningTabs(_ ids: ClosedRange<Int64>) -> WindowHistory {
        var history = WindowHistory(start: OracleWindow(), seq: 0)
        for id in ids { history.applied(seq: UInt64(id), window: window(Array(ids.lowerBound...id))) }
        return history
    }

    private let source = Self.window([1, 2, 3])
    private let destination = Self.window([7, 8])

    /// Tab 2 of the source to index 1 of the destination.
    private func move(durableInSource: Bool = true) -> MoveInFlight {
        MoveInFlight(
            source: "A", destination: "B", tab: 2, incognito: false, pinned: false, index: 1,
            page: source.pages[2], durableInSource: durableInSource)
    }

    private func judge(
        source shown: OracleWindow, destination received: OracleWindow, acknowledged: Bool = false,
        refused: Bool = false, sourceKilled: Bool = false, durableInSource: Bool = true
    ) -> MoveObservation {
        MoveObservation(
            move(durableInSource: durableInSource), source: dumpShowing(shown), destination: dumpShowing(received),
            destinationModel: destination, acknowledged: acknowledged, refused: refused, sourceKilled: sourceKilled)
    }

    @Test func theTabLandsWhereTheInsertPutsItWithItsHistoryAndNoOpener() throws {
        let (landed, index) = try #require(destination.receivingMoved(move(), as: 9))
        #expect(index == 1 && landed.regular.tabs.map(\.id) == [7, 9, 8])
        #expect(landed.regular.activeID == 8, "a moved tab is not activated")
        #expect(landed.pages[9] == source.pages[2] && landed.regular.tabs[1].openerID == nil)
        #expect(source.droppingMoved(2).regular.tabs.map(\.id) == [1, 3])
    }

    @Test func aCommittedMoveIsIntactAndNamesTheTabTheDestinationMade() throws {
        let landed = try #require(destination.receivingMoved(move(), as: 9)).window
        let seen = judge(source: source.droppingMoved(2), destination: landed, acknowledged: true)
        #expect(seen.outcome == .committed && seen.verdict == .intact && seen.received == landed)
    }

    @Test func anUndoneMoveIsIntactWhenNotAcknowledged() {
        let seen = judge(source: source, destination: destination, refused: true)
        #expect(seen.outcome == .undone && seen.verdict == .intact && seen.received == nil)
    }

    @Test func aTabInBothWindowsIsDuplicated() throws {
        let landed = try #require(destination.receivingMoved(move(), as: 9)).window
        #expect(judge(source: source, destination: landed).verdict == .duplicated)
        #expect(judge(source: source, destination: landed, acknowledged: true).verdict == .duplicated)
    }

    @Test func aTabInNeitherWindowIsLostInMoveWhenOneOwedIt() {
        let gone = source.droppingMoved(2)
        #expect(judge(source: gone, destination: destination).verdict == .lostInMove, "the source lived")
        #expect(
            judge(source: gone, destination: destination, sourceKilled: true).verdict == .lostInMove,
            "the source held it durably")
        #expect(
            judge(
                source: gone, destination: destination, acknowledged: true, sourceKilled: true, durableInSource: false
            )
            .verdict == .lostInMove, "the move was acknowledged")
        // A source killed before the tab it opened was durable may lose it, moved or not.
        #expect(
            judge(source: gone, destination: destination, sourceKilled: true, durableInSource: false).verdict
                == .intact)
    }

    @Test func anAcknowledgedMoveUndoneLostWhatTheDestinationAcknowledged() {
        #expect(judge(source: source, destination: destination, acknowledged: true).verdict == .lost)
    }

    @Test func aMoveAnsweredAsRefusedYetMadeIsUnexpected() throws {
        let landed = try #require(destination.receivingMoved(move(), as: 9)).window
        #expect(judge(source: source.droppingMoved(2), destination: landed, refused: true).verdict == .unexpected)
    }

    /// A tab at the landing index that is not the moved one (another URL) is no receipt.
    @Test func aDifferentTabWhereTheMovedOneWouldLandIsNoReceipt() throws {
        var impostor = try #require(destination.receivingMoved(move(), as: 9)).window
        _ = impostor.apply(.navigate(tab: 9, url: "https://elsewhere.example/"), tab: nil)
        #expect(judge(source: source.droppingMoved(2), destination: impostor).received == nil)
    }

    /// A source killed during a committed move comes back at any state since its last recovery,
    /// and the drop sent again takes a seq only where the tab was: the acknowledged seq follows.
    @Test func rewritingASourcesHistoryDropsTheTabEverywhereAndShiftsSeqsWhereItWas() {
        var history = Self.historyOpeningTabs(1...4)
        history.acknowledge(3)
        history.rewrite { ($0.droppingMoved(2), $0.tabIDs.contains(2)) }
        #expect(history.states.map(\.seq) == [0, 1, 3, 4, 5])
        #expect(history.states.allSatisfy { !$0.window.tabIDs.contains(2) })
        #expect(history.acknowledged == 4 && history.acknowledgedState.tabIDs == [1, 3])
        // Back at the acknowledged state, the drop applied at seq 4: intact.
        #expect(
            history.recovered(digest: Self.window([1, 2, 3, 4]).droppingMoved(2).digest, dump: nil, appliedSeq: 5)
                == .intact(recovered: 1))
    }

    /// A source killed during a move may come back without commands it had not acknowledged,
    /// its new worker numbering the drop above the seqs they had (the floor): the seq the move's
    /// reply gives it acknowledges the state it restored, not the commands lost in the gap.
    @Test func aSourceThatLostUnacknowledgedCommandsIsIntactOnceTheMoveIsAcknowledged() {
        var history = Self.historyOpeningTabs(1...4)
        history.acknowledge(2)
        history.rewrite { ($0.droppingMoved(2), $0.tabIDs.contains(2)) }
        // Back at seq 2 (tabs 1 and 2) with the floor at 4: the drop took seq 5, and the reply says so.
        #expect(history.acknowledge(5, afterRecovery: true) == 0 && history.acknowledged == 3)
        let restored = Self.window([1, 2]).droppingMoved(2)
        #expect(history.recovered(digest: restored.digest, dump: nil, appliedSeq: 5) == .intact(recovered: 0))
        #expect(history.acknowledged == 5 && history.acknowledgedState == restored)
        // The seq the reply acknowledged is held to from then on.
        #expect(history.recovered(digest: restored.digest, dump: nil, appliedSeq: 3) == .wentBack(seq: 3))
    }
}
