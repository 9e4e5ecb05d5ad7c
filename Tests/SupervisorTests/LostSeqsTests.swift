@testable import Supervisor
import Testing

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

    @Test func theOldestGoPastTheCapacityAndTheTopNeverOverflows() {
        var lost = LostSeqs()
        for index in 0..<UInt64(LostSeqs.capacity + 5) { lost.insert((index * 10 + 1)...(index * 10 + 2)) }
        #expect(lost.ranges.count == LostSeqs.capacity)
        #expect(lost.ranges.first == 51...52, "the five oldest went")
        lost.insert((UInt64.max - 1)...UInt64.max)
        lost.insert(UInt64.max...UInt64.max)
        #expect(lost.ranges.last == (UInt64.max - 1)...UInt64.max)
    }
}
