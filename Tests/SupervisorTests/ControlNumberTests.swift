import HostCoordination
@testable import Supervisor
import Testing

/// Numbers in a control reply are JSON doubles: `ctl` reads them as integers only where a
/// double holds one exactly (up to 2⁵³ − 1), and never traps on any other.
@Suite struct ControlNumberTests {
    @Test(arguments: [9.223372036854775807e18, 1.8446744073709552e19, -1e300, 1e300, 9007199254740992, 0.5])
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
        #expect(Supervisor.violation(in: stats) != nil)
        stats.appliedSeq = 9_007_199_254_740_991
        stats.durableSeq = stats.appliedSeq
        #expect(Supervisor.violation(in: stats) == nil)
        stats.durableSeq = .max
        #expect(Supervisor.violation(in: stats) != nil, "durable past applied")
    }
}
