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
    /// Whether the window's journal writes go direct (`O_DIRECT`): `JournalWrites`' raw value.
    public var journalWrites: UInt64 = JournalWrites.unknown.rawValue
    /// How the window's incognito session is kept: `IncognitoStorage`'s raw value.
    public var incognitoStorage: UInt64 = IncognitoStorage.sealed.rawValue
    /// The first command whose effect is only in the incognito Browser kept in memory only;
    /// 0 when none. A durable answer covering it is not one (`ControlCode.memoryOnly`).
    public var memoryOnlySince: UInt64 = 0

    /// The fields in the order of their words in the slot (`SlotLayout.stats`): the one
    /// statement of it, which `publish` writes and `readStats` reads.
    static let words: [WritableKeyPath<WorkerStats, UInt64> & Sendable] = [
        \.appliedSeq, \.durableSeq, \.digest, \.regularTabs, \.incognitoTabs, \.failingErrno, \.failingBrowsers,
        \.journalWrites,
        \.incognitoStorage, \.memoryOnlySince,
    ]

    public init() {}
}

/// How a window's incognito session is kept, as its worker publishes it.
public enum IncognitoStorage: UInt64, Sendable {
    /// On disk, sealed with the window's key from the kernel keyring.
    case sealed = 0
    /// In memory only: the keyring was refused, so nothing of it is saved.
    case memoryOnly = 1
}

/// How a window's journals are written, as its worker publishes it.
public enum JournalWrites: UInt64, Sendable {
    /// No journal is open for writing yet.
    case unknown = 0
    /// `O_DIRECT`: each save one aligned write that bypasses the page cache.
    case direct = 1
    /// Through the page cache (tmpfs, or a file system that refuses direct I/O), framed the same.
    case buffered = 2
}

/// One window's slot, in its own memfd after the slot header (`SlotMemory`), laid out by
/// `SlotLayout`. Every field has one writer:
/// - the supervisor: the slot header, state, generation, pid, UUID (and it zeroes the rest
///   between workers);
/// - the worker of the current generation: ready generation, heartbeat, the save in flight, the
///   stats (under a sequence lock), the save counters and latency buckets, the reply ring's tail
///   and the command ring's head.
/// All access is atomic, so a process killed mid-update leaves no lock held: at worst a stats
/// version stays odd, and readers give up after bounded retries and keep their last snapshot.
public struct WindowSlot: @unchecked Sendable {
    public static let size = SlotLayout.size

    let base: UnsafeMutableRawPointer
    /// What the supervisor wrote in the header before the slot: written again before each
    /// worker, since the worker before may have written anything there.
    private let header: SlotMemory.Header

    init(_ base: UnsafeMutableRawPointer, header: SlotMemory.Header) {
        self.base = base
        self.header = header
    }

    private func word32(_ field: SharedField) -> UnsafeAtomic<UInt32> {
        assert(field.wordSize == MemoryLayout<UInt32>.size, "\(field.name) is a 32-bit word")
        return UnsafeAtomic(at: (base + field.offset).assumingMemoryBound(to: UInt32.AtomicRepresentation.self))
    }

    /// The `index`th 64-bit word of `field`.
    func word64(_ field: SharedField, _ index: Int = 0) -> UnsafeAtomic<UInt64> {
        assert(
            field.wordSize == MemoryLayout<UInt64>.size && (0..<field.wordCount).contains(index),
            "\(field.name) word \(index)")
        return word64(at: field.offset + index * field.wordSize)
    }

