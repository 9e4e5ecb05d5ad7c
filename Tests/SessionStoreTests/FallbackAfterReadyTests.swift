import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// The generation a damaged newest snapshot would fall back to is read once the window is
/// ready, before its first save (docs/recovery.md, "The fallback is read after ready").
@Suite struct FallbackAfterReadyTests {
    static let options = RepairFromMemoryTests.options
    static let directory = LeftOutSaveTests.regularDirectory

    /// Two generations, the newest journal holding three saves; with `damagingFallback`, a save
    /// in the middle of the older journal no longer reads (the newest chain still reads whole).
    static func twoGenerations(damagingFallback: Bool) throws -> (
        engine: FaultEngine, seq: UInt64, fallbackJournal: FilePath
    ) {
        let engine = FaultEngine(directories: [simulatedRoot])
        var seq: UInt64 = 0
        let (store, _) = try simulatedWindow(engine, options: options)
        for page in 1...3 { try RepairFromMemoryTests.command(store, &seq, "https://before.example/\(page)") }
        seq += 1
        try store.apply(seq: seq) { try LeftOutSaveTests.open("https://before.example/compacted", in: store.regular) }
        try store.stores[0].startSave(seq: seq, browsers: BrowserKind.regular.commitBit, compact: true)
        try store.settle()
        for page in 1...3 { try RepairFromMemoryTests.command(store, &seq, "https://journal.example/\(page)") }
        let journals = try #require(
            try engine.directoryEntries(directory)?.filter { $0.hasPrefix(DiskLayout.journalPrefix) }.sorted())
        try #require(journals.count == 2)
        let fallbackJournal = directory.appending(journals[0])
        if damagingFallback {
            var bytes = try #require(engine.contents(of: fallbackJournal))
            let commits = try JournalFile.scan(InMemoryBytes(bytes)).commits
            try #require(commits.count == 4)
            bytes[commits[1].end + Framing.recordHeaderSize + 1] ^= 0x40
            engine.overwrite(fallbackJournal, with: bytes)
        }
        engine.processKilled()
        return (engine, seq, fallbackJournal)
    }

    /// Three generations: the fallback's snapshot holds tab 0's two-page history (its first
    /// page, `lostURL`, only in its history frame), the newest journal two saves.
    static func threeGenerations() throws -> (engine: FaultEngine, seq: UInt64, live: WindowContents) {
        let engine = FaultEngine(directories: [simulatedRoot])
        var seq: UInt64 = 0
        let (store, _) = try simulatedWindow(engine, options: options)
        try RepairFromMemoryTests.command(store, &seq, lostURL)
        try RepairFromMemoryTests.command(store, &seq) {
            try store.regular.webStateList.webState(at: 0).commitNavigation(
                to: LeftOutSaveTests.page("https://kept.example/0"))
        }
        for round in 1...2 {
            try RepairFromMemoryTests.command(store, &seq, "https://round.example/\(round)")
            try store.stores[0].startSave(seq: seq, browsers: BrowserKind.regular.commitBit, compact: true)
            try store.settle()
        }
        for page in 1...2 { try RepairFromMemoryTests.command(store, &seq, "https://journal.example/\(page)") }
        try #require(try LeftOutSaveTests.snapshots(engine).count == 2)
        let live = try WindowContents(store)
        engine.processKilled()
        return (engine, seq, live)
    }

    static let lostURL = "https://lost.example/first"

    /// Flips a byte of the last `needle` in `path`: in a snapshot, inside a history frame.
    static func flipLast(_ needle: String, in path: FilePath, _ engine: FaultEngine) throws {
        var bytes = try #require(engine.contents(of: path))
        let needle = Array(needle.utf8)
        let start = try #require(
            (0...(bytes.count - needle.count)).last { Array(bytes[$0..<$0 + needle.count]) == needle })
        bytes[start + needle.count - 1] ^= 0x01
        engine.overwrite(path, with: bytes)
    }

    /// A history frame damaged in the fallback's snapshot: found at the first turn (every frame
    /// is read, as a realized tab would read it), set aside and rewritten, so the newest snapshot
    /// damaged next leaves the tab's whole history.
    @Test func aHistoryFrameDamagedInTheFallbacksSnapshotIsFoundAtTheFirstTurn() throws {
        let (engine, seq, live) = try Self.threeGenerations()
        let fallback = Self.directory.appending(
            DiskLayout.snapshotName(try #require(try LeftOutSaveTests.snapshots(engine).first)))
        try Self.flipLast(Self.lostURL, in: fallback, engine)
        let (store, recovery) = try simulatedWindow(engine, options: Self.options)
        #expect(recovery.seq == seq && recovery.regular.damaged.isEmpty)
        try store.turn()
        #expect(store.takeEvents().contains { Self.isDamagedFallback($0, fallback) })
        try store.settle()

        try LeftOutSaveTests.damageNewestSnapshot(engine)
        engine.processKilled()
        let (restored, again) = try simulatedWindow(engine, options: Self.options)
        #expect(again.seq == seq)
        #expect(try WindowContents(restored) == live)
    }

    /// Bytes past the last save of the fallback's journal (in its zeros): the check's chain ends
    /// there, but the real fallback goes on into the newest journal, which cannot follow a torn
    /// one. The first turn rewrites, so the newest snapshot damaged next loses no save.
    @Test func aTornTailInTheFallbacksJournalIsRewrittenAtTheFirstTurn() throws {
        let (engine, seq, live) = try Self.threeGenerations()
        let journal = Self.directory.appending(
            DiskLayout.journalName(try #require(try LeftOutSaveTests.snapshots(engine).first)))
        var bytes = try #require(engine.contents(of: journal))
        let end = try JournalFile.scan(InMemoryBytes(bytes)).commits.last?.end ?? 0
        try #require(end + 64 < bytes.count && bytes[end...].allSatisfy { $0 == 0 })
        bytes[end + 40] = 0xA5
        engine.overwrite(journal, with: bytes)
        let (store, _) = try simulatedWindow(engine, options: Self.options)
        let snapshots = try LeftOutSaveTests.snapshots(engine)
        try store.turn()
        try store.settle()
        #expect(try LeftOutSaveTests.snapshots(engine).last ?? 0 > snapshots.last ?? 0, "written again from memory")

        try LeftOutSaveTests.damageNewestSnapshot(engine)
        engine.processKilled()
        let (restored, again) = try simulatedWindow(engine, options: Self.options)
        #expect(again.seq == seq)
        #expect(try WindowContents(restored) == live)
    }

    static func isDamagedFallback(_ event: SaveEvent, _ path: FilePath) -> Bool {
        if case .damagedFallback(.regular, let damaged) = event { damaged.path == path.string } else { false }
    }

    @Test func theRestoreLeavesTheFallbackUnreadAndTheFirstTurnSetsItsDamageAsideAndRewrites() throws {
        let (engine, seq, fallbackJournal) = try Self.twoGenerations(damagingFallback: true)
        let damagedBefore = engine.contents(of: fallbackJournal)
        let (store, recovery) = try simulatedWindow(engine, options: Self.options)
        #expect(recovery.seq == seq)
        #expect(recovery.regular.damaged.isEmpty, "the restore read only the newest chain: \(recovery.regular)")
        #expect(
            engine.contents(of: fallbackJournal) == damagedBefore,
            "the damaged fallback is untouched until the first turn")
        #expect(store.stores[0].uncheckedFallback != nil)
        let newestBefore = try #require(try LeftOutSaveTests.snapshots(engine).last)

        // No command: the turn reads the fallback, sets its damage aside and writes the session
        // again from memory, unasked.
        try store.turn()
        #expect(store.takeEvents().contains { Self.isDamagedFallback($0, fallbackJournal) })
        #expect(engine.contents(of: fallbackJournal) == nil, "moved into damaged/")
        try store.settle()
        #expect(
            try #require(try LeftOutSaveTests.snapshots(engine).last) > newestBefore, "a new generation from memory")
        let live = try WindowContents(store)

        // The second fault, the newest snapshot damaged, finds a fallback that reaches it.
        try LeftOutSaveTests.damageNewestSnapshot(engine)
        engine.processKilled()
        let (restored, again) = try simulatedWindow(engine, options: Self.options)
        #expect(again.seq == seq)
        #expect(try WindowContents(restored) == live)
    }

    @Test func aFallbackThatReadsWholeChangesNothing() throws {
        let (engine, seq, _) = try Self.twoGenerations(damagingFallback: false)
        let (store, recovery) = try simulatedWindow(engine, options: Self.options)
        let snapshots = try LeftOutSaveTests.snapshots(engine)
        try store.turn()
        #expect(store.stores[0].uncheckedFallback == nil)
        #expect(!store.takeEvents().contains { if case .damagedFallback = $0 { true } else { false } })
        try store.settle()
        #expect(try LeftOutSaveTests.snapshots(engine) == snapshots, "no rewrite")
        #expect(recovery.seq == seq && store.durableSeq == seq)
    }

    /// Commands apply and show while the fallback is unread, and none is made durable before it
    /// reads: a read short of descriptors fails the save, appends nothing, and the retry saves.
    @Test func noSaveStartsBeforeTheFallbackReads() throws {
        let (engine, seq, _) = try Self.twoGenerations(damagingFallback: false)
        let (store, _) = try simulatedWindow(engine, options: Self.options)
        let olderSnapshot = Self.directory.appending(
            DiskLayout.snapshotName(try #require(try LeftOutSaveTests.snapshots(engine).first)))
        let newestJournal = try RepairFromMemoryTests.newestJournal(engine)
        let journalBefore = engine.contents(of: newestJournal)
        engine.failingOpens[olderSnapshot.string] = .tooManyOpenFiles

        try store.apply(seq: seq + 1) { try LeftOutSaveTests.open("https://after.example/ready", in: store.regular) }
        #expect(
            store.regular.webStateList.webStates.contains { $0.url == "https://after.example/ready" },
            "applied and shown")
        #expect(throws: StoreError.self) { try store.waitUntilDurable(seq + 1) }
        #expect(store.durableSeq == seq)
        #expect(engine.contents(of: newestJournal) == journalBefore, "nothing appended before the fallback read")
        #expect(store.stores[0].uncheckedFallback != nil, "still to be read")

        engine.failingOpens = [:]
        try store.waitUntilDurable(seq + 1)
        #expect(store.durableSeq == seq + 1)
        #expect(store.stores[0].uncheckedFallback == nil)
    }
}
