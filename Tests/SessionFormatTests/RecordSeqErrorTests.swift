import HostLimits
import Testing

@testable import SessionFormat

/// An error about a journal record's seq names that record's seq and where it starts. Before,
/// a record at seq 2⁶⁴−1 under a commit at seq 5 read "record at byte <the commit's>: seq 5
/// after 18446744073709551615".
@Suite struct RecordSeqErrorTests {
    /// A journal of `saves`, and where each record starts.
    private func journal(_ saves: [(records: [UInt64], commit: UInt64)]) throws -> (JournalFile.Scan, [Int]) {
        var bytes = JournalFile.header
        var offsets: [Int] = []
        for save in saves {
            for seq in save.records {
                var storage = MutationStorage()
                storage.seq = seq
                storage.activate = Windowhost_Session_ActivateMutation()
                offsets.append(bytes.count)
                bytes += try JournalRecord(storage).frame
            }
            bytes += JournalCommit(seq: save.commit, browsers: 1).frame
        }
        return (try JournalFile.scan(InMemoryBytes(bytes)), offsets)
    }

    @Test func aRecordSeqAboveTheRangeIsNamedAtTheRecord() throws {
        let (scan, offsets) = try journal([([2], 2), ([UInt64.max], 5)])
        #expect(scan.recordOffsets == offsets)
        let check = scan.checkSeqs(snapshotSeq: 1, previousCommit: nil)
        #expect(check.validCommits == 1)
        let error = try #require(check.error)
        #expect(error == .invalidState(offset: offsets[1], reason: .seqOutOfRange(UInt64.max)))
        #expect(
            "\(error)"
                == "record at byte \(offsets[1]): seq 18446744073709551615 above the highest a window reaches (2^53 - 1)"
        )
        // Just above the range, the same.
        let (above, aboveOffsets) = try journal([([Limits.maxCommandSeq + 1], 7)])
        #expect(
            above.checkSeqs(snapshotSeq: 5, previousCommit: nil).error
                == .invalidState(offset: aboveOffsets[0], reason: .seqOutOfRange(Limits.maxCommandSeq + 1)))
    }

    @Test func aRecordPastItsCommitOrGoingBackIsNamedAtTheRecord() throws {
        let (past, pastOffsets) = try journal([([6], 6), ([7, 9], 8)])
        let error = try #require(past.checkSeqs(snapshotSeq: 5, previousCommit: nil).error)
        #expect(error == .invalidState(offset: pastOffsets[2], reason: .recordPastItsCommit(9, commit: 8)))
        #expect(
            "\(error)" == "record at byte \(pastOffsets[2]): record seq 9 above the seq 8 of the commit that covers it")
        let (back, backOffsets) = try journal([([7], 7), ([6], 8)])
        #expect(
            back.checkSeqs(snapshotSeq: 5, previousCommit: nil).error
                == .invalidState(offset: backOffsets[1], reason: .seqOutOfOrder(6, previous: 7)))
    }
}
