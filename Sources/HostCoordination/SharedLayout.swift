import HostLimits

/// One field of a shared-memory layout: where it starts, how many bytes it spans, and the width
/// of the atomic words it is read and written as. Every access is aligned to that width, or the
/// atomics would tear (`SharedLayoutTests` checks each field's offset against it).
struct SharedField: Equatable, Sendable {
    let name: String
    let offset: Int
    let size: Int
    let wordSize: Int

    init(_ name: String, at offset: Int, bytes size: Int, wordSize: Int) {
        self.name = name
        self.offset = offset
        self.size = size
        self.wordSize = wordSize
    }

    /// `count` consecutive `Word`s from `offset`.
    init<Word: FixedWidthInteger>(_ name: String, at offset: Int, _ word: Word.Type, count: Int = 1) {
        self.init(name, at: offset, bytes: MemoryLayout<Word>.size * count, wordSize: MemoryLayout<Word>.size)
    }

    var end: Int { offset + size }
    var wordCount: Int { size / wordSize }
}

/// Where each field of a window slot lives, from the start of the slot (after the slot header):
/// the one owner of the offsets `WindowSlot` reads and writes, and of the table in
/// docs/shared-memory.md (`SharedLayoutTests` parses the table and compares).
enum SlotLayout {
    // The supervisor's fields, on the first cache line.
    static let state = SharedField("state", at: 0, UInt32.self)
    static let generation = SharedField("generation", at: 4, UInt32.self)
    static let pid = SharedField("worker pid", at: 8, UInt32.self)
    /// The UUID's 16 bytes as two 64-bit words, each half big-endian.
    static let windowID = SharedField("window UUID", at: 16, UInt64.self, count: 2)

    // The worker's fields, from the next cache line: the worker's stores never invalidate the
    // line the supervisor writes.
    static let readyGeneration = SharedField("ready generation", at: 64, UInt32.self)
    static let heartbeat = SharedField("heartbeat", at: 72, UInt64.self)
    static let savingSeq = SharedField("saving seq", at: 80, UInt64.self)
    /// On a cache line of its own with the stats it guards, apart from the heartbeat that
    /// changes every turn of the worker's loop.
    static let statsVersion = SharedField("stats version", at: 128, UInt64.self)
    /// The words published under `statsVersion`, in `WorkerStats`' order.
    static let stats = SharedField("stats", at: 136, UInt64.self, count: 10)
    /// The save counters and latency buckets survive a restart of the same window, so they
    /// start past everything that is zeroed between workers (`workerScratch`).
    static let savesCompleted = SharedField("saves completed", at: 256, UInt64.self)
    static let saveFailures = SharedField("save failures", at: 264, UInt64.self)
    static let compactionFailures = SharedField("compaction failures", at: 272, UInt64.self)
    static let latency = SharedField("save latency", at: 320, UInt64.self, count: LatencyBuckets.count)

    /// The command ring starts on a page boundary past every field (16 KiB in), the reply ring
    /// right after it; their pages exist only once a message reaches them. The command ring
    /// holds the longest control request as one message: its capacity is that bound.
    static let commandRingCapacity = Limits.maxControlRequestBytes
    static let replyRingCapacity = 1 << 20
    static let commandRing = SharedField(
        "command ring", at: 16 << 10, bytes: RingLayout.headerSize + commandRingCapacity,
        wordSize: RingLayout.head.wordSize)
    static let replyRing = SharedField(
        "reply ring", at: commandRing.end, bytes: RingLayout.headerSize + replyRingCapacity,
        wordSize: RingLayout.head.wordSize)

    /// Everything after the slot header.
    static let size = replyRing.end

    /// What a worker writes that goes back to zero before each worker (64-bit stores).
    static let workerScratch = readyGeneration.offset..<savesCompleted.offset
    /// What goes back to zero only for a new reservation (64-bit stores).
    static let counters = savesCompleted.offset..<latency.end

    /// In offset order, as docs/shared-memory.md lists them.
    static let fields = [
        state, generation, pid, windowID, readyGeneration, heartbeat, savingSeq, statsVersion, stats, savesCompleted,
        saveFailures, compactionFailures, latency, commandRing, replyRing,
    ]
}

/// The start of one `MessageRing`: the two positions, then the buffer.
enum RingLayout {
    /// The consumer's position.
    static let head = SharedField("head", at: 0, UInt64.self)
    /// The producer's position, a cache line after the consumer's: each side stores to a line
    /// the other only reads.
    static let tail = SharedField("tail", at: 64, UInt64.self)
    /// Where the buffer starts: past the two positions' cache lines.
    static let headerSize = 128
    /// A message's length (UInt32, little-endian) before its bytes in the buffer.
    static let lengthSize = MemoryLayout<UInt32>.size

    static let fields = [head, tail]
}

extension SlotMemory {
    /// Where the slot header's fields are, from the start of the memfd. Written and read with
    /// plain (aligned) stores and loads: only the supervisor writes it, before a worker starts.
    enum HeaderOffset {
        static let magic = 0
        static let version = 8
        static let headerSize = 12
        static let slotSize = 16
        static let slotIndex = 24
        static let supervisorPID = 28
        static let totalSize = 32
    }

    /// The header's fields with their widths, as docs/shared-memory.md lists them.
    static let headerFields = [
        SharedField("magic", at: HeaderOffset.magic, UInt64.self),
        SharedField("layout version", at: HeaderOffset.version, UInt32.self),
        SharedField("header size", at: HeaderOffset.headerSize, UInt32.self),
        SharedField("slot size", at: HeaderOffset.slotSize, UInt64.self),
        SharedField("slot index", at: HeaderOffset.slotIndex, UInt32.self),
        SharedField("supervisor pid", at: HeaderOffset.supervisorPID, Int32.self),
        SharedField("memfd size", at: HeaderOffset.totalSize, UInt64.self),
    ]
}
