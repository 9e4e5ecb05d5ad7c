import BrowserModel
import IOUring
import TestSupport
import Testing

@testable import SessionStore

/// A caller that saves without ever polling (`windowhost save-loop`, the benchmarks) must not
/// make the store's event queue grow with every save.
@Suite struct EventQueueTests {
    @Test func savesWithoutPollingKeepTheQueueBoundedAndTheLatestSeq() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(engine)
        let list = store.regular.webStateList
        let profile = store.regular.profile
        let saves: UInt64 = 1_000
        for seq in 1...saves {
            try store.apply(seq: seq) {
                let tab = WebState(id: profile.makeWebStateID(), creationTime: .zero)
                try list.insert(tab)
            }
            try store.waitUntilDurable(seq)
        }
        let events = try store.poll()
        #expect(events.count <= WindowStore.maxQueuedEvents)
        #expect(events.last == .durable(saves))
        #expect(events.filter { if case .durable = $0 { true } else { false } }.count == 1)
    }
}
