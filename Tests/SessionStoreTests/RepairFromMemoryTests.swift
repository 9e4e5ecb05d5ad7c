import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Recovery that cannot continue the files writes a new snapshot from memory. The generation
/// before it, plus its journal, does not reach that snapshot. So when the new snapshot is
/// damaged next (one fault, after the first was repaired), falling back to the generation
/// before would bring the window back short of it, or torn: that generation's journal, then
/// the new one's records applied to a list they were never made on (found by `windowhost
/// stress`: "came back in a state that matches no prefix of its commands", tab 20 with another
/// tab's page). A snapshot written from memory is followed at once by a generation that
/// continues it, so the newest snapshot always has a fallback that reaches it.
@Suite struct RepairFromMemoryTests {
    static let options = StoreOptions(
        compactAfterRecords: 1000, compactAfterBytes: 1 << 20, journalPreallocation: 16 << 10)
    static let regularDirectory = LeftOutSaveTests.regularDirectory

    enum FirstFault: CaseIterable {
        /// A save in the middle of the journal no longer reads: the saves before it are kept.
        case journalDamagedInTheMiddle
        /// The newest snapshot no longer reads: the window falls back to the generation before.
        case newestSnapshotDamaged
        /// A save in the middle of the fallback's journal (the generation before the newest)
        /// no longer reads. Nothing restored needs it, so it went unnoticed, and the second
        /// fault fell back onto it: the saves after the damaged one were lost.
        case fallbackJournalDamagedInTheMiddle
    }

    static func command(_ store: WindowStore, _ seq: inout UInt64, _ url: String) throws {
        try command(store, &seq) { try LeftOutSaveTests.open(url, in: store.regular) }
    }

    /// `body` applied as the window's next seq, waited for until durable.
    static func command(_ store: WindowStore, _ seq: inout UInt64, _ body: () throws -> Void) throws {
        seq += 1
        try store.apply(seq: seq, body)
        try store.waitUntilDurable(seq)
    }

    static func newestJournal(_ engine: FaultEngine) throws -> FilePath {
        let name = try #require(
            try engine.directoryEntries(regularDirectory)?.filter { $0.hasPrefix(DiskLayout.journalPrefix) }.max())
        return regularDirectory.appending(name)
    }

    @Test(arguments: FirstFault.allCases)
    func aSecondFaultAfterARepairFromMemoryLosesNothingAcknowledged(first: FirstFault) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        var seq: UInt64 = 0
        do {
            let (store, _) = try simulatedWindow(engine, options: Self.options)
            // Two generations, the newest journal holding six saves.
            for page in 1...3 { try Self.command(store, &seq, "https://before.example/\(page)") }
            try store.apply(seq: seq + 1) {
                try LeftOutSaveTests.open("https://before.example/compacted", in: store.regular)
            }
            seq += 1
            try store.stores[0].startSave(seq: seq, browsers: BrowserKind.regular.commitBit, compact: true)
            try store.settle()
            for page in 1...6 { try Self.command(store, &seq, "https://journal.example/\(page)") }
        }
        switch first {
        case .journalDamagedInTheMiddle:
            let path = try Self.newestJournal(engine)
            var bytes = try #require(engine.contents(of: path))
            let commits = try JournalFile.scan(InMemoryBytes(bytes)).commits
            try #require(commits.count == 6)
            bytes[commits[2].end + Framing.recordHeaderSize + 1] ^= 0x40
            engine.overwrite(path, with: bytes)
        case .newestSnapshotDamaged:
            try LeftOutSaveTests.damageNewestSnapshot(engine)
        case .fallbackJournalDamagedInTheMiddle:
            let journals = try #require(
                try engine.directoryEntries(Self.regularDirectory)?.filter { $0.hasPrefix(DiskLayout.journalPrefix) }
                    .sorted())
            try #require(journals.count == 2)
            let path = Self.regularDirectory.appending(journals[0])
            var bytes = try #require(engine.contents(of: path))
            let commits = try JournalFile.scan(InMemoryBytes(bytes)).commits
            try #require(commits.count == 4)
            bytes[commits[1].end + Framing.recordHeaderSize + 1] ^= 0x40
            engine.overwrite(path, with: bytes)
        }
        engine.processKilled()

        let live: WindowContents
        do {
            let (store, recovery) = try simulatedWindow(engine, options: Self.options)
            #expect(recovery.regular.repairError == nil, "\(recovery.regular)")
            seq = recovery.seq
            for page in 1...3 { try Self.command(store, &seq, "https://acknowledged.example/\(page)") }
            // The fallback's damage is found after ready, at the first save (`checkFallbacks`).
            let foundLater = store.takeEvents().filter { if case .damagedFallback = $0 { true } else { false } }
            if first == .fallbackJournalDamagedInTheMiddle {
                #expect(recovery.regular.damaged.isEmpty && foundLater.count == 1, "\(recovery.regular) \(foundLater)")
            } else {
                #expect(!recovery.regular.damaged.isEmpty && foundLater.isEmpty, "\(recovery.regular) \(foundLater)")
            }
            live = try WindowContents(store)
        }
        // The second fault: the newest snapshot, which the repair wrote, damaged in turn.
        try LeftOutSaveTests.damageNewestSnapshot(engine)
        engine.processKilled()

        let (restored, recovery) = try simulatedWindow(engine, options: Self.options)
        #expect(recovery.seq == seq, "\(recovery.regular)")
        #expect(try WindowContents(restored) == live, "\(recovery.regular)")
    }
}
