/// When a window saves, after the seed's four cases (chrome-ios-sessions.md):
/// 1. the scene goes to the background: at once;
/// 2. the scene is torn down: at once, if anything is unsaved;
/// 3. a list mutation or a finished navigation, and
/// 4. a prerender replacing a tab: after a delay, on a one-shot timer that the first change
///    starts and later changes do not restart (Chrome's `kSaveDelay`, 2.5 s), so a change waits
///    at most the delay; a delay of zero saves every change at once.
/// Cases 1 and 2 cancel the pending timer. Times are monotonic nanoseconds.
///
/// A Browser whose save failed is tried again by itself after a backoff: 100 ms, doubling after
/// each failure, capped at 3.2 s, so a save lands within about 3 s of the storage working again
/// with no request needed, and a disk that stays full costs one attempt every 3.2 s. An explicit
/// request (a `ctl save`, background, teardown, a durable wait) retries at once.
public struct SavePolicy: Sendable, Equatable {
    public static let defaultDelayMilliseconds: UInt64 = 2500
    public static let firstRetryMilliseconds: UInt64 = 100
    public static let maximumRetryMilliseconds: UInt64 = 3200

    /// How long a Browser waits before trying again after its `failures`-th failure in a row
    /// (1 or more): the first retry's delay, doubled per failure, capped.
    public static func retryDelayMilliseconds(afterFailures failures: Int) -> UInt64 {
        precondition(failures >= 1, "a retry follows a failure")
        // Past the cap's doublings the shift would overflow: the cap holds from there on.
        let doublings = min(failures - 1, 16)
        return min(firstRetryMilliseconds << UInt64(doublings), maximumRetryMilliseconds)
    }

    public let delayNanoseconds: UInt64
    /// When the pending delayed save is due, if one is pending.
    public private(set) var deadline: UInt64?

    public init(delayMilliseconds: UInt64 = defaultDelayMilliseconds) {
        // A delay given on the command line may be absurd: it saturates rather than traps.
        let (nanoseconds, overflow) = delayMilliseconds.multipliedReportingOverflow(by: 1_000_000)
        delayNanoseconds = overflow ? .max : nanoseconds
    }

    /// Cases 3 and 4. True when the change must be saved now (no delay).
    public mutating func changed(at now: UInt64) -> Bool {
        if delayNanoseconds == 0 { return true }
        if deadline == nil { deadline = now.saturatingAdd(delayNanoseconds) }
        return false
    }

    /// True once when the pending delayed save falls due.
    public mutating func takeDue(at now: UInt64) -> Bool {
        guard let deadline, now >= deadline else { return false }
        self.deadline = nil
        return true
    }

    /// Cases 1 and 2: an immediate save replaces the delayed one.
    public mutating func cancel() { deadline = nil }
}

extension UInt64 {
    /// `self + other`, or `.max` where it would overflow: deadlines far enough out are never.
    public func saturatingAdd(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
