import BrowserModel
import Foundation
import HostLimits
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionFormat
@testable import SessionStore

/// Issue 13 item 3: saves are pipelined. While saves are in flight, commands go on being
/// applied and the next save is submitted at once, up to `StoreOptions.savesInFlight`; they
/// are acknowledged in seq order whatever order their writes land in; a failed save takes back
/// every save after it, and the next save covers the space they used.
@Suite struct PipelinedSaveTests {
    /// Opens one tab in a Browser as command `seq`: a record that replayed twice would put
    /// the same tab in the list twice.
    private func openTab(_ store: WindowStore, seq: UInt64, in kind: BrowserKind = .regular) throws {
        let browser = store.browser(kind)
        try store.apply(seq: seq) {
            try browser.webStateList.insert(
                WebState(id: browser.profile.makeWebStateID(), creationTime: .zero), InsertionParams(activate: true))
        }
    }

    private func durableEvents(_ events: [SaveEvent]) -> [UInt64] {
        events.compactMap { if case .durable(let seq) = $0 { seq } else { nil } }
    }

    private func journal(_ disk: FaultEngine, _ store: WindowStore) throws -> JournalFile.Scan {
        let path = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
            BrowserKind.regular.rawValue
        )
        .appending(DiskLayout.journalName(store.stores[0].generation))
        return try JournalFile.scan(InMemoryBytes(try #require(disk.contents(of: path))))
    }

    /// Saves go out while earlier ones are in flight, at most the bound; writes landing newest
    /// first are acknowledged oldest first, each once, and a power cut then gives what was
    /// acknowledged.
    @Test func savesAreSubmittedWhileOthersAreInFlightAndAcknowledgedInSeqOrder() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(disk)
        try openTab(store, seq: 1)
        try store.waitUntilDurable(1)
        _ = store.takeEvents()

        var landing = false
        disk.completionOrder = { queued in landing ? queued - 1 : nil }
        let bound = UInt64(Limits.maxSavesInFlight)
        for seq in 2...bound + 2 {
            try openTab(store, seq: seq)
            let events = try store.poll()
            #expect(events.isEmpty, "\(events)")
        }
        #expect(
            disk.inFlight == Limits.maxSavesInFlight, "saves 2 to \(bound + 1) in flight, \(bound + 2) waits for room")
        #expect(store.savingSeq == bound + 1 && store.durableSeq == 1)

