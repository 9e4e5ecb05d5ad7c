import BrowserModel
import Foundation
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionFormat
@testable import SessionStore

/// Issue 13 item 1: journal appends go direct, each save on blocks of its own, so a torn write
/// can only hit the save in flight; journals from before block framing are continued by a new
/// generation; where direct writes are refused the framing is the same and the window says so.
@Suite struct BlockFramingTests {
    private static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/format1-window")

    /// The journal at `path`, scanned.
    private func scan(_ path: FilePath) throws -> JournalFile.Scan {
        try JournalFile.scan(InMemoryBytes(Array(try Data(contentsOf: URL(fileURLWithPath: path.string)))))
    }

    /// On ext4 (the test's /tmp), with each real engine: the journal is written direct, its
    /// first save starts on a block boundary past the header, and every save's commit ends on
    /// one, so each save starts a block no earlier save touches.
    @Test(arguments: ["uring", "sync"])
    func savesStartAndEndOnBlockBoundaries(engineName: String) throws {
        try withTemporaryDirectory { root in
            let engine: any IOEngine = engineName == "uring" ? try UringEngine() : SyncEngine()
            let store = WindowStore(root: root, windowID: windowID, engine: engine, saveDelayMilliseconds: 0)
            _ = try store.recover()
            var browsing = WindowBrowsing(seed: 13, incognitoOneIn: 1_000_000)
            for seq in 1...20 as ClosedRange<UInt64> {
                try browsing.step(store, seq: seq, incognito: false)
                try store.waitUntilDurable(seq)
            }
            let alignment = try #require(try store.journalWrites?.get(), "ext4 takes direct writes")
            let directory = root.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
                BrowserKind.regular.rawValue)
            let journal = directory.appending(DiskLayout.journalName(store.stores[0].generation))
            let found = try scan(journal)
            #expect(found.headerEnd % alignment.block == 0 && found.headerEnd > Framing.fileHeaderSize)
            #expect(found.commits.count == 20)
            for commit in found.commits { #expect(commit.end % alignment.block == 0, "save ending at \(commit.end)") }

            let again = WindowStore(root: root, windowID: windowID, engine: SyncEngine())
            let recovery = try again.recover()
            #expect(recovery.regular.damaged.isEmpty && recovery.seq == 20)
            #expect(try WindowContents(again) == WindowContents(store))
        }
    }

    /// A disk whose sector writes are not atomic garbles the sector a write in flight stops in.
    /// The save in flight then loses only itself: the acknowledged save before it shares no
    /// sector with it. (Appended right after the save before, as before block framing, the
    /// garbled sector held that save's commit, and recovery lost an acknowledged save.)
    @Test func aTornSaveNeverDamagesTheSaveBefore() throws {
        for seed in 0..<24 as Range<UInt64> {
            let disk = FaultEngine(directories: [simulatedRoot])
            disk.tornSectorsGarble = true
            let (store, _) = try simulatedWindow(disk)
            var browsing = WindowBrowsing(seed: seed)
            for seq in 1...3 as ClosedRange<UInt64> {
                try browsing.step(store, seq: seq)
                try store.waitUntilDurable(seq)
            }
            let acknowledged = try WindowContents(store)
            try browsing.step(store, seq: 4)
            let inFlight = try WindowContents(store)
            // The save is submitted and stays in flight: the power goes before it completes.
            disk.completionOrder = { _ in 0 }
            try store.save()
            var random = SeededGenerator(seed: seed)
            disk.powerCut(keepingUnsyncedWith: &random)
            disk.completionOrder = nil
            let (recovered, report) = try simulatedWindow(disk)
            let contents = try WindowContents(recovered)
            #expect(contents == acknowledged || contents == inFlight, "seed \(seed): \(report)")
            #expect(report.regular.damaged.isEmpty && report.incognito.damaged.isEmpty, "seed \(seed)")
        }
    }

