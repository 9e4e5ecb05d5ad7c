import HostCoordination
import IOUring
import SystemPackage

/// When a dead worker comes back, after Erlang/OTP's restart intensity and systemd's stepped
/// backoff, with Chrome's limit on failed starts:
/// - a worker killed on request (`ctl kill`, stress campaigns) restarts at once and counts for
///   nothing: the kill says nothing about the window;
/// - a worker that dies before it has restored its window is a failed start; after
///   `failedStartLimit` in a row the window's session is set aside and it restarts empty;
/// - any other death restarts at once while at most `maximumRestarts` happened in the last
///   `period`; past that, after a backoff that doubles from `initialBackoff` to `maximumBackoff`
///   until the window stays up for a whole period;
/// - a worker the supervisor could not start for want of its *own* resources (descriptors,
///   memory, processes: `isShortage`) is no death at all: it is tried again after a backoff
///   that doubles from `initialBackoff` to `maximumShortageBackoff` while the shortage lasts,
///   and never counts against the window's restarts or failed starts. So is a worker that
///   exits before it is ready with a status that says nothing of the session
///   (`diedOfNoFaultOfTheSession`): its own shortage, a loader that could not start it.
public struct RestartPolicy: Sendable, Equatable {
    public var maximumRestarts = 5
    public var periodNanoseconds: UInt64 = 10_000_000_000
    public var initialBackoffNanoseconds: UInt64 = 100_000_000
    public var maximumBackoffNanoseconds: UInt64 = 5_000_000_000
    public var failedStartLimit = 2
    public var maximumShortageBackoffNanoseconds: UInt64 = 3_200_000_000

    public init() {}

    /// One window's recent deaths.
    public struct History: Sendable, Equatable {
        var deaths: [UInt64] = []
        var failedStarts = 0
        /// Starts in a row the supervisor's own shortage prevented.
        public internal(set) var shortages = 0
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
                steppedBackoff(after: excess, upTo: maximumBackoffNanoseconds)
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

    /// The supervisor could not start the window's worker for want of its own resources: when
    /// to try again. Neither a death nor a failed start: the window did nothing.
    public func retryAfterShortage(_ history: inout History) -> UInt64 {
        history.shortages += 1
        return steppedBackoff(after: history.shortages, upTo: maximumShortageBackoffNanoseconds)
    }

    /// systemd's stepped backoff after `count` (≥ 1) failures in a row: `initialBackoff`,
    /// doubling with each, up to `maximum`.
    func steppedBackoff(after count: Int, upTo maximum: UInt64) -> UInt64 {
        assert(count >= 1, "a backoff follows a failure")
        return min(initialBackoffNanoseconds << UInt64(min(max(count, 1) - 1, 20)), maximum)
    }

    /// The worker restored its window and is ready: a shortage, the supervisor's or the
    /// worker's, is over (not at the spawn: a worker short while restoring keeps backing off).
    public func started(_ history: inout History) {
        history.shortages = 0
    }

    /// Whether a failure to start a worker (posix_spawn, eventfd, pidfd_open) is the
    /// supervisor's own shortage, which says nothing about the window: out of descriptors
    /// (EMFILE, ENFILE), memory (ENOMEM) or processes (EAGAIN); `Errno.isResourceShortage`.
    public static func isShortage(_ error: Errno) -> Bool { error.isResourceShortage }

    /// Whether a worker's death before it was ready says nothing of its window's session. The
    /// session is read only by the restore, which exits `WorkerExit.restoreFailed` when it
    /// fails and is killed by a signal when it crashes. Any other exit before ready says
    /// nothing of the session: `WorkerExit.restoreShortOfResources` (its own descriptors or memory),
    /// `restoreStorageUnavailable` (the file system failed as a whole), 127 (the
    /// loader could not open a library, short of descriptors), 0 or 1. It is retried like the
    /// supervisor's own shortage, and never counts toward setting the session aside (a hostile
    /// tester squeezed fresh workers' descriptor limits and got 5 of 6 healthy windows set
    /// aside on exits 0 and 127). A worker that exits so on purpose only delays its own window.
    public static func diedOfNoFaultOfTheSession(workerExitStatus status: Int32, signaled: Bool, beforeReady: Bool)
        -> Bool
    {
        beforeReady && !signaled && status != WorkerExit.restoreFailed.status
    }
}
