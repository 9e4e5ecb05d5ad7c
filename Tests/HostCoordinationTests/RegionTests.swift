import CLinuxShims
import CTestShims
import Foundation
import Glibc
import SystemPackage
import Testing

@testable import HostCoordination

@Suite struct MessageRingTests {
    @Test func messagesComeOutWholeAndInOrderAcrossTheWrap() throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let ring = region.slot(0).commandRing
        var sent: [[UInt8]] = []
        var received: [[UInt8]] = []
        var random = SystemRandomNumberGenerator()
        // Many times the capacity: head and tail wrap around the buffer again and again.
        for round in 0..<2000 {
            let message = (0..<Int.random(in: 0...3000, using: &random)).map { UInt8(truncatingIfNeeded: $0 &+ round) }
            do {
                try ring.send(message)
                sent.append(message)
            } catch .full {
                while let next = try ring.receive() { received.append(next) }
                try ring.send(message)
                sent.append(message)
            }
            if round % 7 == 0, let next = try ring.receive() { received.append(next) }
        }
        while let next = try ring.receive() { received.append(next) }
        #expect(received == sent)
        #expect(sent.reduce(0) { $0 + $1.count } > 20 * ring.capacity)
    }

    @Test func aFullRingAndAnOversizedMessageAreRefusedWithoutHarm() throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let ring = region.slot(0).commandRing
        #expect(throws: MessageRing.SendError.tooLarge(ring.capacity)) {
            try ring.send([UInt8](repeating: 1, count: ring.capacity))
        }
        try ring.send([UInt8](repeating: 2, count: ring.maximumMessage - 8))
        #expect(throws: MessageRing.SendError.full) { try ring.send([UInt8](repeating: 3, count: 16)) }
        #expect(try ring.receive()?.count == ring.maximumMessage - 8)
        #expect(try ring.receive() == nil)
    }

    @Test func aLengthPastThePublishedTailIsACorruptRingNotACrash() throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let slot = region.slot(0)
        try slot.commandRing.send([1, 2, 3])
        // A writer outside the protocol: the length now says more than was published.
        (slot.base + SlotLayout.commandRing.offset + MessageRing.headerSize).storeBytes(
            of: UInt32(900).littleEndian, as: UInt32.self)
        #expect(throws: MessageRing.CorruptRing(length: 900, available: 7)) { try slot.commandRing.receive() }
    }
}

@Suite struct SlotTests {
    @Test func statsReadBackAsPublishedAndAnAbandonedUpdateNeverBlocksTheReader() throws {
        let region = try SharedRegion(slotCount: 2, supervisorPID: getpid())
        let slot = region.slot(1)
        var stats = WorkerStats()
        // Every field a value of its own: a word read into another field shows.
        for (index, field) in WorkerStats.words.enumerated() { stats[keyPath: field] = 0xA000 + UInt64(index) }
        slot.publish(stats)
        #expect(slot.readStats() == stats)
        // A worker killed between the two halves of an update leaves the version odd.
        slot.abandonStatsUpdate()
        #expect(slot.readStats(attempts: 1000) == nil)
        // The next generation starts from zeroed worker fields.
        slot.resetWorkerFields(keepingCounters: true)
        #expect(slot.readStats() == WorkerStats())
    }

    @Test func fieldsOfOneSlotStayOutOfTheOthers() throws {
        let region = try SharedRegion(slotCount: 3, supervisorPID: 4242)
        let ids = (0..<3).map { _ in UUID() }
        for index in 0..<3 {
            let slot = region.slot(index)
            slot.windowID = ids[index]
            slot.state = .foreground
            slot.generation = UInt32(index + 1)
            slot.pid = Int32(100 + index)
            try slot.replyRing.send([UInt8(index)])
        }
        region.slot(1).resetWorkerFields(keepingCounters: false)
        for index in 0..<3 {
            let slot = region.slot(index)
            #expect(
                slot.windowID == ids[index] && slot.generation == UInt32(index + 1) && slot.pid == Int32(100 + index))
            #expect(try slot.replyRing.receive() == (index == 1 ? nil : [UInt8(index)]))
        }
    }

    @Test func saveCountersAndLatencySurviveARestartButNotANewReservation() throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let slot = region.slot(0)
        for microseconds in [100, 200, 300] as [UInt64] { slot.recordSave(microseconds: microseconds) }
        slot.resetWorkerFields(keepingCounters: true)
        #expect(slot.savesCompleted == 3 && slot.latency.histogram().totalCount == 3)
        slot.resetWorkerFields(keepingCounters: false)
        #expect(slot.savesCompleted == 0 && slot.latency.histogram().totalCount == 0)
    }
}

