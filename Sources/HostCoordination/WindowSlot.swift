import Atomics
import Foundation

/// What a slot's window is doing. Written by the supervisor only.
public enum SlotState: UInt32, Sendable, CaseIterable, CustomStringConvertible {
    case free = 0
    case reserved
    case starting
    case foreground
    case background
    case disconnecting
    case crashed
    case setAside

    public var description: String {
        switch self {
        case .free: "free"
        case .reserved: "reserved"
        case .starting: "starting"
        case .foreground: "foreground"
        case .background: "background"
        case .disconnecting: "disconnecting"
        case .crashed: "crashed"
        case .setAside: "set_aside"
        }
    }
}

/// What a worker publishes about its window, read as one consistent snapshot.
public struct WorkerStats: Equatable, Sendable {
    public var appliedSeq: UInt64 = 0
    public var durableSeq: UInt64 = 0
    /// `WindowDigest` of the window at `durableSeq`.
    public var digest: UInt64 = 0
    public var regularTabs: UInt64 = 0
    public var incognitoTabs: UInt64 = 0
    /// While some Browser's saves are failing: the errno of the latest failure (`EIO` for one
    /// without an errno); 0 once every Browser saves again. What fails a durable wait at once.
    public var failingErrno: UInt64 = 0
    /// The Browsers whose saves are failing, as commit bits (regular 1, incognito 2).
    public var failingBrowsers: UInt64 = 0

    public init() {}
}

/// One window's slot, in its own memfd after the slot header (`SlotMemory`). Every field has one
/// writer:
/// - the supervisor: the slot header, state, generation, pid, UUID (and it zeroes the rest
///   between workers);
/// - the worker of the current generation: ready generation, heartbeat, the save in flight, the
///   stats (under a sequence lock), the save counters and latency buckets, the reply ring's tail
///   and the command ring's head.
/// All access is atomic, so a process killed mid-update leaves no lock held: at worst a stats
/// version stays odd, and readers give up after bounded retries and keep their last snapshot.
public struct WindowSlot: @unchecked Sendable {
    static let commandRingOffset = 16 << 10
    static let commandRingCapacity = 64 << 10
    static let replyRingOffset = commandRingOffset + MessageRing.headerSize + commandRingCapacity
    static let replyRingCapacity = 1 << 20
    public static let size = replyRingOffset + MessageRing.headerSize + replyRingCapacity

    let base: UnsafeMutableRawPointer
    /// What the supervisor wrote in the header before the slot: written again before each
    /// worker, since the worker before may have written anything there.
    private let header: SlotMemory.Header

    init(_ base: UnsafeMutableRawPointer, header: SlotMemory.Header) {
        self.base = base
        self.header = header
    }

    private func word32(_ offset: Int) -> UnsafeAtomic<UInt32> {
        UnsafeAtomic(at: (base + offset).assumingMemoryBound(to: UInt32.AtomicRepresentation.self))
    }

