import Atomics
import Foundation
import Glibc
@testable import HostCoordination
import Testing

/// Shared memory is written by another process: whatever a worker leaves in it, the supervisor
/// reading it gets a refusal or a clamped value, never a trap.
@Suite struct HostileSharedMemoryTests {
    /// A tail or head anywhere in 64 bits: the reader reports a corrupt ring, the writer sees a
    /// full ring or wraps, and neither traps.
    @Test(arguments: [UInt64.max, UInt64(1) << 63, UInt64(1) << 40])
    func ringPositionsFromTheOtherSideNeverTrap(position: UInt64) throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let ring = region.slot(0).replyRing
        try ring.send([1, 2, 3])
        store(position, at: ring.base + 64)  // the producer's tail
        #expect(throws: MessageRing.CorruptRing.self) { _ = try ring.receive() }
        store(position, at: ring.base)  // the consumer's head, behind the producer's back
        store(0, at: ring.base + 64)
        // Wrapped or full, whatever the distance reads as: refused or sent, never a trap.
        _ = try? ring.send([4])
        store(position, at: ring.base)
        store(position &- 8, at: ring.base + 64)  // a tail behind the head
        #expect(throws: MessageRing.SendError.full) { try ring.send([5]) }
    }

    /// Positions near 2⁶⁴ with a message that fits: the message's bytes sit past the wrap of
    /// the 64-bit counters, and both sides reach them with wrapping arithmetic.
    @Test(arguments: [UInt64.max - 1, UInt64.max - 3, UInt64.max])
    func aMessageStraddlingTheCountersWrapReadsBack(start: UInt64) throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let ring = region.slot(0).replyRing
        store(start, at: ring.base)
        store(start, at: ring.base + 64)
        try ring.send([])
        #expect(try ring.receive() == [])
        try ring.send([7, 8, 9])
        #expect(try ring.receive() == [7, 8, 9])
        #expect(try ring.receive() == nil)
    }

    /// Counters at their highest: the histogram holds at most `Limits.maxLatencySamples`, and
    /// merging and percentiles work on it.
    @Test func saturatedLatencyCountersReadAsABoundedHistogram() throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let buckets = region.slot(0).latency
        for index in 0..<LatencyBuckets.count { store(.max, at: buckets.base + index * 8) }
        let histogram = buckets.histogram()
        #expect(histogram.totalCount <= (1 << 48))
        var total = histogram
        total.add(buckets.histogram())
        #expect(total.valueAtPercentile(99) <= LatencyBuckets.highestMicroseconds)
        #expect(histogram.maxRecorded <= LatencyBuckets.highestMicroseconds)
    }
}

private func store(_ value: UInt64, at pointer: UnsafeMutableRawPointer) {
    UnsafeAtomic<UInt64>(at: pointer.assumingMemoryBound(to: UInt64.AtomicRepresentation.self)).store(value, ordering: .releasing)
}