@Suite struct AttachTests {
    @Test func aWorkerAttachesToItsOwnSlotAndNoOther() throws {
        let region = try SharedRegion(slotCount: 4, supervisorPID: 77)
        region.slot(2).windowID = UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!
        let attached = try SlotMemory(attaching: FileDescriptor(rawValue: dup(region.descriptor(ofSlot: 2).rawValue)))
        #expect(attached.index == 2 && attached.supervisorPID == 77)
        #expect(attached.slot.windowID == region.slot(2).windowID)
        attached.slot.heartbeat = 12345
        #expect(region.slot(2).heartbeat == 12345)
        #expect((0..<4).filter { region.slot($0).heartbeat == 12345 } == [2])
        // One memfd per slot: four files, so one slot's descriptor maps nothing of another.
        let inodes = Set(
            (0..<4).map { index in
                var status = stat()
                #expect(fstat(region.descriptor(ofSlot: index).rawValue, &status) == 0)
                #expect(status.st_mode & 0o777 == 0o600)
                #expect(Int(status.st_size) == SlotMemory.size)
                return status.st_ino
            })
        #expect(inodes.count == 4)
    }

    /// A worker holds its slot's descriptor: were it able to shrink the file, the supervisor's
    /// next read of the mapping would fault (SIGBUS). The size is sealed, even for a reopen.
    @Test func noHolderCanResizeASlot() throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: 1)
        let fd = region.descriptor(ofSlot: 0).rawValue
        #expect(ftruncate(fd, 4096) == -1 && errno == EPERM)
        #expect(ftruncate(fd, off_t(SlotMemory.size * 2)) == -1 && errno == EPERM)
        let reopened = open("/proc/self/fd/\(fd)", O_RDWR | O_CLOEXEC)
        try #require(reopened >= 0)
        defer { close(reopened) }
        #expect(ftruncate(reopened, 0) == -1 && errno == EPERM)
        #expect(wh_memfd_seal_size(reopened) == -1, "sealed for good: no seal can be added or removed")
        region.slot(0).heartbeat = 7
        #expect(region.slot(0).heartbeat == 7)
    }

    /// A worker may write over its slot's header; the next worker of the slot still attaches.
    @Test func theHeaderIsWrittenAgainBeforeEachWorker() throws {
        let region = try SharedRegion(slotCount: 2, supervisorPID: 55)
        let header = region.slot(1).base - SlotMemory.headerSize
        header.initializeMemory(as: UInt8.self, repeating: 0xA5, count: SlotMemory.headerSize)
        #expect(throws: RegionError.self) {
            try SlotMemory(attaching: FileDescriptor(rawValue: dup(region.descriptor(ofSlot: 1).rawValue)))
        }
        region.slot(1).resetWorkerFields(keepingCounters: true)
        let attached = try SlotMemory(attaching: FileDescriptor(rawValue: dup(region.descriptor(ofSlot: 1).rawValue)))
        #expect(attached.index == 1 && attached.supervisorPID == 55)
    }

    @Test func aSlotOfAnotherLayoutIsRefusedByName() throws {
        let memory = try SlotMemory(index: 0, supervisorPID: 1)
        memory.base.storeBytes(
            of: SlotMemory.layoutVersion + 1, toByteOffset: SlotMemory.HeaderOffset.version, as: UInt32.self)
        #expect {
            try SlotMemory(attaching: FileDescriptor(rawValue: dup(memory.descriptor.rawValue)))
        } throws: { error in
            "\(error)".contains("layout version \(SlotMemory.layoutVersion + 1)")
        }
        let small = wh_memfd_create("not-a-slot")
        #expect(ftruncate(small, 8192) == 0)
        #expect {
            try SlotMemory(attaching: FileDescriptor(rawValue: small))
        } throws: { error in
            "\(error)".contains("8192 bytes")
        }
        let stranger = wh_memfd_create("not-a-slot")
        #expect(ftruncate(stranger, off_t(SlotMemory.size)) == 0)
        #expect {
            try SlotMemory(attaching: FileDescriptor(rawValue: stranger))
        } throws: { error in
            "\(error)".contains("not a windowhost slot")
        }
    }
}

@Suite struct LatencyBucketTests {
    @Test func bucketsKeepEveryValueWithinThreePercent() {
        for value in [0, 1, 63, 64, 65, 100, 1000, 4095, 4096, 123_456, 9_999_999, 1 << 38] as [UInt64] {
            let middle = LatencyBuckets.representative(of: LatencyBuckets.index(of: value))
            let error = abs(Double(middle) - Double(value)) / max(1, Double(value))
            #expect(error <= 0.03, "\(value) → \(middle)")
        }
        let indices = (0..<100_000 as Range<UInt64>).map(LatencyBuckets.index(of:))
        #expect(zip(indices, indices.dropFirst()).allSatisfy { $0 <= $1 }, "monotonic")
    }

    @Test func percentilesFromSharedMemoryMatchTheSamples() throws {
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let buckets = region.slot(0).latency
        for value in 1...1000 as ClosedRange<UInt64> { buckets.record(value * 10) }
        let histogram = buckets.histogram()
        #expect(histogram.totalCount == 1000)
        #expect(histogram.maxRecorded == 10_000, "the maximum is exact")
        let p50 = Double(histogram.valueAtPercentile(50))
        let p99 = Double(histogram.valueAtPercentile(99))
        #expect(abs(p50 - 5000) / 5000 < 0.04 && abs(p99 - 9900) / 9900 < 0.04, "p50 \(p50) p99 \(p99)")
    }
}

extension WindowSlot {
    /// Leaves the stats version odd, as a worker killed mid-update does.
    fileprivate func abandonStatsUpdate() {
        word64(SlotLayout.statsVersion).wrappingIncrement(ordering: .releasing)
    }
}
