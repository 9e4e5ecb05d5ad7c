/// The bounds every number that crosses a trust boundary (a file on disk, shared memory, a
/// control request) is checked against. One definition: the writer refuses to produce what the
/// reader would refuse, and the reader checks the same constant. Each bound is documented in
/// docs/storage-format.md and docs/security.md.
public enum Limits {
    /// The highest command sequence number a window may reach. 2⁵³ − 1 is the largest integer a
    /// JSON number (an IEEE double) holds exactly, so a seq survives `ctl --json` and a script's
    /// arithmetic unchanged; at a million commands a second it lasts 285 years. A seq above it
    /// on disk or in shared memory is damage, and every `seq + 1` below it cannot overflow.
    public static let maxCommandSeq: UInt64 = (1 << 53) - 1

    /// The most save latency samples one window's shared-memory histogram is read as holding:
    /// a million saves a second for 8.9 years. A worker writes its buckets in shared memory, so
    /// the supervisor reads them clamped to this, and summing every window's (at most 64) stays
    /// far from overflowing.
    public static let maxLatencySamples: UInt64 = 1 << 48

    /// Whether `seq` is one a window can have reached.
    @inlinable
    public static func isValidCommandSeq(_ seq: UInt64) -> Bool { seq <= maxCommandSeq }
}
