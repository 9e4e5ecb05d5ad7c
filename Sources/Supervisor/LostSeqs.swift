import SessionStore

/// The seqs of a window replied to and then lost with the worker that applied them, as ranges,
/// oldest first, merged where they touch. Bounded, and never by forgetting: past `capacity`
/// ranges the two oldest become one that spans both, so a seq between them that is durable is
/// then said lost too (a script told so retries a command that was in fact kept), and a lost
/// one is never taken for durable (dropping the oldest did that: `wait-durable --seq` answered
/// 0 for a command lost 33 kills before).
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
        mergeOldestPastCapacity()
        assert(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound }, "ranges ordered and apart")
        // Never by forgetting: every seq named lost stays named (`range(holding:)`).
        precondition(
            self.range(holding: range.lowerBound) != nil && self.range(holding: range.upperBound) != nil,
            "a seq named lost stays lost")
    }

    /// Past `capacity`, the two oldest ranges become one that spans both.
    private mutating func mergeOldestPastCapacity() {
        while ranges.count > Self.capacity {
            ranges[1] = ranges[0].lowerBound...ranges[1].upperBound
            ranges.removeFirst()
        }
        assert(ranges.count <= Self.capacity, "bounded")
    }

    func range(holding seq: UInt64) -> ClosedRange<UInt64>? { ranges.first { $0.contains(seq) } }

    /// Forgets a range the window's own state contradicts (it holds a seq as durable).
    mutating func remove(_ range: ClosedRange<UInt64>) {
        ranges.removeAll { $0 == range }
        assert(!ranges.contains(range), "a range forgotten is gone")
    }

    /// Takes `seq` alone out of the range holding it, which splits in two: the seqs on either
    /// side stay lost. At `capacity`, the split may be merged back (the seq then stays said
    /// lost: the safe side).
    mutating func remove(seq: UInt64) {
        guard let index = ranges.firstIndex(where: { $0.contains(seq) }) else { return }
        let range = ranges.remove(at: index)
        let sides = [
            seq > range.lowerBound ? range.lowerBound...(seq - 1) : nil,
            seq < range.upperBound ? (seq + 1)...range.upperBound : nil,
        ]
        ranges.insert(contentsOf: sides.compactMap { $0 }, at: index)
        mergeOldestPastCapacity()
        assert(
            zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound },
            "ranges stay ordered and apart")
    }
}
