import BrowserModel
import Foundation
import HostCoordination
import Logging
import SystemPackage
import Testing

@testable import Supervisor

/// `ROOT/moves` (`MoveLog`, `MoveBook`): entries read back as written, a torn or damaged lane
/// is a free one, every number is checked, and the file is written in place.
@Suite struct MoveLogTests {
    static func entry(_ seed: UInt64 = 1) -> MoveEntry {
        MoveEntry(
            move: MoveID(rawValue: 0xdead_beef_0000 + seed)!, source: UUID(), tab: Int64(seed) + 40,
            destination: UUID(), incognito: seed % 2 == 0)
    }

    @Test func anEntryReadsBackAndZerosAreAFreeLane() {
        let written = Self.entry()
        var lane = MoveLog.encode(written) + [UInt8](repeating: 0, count: 100)
        #expect(MoveLog.decode(lane[...]) == .entry(written))
        #expect(MoveLog.decode([UInt8](repeating: 0, count: MoveLog.laneBytes)[...]) == .free)
        lane[lane.count - 1] = 1
        #expect(MoveLog.decode(lane[...]) == .entry(written), "only the content is read")
    }

    @Test func everyFlippedByteOfAnEntryMakesItUnreadable() {
        let content = MoveLog.encode(Self.entry(4))
        for index in content.indices {
            var torn = content
            torn[index] ^= 0x40
            guard case .unreadable = MoveLog.decode(torn[...]) else {
                Issue.record("byte \(index) flipped still reads")
                continue
            }
        }
        guard case .unreadable = MoveLog.decode(content.prefix(content.count - 3)) else {
            Issue.record("a cut entry reads")
            return
        }
    }

    @Test func numbersOutOfRangeAreRefusedEvenUnderAGoodChecksum() {
        let id = UUID()
        let bad = [
            MoveEntry(move: MoveID(rawValue: 1)!, source: UUID(), tab: 0, destination: UUID(), incognito: false),
            MoveEntry(move: MoveID(rawValue: 1)!, source: id, tab: 3, destination: id, incognito: false),
        ]
        for entry in bad {
            guard case .unreadable = MoveLog.decode(MoveLog.encode(entry)[...]) else {
                Issue.record("\(entry) reads")
                continue
            }
        }
    }

    @Test func theBookKeepsItsLanesAcrossRestartsAndSkipsATornOne() throws {
        let root = try temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root.string) }
        let logger = Logger(label: "test")
        let book = try MoveBook(files: SupervisorFiles(root: root, logger: logger), logger: logger)
        let (first, second, third) = (Self.entry(1), Self.entry(2), Self.entry(3))
        #expect(try book.record(first) == 0)
        #expect(try book.record(second) == 1)
        #expect(try book.record(third) == 2)
        book.clear(second.move)
        #expect(
            try MoveBook(files: SupervisorFiles(root: root, logger: logger), logger: logger).lanes == [
                0: first, 2: third,
            ])
        let path = root.appending(DiskLayout.moves)
        #expect(try FileManager.default.attributesOfItem(atPath: path.string)[.size] as? Int == MoveLog.fileBytes)
        let mode = try FileManager.default.attributesOfItem(atPath: path.string)[.posixPermissions] as? Int
        #expect(mode == 0o600, "the log is private")
        // A power cut tore the third lane's write.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path.string))
        try handle.seek(toOffset: UInt64(2 * MoveLog.laneBytes + 20))
        try handle.write(contentsOf: Data([0xff, 0x00, 0x13]))
        try handle.close()
        let reread = try MoveBook(files: SupervisorFiles(root: root, logger: logger), logger: logger)
        #expect(reread.lanes == [0: first])
        #expect(try reread.record(second) == 1, "the first free lane")
    }

    @Test func aLogOfAnotherSizeIsReadThenMadeAnew() throws {
        let root = try temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root.string) }
        let path = root.appending(DiskLayout.moves)
        let kept = Self.entry(5)
        var bytes = [UInt8](repeating: 0, count: MoveLog.laneBytes * 3)
        bytes.replaceSubrange(
            MoveLog.laneBytes..<(MoveLog.laneBytes + MoveLog.contentBytes), with: MoveLog.encode(kept))
        #expect(FileManager.default.createFile(atPath: path.string, contents: Data(bytes)))
        let book = try MoveBook(
            files: SupervisorFiles(root: root, logger: Logger(label: "test")), logger: Logger(label: "test"))
        #expect(book.lanes == [1: kept])
        let added = Self.entry(6)
        _ = try book.record(added)
        #expect(try FileManager.default.attributesOfItem(atPath: path.string)[.size] as? Int == MoveLog.fileBytes)
        #expect(
            try MoveBook(
                files: SupervisorFiles(root: root, logger: Logger(label: "test")), logger: Logger(label: "test")
            ).lanes == [0: added, 1: kept])
    }

    @Test func aSymlinkUnderTheLogsNameIsSetAsideNotFollowed() throws {
        let root = try temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root.string) }
        let target = root.appending("elsewhere")
        #expect(FileManager.default.createFile(atPath: target.string, contents: Data([1, 2, 3])))
        try FileManager.default.createSymbolicLink(
            atPath: root.appending(DiskLayout.moves).string, withDestinationPath: target.string)
        let logger = Logger(label: "test")
        let book = try MoveBook(files: SupervisorFiles(root: root, logger: logger), logger: logger)
        #expect(book.lanes.isEmpty)
        let aside = try FileManager.default.contentsOfDirectory(atPath: root.appending(DiskLayout.setAside).string)
        #expect(aside.count == 1 && aside[0].hasPrefix("moves-") && aside[0].hasSuffix("-damaged-file"), "\(aside)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: target.string)) == Data([1, 2, 3]), "the target untouched")
        _ = try book.record(Self.entry(7))
        var status = stat()
        #expect(lstat(root.appending(DiskLayout.moves).string, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG)
    }

    private func temporaryRoot() throws -> FilePath {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("moves-\(UUID())").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return FilePath(path)
    }
}
