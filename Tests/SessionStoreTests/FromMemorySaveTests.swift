import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// A save whose journal cannot be continued goes into a snapshot written from memory: no
/// generation before it holds that save's records. Written once, one fault (the snapshot
/// damaged) fell back to the generation before and lost the acknowledged save, until the next
/// save's compaction followed it (hostile round B1: `wait-durable` said 28, the window came
/// back at 27). The snapshot now goes down twice before the save is acknowledged.
@Suite struct FromMemorySaveTests {
    static let options = StoreOptions(
        compactAfterRecords: 1000, compactAfterBytes: 1 << 20, journalPreallocation: 16 << 10)
    static let regularDirectory = LeftOutSaveTests.regularDirectory

    /// What makes the journal one the next save cannot continue.
    enum JournalLoss: CaseIterable {
        /// The journal renamed away under the store: the append lands outside the session.
        case journalMovedAway
        /// The whole session directory moved away: a new one is written where it belongs.
        case sessionDirectoryMovedAway
    }

    @Test(arguments: JournalLoss.allCases)
    func aSaveOnlyASnapshotFromMemoryHoldsSurvivesThatSnapshotsDamage(loss: JournalLoss) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        var seq: UInt64 = 0
        let live: WindowContents
        do {
            let (store, _) = try simulatedWindow(engine, options: Self.options)
            for page in 1...3 { try RepairFromMemoryTests.command(store, &seq, "https://before.example/\(page)") }
            // A generation before the newest, as after any compaction.
            try store.stores[0].startSave(seq: seq, browsers: BrowserKind.regular.commitBit, compact: true)
            try store.settle()
            for page in 1...2 { try RepairFromMemoryTests.command(store, &seq, "https://journal.example/\(page)") }
            switch loss {
            case .journalMovedAway:
                let journal = try RepairFromMemoryTests.newestJournal(engine)
                try engine.rename(journal, to: Self.regularDirectory.appending("moved-away"))
            case .sessionDirectoryMovedAway:
                try engine.rename(
                    Self.regularDirectory, to: Self.regularDirectory.removingLastComponent().appending("moved-away"))
            }
            seq += 1
            try store.apply(seq: seq) {
                try LeftOutSaveTests.open("https://only-in-the-snapshot.example/", in: store.regular)
            }
            // The append lands outside the session: not acknowledged, and the retry writes the
            // Browser from memory where it belongs.
            #expect(throws: StoreError.self) { try store.waitUntilDurable(seq) }
            #expect(store.durableSeq == seq - 1)
            try store.waitUntilDurable(seq)
            #expect(store.durableSeq == seq)
            live = try WindowContents(store)
        }
        try LeftOutSaveTests.damageNewestSnapshot(engine)
        engine.processKilled()

        let (restored, recovery) = try simulatedWindow(engine, options: Self.options)
        #expect(recovery.seq == seq, "\(recovery.regular)")
        #expect(try WindowContents(restored) == live, "\(recovery.regular)")
        #expect(!recovery.regular.damaged.isEmpty, "the damaged snapshot is reported")
    }
}
