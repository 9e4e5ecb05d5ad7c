import BrowserModel
import Foundation
import HostLimits
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionFormat
@testable import SessionStore

/// Hostile round on snapshot format 2 through the real store on a real directory: a crafted
/// newest snapshot recovered and compacted, and the upgrade from the format-1 fixture with its
/// newest (format-2) generation damaged so recovery falls back to format 1.
@Suite struct FormatTwoAttackStoreTests {
    private static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Fixtures/format1-window")

    /// The window's regular Browser's session directory under `root`.
    private static func regularDirectory(_ root: FilePath, _ window: UUID = windowID) -> FilePath {
        root.appending(DiskLayout.windows).appending(window.uuidString).appending(BrowserKind.regular.rawValue)
    }

    /// The size of the file at `path`, 0 if none.
    private static func size(_ path: FilePath) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path.string))?[.size] as? Int) ?? 0
    }

    /// The snapshot names in `directory`, oldest first.
    private static func snapshots(_ directory: FilePath) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.string)) ?? []).filter {
            $0.hasPrefix(DiskLayout.snapshotPrefix)
        }.sorted()
    }

    /// 64 tabs whose entries all name one 64 KiB URL and one history frame: a format-2 file of
    /// about 140 KB that passes every check.
    private static func aliasedSnapshot(seq: UInt64) throws -> [UInt8] {
        let url = Array("https://a.example/".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 64 << 10)
        var history = NavigationHistory()
        history.commit(NavigationItem(url: String(decoding: url, as: UTF8.self), title: "", timestamp: .zero))
        let frame = try Framing.record(
            .navigation, payload: encodeMessage(HistoryWire(id: WebStateID(rawValue: 1)!, history: history)))
        var index = SnapshotIndex.header(count: 64, activeIndex: 0, pinnedCount: 0, lastCommandSeq: seq)
        for n in 1...64 {
            SnapshotIndex.appendEntry(
                to: &index,
                SnapshotIndex.Entry(
                    id: WebStateID(rawValue: Int64(n))!, creationTime: .zero, lastActiveTime: .zero, historyOffset: 0,
                    historyLength: UInt32(frame.count), stringOffset: 0, titleLength: 0, urlLength: UInt32(url.count),
                    navigationItemCount: 1, openerIndex: -1, openerNavigationIndex: 0, realizedAtSave: false))
        }
        SnapshotIndex.finishHeader(
            &index, stringRecords: 1, stringAreaLength: UInt64(url.count), historySectionLength: UInt64(frame.count))
        var bytes = Framing.fileHeader(.snapshot)
        try Framing.appendRecord(.listIndex, payload: index, to: &bytes)
        try Framing.appendRecord(.strings, payload: url, to: &bytes)
        return bytes + frame
    }

    /// A crafted newest generation (snapshot 2 and an empty journal) whose 64 tabs share one URL
    /// and one history frame: recovered, then saved until a compaction. Each compaction writes
    /// every tab's URL and frame out in full: the snapshot it writes should stay within a small
    /// factor of the file it came from (or the file should be refused and set aside).
    @Test func aSmallCraftedSnapshotStaysSmallThroughCompaction() throws {
        try withTemporaryDirectory { root in
            let directory = Self.regularDirectory(root)
            try FileManager.default.createDirectory(atPath: directory.string, withIntermediateDirectories: true)
            let crafted = try Self.aliasedSnapshot(seq: 1)
            try Data(crafted).write(to: URL(fileURLWithPath: directory.appending(DiskLayout.snapshotName(2)).string))
            try Data(JournalFile.header(blockSize: 4096)).write(
                to: URL(fileURLWithPath: directory.appending(DiskLayout.journalName(2)).string))
            let options = StoreOptions(compactAfterRecords: 4, compactAfterBytes: 1 << 20)
            let store = WindowStore(
                root: root, windowID: windowID, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
            let recovery = try store.recover()
            let list = store.regular.webStateList
            if recovery.regular.damaged.isEmpty {
                #expect(list.count == 64)
                for seq in 2...9 as ClosedRange<UInt64> {
                    try store.apply(seq: seq) { try list.activate(at: Int(seq)) }
                    try store.waitUntilDurable(seq)
                }
                try store.settle()
            }
            let largest = Self.snapshots(directory).map { Self.size(directory.appending($0)) }.max() ?? 0
            #expect(
                largest <= 4 * crafted.count, "a \(crafted.count)-byte snapshot was compacted into \(largest) bytes")
        }
    }

    /// The format-1 fixture (written before journals were block-framed) restored and saved
    /// until a compaction: its journal cannot be continued, so the compaction writes two
    /// format-2 generations (a twin) and no format-1 file is left. The newest then damaged with
    /// its checksum right (an entry's reserved bits set): recovery sets it aside and falls back
    /// to the twin, losing nothing acknowledged; the pinned tab restored from format 1 and
    /// never realized goes through two more compactions and realizes as the model has it.
    /// (The fallback from format 2 to format 1 needs a block-framed format-1 session:
    /// /tmp/attack11/upgrade.py drives it with the 690d51b binary.)
    @Test func anUpgradedSessionsDamagedNewestFallsBackAndUnrealizedTabsSurvive() throws {
        try withTemporaryDirectory { root in
            let window = FormatOneScenario.window
            let directory = Self.regularDirectory(root, window)
            try FileManager.default.createDirectory(
                atPath: directory.removingLastComponent().removingLastComponent().string,
                withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                atPath: Self.fixture.path, toPath: directory.removingLastComponent().string)
            let options = StoreOptions(compactAfterRecords: 20, compactAfterBytes: 1 << 20)
            var store = WindowStore(
                root: root, windowID: window, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
            var recovery = try store.recover()
            #expect(recovery.seq == 108 && recovery.regular.damaged.isEmpty)
            // The model: the same commands on the simulated disk, the same saves after.
            let disk = FaultEngine(directories: [simulatedRoot])
            let model = WindowStore(
                root: simulatedRoot, windowID: window, engine: disk, options: options,
                keys: disk.keyring.keys(for: window))
            _ = try model.recover()
            try FormatOneScenario.run(model)
            var seq: UInt64 = 108
            // Only tab A (index 1, after pinned B) navigates: B stays unrealized in the store.
            func navigateA(_ count: Int) throws {
                for _ in 0..<count {
                    seq += 1
                    for window in [store, model] {
                        try window.apply(seq: seq) {
                            try window.regular.webStateList.webState(at: 1).commitNavigation(
                                to: NavigationItem(
                                    url: "https://a.example/after/\(seq)", title: "after \(seq)", timestamp: .zero))
                        }
                        try window.waitUntilDurable(seq)
                    }
                }
            }
            #expect(Self.snapshots(directory) == [DiskLayout.snapshotName(1), DiskLayout.snapshotName(2)])
            // Up to the first compaction: snapshot 3 (format 2) and snapshot 2 (format 1) before it.
            while Self.snapshots(directory).last == DiskLayout.snapshotName(2) {
                try navigateA(1)
                try store.settle()
            }
            let afterOne = Self.snapshots(directory)
            #expect(afterOne.count == 2, "\(afterOne)")
            let newest = try #require(afterOne.last)
            let newestPath = directory.appending(newest)
            for name in afterOne {
                let reader = try SnapshotReader(FileBytes(path: directory.appending(name)))
                #expect(reader.version == 2, "\(name)")
            }
            let pinned = try store.regular.webStateList.webState(at: 0)
            #expect(!pinned.isRealized, "pinned tab B never realized")
            let expected = try WindowContents(model)
            try store.settle()

            // Damage the newest: entry 0's reserved field, the index record's checksum made right.
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: newestPath.string)))
            let payload = Framing.fileHeaderSize + Framing.recordHeaderSize
            let length = Int(bytes.littleEndian(UInt32.self, at: Framing.fileHeaderSize + 4))
            bytes.storeLittleEndian(UInt32(1), at: payload + SnapshotIndex.headerSize + SnapshotIndex.Field.reserved)
            bytes.storeLittleEndian(
                CRC32C.checksum(
                    bytes[payload..<payload + length],
                    continuing: CRC32C.checksum(bytes[Framing.fileHeaderSize..<Framing.fileHeaderSize + 8])),
                at: Framing.fileHeaderSize + 8)
            try Data(bytes).write(to: URL(fileURLWithPath: newestPath.string))

            store = WindowStore(
                root: root, windowID: window, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
            recovery = try store.recover()
            #expect(recovery.seq == seq, "every acknowledged save")
            #expect(recovery.regular.damaged.contains { $0.path.hasSuffix(newest) }, "\(recovery.regular.damaged)")
            #expect(try WindowContents(store) == expected)

            // Two more compactions: the format-1 file goes; B, restored from it, still realizes.
            store = WindowStore(
                root: root, windowID: window, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
            recovery = try store.recover()
            #expect(recovery.seq == seq && recovery.regular.damaged.isEmpty, "\(recovery.regular.damaged)")
            try navigateA(50)
            try store.settle()
            let stillPinned = try store.regular.webStateList.webState(at: 0)
            #expect(!stillPinned.isRealized)
            #expect(try WindowContents(store) == WindowContents(model))
            let again = WindowStore(
                root: root, windowID: window, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
            let last = try again.recover()
            #expect(last.seq == seq && last.regular.damaged.isEmpty)
            #expect(try WindowContents(again) == WindowContents(model))
            for name in Self.snapshots(directory) {
                let reader = try SnapshotReader(FileBytes(path: directory.appending(name)))
                #expect(reader.version == 2, "\(name)")
            }
        }
    }
}

