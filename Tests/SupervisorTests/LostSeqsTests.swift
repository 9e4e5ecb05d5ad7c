import Testing

@testable import Supervisor

/// The seqs lost with killed workers, as the supervisor keeps them for durable answers.
@Suite struct LostSeqsTests {
    @Test func rangesThatTouchMergeAndOthersStayApart() {
        var lost = LostSeqs()
        lost.insert(3...5)
        lost.insert(6...6)
        #expect(lost.ranges == [3...6], "adjacent: one range")
        lost.insert(4...9)
        #expect(lost.ranges == [3...9], "a worker killed again before anything was durable: the range grows")
        lost.insert(12...12)
        #expect(lost.ranges == [3...9, 12...12])
        #expect(lost.range(holding: 7) == 3...9 && lost.range(holding: 12) == 12...12)
        #expect(lost.range(holding: 10) == nil && lost.range(holding: 2) == nil)
    }

    /// An adopted session's restored seq is taken out alone: the seqs on either side stay lost
    /// (issue 17's second hostile round: dropping the whole range answered 0 for seqs lost
    /// before the crash loop).
    @Test func takingOneSeqOutSplitsItsRangeAndKeepsTheRest() {
        var lost = LostSeqs()
        lost.insert(1...8194)
        lost.insert(9000...9001)
        lost.remove(seq: 4)
        #expect(lost.ranges == [1...3, 5...8194, 9000...9001])
        lost.remove(seq: 1)
        lost.remove(seq: 8194)
        lost.remove(seq: 9000)
        lost.remove(seq: 8999)
        #expect(lost.ranges == [2...3, 5...8193, 9001...9001], "ends trim; a seq in no range changes nothing")
        lost.remove(seq: 9001)
        #expect(lost.ranges == [2...3, 5...8193])
    }

    /// Past the capacity the oldest ranges are joined, never forgotten: every seq ever lost is
    /// still said lost. (Dropping the oldest made `wait-durable --seq` answer 0 for a command
    /// lost 33 kills before.)
    @Test func pastTheCapacityTheOldestJoinAndNoLostSeqIsForgotten() {
        var lost = LostSeqs()
        let inserted = (0..<UInt64(LostSeqs.capacity + 5)).map { ($0 * 10 + 1)...($0 * 10 + 2) }
        for range in inserted { lost.insert(range) }
        #expect(lost.ranges.count == LostSeqs.capacity)
        #expect(lost.ranges.first == 1...52, "the six oldest joined")
        for range in inserted {
            #expect(lost.range(holding: range.lowerBound) != nil && lost.range(holding: range.upperBound) != nil)
        }
        lost.insert((UInt64.max - 1)...UInt64.max)
        lost.insert(UInt64.max...UInt64.max)
        #expect(lost.ranges.last == (UInt64.max - 1)...UInt64.max)
    }
}
