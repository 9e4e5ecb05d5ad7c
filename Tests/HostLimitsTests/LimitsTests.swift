import HostLimits
import Testing

@Suite struct LimitsTests {
    @Test func theLargestSeqIsExactInAJSONNumberAndHasASuccessor() {
        let largest = Limits.maxCommandSeq
        #expect(UInt64(exactly: Double(largest)) == largest)
        #expect(UInt64(exactly: Double(largest + 1)) == largest + 1)
        #expect(UInt64(exactly: Double(largest + 2)) != largest + 2, "2⁵³ + 1 is the first integer a double rounds")
        #expect(Limits.isValidCommandSeq(largest))
        #expect(!Limits.isValidCommandSeq(largest + 1))
        #expect(!Limits.isValidCommandSeq(.max))
    }
}