/// Two tabs' history ranges swapped in the newest snapshot, checksum right: each entry names the
/// other tab's frame. Realized at once, each tab finds the mismatch and rebuilds its history
/// from the generation before. But compaction copies an unrealized tab's frame without looking
/// whose it is (`SnapshotReader.historyFrame`), so after two compactions the swapped frames are
/// in every generation, the one that held the right histories is deleted, and realizing the tab
/// then can only degrade it to one page: acknowledged history lost.
@Suite struct SwappedFrameTests {
    /// A real window: tabs A, B and C with three entries each, every save durable.
    static func prepared(_ root: FilePath, options: StoreOptions) throws -> (
        expected: WindowContents, seq: UInt64, directory: FilePath
    ) {
        let store = WindowStore(
            root: root, windowID: windowID, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
        _ = try store.recover()
        let list = store.regular.webStateList
        var seq: UInt64 = 0
        func command(_ body: () throws -> Void) throws {
            seq += 1
            try store.apply(seq: seq, body)
            try store.waitUntilDurable(seq)
        }
        for name in ["a", "b", "c"] {
            let tab = WebState(id: store.regular.profile.makeWebStateID(), creationTime: .zero)
            try command { try list.insert(tab, InsertionParams(activate: true)) }
            for n in 0..<3 {
                try command {
                    try tab.commitNavigation(
                        to: NavigationItem(url: "https://\(name).example/\(n)", title: "\(name) \(n)", timestamp: .zero)
                    )
                }
            }
        }
        try store.settle()
        let directory = root.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
            BrowserKind.regular.rawValue)
        return (try WindowContents(store), seq, directory)
    }