    private func word64(at offset: Int) -> UnsafeAtomic<UInt64> {
        UnsafeAtomic(at: (base + offset).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }

    // MARK: supervisor's fields

    public var state: SlotState {
        get { SlotState(rawValue: word32(SlotLayout.state).load(ordering: .acquiring)) ?? .free }
        nonmutating set { word32(SlotLayout.state).store(newValue.rawValue, ordering: .releasing) }
    }

    /// Counts the workers spawned for this window since it was reserved.
    public var generation: UInt32 {
        get { word32(SlotLayout.generation).load(ordering: .acquiring) }
        nonmutating set { word32(SlotLayout.generation).store(newValue, ordering: .releasing) }
    }

    public var pid: Int32 {
        get { Int32(bitPattern: word32(SlotLayout.pid).load(ordering: .acquiring)) }
        nonmutating set { word32(SlotLayout.pid).store(UInt32(bitPattern: newValue), ordering: .releasing) }
    }

    public var windowID: UUID {
        get {
            let high = word64(SlotLayout.windowID, 0).load(ordering: .acquiring)
            let low = word64(SlotLayout.windowID, 1).load(ordering: .acquiring)
            return withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { bytes in
                UUID(uuid: bytes.load(as: uuid_t.self))
            }
        }
        nonmutating set {
            let (high, low) = withUnsafeBytes(of: newValue.uuid) { bytes in
                (
                    UInt64(bigEndian: bytes.load(fromByteOffset: 0, as: UInt64.self)),
                    UInt64(bigEndian: bytes.load(fromByteOffset: 8, as: UInt64.self))
                )
            }
            word64(SlotLayout.windowID, 0).store(high, ordering: .releasing)
            word64(SlotLayout.windowID, 1).store(low, ordering: .releasing)
        }
    }

    /// Before a worker of a new generation starts: everything a worker writes goes back to
    /// zero, the rings empty. `keepingCounters` keeps the save counters and latency buckets
    /// (a restart of the same window); a new reservation clears them too.
    public func resetWorkerFields(keepingCounters: Bool) {
        header.write(at: base - SlotMemory.headerSize)
        for offset in stride(from: SlotLayout.workerScratch.lowerBound, to: SlotLayout.workerScratch.upperBound, by: 8)
        {
            word64(at: offset).store(0, ordering: .relaxed)
        }
        if !keepingCounters {
            for offset in stride(from: SlotLayout.counters.lowerBound, to: SlotLayout.counters.upperBound, by: 8) {
                word64(at: offset).store(0, ordering: .relaxed)
            }
        }
        commandRing.reset()
        replyRing.reset()
        atomicMemoryFence(ordering: .sequentiallyConsistent)
    }

    // MARK: worker's fields

    /// The generation whose worker has restored its window and takes commands.
    public var readyGeneration: UInt32 {
        get { word32(SlotLayout.readyGeneration).load(ordering: .acquiring) }
        nonmutating set { word32(SlotLayout.readyGeneration).store(newValue, ordering: .releasing) }
    }

    /// CLOCK_MONOTONIC nanoseconds of the worker's last turn of its loop.
    public var heartbeat: UInt64 {
        get { word64(SlotLayout.heartbeat).load(ordering: .acquiring) }
        nonmutating set { word64(SlotLayout.heartbeat).store(newValue, ordering: .releasing) }
    }

    /// The command seq the save in flight covers, 0 when none: where a kill hurts most.
    public var savingSeq: UInt64 {
        get { word64(SlotLayout.savingSeq).load(ordering: .acquiring) }
        nonmutating set { word64(SlotLayout.savingSeq).store(newValue, ordering: .releasing) }
    }

    /// Publishes `stats` under the sequence lock (worker only).
    public func publish(_ stats: WorkerStats) {
        let version = word64(SlotLayout.statsVersion)
        let start = version.load(ordering: .relaxed)
        version.store(start &+ 1, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        assert(WorkerStats.words.count == SlotLayout.stats.wordCount, "one word per field")
        for (index, field) in WorkerStats.words.enumerated() {
            word64(SlotLayout.stats, index).store(stats[keyPath: field], ordering: .relaxed)
        }
        version.store(start &+ 2, ordering: .releasing)
    }

    /// A consistent snapshot of the stats, or nil if none was seen within `attempts` tries (a
    /// writer mid-update, or killed in the middle of one): never waits for the writer.
    public func readStats(attempts: Int = 64) -> WorkerStats? {
        let version = word64(SlotLayout.statsVersion)
        for _ in 0..<attempts {
            let before = version.load(ordering: .acquiring)
            guard before & 1 == 0 else { continue }
            var stats = WorkerStats()
            for (index, field) in WorkerStats.words.enumerated() {
                stats[keyPath: field] = word64(SlotLayout.stats, index).load(ordering: .relaxed)
            }
            atomicMemoryFence(ordering: .acquiring)
            guard version.load(ordering: .relaxed) == before else { continue }
            return stats
        }
        return nil
    }

    // MARK: save counters and latency

    public var savesCompleted: UInt64 { word64(SlotLayout.savesCompleted).load(ordering: .relaxed) }
    /// Failed save attempts (scheduled, explicit, at disconnect; each retry counts).
    public var saveFailures: UInt64 { word64(SlotLayout.saveFailures).load(ordering: .relaxed) }
    /// Failed compactions (the saves riding on them may have succeeded).
    public var compactionFailures: UInt64 { word64(SlotLayout.compactionFailures).load(ordering: .relaxed) }

    /// Records one durable save that took `microseconds` from request to durable (worker).
    public func recordSave(microseconds: UInt64) {
        word64(SlotLayout.savesCompleted).wrappingIncrement(ordering: .relaxed)
        latency.record(microseconds)
    }

    public func recordSaveFailure() { word64(SlotLayout.saveFailures).wrappingIncrement(ordering: .relaxed) }

    public func recordCompactionFailure() {
        word64(SlotLayout.compactionFailures).wrappingIncrement(ordering: .relaxed)
    }

    public var latency: LatencyBuckets { LatencyBuckets(base + SlotLayout.latency.offset) }

    // MARK: rings

    /// Supervisor → worker.
    public var commandRing: MessageRing {
        MessageRing(base + SlotLayout.commandRing.offset, capacity: SlotLayout.commandRingCapacity)
    }
    /// Worker → supervisor.
    public var replyRing: MessageRing {
        MessageRing(base + SlotLayout.replyRing.offset, capacity: SlotLayout.replyRingCapacity)
    }
}