    /// The format-1 fixture's journals end anywhere: restored as they are, the next save writes
    /// a new generation instead of appending into the block that holds their last save (whose
    /// files stay byte for byte), and the next start reads the new generation, and through it,
    /// when its snapshot is damaged, the old files.
    @Test func aFormatOneJournalIsContinuedByANewGeneration() throws {
        try withTemporaryDirectory { root in
            let directory = root.appending(DiskLayout.windows).appending(FormatOneScenario.window.uuidString)
            try FileManager.default.createDirectory(
                atPath: directory.removingLastComponent().string, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: Self.fixture.path, toPath: directory.string)
            let regular = directory.appending(BrowserKind.regular.rawValue)
            let store = WindowStore(
                root: root, windowID: FormatOneScenario.window, engine: try UringEngine(),
                options: FormatOneScenario.options)
            let recovery = try store.recover()
            #expect(recovery.seq == 108 && recovery.regular.generation == 2)
            #expect(store.stores[0].mustCompact, "a journal ending off the block boundary is not appended to")

            try store.apply(seq: 109) {
                try store.regular.webStateList.webState(at: 1).commitNavigation(
                    to: NavigationItem(url: "https://a.example/new", timestamp: .zero))
            }
            try store.waitUntilDurable(109)
            try store.settle()
            // Written from memory (generation 2 does not reach it): twice, as 3 and 4.
            #expect(store.stores[0].generation == 4, "a new generation")
            #expect(FileManager.default.fileExists(atPath: regular.appending(DiskLayout.snapshotName(3)).string))

            // Its saves go on as appends on block boundaries.
            try store.apply(seq: 110) { try store.regular.webStateList.activate(at: 0) }
            try store.waitUntilDurable(110)
            let newest = store.stores[0].generation
            let found = try scan(regular.appending(DiskLayout.journalName(newest)))
            #expect(found.commits.count == 1 && found.commits.allSatisfy { $0.end % 512 == 0 })
            let afterAppend = try WindowContents(store)

            let again = WindowStore(
                root: root, windowID: FormatOneScenario.window, engine: SyncEngine(), options: FormatOneScenario.options
            )
            let second = try again.recover()
            #expect(second.regular.damaged.isEmpty && second.seq == 110)
            #expect(try WindowContents(again) == afterAppend)

            // The newest snapshot damaged: the generation before (written in the same save)
            // and its journal restore the same window.
            let snapshot = regular.appending(DiskLayout.snapshotName(newest))
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: snapshot.string)))
            bytes[Framing.fileHeaderSize + 4] ^= 0x5A
            try Data(bytes).write(to: URL(fileURLWithPath: snapshot.string))
            let third = WindowStore(
                root: root, windowID: FormatOneScenario.window, engine: SyncEngine(), options: FormatOneScenario.options
            )
            let fallback = try third.recover()
            #expect(fallback.regular.damaged.count == 1 && fallback.seq == 110)
            #expect(try WindowContents(third) == afterAppend)
        }
    }

    /// tmpfs: direct writes refused (`inMemory`), the journal buffered with the same framing,
    /// and the window says so.
    @Test func onTmpfsJournalsAreBufferedWithTheSameFraming() throws {
        let root = FilePath("/dev/shm/windowhost-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(atPath: root.string, withIntermediateDirectories: false)
        defer { removeTestRoot(root.string) }
        #expect(DirectIO.isInMemory(root))
        let store = WindowStore(root: root, windowID: windowID, engine: try UringEngine(), saveDelayMilliseconds: 0)
        _ = try store.recover()
        var browsing = WindowBrowsing(seed: 5, incognitoOneIn: 1_000_000)
        for seq in 1...5 as ClosedRange<UInt64> {
            try browsing.step(store, seq: seq, incognito: false)
            try store.waitUntilDurable(seq)
        }
        guard case .failure(.inMemory)? = store.journalWrites else {
            Issue.record("expected buffered writes on tmpfs, got \(String(describing: store.journalWrites))")
            return
        }
        let journal = root.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
            BrowserKind.regular.rawValue
        )
        .appending(DiskLayout.journalName(store.stores[0].generation))
        let found = try scan(journal)
        #expect(found.commits.count == 5 && found.commits.allSatisfy { $0.end % BrowserStore.minimumBlock == 0 })
    }
}
