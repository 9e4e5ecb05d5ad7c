import Foundation
import HostControl
import Testing

@testable import Supervisor

/// The spare worker's lifecycle, with no process: when a spare starts, what a hand-over and a
/// death lead to, and that one that keeps dying backs off instead of spinning.
@Suite struct SpareLifecycleTests {
    private let policy = RestartPolicy()
    private let second: UInt64 = 1_000_000_000

    /// A spare spawned at `now` and said ready.
    private func waiting(at now: UInt64) -> SpareLifecycle {
        var spare = SpareLifecycle(policy: policy, now: now)
        #expect(spare.handle(.tick(windowsStarting: false), now: now) == [.spawn])
        #expect(spare.handle(.spawned, now: now).isEmpty)
        #expect(spare.handle(.saidReady, now: now).isEmpty)
        #expect(spare.state == .waiting(since: now) && spare.isWaiting)
        return spare
    }

    @Test func theFirstSpareWaitsForTheInitialWindowsUnlessTheyTakeTooLong() {
        var spare = SpareLifecycle(policy: policy, now: 10 * second)
        #expect(spare.handle(.tick(windowsStarting: true), now: 10 * second).isEmpty, "a window restores")
        #expect(spare.handle(.tick(windowsStarting: true), now: 10 * second + second / 2).isEmpty)
        #expect(spare.handle(.tick(windowsStarting: true), now: 11 * second) == [.spawn], "waited a quiet wait")
        #expect(spare.shown == .none)
    }

    @Test func aHandOverLeavesNoSpareUntilTheRestoresAreDone() {
        var spare = waiting(at: second)
        #expect(spare.handle(.handedOver, now: 2 * second).isEmpty)
        #expect(spare.state == .handed(at: 2 * second) && !spare.hasProcess && spare.shown == .handed)
        // The window handed the spare restores: the next spare does not compete with it.
        #expect(spare.handle(.tick(windowsStarting: true), now: 2 * second).isEmpty)
        #expect(spare.handle(.tick(windowsStarting: false), now: 2 * second + 1) == [.spawn])
        #expect(spare.handle(.spawned, now: 2 * second + 1).isEmpty)
        #expect(spare.shown == .starting && spare.hasProcess)
    }

    @Test func aSpareThatKeepsDyingBacksOffDoublingToTheMaximum() {
        var spare = SpareLifecycle(policy: policy, now: 0)
        var now: UInt64 = 0
        var delays: [UInt64] = []
        for _ in 0..<10 {
            #expect(spare.handle(.tick(windowsStarting: false), now: now) == [.spawn])
            #expect(spare.handle(.spawned, now: now).isEmpty)
            #expect(spare.handle(.died, now: now).isEmpty)
            guard case .none(let at) = spare.state else {
                Issue.record("a dead spare leaves none: \(spare.state)")
                return
            }
            delays.append(at - now)
            #expect(spare.handle(.tick(windowsStarting: false), now: at - 1).isEmpty, "not before its backoff")
            now = at
        }
        #expect(Array(delays.prefix(4)) == [100, 200, 400, 800].map { UInt64($0) * 1_000_000 }, "\(delays)")
        #expect(delays.last == policy.maximumBackoffNanoseconds)
        #expect(spare.failures == 10)
        // A spare handed over proves the next can start at once after a death.
        #expect(spare.handle(.tick(windowsStarting: false), now: now) == [.spawn])
        #expect(spare.handle(.spawned, now: now).isEmpty)
        #expect(spare.handle(.saidReady, now: now).isEmpty)
        #expect(spare.handle(.handedOver, now: now).isEmpty)
        #expect(spare.failures == 0)
    }

    @Test func aSpareThatWaitedAWholePeriodDiesWithoutABackoffBuiltUp() {
        var spare = waiting(at: 0)
        #expect(spare.handle(.died, now: policy.periodNanoseconds).isEmpty)
        #expect(spare.failures == 1)
        #expect(spare.state == .none(startAt: policy.periodNanoseconds + policy.initialBackoffNanoseconds))
    }

    @Test func aSpareThatHangsWhileStartingIsKilledAndItsDeathCounts() {
        var spare = SpareLifecycle(policy: policy, now: 0)
        _ = spare.handle(.tick(windowsStarting: false), now: 0)
        _ = spare.handle(.spawned, now: 0)
        #expect(spare.handle(.tick(windowsStarting: false), now: SpareLifecycle.startTimeoutNanoseconds).isEmpty)
        #expect(spare.handle(.tick(windowsStarting: false), now: SpareLifecycle.startTimeoutNanoseconds + 1) == [.kill])
        #expect(spare.shown == .stopping && spare.hasProcess)
        #expect(spare.handle(.died, now: SpareLifecycle.startTimeoutNanoseconds + 2).isEmpty)
        #expect(spare.failures == 1 && !spare.hasProcess)
    }

    @Test(arguments: [SpareLifecycle.Event.misbehaved, .handOverFailed, .saidReady])
    func aWaitingSpareThatBreaksTheProtocolIsKilled(_ event: SpareLifecycle.Event) {
        var spare = waiting(at: 0)
        #expect(spare.handle(event, now: 1) == [.kill])
        #expect(spare.shown == .stopping && !spare.isWaiting)
        #expect(spare.handle(.died, now: 2).isEmpty)
        #expect(spare.shown == .none)
    }

    @Test func shutdownKillsTheSpareAndStartsNoOther() {
        var spare = waiting(at: 0)
        #expect(spare.handle(.shutdown, now: 1) == [.kill])
        #expect(spare.handle(.died, now: 2).isEmpty)
        #expect(spare.handle(.tick(windowsStarting: false), now: 100 * second).isEmpty)
        var none = SpareLifecycle(policy: policy, now: 0)
        #expect(none.handle(.shutdown, now: 1).isEmpty)
        #expect(none.handle(.tick(windowsStarting: false), now: 100 * second).isEmpty)
    }
}