    private func word64(_ offset: Int) -> UnsafeAtomic<UInt64> {
        UnsafeAtomic(at: (base + offset).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }

    // MARK: supervisor's fields

    public var state: SlotState {
        get { SlotState(rawValue: word32(0).load(ordering: .acquiring)) ?? .free }
        nonmutating set { word32(0).store(newValue.rawValue, ordering: .releasing) }
    }

    /// Counts the workers spawned for this window since it was reserved.
    public var generation: UInt32 {
        get { word32(4).load(ordering: .acquiring) }
        nonmutating set { word32(4).store(newValue, ordering: .releasing) }
    }

    public var pid: Int32 {
        get { Int32(bitPattern: word32(8).load(ordering: .acquiring)) }
        nonmutating set { word32(8).store(UInt32(bitPattern: newValue), ordering: .releasing) }
    }

    public var windowID: UUID {
        get {
            let high = word64(16).load(ordering: .acquiring)
            let low = word64(24).load(ordering: .acquiring)
            return withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { bytes in
                UUID(uuid: bytes.load(as: uuid_t.self))
            }
        }
        nonmutating set {
            let (high, low) = withUnsafeBytes(of: newValue.uuid) { bytes in
                (UInt64(bigEndian: bytes.load(fromByteOffset: 0, as: UInt64.self)),
                 UInt64(bigEndian: bytes.load(fromByteOffset: 8, as: UInt64.self)))
            }
            word64(16).store(high, ordering: .releasing)
            word64(24).store(low, ordering: .releasing)
        }
    }

    /// Before a worker of a new generation starts: everything a worker writes goes back to
    /// zero, the rings empty. `keepingCounters` keeps the save counters and latency buckets
    /// (a restart of the same window); a new reservation clears them too.
    public func resetWorkerFields(keepingCounters: Bool) {
        header.write(at: base - SlotMemory.headerSize)
        for offset in stride(from: 64, to: 256, by: 8) { word64(offset).store(0, ordering: .relaxed) }
        if !keepingCounters {
            for offset in stride(from: 256, to: Self.latencyOffset + LatencyBuckets.count * 8, by: 8) {
                word64(offset).store(0, ordering: .relaxed)
            }
        }
        commandRing.reset()
        replyRing.reset()
        atomicMemoryFence(ordering: .sequentiallyConsistent)
    }

    // MARK: worker's fields

    /// The generation whose worker has restored its window and takes commands.
    public var readyGeneration: UInt32 {
        get { word32(64).load(ordering: .acquiring) }
        nonmutating set { word32(64).store(newValue, ordering: .releasing) }
    }

    /// CLOCK_MONOTONIC nanoseconds of the worker's last turn of its loop.
    public var heartbeat: UInt64 {
        get { word64(72).load(ordering: .acquiring) }
        nonmutating set { word64(72).store(newValue, ordering: .releasing) }
    }

    /// The command seq the save in flight covers, 0 when none: where a kill hurts most.
    public var savingSeq: UInt64 {
        get { word64(80).load(ordering: .acquiring) }
        nonmutating set { word64(80).store(newValue, ordering: .releasing) }
    }

    private static let statsVersionOffset = 128
    private static let statsOffsets = [136, 144, 152, 160, 168, 176, 184]

    /// Publishes `stats` under the sequence lock (worker only).
    public func publish(_ stats: WorkerStats) {
        let version = word64(Self.statsVersionOffset)
        let start = version.load(ordering: .relaxed)
        version.store(start &+ 1, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        let values = [
            stats.appliedSeq, stats.durableSeq, stats.digest, stats.regularTabs, stats.incognitoTabs, stats.failingErrno,
            stats.failingBrowsers,
        ]
        assert(values.count == Self.statsOffsets.count, "one offset per field")
        for (offset, value) in zip(Self.statsOffsets, values) { word64(offset).store(value, ordering: .relaxed) }
        version.store(start &+ 2, ordering: .releasing)
    }

    /// A consistent snapshot of the stats, or nil if none was seen within `attempts` tries (a
    /// writer mid-update, or killed in the middle of one): never waits for the writer.
    public func readStats(attempts: Int = 64) -> WorkerStats? {
        let version = word64(Self.statsVersionOffset)
        for _ in 0..<attempts {
            let before = version.load(ordering: .acquiring)
            guard before & 1 == 0 else { continue }
            let values = Self.statsOffsets.map { word64($0).load(ordering: .relaxed) }
            atomicMemoryFence(ordering: .acquiring)
            guard version.load(ordering: .relaxed) == before else { continue }
            var stats = WorkerStats()
            stats.appliedSeq = values[0]
            stats.durableSeq = values[1]
            stats.digest = values[2]
            stats.regularTabs = values[3]
            stats.incognitoTabs = values[4]
            stats.failingErrno = values[5]
            stats.failingBrowsers = values[6]
            return stats
        }
        return nil
    }

    /// Leaves the stats version odd, as a worker killed mid-update does (tests).
    public func abandonStatsUpdate() {
        word64(Self.statsVersionOffset).wrappingIncrement(ordering: .releasing)
    }

    // MARK: save counters and latency

    static let latencyOffset = 320

    public var savesCompleted: UInt64 { word64(256).load(ordering: .relaxed) }
    /// Failed save attempts (scheduled, explicit, at disconnect; each retry counts).
    public var saveFailures: UInt64 { word64(264).load(ordering: .relaxed) }
    /// Failed compactions (the saves riding on them may have succeeded).
    public var compactionFailures: UInt64 { word64(272).load(ordering: .relaxed) }

    /// Records one durable save that took `microseconds` from request to durable (worker).
    public func recordSave(microseconds: UInt64) {
        word64(256).wrappingIncrement(ordering: .relaxed)
        latency.record(microseconds)
    }

    public func recordSaveFailure() { word64(264).wrappingIncrement(ordering: .relaxed) }

    public func recordCompactionFailure() { word64(272).wrappingIncrement(ordering: .relaxed) }

    public var latency: LatencyBuckets { LatencyBuckets(base + Self.latencyOffset) }

    // MARK: rings

    /// Supervisor → worker.
    public var commandRing: MessageRing { MessageRing(base + Self.commandRingOffset, capacity: Self.commandRingCapacity) }
    /// Worker → supervisor.
    public var replyRing: MessageRing { MessageRing(base + Self.replyRingOffset, capacity: Self.replyRingCapacity) }
}
