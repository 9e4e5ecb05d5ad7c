import BrowserModel
import IOUring
import SessionFormat
import TestSupport
import Testing

@testable import SessionStore

/// A move received into a Browser with no session (an incognito one after its last tab closed,
/// or never made): the save creates the session, an empty generation, then appends the insert.
/// Killed between the two, the window must not claim the move: asked whether it holds it (after a
/// supervisor's restart), it would say yes, and the source would drop a tab no window has.
@Suite struct MovedInSessionCreatedTests {
    static let move: UInt64 = 0x5EED_0000_0000_0077

    @Test func aSessionCreatedForAMovedInTabDoesNotClaimTheMoveBeforeItsInsertIsDurable() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(engine)
        let incognito = store.incognito
        let tab = WebState(id: incognito.profile.makeWebStateID(), creationTime: .zero)
        try tab.commitNavigation(
            to: NavigationItem(
                url: "https://moved.example/", title: "moved", timestamp: Timestamp(microsecondsSinceEpoch: 1)))
        try store.apply(seq: 1, move: Self.move) { try incognito.webStateList.insert(tab, InsertionParams()) }
        let received = try #require(ReceivedMove(move: Self.move, tab: tab.id))
        store.noteMoveReceived(received, in: .incognito)
        #expect(store.tab(madeBy: Self.move) == tab.id, "held while the tab is there")
        // The session is made (its empty generation durable); the insert's append never lands.
        try store.stores[1].createIfNeeded(emptyThrough: 0)
        engine.powerCut()
        let (restored, _) = try simulatedWindow(engine)
        #expect(restored.incognito.webStateList.count == 0)
        #expect(restored.stores[1].movesReceived.tab(madeBy: Self.move) == nil, "an empty session claims no move")
        #expect(restored.tab(madeBy: Self.move) == nil)
    }
}
