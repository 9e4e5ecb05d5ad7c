import BrowserModel
import Foundation
import SessionFormat

/// The session files: each input is a whole file, read twice, as the file itself and as the
/// same bytes followed by a 1 TiB hole (a sparse file, which costs nothing on disk). Every read
/// allocates what it asks for, as the store's pread does, so a read sized by what a file claims
/// rather than by the limits shows up as an allocation above libFuzzer's `-malloc_limit_mb`.
/// `WINDOWHOST_FUZZ_HOLE=0` leaves the hole out, to explore past a known oversized read.
enum SessionFileInputs {
    static let holeBytes = 1 << 40

    static let withHole = ProcessInfo.processInfo.environment["WINDOWHOST_FUZZ_HOLE"] != "0"

    static func sources(_ bytes: [UInt8]) -> [any ByteSource] {
        withHole ? [InMemoryBytes(bytes), SparseFile(bytes, hole: holeBytes)] : [InMemoryBytes(bytes)]
    }

    static let allKinds: Set<RecordKind> = [.listMetadata, .navigation, .mutation, .commit]

    /// Headers of both kinds, and records followed one to the next from byte 0 and from the end
    /// of a header.
    static func frames(_ bytes: [UInt8]) {
        for source in sources(bytes) {
            for kind in SessionFileKind.allCases { _ = try? Framing.checkFileHeader(source, kind: kind) }
            for start in [0, Framing.fileHeaderSize] {
                var offset = start
                while offset < source.size,
                    let record = try? Framing.readRecord(source, at: offset, expecting: allKinds)
                {
                    precondition(
                        record.end > offset && record.end <= source.size, "record at \(offset) ends at \(record.end)")
                    offset = record.end
                }
            }
        }
    }

    /// What restore does with a snapshot: the metadata, the list, every tab realized. A list
    /// restored whole is written again and must read back the same.
    static func snapshot(_ bytes: [UInt8]) throws(FuzzFinding) {
        for source in sources(bytes) {
            guard let reader = try? SnapshotReader(source) else { continue }
            let count = reader.count
            try expect(
                reader.activeIndex.map { (0..<count).contains($0) } ?? true,
                "active index \(String(describing: reader.activeIndex)) of \(count)")
            try expect((0...count).contains(reader.pinnedCount), "pinned count \(reader.pinnedCount) of \(count)")
            let list = WebStateList()
            do {
                try reader.restore(into: list, profile: Profile(stateDirectory: "/fuzz"))
            } catch {
                continue
            }
            try expect(list.count == count, "restored \(list.count) tabs of \(count)")
            try expectValid(list, "restored")
            var realizedAll = true
            for (index, webState) in list.webStates.enumerated() {
                _ = try? reader.historyPayload(at: index)
                do {
                    _ = try webState.navigationHistory()
                } catch {
                    try expect(
                        !webState.isRealized, "tab \(webState.id) realized although its history failed: \(error)")
                    realizedAll = false
                }
            }
            if realizedAll { try expectRoundTrip(list, seq: reader.lastCommandSeq) }
        }
    }

    /// What recovery does with a journal: the scan, the check for valid records after a bad
    /// one, then the committed records replayed in order onto a list until one does not fit.
    static func journal(_ bytes: [UInt8]) throws(FuzzFinding) {
        for source in sources(bytes) {
            guard let scan = try? JournalFile.scan(source) else { continue }
            try expect(
                (Framing.fileHeaderSize...source.size).contains(scan.validLength),
                "valid length \(scan.validLength) of \(source.size)")
            var previous = (records: 0, end: Framing.fileHeaderSize)
            for commit in scan.commits {
                try expect(
                    commit.recordCount >= previous.records && commit.recordCount <= scan.records.count
                        && commit.end > previous.end && commit.end <= scan.validLength,
                    "commit \(commit) after \(previous) in \(scan.records.count) records, \(scan.validLength) bytes")
                previous = (commit.recordCount, commit.end)
            }
            if scan.stoppedBy != nil { _ = try? JournalFile.hasValidCommit(in: source, after: scan.validLength + 1) }
            let list = WebStateList()
            let profile = Profile(stateDirectory: "/fuzz")
            let stored = JournalTabs()
            var replayedAll = true
            for record in scan.committedRecords {
                do {
                    try JournalReplayer.apply(record, to: list, profile: profile, keepingIn: stored)
                } catch {
                    replayedAll = false
                }
                try expectValid(list, "after \(record)")
                if !replayedAll { break }
            }
            if replayedAll { try expectRoundTrip(list, seq: scan.commits.last?.commit.seq ?? 0) }
        }
    }

    static func expectValid(_ list: WebStateList, _ when: @autoclosure () -> String) throws(FuzzFinding) {
        let violations = list.invariantViolations()
        try expect(violations.isEmpty, "\(when()): \(violations)")
    }

    /// Whatever the reader accepted, the writer writes, and the reader reads back the same: the
    /// writer never writes what the reader would refuse.
    static func expectRoundTrip(_ list: WebStateList, seq: UInt64) throws(FuzzFinding) {
        do {
            let contents = try TabListContents(list, realizing: true)
            let bytes = try SnapshotEncoder.encode(list, lastCommandSeq: seq) { webState throws(SessionFormatError) in
                throw .invalidState(offset: 0, reason: .replayMismatch("tab \(webState.id) is not realized"))
            }
            let reader = try SnapshotReader(InMemoryBytes(bytes))
            let again = WebStateList()
            try reader.restore(into: again, profile: Profile(stateDirectory: "/fuzz"))
            try expect(reader.lastCommandSeq == seq, "seq \(seq) read back as \(reader.lastCommandSeq)")
            let read = try TabListContents(again, realizing: true)
            try expect(read == contents, "wrote \(contents), read back \(read)")
        } catch let finding as FuzzFinding {
            throw finding
        } catch {
            throw FuzzFinding(description: "a list the reader accepted does not round-trip: \(error)")
        }
    }
}

/// A file as pread sees it: `bytes`, then `hole` zero bytes. Each read allocates exactly what
/// it asks for, as `FileBytes` does, and none may ask for more than the format's limits allow.
struct SparseFile: ByteSource {
    let bytes: [UInt8]
    let size: Int

    init(_ bytes: [UInt8], hole: Int) {
        self.bytes = bytes
        size = bytes.count + hole
    }

    func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
        try checkRange(offset: offset, count: count)
        // Caught here as well as by libFuzzer's malloc limit, so the corpus replay test (no
        // sanitizer) refuses such a read too, without making it.
        precondition(
            count <= FuzzTarget.allocationLimitMiB << 20,
            "a read of \(count) bytes at byte \(offset): sized by what the file claims, beyond the format's limits")
        var read = [UInt8](repeating: 0, count: count)
        if offset < bytes.count {
            let stored = bytes[offset..<min(bytes.count, offset + count)]
            read.replaceSubrange(0..<stored.count, with: stored)
        }
        return read
    }
}
