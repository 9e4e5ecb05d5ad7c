import BrowserModel
import IOUring
import TestSupport
import Testing

@testable import SessionStore

/// A save that finishes inside a command (`background`, an explicit `save`, `teardown`) puts
/// its event in the store's one outbox, there as soon as the command returns: the worker loop
/// drains it after the command, and nothing is rebuilt from the store's state.
@Suite struct OutboxTests {
    /// A window whose delayed save never comes due (the clock stands still): only the commands save.
    private func window() throws -> WindowStore {
        try simulatedWindow(FaultEngine(directories: [simulatedRoot]), delay: 2500, clock: ManualClock()).0
    }

    private func openTab(_ store: WindowStore, seq: UInt64) throws {
        let profile = store.regular.profile
        try store.apply(seq: seq) {
            try store.regular.webStateList.insert(WebState(id: profile.makeWebStateID(), creationTime: .zero))
        }
    }

    /// Save 1 is in flight when the scene goes to the background: the background's turn finishes
    /// it (and starts save 2), and its durable event is in the outbox, once.
    @Test func aSaveFinishedInsideBackgroundIsInTheOutbox() throws {
        let store = try window()
        try openTab(store, seq: 1)
        try store.save()
        #expect(store.savingSeq == 1)
        try openTab(store, seq: 2)
        try store.background()
        #expect(store.takeEvents() == [.durable(1)])
        #expect(store.takeEvents().isEmpty, "drained once")
        #expect(try store.poll(waiting: true) == [.durable(2)])
    }

    @Test func aSaveFinishedInsideAnExplicitSaveIsInTheOutbox() throws {
        let store = try window()
        try openTab(store, seq: 1)
        try store.save()
        try openTab(store, seq: 2)
        try store.save()
        #expect(store.takeEvents() == [.durable(1)])
        #expect(store.savingSeq == 2)
    }

    @Test func aTeardownsSaveIsInTheOutbox() throws {
        let store = try window()
        try openTab(store, seq: 1)
        try openTab(store, seq: 2)
        try store.teardown()
        #expect(store.durableSeq == 2)
        #expect(store.takeEvents() == [.durable(2)])
        #expect(try store.poll().isEmpty, "nothing left for the loop to report again")
    }

    /// An outbox nobody drained for a while holds at most `maxQueuedEvents`, the oldest others
    /// going first; its durable event stays, whatever came after it (before, the cap dropped it
    /// like any other and the window's durable seq went unpublished until its next save).
    @Test func theDurableEventOutlivesAnOverflowingOutbox() throws {
        let store = try window()
        store.report(.durable(1))
        store.report(.durable(2))
        for _ in 0..<(WindowStore.maxQueuedEvents + 40) { store.report(.deletedIncognito) }
        let events = store.takeEvents()
        #expect(events.count == WindowStore.maxQueuedEvents)
        #expect(events.filter { $0 == .durable(2) }.count == 1 && !events.contains(.durable(1)), "\(events.prefix(3))")
    }
}
