/// When a window saves, after the seed's four cases (chrome-ios-sessions.md):
/// 1. the scene goes to the background: at once;
/// 2. the scene is torn down: at once, if anything is unsaved;
/// 3. a list mutation or a finished navigation, and
/// 4. a prerender replacing a tab: after a delay, on a one-shot timer that the first change
///    starts and later changes do not restart (Chrome's `kSaveDelay`, 2.5 s), so a change waits
///    at most the delay; a delay of zero saves every change at once.
/// Cases 1 and 2 cancel the pending timer. Times are monotonic nanoseconds.
public struct SavePolicy: Sendable, Equatable {
    public static let defaultDelayMilliseconds: UInt64 = 2500

    public let delayNanoseconds: UInt64
    /// When the pending delayed save is due, if one is pending.
    public private(set) var deadline: UInt64?

    public init(delayMilliseconds: UInt64 = defaultDelayMilliseconds) {
        delayNanoseconds = delayMilliseconds * 1_000_000
    }

    /// Cases 3 and 4. True when the change must be saved now (no delay).
    public mutating func changed(at now: UInt64) -> Bool {
        if delayNanoseconds == 0 { return true }
        if deadline == nil { deadline = now + delayNanoseconds }
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
