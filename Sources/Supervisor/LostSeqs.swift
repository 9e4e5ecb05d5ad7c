import SessionStore

/// The seqs of a window replied to and then lost with the worker that applied them, as ranges,
/// oldest first, merged where they touch. Bounded: past `capacity` ranges the oldest go (a
/// window losing commands that often is shown by its restart count; `wait-durable --seq` for a
/// seq that old then waits as for any seq at or below the durable one).
struct LostSeqs: Equatable {
    static let capacity = 32
    private(set) var ranges: [ClosedRange<UInt64>] = []

    /// Ranges arrive in order (each above what the window restored, which never goes below a
    /// durable seq), so only the last can touch a new one.
    mutating func insert(_ range: ClosedRange<UInt64>) {
        if let last = ranges.last, range.lowerBound <= last.upperBound.saturatingAdd(1) {
            ranges[ranges.count - 1] = min(last.lowerBound, range.lowerBound)...max(last.upperBound, range.upperBound)
        } else {
            ranges.append(range)
        }
        if ranges.count > Self.capacity { ranges.removeFirst(ranges.count - Self.capacity) }
        assert(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound }, "ranges ordered and apart")
    }

    func range(holding seq: UInt64) -> ClosedRange<UInt64>? { ranges.first { $0.contains(seq) } }
}
