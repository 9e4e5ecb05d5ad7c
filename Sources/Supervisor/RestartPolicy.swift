/// When a dead worker comes back, after Erlang/OTP's restart intensity and systemd's stepped
/// backoff, with Chrome's limit on failed starts:
/// - a worker killed on request (`ctl kill`, stress campaigns) restarts at once and counts for
///   nothing: the kill says nothing about the window;
/// - a worker that dies before it has restored its window is a failed start; after
///   `failedStartLimit` in a row the window's session is set aside and it restarts empty;
/// - any other death restarts at once while at most `maximumRestarts` happened in the last
///   `period`; past that, after a backoff that doubles from `initialBackoff` to `maximumBackoff`
///   until the window stays up for a whole period.
public struct RestartPolicy: Sendable, Equatable {
    public var maximumRestarts = 5
    public var periodNanoseconds: UInt64 = 10_000_000_000
    public var initialBackoffNanoseconds: UInt64 = 100_000_000
    public var maximumBackoffNanoseconds: UInt64 = 5_000_000_000
    public var failedStartLimit = 2

    public init() {}

    /// One window's recent deaths.
    public struct History: Sendable, Equatable {
        var deaths: [UInt64] = []
        var failedStarts = 0
        public internal(set) var restarts = 0

        public init() {}
    }

    public enum Decision: Equatable, Sendable {
        case restartNow
        case restartAfter(nanoseconds: UInt64)
        /// Move the session to `set-aside/` and start the window empty, after the delay.
        case setAside(thenRestartAfter: UInt64)
    }

    public func decide(_ history: inout History, now: UInt64, diedBeforeReady: Bool, requested: Bool) -> Decision {
        history.restarts += 1
        if requested { return .restartNow }
        history.deaths = history.deaths.filter { now &- $0 < periodNanoseconds } + [now]
        let excess = history.deaths.count - maximumRestarts
        let delay: UInt64 =
            if excess > 0 {
                min(initialBackoffNanoseconds << UInt64(min(excess - 1, 20)), maximumBackoffNanoseconds)
            } else {
                // s6: a child that never became ready is not respawned at once.
                diedBeforeReady ? initialBackoffNanoseconds : 0
            }
        if diedBeforeReady {
            history.failedStarts += 1
            if history.failedStarts >= failedStartLimit {
                history.failedStarts = 0
                return .setAside(thenRestartAfter: delay)
            }
        } else {
            history.failedStarts = 0
        }
        return delay == 0 ? .restartNow : .restartAfter(nanoseconds: delay)
    }
}