    /// Swaps entries 0 and 1's history ranges in the newest snapshot, checksum made right.
    private static func swapFrames(in directory: FilePath) throws -> String {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.string).filter {
            $0.hasPrefix(DiskLayout.snapshotPrefix)
        }.sorted()
        let newest = try #require(names.last)
        let url = URL(fileURLWithPath: directory.appending(newest).string)
        var bytes = Array(try Data(contentsOf: url))
        let payload = Framing.fileHeaderSize + Framing.recordHeaderSize
        func at(_ item: Int, _ field: Int) -> Int {
            payload + SnapshotIndex.headerSize + item * SnapshotIndex.entrySize + field
        }
        let offsets = (
            bytes.littleEndian(UInt64.self, at: at(0, SnapshotIndex.Field.historyOffset)),
            bytes.littleEndian(UInt64.self, at: at(1, SnapshotIndex.Field.historyOffset))
        )
        let lengths = (
            bytes.littleEndian(UInt32.self, at: at(0, SnapshotIndex.Field.historyLength)),
            bytes.littleEndian(UInt32.self, at: at(1, SnapshotIndex.Field.historyLength))
        )
        bytes.storeLittleEndian(offsets.1, at: at(0, SnapshotIndex.Field.historyOffset))
        bytes.storeLittleEndian(offsets.0, at: at(1, SnapshotIndex.Field.historyOffset))
        bytes.storeLittleEndian(lengths.1, at: at(0, SnapshotIndex.Field.historyLength))
        bytes.storeLittleEndian(lengths.0, at: at(1, SnapshotIndex.Field.historyLength))
        let length = Int(bytes.littleEndian(UInt32.self, at: Framing.fileHeaderSize + 4))
        bytes.storeLittleEndian(
            CRC32C.checksum(
                bytes[payload..<payload + length],
                continuing: CRC32C.checksum(bytes[Framing.fileHeaderSize..<Framing.fileHeaderSize + 8])),
            at: Framing.fileHeaderSize + 8)
        try Data(bytes).write(to: url)
        return newest
    }

    /// Realized at once (0) the tabs come back whole; after two compactions (2) they must too.
    @Test(arguments: [0, 2]) func swappedFramesKeepTheirHistoriesThroughCompactions(compactionsFirst: Int) throws {
        try Self.expectTabsAAndBWhole(compactionsFirst: compactionsFirst) { directory in
            _ = try Self.swapFrames(in: directory)
        }
    }

    /// The prepared window, its newest regular snapshot damaged by `damage`, restored, then
    /// `compactionsFirst` compactions of saves that touch only tab C (A and B stay unrealized
    /// through them): tabs A and B must come back as they were acknowledged.
    static func expectTabsAAndBWhole(compactionsFirst: Int, damage: (FilePath) throws -> Void) throws {
        try withTemporaryDirectory { root in
            let options = StoreOptions(compactAfterRecords: 4, compactAfterBytes: 1 << 20)
            let (expected, last, directory) = try Self.prepared(root, options: options)
            try damage(directory)
            let store = WindowStore(
                root: root, windowID: windowID, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
            let recovery = try store.recover()
            #expect(recovery.seq == last)
            var seq = last
            let c = try store.regular.webStateList.webState(at: 2)
            for _ in 0..<(compactionsFirst * 5) {
                seq += 1
                try store.apply(seq: seq) {
                    try c.commitNavigation(
                        to: NavigationItem(url: "https://c.example/\(seq)", title: "c", timestamp: .zero))
                }
                try store.waitUntilDurable(seq)
            }
            try store.settle()
            let got = try WindowContents(store)
            #expect(
                got.regular.tabs.prefix(2) == expected.regular.tabs.prefix(2),
                "tabs A and B: \(got.regular.tabs.prefix(2))")
        }
    }
}
