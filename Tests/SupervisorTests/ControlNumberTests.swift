import HostCoordination
import Testing

@testable import HostControl
@testable import Supervisor

/// Numbers in a control reply are JSON doubles: `ctl` reads them as integers only where a
/// double holds one exactly (up to 2⁵³ − 1), and never traps on any other.
@Suite struct ControlNumberTests {
    @Test(arguments: [9.223372036854775807e18, 1.8446744073709552e19, -1e300, 1e300, 9_007_199_254_740_992, 0.5])
    func aNumberNoSeqCanBeIsNoInteger(value: Double) {
        #expect(JSONValue.number(value).int == nil)
    }

    @Test func everySeqAWindowCanReachReadsExactly() {
        #expect(JSONValue(UInt64(9_007_199_254_740_991)).int == 9_007_199_254_740_991)
        #expect(JSONValue.number(-3).int == -3)
    }

    /// What a worker publishes is checked before the supervisor does arithmetic on it.
    @Test func impossibleStatsAreAViolation() {
        var stats = WorkerStats()
        stats.appliedSeq = .max
        #expect(stats.violation != nil)
        stats.appliedSeq = 9_007_199_254_740_991
        stats.durableSeq = stats.appliedSeq
        #expect(stats.violation == nil)
        stats.durableSeq = .max
        #expect(stats.violation != nil, "durable past applied")
    }

    /// A dump's history numbers come from an untrusted worker: `ctl` adds one to the index, so
    /// an index past the count (or a count past the model's bound) is refused before any reply.
    @Test(arguments: [(Int32?.none, Int32(0)), (0, 1), (74, 75)])
    func aDumpWithinTheModelsBoundsIsNoViolation(index: Int32?, count: Int32) {
        #expect(dump(index: index, count: count).violation == nil)
    }

    @Test(arguments: [(Int32?.some(.max), Int32(75)), (1, 1), (-1, 3), (nil, -1), (nil, 76), (0, .max)])
    func aDumpPastTheModelsBoundsIsAViolation(index: Int32?, count: Int32) {
        #expect(dump(index: index, count: count).violation != nil)
    }

    private func dump(index: Int32?, count: Int32) -> WindowDump {
        var tab = TabDump()
        tab.id = 1
        tab.historyCount = count
        if let index { tab.historyIndex = index }
        var dump = WindowDump()
        dump.incognito.tabs = [tab]
        return dump
    }
}
