import BrowserModel
import Testing

@testable import SessionFormat

/// What a journal's scan asks of its file, counted (load-independent, unlike a timing): a
/// window held in its journal is read a chunk at a time, not twice a record, and a read that
/// fails is still met at the record it is in.
@Suite struct JournalReadCostTests {
    /// Before: two reads a record (its header, then its payload), 20,000 for a window of
    /// 10,000 tabs held in its journal.
    @Test func aScanReadsTheJournalAChunkAtATime() throws {
        var session = BrowsingSession(seed: 30)
        try session.run(commands: 2_000)
        let bytes = try session.journalBytes
        let source = CountingSource(bytes)
        let scan = try JournalFile.scan(source)
        #expect(scan.stoppedBy == nil)
        #expect(scan.records == session.records)
        #expect(session.records.count >= 1_000, "a journal of many records")
        let chunks = (bytes.count + JournalFile.chunkSize - 1) / JournalFile.chunkSize
        #expect(source.reads.count <= 2 * chunks, "\(source.reads.count) reads of \(bytes.count) bytes")
    }

    /// A read that fails (an EIO in the journal's middle) stops the scan where it stopped when
    /// each record was read alone: at that record, with the records before it kept.
    @Test func aFailingReadStopsTheScanAtTheRecordItIsIn() throws {
        var session = BrowsingSession(seed: 31)
        try session.run(commands: 300)
        var bytes = JournalFile.header
        var payloadStarts: [Int] = []
        for record in session.records {
            payloadStarts.append(bytes.count + Framing.recordHeaderSize)
            bytes += try record.frame
        }
        let failing = payloadStarts.count / 2
        let source = FailingSource(bytes, failingAt: payloadStarts[failing] + 1)
        let scan = try JournalFile.scan(source)
        #expect(scan.records == Array(session.records[..<failing]))
        #expect(scan.stoppedBy == .readFailed(offset: payloadStarts[failing], reason: FailingSource.reason))
        #expect(scan.validLength == payloadStarts[failing] - Framing.recordHeaderSize)
    }
}

/// Fails every read that covers byte `failingAt`, as a disk with one bad sector does.
private final class FailingSource: ByteSource {
    static let reason = "injected EIO"
    let inner: InMemoryBytes
    let failingAt: Int

    init(_ bytes: [UInt8], failingAt: Int) {
        inner = InMemoryBytes(bytes)
        self.failingAt = failingAt
    }

    var size: Int { inner.size }

    func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
        guard !(offset..<offset + count).contains(failingAt) else {
            throw .readFailed(offset: offset, reason: Self.reason)
        }
        return try inner.read(offset: offset, count: count)
    }
}
