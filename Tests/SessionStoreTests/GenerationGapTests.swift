import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Generation numbers can skip: a compaction killed before its rename leaves a journal (and a
/// temporary snapshot) under the next number, recovery removes them as orphans, and the next
/// compaction takes the number above. A fallback past a damaged newest snapshot must still go
/// through the newest journal: walked one number at a time, the chain stopped at the gap and
/// the window came back without the saves of that journal, acknowledged (found by `windowhost
/// stress`, seed 1 with --io uring: "came back in a state that matches no prefix").
@Suite struct GenerationGapTests {
    static let options = StoreOptions(compactAfterRecords: 6, compactAfterBytes: 1 << 20, journalPreallocation: 8 << 10)
    static let regularDirectory = LeftOutSaveTests.regularDirectory

    @Test func aFallbackGoesThroughAGenerationNumberNoSnapshotTook() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        var seq: UInt64 = 0
        do {
            let (store, _) = try simulatedWindow(engine, options: Self.options)
            for page in 1...3 { try RepairFromMemoryTests.command(store, &seq, "https://before.example/\(page)") }
            #expect(store.stores[0].generation == 1)
        }
        // What a compaction killed before its rename leaves under the next number.
        for name in [DiskLayout.journalName(2), DiskLayout.snapshotName(2) + DiskLayout.temporarySuffix] {
            let file = try engine.open(Self.regularDirectory.appending(name), .create)
            try engine.perform([.write(file, JournalFile.header, offset: 0, durable: true)])
            engine.close(file)
        }
        engine.processKilled()

        let live: WindowContents
        do {
            let (store, recovery) = try simulatedWindow(engine, options: Self.options)
            #expect(recovery.seq == seq)
            // On past a compaction, into generation 3, and a few saves in its journal.
            while store.stores[0].generation < 3 || store.stores[0].journalRecords < 2 {
                try RepairFromMemoryTests.command(store, &seq, "https://after.example/\(seq)")
            }
            #expect(store.stores[0].generation == 3, "the number 2 was passed over")
            live = try WindowContents(store)
        }
        try LeftOutSaveTests.damageNewestSnapshot(engine)
        engine.processKilled()

        let (restored, recovery) = try simulatedWindow(engine, options: Self.options)
        #expect(recovery.regular.generation == 1 && !recovery.regular.damaged.isEmpty, "\(recovery.regular)")
        #expect(recovery.seq == seq, "\(recovery.regular)")
        #expect(try WindowContents(restored) == live)
    }

    /// Generation 1's snapshot is the empty one a new session starts with, and its journal holds
    /// every save since: a young window, and almost every incognito session (created again at
    /// generation 1). When that snapshot is damaged, the journal's saves come back on an empty
    /// list (found by a hostile tester: one flipped byte lost every acknowledged tab, and the
    /// journal was deleted at the repair's next compaction).
    @Test(arguments: BrowserKind.allCases)
    func aDamagedFirstSnapshotLosesNoSaveOfItsJournal(kind: BrowserKind) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        var seq: UInt64 = 0
        let live: WindowContents
        let directory: FilePath
        do {
            let (store, _) = try simulatedWindow(engine, options: Self.options)
            directory = store.browser(kind).sessionDirectory
            for page in 1...3 {
                seq += 1
                try store.apply(seq: seq) {
                    try LeftOutSaveTests.open("https://\(kind.rawValue).example/\(page)", in: store.browser(kind))
                }
                try store.waitUntilDurable(seq)
            }
            #expect(store.stores[kind == .regular ? 0 : 1].generation == 1)
            live = try WindowContents(store)
        }
        let path = directory.appending(DiskLayout.snapshotName(1))
        var bytes = try #require(engine.contents(of: path))
        bytes[Framing.fileHeaderSize + 2] ^= 0x20
        engine.overwrite(path, with: bytes)
        engine.processKilled()

        let (restored, recovery) = try simulatedWindow(engine, options: Self.options)
        let report = kind == .regular ? recovery.regular : recovery.incognito
        #expect(!report.damaged.isEmpty && report.repairError == nil, "\(report)")
        #expect(recovery.seq == seq, "\(report)")
        #expect(try WindowContents(restored) == live)
        // Rewritten: the next start reads it without the damage.
        engine.processKilled()
        let (again, second) = try simulatedWindow(engine, options: Self.options)
        #expect(try WindowContents(again) == live && second.seq == seq, "\(second)")
    }
}
