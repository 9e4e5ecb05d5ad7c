import Glibc
import HostCoordination
import Supervisor
import Testing

/// A worker whose restore ran short of its own descriptors or memory exits 75 (EX_TEMPFAIL):
/// retried after the shortage backoff like the supervisor's own shortage, never a failed
/// start, so a good session is never set aside for it.
extension RestartPolicyTests {
    @Test func onlyARestoreThatFailedOrCrashedIsTheSessionsFault() {
        #expect(WorkerExit.restoreShortOfResources.status == 75 && WorkerExit.restoreFailed.status == 74)
        #expect(WorkerExit.restoreStorageUnavailable.status == 69)
        // Exits before ready that say nothing of the session: its own shortage, storage that
        // does not answer (69), a loader short of descriptors (127), exits no restore makes.
        for status: Int32 in [0, 1, 69, 70, 75, 78, 127] {
            #expect(
                RestartPolicy.diedOfNoFaultOfTheSession(workerExitStatus: status, signaled: false, beforeReady: true),
                "\(status)")
        }
        // A restore that failed (74) or crashed (any signal), and any death after ready: judged
        // as a death.
        #expect(!RestartPolicy.diedOfNoFaultOfTheSession(workerExitStatus: 74, signaled: false, beforeReady: true))
        for signal: Int32 in [SIGSEGV, SIGILL, SIGTRAP, SIGABRT, SIGKILL, 75] {
            #expect(
                !RestartPolicy.diedOfNoFaultOfTheSession(workerExitStatus: signal, signaled: true, beforeReady: true),
                "\(signal)")
        }
        #expect(!RestartPolicy.diedOfNoFaultOfTheSession(workerExitStatus: 75, signaled: false, beforeReady: false))
    }

    /// The supervisor's decision, exit by exit: the shortages back off and leave the
    /// failed-start count where it was; the window is set aside only after two real failures.
    @Test func workerShortagesWhileRestoringNeverSetTheSessionAside() {
        let policy = RestartPolicy()
        var history = RestartPolicy.History()
        func died(_ status: Int32, at now: UInt64) -> RestartPolicy.Decision {
            if RestartPolicy.diedOfNoFaultOfTheSession(workerExitStatus: status, signaled: false, beforeReady: true) {
                return .restartAfter(nanoseconds: policy.retryAfterShortage(&history))
            }
            return policy.decide(&history, now: now, diedBeforeReady: true, requested: false)
        }
        let shortages = (0..<8).map { died(75, at: UInt64($0) * second) }
        #expect(
            shortages
                == [100, 200, 400, 800, 1600, 3200, 3200, 3200].map { .restartAfter(nanoseconds: $0 * 1_000_000) })
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
