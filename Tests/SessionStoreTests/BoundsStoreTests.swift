import BrowserModel
import Foundation
import Glibc
import HostLimits
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionFormat
@testable import SessionStore

/// What issue 11 items 1, 2 (on disk) and 6 require of a store on real files: files written by
/// the previous release read unchanged, a huge window and a huge history come back after a
/// restart, numbers out of range are damage, and nothing is read or deleted blindly.
@Suite struct BoundsStoreTests {
    private static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/format1-window")

    private func windowDirectory(_ root: FilePath, _ window: UUID = windowID) -> FilePath {
        root.appending(DiskLayout.windows).appending(window.uuidString)
    }

    private func files(_ directory: FilePath) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: directory.string)) ?? [])
    }

    /// The fixture, written by the code at 01a7bb8 (format 1, no history cap): it restores
    /// without damage to what today's model makes of the same commands, the one history past
    /// the cap cut to its newest 75 entries; and the store goes on saving onto it.
    @Test func filesWrittenByTheFormatOneReleaseReadUnchanged() throws {
        try withTemporaryDirectory { root in
            let directory = windowDirectory(root, FormatOneScenario.window)
            try FileManager.default.createDirectory(
                atPath: directory.removingLastComponent().string, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: Self.fixture.path, toPath: directory.string)
            let store = WindowStore(
                root: root, windowID: FormatOneScenario.window, engine: SyncEngine(), options: FormatOneScenario.options
            )
            let recovery = try store.recover()
            #expect(recovery.regular.damaged.isEmpty && recovery.incognito.damaged.isEmpty)
            #expect(
                recovery.regular.generation == 2 && recovery.regular.replayedRecords > 30,
                "snapshot and journal both used")
            #expect(recovery.seq == 108)

            let model = WindowStore(
                root: simulatedRoot, windowID: FormatOneScenario.window,
                engine: FaultEngine(directories: [simulatedRoot]),
                options: FormatOneScenario.options)
            _ = try model.recover()
            try FormatOneScenario.run(model)
            #expect(try WindowContents(store) == WindowContents(model))
            let a = try store.regular.webStateList.webState(at: 1).navigationHistory()
            #expect(a.items.count == 75 && a.droppedItemCount == 16)
            #expect(a.items.first?.url == "https://a.example/16" && a.currentItem?.url == "https://a.example/95")

            // And it takes new saves, which the next start reads.
            try store.apply(seq: 109) {
                try store.regular.webStateList.webState(at: 1).commitNavigation(
                    to: NavigationItem(url: "https://a.example/new", timestamp: .zero))
            }
            try store.waitUntilDurable(109)
            let expected = try WindowContents(store)
            let again = WindowStore(
                root: root, windowID: FormatOneScenario.window, engine: SyncEngine(), options: FormatOneScenario.options
            )
            let second = try again.recover()
            #expect(second.regular.damaged.isEmpty && second.seq == 109)
            #expect(try WindowContents(again) == expected)
        }
    }

    /// The issue's case: 1,100 tabs with 65 KB URLs, 72 MB of list metadata, saved in one
    /// compaction. Before the fix the snapshot's metadata record was refused at restart and the
    /// window came back empty.
    @Test func aHugeWindowComesBackAfterARestart() throws {
        try withTemporaryDirectory { root in
            let store = WindowStore(root: root, windowID: windowID, engine: try UringEngine(), saveDelayMilliseconds: 0)
            _ = try store.recover()
            let padding = String(repeating: "w", count: 65_000)
            for seq in 1...1100 as ClosedRange<UInt64> {
                try store.apply(seq: seq) {
                    var history = NavigationHistory()
                    history.commit(
                        try NavigationItem.checked(url: "https://tab\(seq).example/\(padding)", timestamp: .zero))
                    let tab = WebState(
                        id: store.regular.profile.makeWebStateID(), creationTime: .zero, history: history)
                    try store.regular.webStateList.insert(tab, InsertionParams(activate: true))
                }
            }
            try store.waitUntilDurable(1100)
            try store.settle()
            let expected = try TabListContents(store.regular.webStateList, realizing: false)
            let urls = store.regular.webStateList.webStates.map(\.url)
            let snapshots = files(windowDirectory(root).appending(BrowserKind.regular.rawValue)).filter {
                $0.hasPrefix(DiskLayout.snapshotPrefix)
            }
            let size =
                try snapshots.map {
                    try FileManager.default.attributesOfItem(
                        atPath: windowDirectory(root).appending(BrowserKind.regular.rawValue).appending($0).string)[
                            .size] as? Int ?? 0
                }.max() ?? 0
            #expect(size > Limits.maxRecordPayloadBytes, "the metadata alone is over one record")

            let again = WindowStore(root: root, windowID: windowID, engine: try UringEngine())
            let recovery = try again.recover()
            #expect(recovery.regular.damaged.isEmpty)
            #expect(recovery.seq == 1100)
            #expect(
                try TabListContents(again.regular.webStateList, realizing: false).tabs.map(\.id)
                    == expected.tabs.map(\.id))
            #expect(again.regular.webStateList.activeIndex == expected.activeIndex)
            #expect(again.regular.webStateList.webStates.map(\.url) == urls)
            #expect(
                try again.regular.webStateList.webState(at: 1099).navigationHistory().currentItem?.url == urls[1099])
        }
    }

    /// One tab navigated 35 times to 2 MiB URLs: 70 MB of history, more than a record holds.
    /// The text budget keeps the newest entries that fit; they come back after a restart.
    @Test func aHugeHistoryComesBackAfterARestart() throws {
        try withTemporaryDirectory { root in
            let store = WindowStore(root: root, windowID: windowID, engine: try UringEngine(), saveDelayMilliseconds: 0)
            _ = try store.recover()
            let tab = WebState(id: store.regular.profile.makeWebStateID(), creationTime: .zero)
            try store.apply(seq: 1) { try store.regular.webStateList.insert(tab, InsertionParams(activate: true)) }
            try store.waitUntilDurable(1)
            let base = String(repeating: "h", count: Limits.maxURLBytes - 3)
            for seq in 2...36 as ClosedRange<UInt64> {
                try store.apply(seq: seq) {
                    try tab.commitNavigation(to: NavigationItem(url: base + "\(seq)", timestamp: .zero))
                }
            }
            try store.waitUntilDurable(36)
            try store.settle()
            let history = try tab.navigationHistory()
            #expect(history.items.count < 35 && history.droppedItemCount == 35 - history.items.count)

            let again = WindowStore(root: root, windowID: windowID, engine: try UringEngine())
            let recovery = try again.recover()
            #expect(recovery.regular.damaged.isEmpty && recovery.seq == 36)
            #expect(try again.regular.webStateList.webState(at: 0).navigationHistory() == history)
        }
    }

    /// Three saves, then a commit with seq 2⁶⁴ − 1 and a valid checksum: damage in the middle.
    /// The saves before it are kept, the journal is set aside, and the seq recovery reports is
    /// the last valid one.
    @Test(arguments: [UInt64.max, Limits.maxCommandSeq + 1, 2])
    func aCommitWithASeqOutOfRangeIsDamage(badSeq: UInt64) throws {
        try withTemporaryDirectory { root in
            let store = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try store.recover()
            for seq in 1...3 as ClosedRange<UInt64> {
                try store.apply(seq: seq) {
                    let tab = WebState(
                        id: store.regular.profile.makeWebStateID(), creationTime: .zero,
                        history: try #require(
                            NavigationHistory(
                                items: [NavigationItem(url: "https://\(seq).example/", timestamp: .zero)],
                                currentIndex: 0)))
                    try store.regular.webStateList.insert(tab, InsertionParams(activate: true))
                }
                try store.waitUntilDurable(seq)
            }
            let expected = try WindowContents(store)
            let journalPath = windowDirectory(root).appending(BrowserKind.regular.rawValue).appending(
                DiskLayout.journalName(1))
            let scan = try JournalFile.scan(FileBytes(path: journalPath))
            #expect(scan.commits.count == 3)
            let tail = try #require(scan.commits.last).end
            let handle = try FileDescriptor.open(journalPath, .writeOnly)
            _ = try handle.writeAll(toAbsoluteOffset: Int64(tail), JournalCommit(seq: badSeq, browsers: 1).frame)
            try handle.close()

            let again = WindowStore(root: root, windowID: windowID, engine: SyncEngine())
            let recovery = try again.recover()
            let damaged = try #require(recovery.regular.damaged.first)
            #expect(damaged.path == journalPath.string)
            #expect(damaged.setAsideAt != nil, "the journal is set aside")
            if case .invalidState(let offset, _) = damaged.error {
                #expect(offset == tail)
            } else {
                Issue.record("\(damaged.error)")
            }
            #expect(recovery.seq == 3 && recovery.seq <= Limits.maxCommandSeq)
            #expect(try WindowContents(again) == expected)
        }
    }

    /// A commit with a valid checksum whose Browser bits name no Browser (0, the lagging bit
    /// alone) or an undefined bit: damage in the middle like a seq out of range, never accepted
    /// (it was, silently, and recovery reported seq 4) nor zeroed as a torn tail.
    @Test(arguments: [0, JournalCommit.laggingBit, 8, 0x81] as [UInt8])
    func aCommitWithUndefinedBrowserBitsIsDamage(bits: UInt8) throws {
        try withTemporaryDirectory { root in
            let store = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try store.recover()
            for seq in 1...3 as ClosedRange<UInt64> {
                try store.apply(seq: seq) {
                    try store.regular.webStateList.insert(
                        WebState(id: store.regular.profile.makeWebStateID(), creationTime: .zero),
                        InsertionParams(activate: true))
                }
                try store.waitUntilDurable(seq)
            }
            let expected = try WindowContents(store)
            let journalPath = windowDirectory(root).appending(BrowserKind.regular.rawValue).appending(
                DiskLayout.journalName(1))
            let tail = try #require(try JournalFile.scan(FileBytes(path: journalPath)).commits.last).end
            let handle = try FileDescriptor.open(journalPath, .writeOnly)
            _ = try handle.writeAll(toAbsoluteOffset: Int64(tail), JournalCommit(seq: 4, browsers: bits).frame)
            try handle.close()

            let again = WindowStore(root: root, windowID: windowID, engine: SyncEngine())
            let recovery = try again.recover()
            let damaged = try #require(recovery.regular.damaged.first)
            #expect(damaged.path == journalPath.string)
            #expect(damaged.setAsideAt != nil, "the journal is set aside")
            #expect(damaged.error == .invalidState(offset: tail, reason: .undefinedCommitBits(bits)))
            #expect(recovery.seq == 3)
            #expect(try WindowContents(again) == expected)
        }
    }

    /// A sparse 1 TiB journal: damage, set aside at once, never read (it aborted `inspect` and
    /// set the window aside before).
    @Test func aSparseTerabyteJournalIsSetAsideUnread() throws {
        try withTemporaryDirectory { root in
            let store = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try store.recover()
            try store.apply(seq: 1) {
                try store.regular.webStateList.insert(
                    WebState(id: store.regular.profile.makeWebStateID(), creationTime: .zero),
                    InsertionParams(activate: true))
            }
            try store.waitUntilDurable(1)
            let journalPath = windowDirectory(root).appending(BrowserKind.regular.rawValue).appending(
                DiskLayout.journalName(1))
            #expect(truncate(journalPath.string, 1 << 40) == 0, "a sparse 1 TiB file: \(Errno(rawValue: errno))")

            let start = ContinuousClock.now
            let again = WindowStore(root: root, windowID: windowID, engine: SyncEngine())
            let recovery = try again.recover()
            #expect(ContinuousClock.now - start < .seconds(10))
            let damaged = try #require(recovery.regular.damaged.first)
            #expect(damaged.error == .fileTooLarge(size: 1 << 40, limit: Limits.maxJournalBytes))
            #expect(damaged.setAsideAt != nil)
            #expect(again.regular.webStateList.count == 0, "the one save was in that journal")
        }
    }

    /// A compaction whose new snapshot does not read back (a history frame damaged between the
    /// write and the read, as a failing disk would) deletes nothing, reports the failure, and
    /// the next save writes a new generation.
    @Test func aCompactionThatDoesNotReadBackDeletesNothing() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let options = StoreOptions(compactAfterRecords: 6, compactAfterBytes: 1 << 20)
        let (store, _) = try simulatedWindow(engine, options: options)
        let directory = windowDirectory(simulatedRoot).appending(BrowserKind.regular.rawValue)
        var seq: UInt64 = 0
        var events: [SaveEvent] = []
        func command() throws {
            seq += 1
            try store.apply(seq: seq) {
                let tab = WebState(
                    id: store.regular.profile.makeWebStateID(), creationTime: .zero,
                    history: try #require(
                        NavigationHistory(
                            items: [NavigationItem(url: "https://\(seq).example/", timestamp: .zero)], currentIndex: 0))
                )
                try store.regular.webStateList.insert(tab, InsertionParams(activate: true))
            }
            // The snapshot too, which is read back in the background: before any later save.
            repeat { events += try store.poll(waiting: true) } while store.writesInFlight
        }
        while engine.contents(of: directory.appending(DiskLayout.snapshotName(2))) == nil { try command() }
        let before = Set((try engine.directoryEntries(directory)) ?? [])
        #expect(before.contains(DiskLayout.snapshotName(1)) && before.contains(DiskLayout.journalName(1)))
        // The next compaction's snapshot is damaged once it is in place, before the read-back.
        let third = directory.appending(DiskLayout.snapshotName(3))
        var damaged = false
        engine.completionOrder = { _ in
            if !damaged, var bytes = engine.contents(of: third) {
                bytes[bytes.count - 1] ^= 0xFF
                engine.overwrite(third, with: bytes)
                damaged = true
            }
            return 0
        }
        while !damaged { try command() }
        engine.completionOrder = nil
        let compactionFailures = events.compactMap { if case .compactionFailed(let error) = $0 { error } else { nil } }
        #expect(compactionFailures.contains { if case .readBackFailed = $0 { true } else { false } }, "\(events)")
        let after = Set((try engine.directoryEntries(directory)) ?? [])
        #expect(after.isSuperset(of: before), "nothing older was removed: \(before.subtracting(after))")
        #expect(store.durableSeq == seq)

        try command()
        let final = Set((try engine.directoryEntries(directory)) ?? [])
        #expect(final.contains(DiskLayout.snapshotName(4)), "the next save rebased: \(final.sorted())")
        let expected = try WindowContents(store)
        let (restored, recovery) = try simulatedWindow(engine.copy(), options: options)
        #expect(recovery.regular.damaged.isEmpty)
        #expect(try WindowContents(restored) == expected)
    }
}
