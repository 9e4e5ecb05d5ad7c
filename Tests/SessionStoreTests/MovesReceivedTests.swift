import BrowserModel
import HostLimits
import SessionFormat
import TestSupport
import Testing

@testable import SessionStore

/// Issue 32: the moves a Browser received outlive restarts, from its journal's inserts and from
/// its snapshots, the last `Limits.movesRemembered` of them.
@Suite struct MovesReceivedTests {
    /// Tab after tab inserted under a move each (seq = move), noted as the window does.
    static func receive(_ moves: ClosedRange<UInt64>, in store: WindowStore) throws {
        for move in moves {
            let tab = newTab("https://moved.example/\(move)", store.regular.profile)
            try store.apply(seq: move, move: move) { try store.regular.webStateList.insert(tab) }
            store.noteMoveReceived(try #require(ReceivedMove(move: move, tab: tab.id)), in: .regular)
        }
        try store.waitUntilDurable(moves.upperBound)
    }

    @Test(arguments: [false, true]) func theLatestMovesComeBackFromTheJournalAndFromASnapshot(compacted: Bool) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(engine)
        let last = UInt64(Limits.movesRemembered + 2)
        try Self.receive(1...last, in: store)
        if compacted {
            store.stores[0].rewriteFromMemoryUnasked()
            try store.settle()
            #expect(store.stores[0].snapshotGeneration > 1)
        }
        let (again, _) = try simulatedWindow(engine)
        #expect(again.stores[0].movesReceived.moves.map(\.move) == Array(3...last), "the latest, oldest first")
        #expect(again.tab(madeBy: last) == again.regular.webStateList.webStates.last?.id)
        #expect(again.tab(madeBy: 2) == nil, "forgotten past the bound")
    }

    /// A detach under a move (the source's drop) replays as a detach; the moves received stay.
    @Test func aDetachUnderAMoveReplaysAsADetach() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(engine)
        try Self.receive(1...1, in: store)
        try store.apply(seq: 2, move: 0xD0) { _ = try store.regular.webStateList.detach(at: 0) }
        try store.waitUntilDurable(2)
        let (again, _) = try simulatedWindow(engine)
        #expect(again.regular.webStateList.isEmpty && again.tab(madeBy: 1) != nil && again.appliedSeq == 2)
    }
}
