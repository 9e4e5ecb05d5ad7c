/// Group commit on the ring: when a window starts its next save while saves are in flight.
///
/// A blocking engine group-commits by nature: while its one write and flush run, the commands
/// that arrive pile up, and the next save carries them all (138 commands a write at 256,000
/// commands/s). A ring that started a save at every turn with room made about 4× the durable
/// writes under load, at ~2.8 commands each, and each one is a write plus a flush here (a
/// volatile cache, no FUA) and some 70–90 µs of the worker's CPU: the load it cannot afford
/// on a saturated core. So commands wait for the save in flight, as a blocking engine's would,
/// unless waiting costs more than a save:
/// - no save in flight: one starts at once (at low load a command waits one flush, no more);
/// - `batchCommands` commands wait: one starts, whatever is in flight (depth for a backlog);
/// - the oldest waiting command has waited a flush (`flushNanoseconds`, what a save alone took
///   lately): one starts, so a slow save in flight does not hold the next one behind it.
/// Nothing here sets a timer: a save in flight always completes, and its completion (or the
/// next command) wakes the loop that asks again.
public struct GroupCommit: Sendable, Equatable {
    /// Commands waiting that start a save at once: such a save still fits the registered
    /// buffer it is written from (4 KiB; a navigation journals ~95 bytes, so 32 take ~3 KiB
    /// with their framing), and it is one turn's worth (`Limits.maxCommandsPerTurn`).
    public static let batchCommands = 32
    /// The flush time assumed before any save was measured.
    public static let initialFlushNanoseconds: UInt64 = 300_000
    /// The longest a command waits for the save in flight, whatever a flush took lately: a
    /// device that stalled once does not make every command wait for its stall.
    public static let maximumWaitNanoseconds: UInt64 = 2_000_000

    /// A save alone lately, start to durable: a moving average (1/8 of each new one).
    public private(set) var flushNanoseconds: UInt64

    public init(flushNanoseconds: UInt64 = initialFlushNanoseconds) {
        self.flushNanoseconds = flushNanoseconds
    }

    /// A save that ran alone (no other in flight) took `nanoseconds`, start to durable.
    public mutating func observe(saveNanoseconds nanoseconds: UInt64) {
        let sample = min(nanoseconds, Self.maximumWaitNanoseconds)
        flushNanoseconds = flushNanoseconds - flushNanoseconds / 8 + sample / 8
        assert(
            flushNanoseconds <= max(Self.initialFlushNanoseconds, Self.maximumWaitNanoseconds),
            "the average stays within its samples' bound")
    }

    /// Whether a save starts now, with `inFlight` saves in flight, `waitingCommands` commands
    /// applied that no save carries, the oldest of them waiting for `oldestWaitNanoseconds`.
    public func shouldStart(inFlight: Int, waitingCommands: Int, oldestWaitNanoseconds: UInt64) -> Bool {
        assert(inFlight >= 0 && waitingCommands >= 0, "counts, not differences")
        guard waitingCommands > 0 else { return false }
        if inFlight == 0 || waitingCommands >= Self.batchCommands { return true }
        return oldestWaitNanoseconds >= min(flushNanoseconds, Self.maximumWaitNanoseconds)
    }
}
