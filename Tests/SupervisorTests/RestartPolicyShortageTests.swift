import Supervisor
import SystemPackage
import Testing

/// The supervisor's own shortage (out of descriptors, memory, processes) while starting a
/// worker is no death: it backs off and never spends the window's budget.
extension RestartPolicyTests {
    @Test func theSupervisorsShortagesBackOffAndNeverCountAgainstTheWindow() {
        let policy = RestartPolicy()
        var history = RestartPolicy.History()
        // One failed start: the next one would set the session aside.
        #expect(
            policy.decide(&history, now: 0, diedBeforeReady: true, requested: false)
                == .restartAfter(nanoseconds: policy.initialBackoffNanoseconds))
        let delays = (0..<9).map { _ in policy.retryAfterShortage(&history) }
        #expect(delays == [100, 200, 400, 800, 1600, 3200, 3200, 3200, 3200].map { $0 * 1_000_000 })
        #expect(history.shortages == 9 && history.restarts == 1, "shortages are neither deaths nor restarts")
        // The worker finally starts and restores: its next death is judged as if no shortage happened.
        policy.started(&history)
        #expect(history.shortages == 0)
        #expect(policy.decide(&history, now: second, diedBeforeReady: false, requested: false) == .restartNow)
        // A new shortage starts its backoff from the beginning.
        #expect(policy.retryAfterShortage(&history) == policy.initialBackoffNanoseconds)
    }

    @Test func aShortageBetweenTwoFailedStartsDoesNotResetOrAdvanceTheCount() {
        let policy = RestartPolicy()
        var history = RestartPolicy.History()
        #expect(
            policy.decide(&history, now: 0, diedBeforeReady: true, requested: false)
                == .restartAfter(nanoseconds: policy.initialBackoffNanoseconds))
        for _ in 0..<50 { _ = policy.retryAfterShortage(&history) }
        policy.started(&history)
        // The second real failed start, however many shortages came between, is the limit.
        #expect(
            policy.decide(&history, now: second, diedBeforeReady: true, requested: false)
                == .setAside(thenRestartAfter: policy.initialBackoffNanoseconds))
    }

    @Test func onlyTheSupervisorsOwnResourcesAreAShortage() {
        for errno in [Errno.tooManyOpenFiles, .tooManyOpenFilesInSystem, .noMemory, .resourceTemporarilyUnavailable] {
            #expect(RestartPolicy.isShortage(errno), "\(errno)")
        }
        // A missing or unrunnable executable is the start's own failure.
        for errno in [Errno.noSuchFileOrDirectory, .permissionDenied, .execFormatError, .invalidArgument] {
            #expect(!RestartPolicy.isShortage(errno), "\(errno)")
        }
    }
}