        landing = true
        var acknowledged: [UInt64] = []
        for _ in 0..<2 * Limits.maxSavesInFlight + 4 where store.durableSeq < bound + 2 {
            acknowledged += durableEvents(try store.poll())
            #expect(store.durableSeq == acknowledged.last ?? 1)
        }
        #expect(
            acknowledged == [bound + 1, bound + 2],
            "the newest landed first and waited for every one before it; then the last went alone")
        #expect(try journal(disk, store).commits.map(\.commit.seq) == Array(1...bound + 2))
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(disk) == live)
    }

    /// Save 2 fails after save 3, written after it, landed: neither is acknowledged, both go
    /// again in one save over their space, padded past save 3's end, so save 3's stale copy
    /// never follows it in the journal. (Without the padding, recovery replayed save 3 twice.)
    @Test func aFailedSaveTakesBackTheLandedOneAfterItAndTheRetryCoversIt() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(disk)
        try openTab(store, seq: 1)
        try store.waitUntilDurable(1)

        var landing = false
        disk.completionOrder = { queued in landing ? queued - 1 : nil }
        try openTab(store, seq: 2)
        _ = try store.poll()
        try openTab(store, seq: 3)
        _ = try store.poll()
        #expect(disk.inFlight == 2)
        let endBefore = store.stores[0].journalEnd
        // Save 3 runs first (operation +1), then save 2 fails (+2).
        disk.failures[disk.operationCount + 2] = .ioError
        landing = true
        var events: [SaveEvent] = []
        for _ in 0..<4 { events += try store.poll() }
        #expect(durableEvents(events).isEmpty && store.durableSeq == 1)
        #expect(
            events.failures.count == 1 && events.failures.first?.error.errno == .ioError,
            "one failure for the Browser, not one per save")
        #expect(store.stores[0].journalEnd == endBefore, "nothing confirmed")

        let stale = try journal(disk, store).commits.map(\.commit.seq)
        #expect(stale == [1], "save 2's blocks read as zeros, so the reader stops before save 3")

        disk.completionOrder = nil
        try store.waitUntilDurable(3)
        let found = try journal(disk, store)
        #expect(found.commits.map(\.commit.seq) == [1, 3], "saves 2 and 3 went again as one")
        #expect(found.commits.last.map(\.end) ?? 0 >= endBefore + 2 * 512, "padded to cover both saves taken back")
        let live = try WindowContents(store)
        #expect(live.regular.tabs.count == 3)
        #expect(try contentsAfterPowerCut(disk) == live)
    }

    /// A power cut while several saves of both Browsers are in flight, whose regular writes
    /// landed and incognito ones never ran: recovery leaves out every save the incognito
    /// Browser lacks, not only the last, and the window comes back as acknowledged. (Leaving
    /// out only the last brought back two unacknowledged regular tabs without their partners.)
    @Test func aCutWithSeveralSavesInFlightLeavesOutEverySaveTheOtherBrowserLacks() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(disk)
        try openTab(store, seq: 1)
        try openTab(store, seq: 2, in: .incognito)
        try store.waitUntilDurable(2)
        let acknowledged = try WindowContents(store)

        var picks: [Int] = []
        disk.completionOrder = { _ in picks.isEmpty ? nil : picks.removeFirst() }
        for seq in stride(from: 3, through: 7, by: 2) as StrideThrough<UInt64> {
            try openTab(store, seq: seq)
            try openTab(store, seq: seq + 1, in: .incognito)
            _ = try store.poll()
        }
        #expect(disk.inFlight == 6 && store.savingSeq == 8, "three saves of both Browsers in flight")
        // Queued in submit order, each save's regular chain before its incognito one: the
        // regular chains are at 0, then 1 and 2 once those before them ran.
        picks = [0, 1, 2]
        for _ in 0..<3 { _ = try store.poll() }
        #expect(disk.inFlight == 3 && store.durableSeq == 2)
        disk.powerCut()
        disk.completionOrder = nil
        let (restored, recovery) = try simulatedWindow(disk)
        #expect(try WindowContents(restored) == acknowledged, "\(recovery)")
        #expect(recovery.seq == 2)
    }

    /// The incognito part of save 4 fails while the regular parts of saves 4 and 6 (both naming
    /// incognito) landed: both regular appends are taken back, go again padded over their
    /// space, and every tab comes back after a power cut, the incognito ones once its backoff
    /// passed.
    @Test func aPartnersFailureTakesBackEveryLaterSaveOfTheOtherBrowser() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let clock = ManualClock()
        let (store, _) = try simulatedWindow(disk, clock: clock)
        try openTab(store, seq: 1)
        try openTab(store, seq: 2, in: .incognito)
        try store.waitUntilDurable(2)
        _ = store.takeEvents()
        let regularEnd = store.stores[0].journalEnd

        var picks: [Int] = []
        disk.completionOrder = { _ in picks.isEmpty ? nil : picks.removeFirst() }
        for seq in [3, 5] as [UInt64] {
            try openTab(store, seq: seq)
            try openTab(store, seq: seq + 1, in: .incognito)
            _ = try store.poll()
        }
        #expect(disk.inFlight == 4)
        // Queue: regular 4, incognito 4, regular 6, incognito 6. Regular 4 lands, incognito 4
        // fails, regular 6 and incognito 6 land.
        disk.failures[disk.operationCount + 2] = .ioError
        picks = [0, 0, 0, 0]
        var events: [SaveEvent] = []
        for _ in 0..<4 { events += try store.poll() }
        #expect(durableEvents(events).isEmpty && store.durableSeq == 2)
        #expect(events.failures.map(\.browser) == [.incognito])
        #expect(store.stores[0].journalEnd == regularEnd, "the regular saves are taken back")

        disk.completionOrder = nil
        clock.advance(milliseconds: 100)
        try store.waitUntilDurable(6)
        let live = try WindowContents(store)
        #expect(live.regular.tabs.count == 3 && live.incognito.tabs.count == 3)
        #expect(try contentsAfterPowerCut(disk) == live)
    }

    /// On the ring and real ext4: commands applied while saves are in flight, several at once,
    /// then a kill (the store dropped, nothing more written): every acknowledged tab is there.
    @Test func onTheRingSavesOverlapAndAKillKeepsWhatWasAcknowledged() throws {
        try withTemporaryDirectory { root in
            var acknowledged: WindowContents?
            var overlapped = false
            do {
                let store = WindowStore(
                    root: root, windowID: windowID, engine: try UringEngine(), saveDelayMilliseconds: 0)
                _ = try store.recover()
                for seq in 1...200 as ClosedRange<UInt64> {
                    try openTab(store, seq: seq)
                    try store.turn()
                    if store.engine.inFlight > 1 { overlapped = true }
                    if seq == 150 {
                        try store.waitUntilDurable(150)
                        acknowledged = try WindowContents(store)
                    }
                }
            }
            #expect(overlapped, "a save was submitted while an earlier one was in flight")
            let again = WindowStore(root: root, windowID: windowID, engine: SyncEngine())
            let recovery = try again.recover()
            #expect(recovery.seq >= 150 && recovery.regular.damaged.isEmpty)
            let restored = try WindowContents(again)
            let expected = try #require(acknowledged)
            #expect(Array(restored.regular.tabs.prefix(150)) == expected.regular.tabs)
        }
    }

    /// With the bound at 1 the store saves as before pipelining: one save in flight.
    @Test func aBoundOfOneKeepsOneSaveInFlight() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(disk, options: StoreOptions(savesInFlight: 1))
        disk.completionOrder = { _ in nil }
        for seq in 1...3 as ClosedRange<UInt64> {
            try openTab(store, seq: seq)
            _ = try store.poll()
        }
        #expect(disk.inFlight == 1 && store.savingSeq == 1)
        #expect(
            StoreOptions(savesInFlight: 99).savesInFlight == Limits.maxSavesInFlight
                && StoreOptions(savesInFlight: 0).savesInFlight == 1)
    }
}
