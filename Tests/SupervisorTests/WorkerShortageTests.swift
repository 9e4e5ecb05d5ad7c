import Supervisor
import Testing

/// A worker whose restore ran short of its own descriptors or memory exits 75 (EX_TEMPFAIL):
/// retried after the shortage backoff like the supervisor's own shortage, never a failed
/// start, so a good session is never set aside for it.
extension RestartPolicyTests {
    @Test func onlyAWorkerThatExitsTempfailWhileRestoringIsShortOfResources() {
        #expect(RestartPolicy.shortageExitStatus == 75)
        #expect(RestartPolicy.isShortage(workerExitStatus: 75, signaled: false, beforeReady: true))
        // Killed by signal 75 (no such signal, but a number is a number), after it was ready,
        // a plain restore failure (74) or any other status: judged as a death.
        #expect(!RestartPolicy.isShortage(workerExitStatus: 75, signaled: true, beforeReady: true))
        #expect(!RestartPolicy.isShortage(workerExitStatus: 75, signaled: false, beforeReady: false))
        for status: Int32 in [0, 1, 70, 74, 78, 134] {
            #expect(!RestartPolicy.isShortage(workerExitStatus: status, signaled: false, beforeReady: true), "\(status)")
        }
    }

    /// The supervisor's decision, exit by exit: the shortages back off and leave the
    /// failed-start count where it was; the window is set aside only after two real failures.
    @Test func workerShortagesWhileRestoringNeverSetTheSessionAside() {
        let policy = RestartPolicy()
        var history = RestartPolicy.History()
        func died(_ status: Int32, at now: UInt64) -> RestartPolicy.Decision {
            if RestartPolicy.isShortage(workerExitStatus: status, signaled: false, beforeReady: true) {
                return .restartAfter(nanoseconds: policy.retryAfterShortage(&history))
            }
            return policy.decide(&history, now: now, diedBeforeReady: true, requested: false)
        }
        let shortages = (0..<8).map { died(75, at: UInt64($0) * second) }
        #expect(shortages == [100, 200, 400, 800, 1600, 3200, 3200, 3200].map { .restartAfter(nanoseconds: $0 * 1_000_000) })
        #expect(history.restarts == 0, "no death counted")
        // The window restores at last: the shortage is over, and its backoff starts again.
        policy.started(&history)
        #expect(died(75, at: 9 * second) == .restartAfter(nanoseconds: policy.initialBackoffNanoseconds))
        // Real failed starts still count, shortages between them or not.
        #expect(died(74, at: 10 * second) == .restartAfter(nanoseconds: policy.initialBackoffNanoseconds))
        _ = died(75, at: 11 * second)
        #expect(died(74, at: 12 * second) == .setAside(thenRestartAfter: policy.initialBackoffNanoseconds))
    }
}
