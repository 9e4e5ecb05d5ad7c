import Atomics
import Histogram
import HostLimits

/// A latency histogram that lives in shared memory: fixed log-linear buckets of microseconds
/// (exact below 64 µs, then 32 buckets per power of two: within about 3 %), each an atomic
/// counter the worker increments and the supervisor reads while the worker runs. Readers turn
/// it into an HdrHistogram for percentiles.
public struct LatencyBuckets: @unchecked Sendable {
    static let exact = 64
    static let perOctave = 32
    static let octaves = 35
    /// Counters, then the maximum recorded.
    public static let count = exact + octaves * perOctave + 1

    let base: UnsafeMutableRawPointer

    init(_ base: UnsafeMutableRawPointer) { self.base = base }

    private func counter(_ index: Int) -> UnsafeAtomic<UInt64> {
        UnsafeAtomic(at: (base + index * 8).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }

    static func index(of value: UInt64) -> Int {
        guard value >= UInt64(exact) else { return Int(value) }
        let magnitude = 63 - value.leadingZeroBitCount
        let shift = magnitude - 5
        let top = Int(value >> UInt64(shift)) - perOctave
        assert(magnitude >= 6 && (0..<perOctave).contains(top), "a value past the exact buckets lands in its octave")
        return min(exact + (magnitude - 6) * perOctave + top, count - 2)
    }

    /// The middle of bucket `index`'s range.
    public static func representative(of index: Int) -> UInt64 {
        guard index >= exact else { return UInt64(index) }
        let octave = (index - exact) / perOctave
        let top = UInt64((index - exact) % perOctave + perOctave)
        let shift = UInt64(octave + 1)
        assert(index < count && octave < octaves, "a bucket of the table")
        return (top << shift) + (1 << shift) / 2
    }

    public func record(_ microseconds: UInt64) {
        counter(Self.index(of: microseconds)).wrappingIncrement(ordering: .relaxed)
        let maximum = counter(Self.count - 1)
        var seen = maximum.load(ordering: .relaxed)
        while microseconds > seen {
            let (exchanged, original) = maximum.weakCompareExchange(
                expected: seen, desired: microseconds, ordering: .relaxed)
            if exchanged { break }
            seen = original
        }
    }

    /// The buckets as an HdrHistogram (values in µs). The samples of the bucket holding the
    /// maximum count at the exact maximum, so `max` is exact; the others at their bucket's middle.
    ///
    /// The worker writes the buckets in shared memory, so they are read as untrusted: at most
    /// `Limits.maxLatencySamples` samples in all, and a maximum past the histogram's range is
    /// taken as its highest value.
    public func histogram() -> Histogram<UInt64> {
        var histogram = Histogram<UInt64>(
            highestTrackableValue: Self.highestMicroseconds, numberOfSignificantValueDigits: .three)
        let maximum = min(counter(Self.count - 1).load(ordering: .relaxed), Self.highestMicroseconds)
        let top = Self.index(of: maximum)
        var room = Limits.maxLatencySamples
        for index in 0..<(Self.count - 1) {
            let count = min(counter(index).load(ordering: .relaxed), room)
            guard count > 0 else { continue }
            room -= count
            _ = histogram.record(index == top ? maximum : Self.representative(of: index), count: count)
        }
        assert(histogram.totalCount <= Limits.maxLatencySamples, "a histogram holds at most the samples limit")
        return histogram
    }

    /// The counters as they are now, for what was recorded between two reads (`since`). Read
    /// as untrusted, like `histogram()`: at most `Limits.maxLatencySamples` in all.
    public func counts() -> LatencyCounts {
        var room = Limits.maxLatencySamples
        return LatencyCounts(
            perBucket: (0..<(Self.count - 1)).map { index in
                let count = min(counter(index).load(ordering: .relaxed), room)
                room -= count
                return count
            })
    }

    /// The highest latency a histogram holds (2⁴² µs, 51 days).
    public static let highestMicroseconds: UInt64 = 1 << 42
}

/// A copy of one slot's latency counters (`LatencyBuckets.counts`): what readers on other
/// threads difference to see the saves recorded between two reads.
public struct LatencyCounts: Sendable, Equatable {
    /// Samples per bucket, in `LatencyBuckets`' order.
    public let perBucket: [UInt64]

    public init(perBucket: [UInt64]) { self.perBucket = perBucket }

    /// What was recorded after `earlier`: each bucket's rise. A bucket that fell (a new window
    /// in the slot, or a worker writing its counters down) counts from zero.
    public func since(_ earlier: LatencyCounts?) -> LatencyCounts {
        guard let earlier, earlier.perBucket.count == perBucket.count else { return self }
        return LatencyCounts(
            perBucket: zip(perBucket, earlier.perBucket).map { now, then in now >= then ? now - then : now })
    }

    /// Each bucket holding samples: its middle in microseconds, and how many.
    public var samples: [(microseconds: UInt64, count: UInt64)] {
        perBucket.indices.compactMap { index in
            perBucket[index] > 0 ? (LatencyBuckets.representative(of: index), perBucket[index]) : nil
        }
    }

    /// The samples as an HdrHistogram (each at its bucket's middle).
    public func histogram() -> Histogram<UInt64> {
        var histogram = Histogram<UInt64>(
            highestTrackableValue: LatencyBuckets.highestMicroseconds, numberOfSignificantValueDigits: .three)
        var room = Limits.maxLatencySamples
        for (microseconds, count) in samples {
            let recorded = min(count, room)
            room -= recorded
            _ = histogram.record(min(microseconds, LatencyBuckets.highestMicroseconds), count: recorded)
        }
        return histogram
    }
}
