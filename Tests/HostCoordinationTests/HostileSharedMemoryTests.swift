import Atomics
import Foundation
import Glibc
import Testing

@testable import HostCoordination

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

    /// A length past the ring's capacity, with a tail a whole ring ahead: refused, never read.
    @Test func aLengthPastTheCapacityIsACorruptRing() throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let ring = region.slot(0).replyRing
        (ring.base + MessageRing.headerSize).storeBytes(of: UInt32(ring.capacity + 1).littleEndian, as: UInt32.self)
        store(UInt64(ring.capacity), at: ring.base + 64)
        #expect(throws: MessageRing.CorruptRing.self) { _ = try ring.receive() }
        store(UInt64(ring.capacity) + 1, at: ring.base + 64)
        #expect(throws: MessageRing.CorruptRing.self) { _ = try ring.receive() }
    }

    /// Random bytes over a whole slot, as a compromised worker writes them: everything the
    /// supervisor reads from it gives a value, a refusal or nil, never a trap.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func randomBytesOverASlotNeverTrapTheReader(seed: UInt64) throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let slot = region.slot(0)
        var state = seed
        for offset in stride(from: 0, to: WindowSlot.size, by: 8) {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            store(state, at: slot.base + offset)
        }
        _ = slot.readStats()
        _ = (slot.state, slot.generation, slot.pid, slot.windowID, slot.readyGeneration, slot.heartbeat, slot.savingSeq)
        _ = (slot.savesCompleted &+ slot.saveFailures &+ slot.compactionFailures)
        #expect(slot.latency.histogram().totalCount <= (1 << 48))
        for _ in 0..<16 { _ = try? slot.replyRing.receive() }
        _ = try? slot.commandRing.send([1, 2, 3])
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
    UnsafeAtomic<UInt64>(at: pointer.assumingMemoryBound(to: UInt64.AtomicRepresentation.self)).store(
        value, ordering: .releasing)
}
