import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Issue 29: a new journal is preallocated to the room its generation's saves fill before a
/// threshold compacts it, judged by the journal it replaces, not by an assumed 256 B a record.
/// Saves that replace a whole window record ~90 B a record, and filled less than half of the
/// configured preallocation: the zeros written past that were most of a large save's bytes.
@Suite struct JournalSizingTests {
    /// 400 records a generation: the configured preallocation is 400 × 256 B + 64 KiB.
    static let options = StoreOptions(compactAfterRecords: 400, groupCommit: nil)
    static let regularDirectory = LeftOutSaveTests.regularDirectory

    /// A window on `disk` whose saves either replace every tab (a large save: 40 tabs, ~80
    /// records) or navigate the active tab (one record, a block a save).
    final class Window {
        let disk: FaultEngine
        let store: WindowStore
        var seq: UInt64 = 0

        init(_ disk: FaultEngine) throws {
            self.disk = disk
            store = try simulatedWindow(disk, options: JournalSizingTests.options).0
            seq = store.appliedSeq
        }

        func replaceEveryTab() throws {
            seq += 1
            let browser = store.regular
            let round = seq
            try store.apply(seq: seq) {
                browser.webStateList.closeAll()
                for index in 0..<40 {
                    try LeftOutSaveTests.open("https://site\(index).example/articles/\(round)", in: browser)
                }
            }
            try store.waitUntilDurable(seq)
        }

        func navigate() throws {
            seq += 1
            let list = store.regular.webStateList
            let round = seq
            try store.apply(seq: seq) {
                try list.activeWebState?.commitNavigation(to: LeftOutSaveTests.page("https://nav.example/\(round)"))
            }
            try store.waitUntilDurable(seq)
        }

        var regular: BrowserStore { store.stores[0] }

        /// The size of the regular Browser's journal file now.
        var journalFileSize: Int? {
            disk.contents(
                of: JournalSizingTests.regularDirectory.appending(DiskLayout.journalName(regular.generation)))?
                .count
        }

        /// Saves of `kind` until the regular Browser's generation moves past the current one;
        /// returns the largest its journal file was before it moved.
        func untilCompacted(_ save: () throws -> Void) throws -> Int {
            let generation = regular.generation
            var largest = journalFileSize ?? 0
            for _ in 0..<2_000 where regular.generation == generation {
                try save()
                if regular.generation == generation { largest = max(largest, journalFileSize ?? 0) }
            }
            #expect(regular.generation > generation, "a compaction ran")
            return largest
        }
    }

    /// Large saves: the spare (and so every journal after the first) is sized to what a
    /// generation of them fills, well under the configured preallocation, and that room holds
    /// every save of the generation: the file never grows, so each flush carries data only.
    @Test func largeSavesGetAJournalSizedToTheirRecords() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let window = try Window(disk)
        _ = try window.untilCompacted(window.replaceEveryTab)
        for _ in 0..<3 {
            let generation = window.regular.generation
            let preallocated = try #require(window.journalFileSize, "the new journal is on the disk")
            #expect(
                preallocated * 2 < Self.options.journalPreallocation,
                "\(preallocated) B preallocated against the configured \(Self.options.journalPreallocation)")
            let largest = try window.untilCompacted(window.replaceEveryTab)
            #expect(
                largest == preallocated, "generation \(generation): its saves fit the preallocation (\(largest) B)")
        }
        // What a generation writes: its saves, the one crossing the threshold, a snapshot and
        // the next journal's zeros. Here ~3.2 times the saves before the crossing one; with the
        // configured preallocation ~6.
        let regular = window.regular
        let before = regular.bytesSubmitted
        var appended = 0
        let generation = regular.generation
        while regular.generation == generation {
            let end = regular.journalEnd
            try window.replaceEveryTab()
            if regular.generation == generation { appended += regular.journalEnd - end }
        }
        let written = Int(regular.bytesSubmitted - before)
        #expect(written < 4 * appended, "\(written) B written for \(appended) B of saves")

        try expectKillAndPowerCutKeep(WindowContents(window.store), on: disk, options: Self.options)
    }

    /// Small saves after large ones: the journal sized for the large saves' records runs out of
    /// zeros before a threshold, and grows by its appends from there (each flush carrying the
    /// size change too). Every acknowledged save comes back after a kill and a power cut, and
    /// the journal after the next compaction is sized for the small saves again.
    @Test func aJournalOutgrowingItsRoomGrowsByAppendAndLosesNothing() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let window = try Window(disk)
        _ = try window.untilCompacted(window.replaceEveryTab)
        _ = try window.untilCompacted(window.replaceEveryTab)
        let preallocated = try #require(window.journalFileSize)
        var grew = false
        for _ in 0..<400 where !grew {
            try window.navigate()
            grew = (window.journalFileSize ?? 0) > preallocated
        }
        #expect(grew, "navigations outgrow a journal sized for large saves (\(preallocated) B)")
        try window.navigate()
        try expectKillAndPowerCutKeep(WindowContents(window.store), on: disk, options: Self.options)

        _ = try window.untilCompacted(window.navigate)
        let resized = try #require(window.journalFileSize)
        #expect(resized > preallocated, "sized for one block a record again: \(resized) B")
        #expect(try contentsAfterPowerCut(disk, options: Self.options) == WindowContents(window.store))
    }
}
