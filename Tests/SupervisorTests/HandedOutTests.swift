import Foundation
import Glibc
import HostLimits
import SystemPackage
import TestSupport
import Testing

@testable import Supervisor

/// `ROOT/handed-out`, the per-window ceilings of seqs and tab ids: its one parse refuses every
/// damaged file with a typed error, and a ceiling is raised by a block without ever trapping.
@Suite struct HandedOutTests {
    private let first = UUID(uuidString: "6F1C2E3A-0B4D-4E5F-8A9B-0C1D2E3F4A5B")!
    private let second = UUID(uuidString: "00000000-0000-4000-8000-0000000000AA")!

    private func text(_ lines: [String]) -> [UInt8] { Array(lines.map { $0 + "\n" }.joined().utf8) }

    private func entry(_ seq: UInt64, _ tab: Int64, lost: [ClosedRange<UInt64>] = []) -> HandedOutWindow {
        var seqs = LostSeqs()
        for range in lost { seqs.insert(range) }
        return HandedOutWindow(ceiling: HandedOutCeiling(seq: seq, tab: tab), lost: seqs)
    }

    @Test func whatIsEncodedParsesBackTheSame() throws {
        let full = (0..<UInt64(LostSeqs.capacity)).map { ($0 * 10 + 1)...($0 * 10 + 5) }
        let windows = [
            first: entry(4097, 12, lost: [2...3, 5...4097]),
            second: entry(
                Limits.maxCommandSeq, Limits.maxWebStateID,
                lost: full + [(Limits.maxCommandSeq - 1)...Limits.maxCommandSeq]),
        ]
        #expect(try HandedOut.parse(HandedOut.encode(windows)) == windows)
        #expect(try HandedOut.parse(HandedOut.encode([:])) == [:])
        #expect(
            String(decoding: HandedOut.encode([first: entry(7, 3, lost: [2...4])]), as: UTF8.self)
                == "windowhost-handed-out 1\n\(first.uuidString) 7 3 2-4\nend 1\n")
    }

    @Test func aDamagedFileIsATypedErrorNeverATrap() {
        let line = "\(first.uuidString) 7 3"
        let cases: [([UInt8], HandedOutError)] = [
            ([], .badHeader),
            (text(["windowhost-handed-out"]), .badHeader),
            (text(["something else 1", "end 0"]), .badHeader),
            (text(["windowhost-handed-out 2", "end 0"]), .unsupportedVersion("2")),
            // Cut short: no end line, an end line counting more, a last line without its newline.
            (text(["windowhost-handed-out 1", line]), .truncated),
            (text(["windowhost-handed-out 1", line, "end 2"]), .truncated),
            (Array("windowhost-handed-out 1\n\(line)\nend 1".utf8), .truncated),
            (text(["windowhost-handed-out 1", "\(first.uuidString.lowercased()) 7 3", "end 1"]), .badLine(2)),
            (text(["windowhost-handed-out 1", "\(first.uuidString) 7", "end 1"]), .badLine(2)),
            (text(["windowhost-handed-out 1", "\(first.uuidString)  7 3", "end 1"]), .badLine(2)),
            (text(["windowhost-handed-out 1", "\(first.uuidString) -7 3", "end 1"]), .badLine(2)),
            (text(["windowhost-handed-out 1", "\(first.uuidString) 7 +3", "end 1"]), .badLine(2)),
            (
                text(["windowhost-handed-out 1", "\(first.uuidString) \(Limits.maxCommandSeq + 1) 3", "end 1"]),
                .numberPastMaximum(line: 2, "\(Limits.maxCommandSeq + 1)")
            ),
            (
                text(["windowhost-handed-out 1", "\(first.uuidString) 7 \(Limits.maxWebStateID + 1)", "end 1"]),
                .numberPastMaximum(line: 2, "\(Limits.maxWebStateID + 1)")
            ),
            (
                text(["windowhost-handed-out 1", "\(first.uuidString) 99999999999999999999999 3", "end 1"]),
                .numberPastMaximum(line: 2, "99999999999999999999999")
            ),
            (text(["windowhost-handed-out 1", line, line, "end 2"]), .duplicateWindow(line: 3, first)),
            (text(["windowhost-handed-out 1", "\(line) 2-", "end 1"]), .badLine(2)),
            (text(["windowhost-handed-out 1", "\(line) 2-3-4", "end 1"]), .badLine(2)),
            (text(["windowhost-handed-out 1", "\(line) 0-3", "end 1"]), .badLostSeqs(line: 2)),
            (text(["windowhost-handed-out 1", "\(line) 4-3", "end 1"]), .badLostSeqs(line: 2)),
            (text(["windowhost-handed-out 1", "\(line) 2-8", "end 1"]), .badLostSeqs(line: 2)),
            (text(["windowhost-handed-out 1", "\(line) 4-5 1-2", "end 1"]), .badLostSeqs(line: 2)),
            (text(["windowhost-handed-out 1", "\(line) 1-2 3-4", "end 1"]), .badLostSeqs(line: 2)),
            (
                text([
                    "windowhost-handed-out 1",
                    "\(first.uuidString) 999 3" + String(repeating: " 1-1", count: LostSeqs.capacity + 1), "end 1",
                ]),
                .badLostSeqs(line: 2)
            ),
            (
                [UInt8](repeating: UInt8(ascii: "\n"), count: Limits.maxHandedOutBytes + 1),
                .oversize(Limits.maxHandedOutBytes + 1)
            ),
        ]
        for (bytes, expected) in cases {
            #expect(throws: expected, "\(String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription)") {
                try HandedOut.parse(bytes)
            }
        }
    }

    @Test func aCeilingIsRaisedByABlockAndSaturatesAtTheMaximum() throws {
        let ceiling = HandedOutCeiling(seq: 10, tab: 5)
        #expect(try ceiling.covering(HandedOutCeiling(seq: 10, tab: 0)) == ceiling, "covered: no write")
        #expect(
            try ceiling.covering(HandedOutCeiling(seq: 11, tab: 5))
                == HandedOutCeiling(seq: 11 + HandedOutCeiling.block, tab: 5))
        #expect(
            try ceiling.covering(HandedOutCeiling(seq: 3, tab: 6))
                == HandedOutCeiling(seq: 10, tab: 6 + Int64(HandedOutCeiling.block)))
        let top = HandedOutCeiling(seq: Limits.maxCommandSeq, tab: Limits.maxWebStateID)
        #expect(try HandedOutCeiling.zero.covering(top) == top, "near the maximum the block is cut, never wraps")
        #expect(
            try HandedOutCeiling.zero.covering(HandedOutCeiling(seq: Limits.maxCommandSeq - 1, tab: 1)).seq
                == Limits.maxCommandSeq)
        #expect(throws: HandedOutError.numberPastMaximum(line: nil, "\(Limits.maxCommandSeq + 1)")) {
            try HandedOutCeiling.zero.covering(HandedOutCeiling(seq: Limits.maxCommandSeq + 1, tab: 0))
        }
        #expect(throws: HandedOutError.numberPastMaximum(line: nil, "-1")) {
            try HandedOutCeiling.zero.covering(HandedOutCeiling(seq: 0, tab: -1))
        }
    }

    /// Written private (0600 whatever the umask), read back; a symlink in its place is set aside
    /// as itself (never followed) and its target untouched; a damaged file is set aside.
    @Test func theFileIsPrivateAndNeverReadThroughASymlink() throws {
        var template = Array("/tmp/windowhost-handedout-XXXXXX".utf8CString)
        try #require(mkdtemp(&template) != nil)
        let root = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        defer { removeTestRoot(root.string) }
        let files = SupervisorFiles(root: root)
        guard case .missing = try files.handedOutRecord(at: Date()) else {
            Issue.record("no file: missing")
            return
        }

        let old = umask(0)
        defer { umask(old) }
        let ceilings = [first: entry(4100, 4099, lost: [3...4100])]
        try files.makeHandedOut(ceilings).close()
        var status = stat()
        #expect(lstat(files.handedOut.string, &status) == 0 && status.st_mode & 0o777 == 0o600)
        guard case .read(let read) = try files.handedOutRecord(at: Date()) else {
            Issue.record("not read")
            return
        }
        #expect(read == ceilings)

        let outside = root.appending("outside")
        try Data(HandedOut.encode(ceilings)).write(to: URL(fileURLWithPath: outside.string))
        try #require(unlink(files.handedOut.string) == 0 && symlink(outside.string, files.handedOut.string) == 0)
        guard case .damaged(_, let path?) = try files.handedOutRecord(at: Date()) else {
            Issue.record("a symlink is damage")
            return
        }
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: path.string) == outside.string, "moved as itself")
        #expect(lstat(files.handedOut.string, &status) != 0, "out of the way")

        try Data("windowhost-handed-out 1\n".utf8).write(to: URL(fileURLWithPath: files.handedOut.string))
        guard case .damaged(let reason, let moved?) = try files.handedOutRecord(at: Date()) else {
            Issue.record("cut short: damage")
            return
        }
        #expect(reason.contains("cut short") && moved.removingLastComponent() == files.setAside)
    }

    /// The file keeps the text twice (two fixed slots, each with its length and checksum): a
    /// write torn in either leaves the other whole, and the first that reads wins.
    @Test func eitherSlotAloneReadsAndNeitherIsATypedError() throws {
        let old = [first: entry(4097, 12)]
        let new = [first: entry(8193, 12, lost: [4098...4100])]
        let file = try HandedOut.encodeFile(new)
        #expect(file.count == HandedOut.fileBytes)
        #expect(try HandedOut.parseFile(file) == new)
        // A power cut in the first slot's write: the second still holds the record before.
        // (Its length and checksum landed, the text after them not all.)
        var torn = try HandedOut.encodeSlot(new).prefix(20) + HandedOut.encodeSlot(old).dropFirst(20)
        torn += try HandedOut.encodeSlot(old)
        #expect(try HandedOut.parseFile(Array(torn)) == old)
        // In the second slot's write: the first, synced before it, holds the new record.
        var second = try HandedOut.encodeSlot(new)
        second += [UInt8](repeating: 0xA5, count: HandedOut.slotBytes)
        #expect(try HandedOut.parseFile(second) == new)
        #expect(throws: HandedOutError.noCopyReads) {
            try HandedOut.parseFile([UInt8](repeating: 0xFF, count: HandedOut.fileBytes))
        }
        #expect(throws: HandedOutError.noCopyReads) {
            try HandedOut.parseFile([UInt8](repeating: 0, count: HandedOut.fileBytes))
        }
    }

    /// On a full disk the file is written in place through the descriptor held: no new
    /// temporary, no new block (making it anew there fails with ENOSPC; hostile round 5 lost a
    /// lost seq so, and `wait-durable --seq` answered 0 for it after a restart).
    @Test func writesInPlaceLandOnAFullDisk() throws {
        var template = Array("/tmp/windowhost-handedout-full-XXXXXX".utf8CString)
        try #require(mkdtemp(&template) != nil)
        let root = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        defer { removeTestRoot(root.string) }
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", root.string]
        try mount.run()
        mount.waitUntilExit()
        try #require(
            mount.terminationStatus == 0,
            "mounting a 1 MiB tmpfs at \(root) was refused (this test needs root): it fails rather than skips")
        defer { _ = umount2(root.string, Int32(MNT_DETACH)) }
        let files = SupervisorFiles(root: root)
        let fd = try files.makeHandedOut([first: entry(4097, 12)])
        defer { try? fd.close() }
        // Fill the disk.
        let filler = try FileDescriptor.open(
            root.appending("filler").string, .writeOnly, options: [.create], permissions: .ownerReadWrite)
        let chunk = [UInt8](repeating: 1, count: 64 << 10)
        while (try? filler.writeAll(chunk)) != nil {}
        try filler.close()
        let recorded = [first: entry(8193, 12, lost: [4098...4100]), second: entry(3, 2)]
        #expect(throws: Errno.noSpace) { try files.makeHandedOut(recorded) }
        try SupervisorFiles.writeHandedOut(recorded, inPlace: fd)
        guard case .read(let read) = try files.handedOutRecord(at: Date()) else {
            Issue.record("not read")
            return
        }
        #expect(read == recorded)
    }
}
