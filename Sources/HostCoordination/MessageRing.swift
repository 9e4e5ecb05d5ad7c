import Atomics

/// A single-producer single-consumer ring of length-prefixed messages in shared memory. The
/// producer writes a message's bytes, then publishes the new tail (release); the consumer reads
/// the tail (acquire), takes whole messages, then publishes the new head. A producer killed
/// mid-write never published its tail, so a torn message is never seen. Head and tail count
/// bytes forever (64 bits do not wrap in practice; the arithmetic wraps rather than traps, as
/// the other process may write any value); positions are taken modulo the capacity.
public struct MessageRing: @unchecked Sendable {
    /// Where the buffer starts, for tests that write into it (`RingLayout` owns the layout).
    static let headerSize = RingLayout.headerSize

    let base: UnsafeMutableRawPointer
    public let capacity: Int

    init(_ base: UnsafeMutableRawPointer, capacity: Int) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0, "a power of two")
        self.base = base
        self.capacity = capacity
    }

    /// Consumer's position: on its own cache line, apart from the producer's.
    private var head: UnsafeAtomic<UInt64> { position(RingLayout.head) }
    private var tail: UnsafeAtomic<UInt64> { position(RingLayout.tail) }

    private func position(_ field: SharedField) -> UnsafeAtomic<UInt64> {
        assert(field.wordSize == MemoryLayout<UInt64>.size, "\(field.name) is a 64-bit word")
        return UnsafeAtomic(at: (base + field.offset).assumingMemoryBound(to: UInt64.AtomicRepresentation.self))
    }
    private var data: UnsafeMutableRawPointer { base + RingLayout.headerSize }

    /// The largest message that fits.
    public var maximumMessage: Int { capacity - RingLayout.lengthSize }

    /// Empties the ring. Only while neither side runs.
    func reset() {
        head.store(0, ordering: .relaxed)
        tail.store(0, ordering: .relaxed)
    }

    public enum SendError: Error, Equatable {
        /// Larger than the ring: it can never be sent.
        case tooLarge(Int)
        /// Not enough room now: the consumer is behind.
        case full
    }

    /// Appends one message (producer only).
    public func send(_ message: [UInt8]) throws(SendError) {
        guard message.count <= maximumMessage else { throw .tooLarge(message.count) }
        let start = tail.load(ordering: .relaxed)
        // Both positions live in shared memory the other process can write: a distance past
        // the capacity is a ring to wait on (the receiving side reports the corruption).
        let used = Int(clamping: start &- head.load(ordering: .acquiring))
        guard capacity - used >= RingLayout.lengthSize + message.count else { throw .full }
        assert(RingLayout.lengthSize + message.count <= capacity, "a message sent fits the ring whole")
        withUnsafeBytes(of: UInt32(message.count).littleEndian) { copyIn($0, at: start) }
        message.withUnsafeBytes { copyIn($0, at: start &+ UInt64(RingLayout.lengthSize)) }
        tail.store(start &+ UInt64(RingLayout.lengthSize + message.count), ordering: .releasing)
    }

    /// A length that runs past the published tail: the other side wrote outside the protocol.
    public struct CorruptRing: Error, Equatable {
        public let length: Int
        public let available: Int
    }

    /// Takes the next whole message, or nil when none is published (consumer only).
    public func receive() throws(CorruptRing) -> [UInt8]? {
        let start = head.load(ordering: .relaxed)
        let available = Int(clamping: tail.load(ordering: .acquiring) &- start)
        guard available >= RingLayout.lengthSize else { return nil }
        var length: UInt32 = 0
        withUnsafeMutableBytes(of: &length) { copyOut($0, at: start) }
        let count = Int(UInt32(littleEndian: length))
        // The producer publishes a length with all its bytes: anything else is a corrupt ring.
        guard available <= capacity, count <= available - RingLayout.lengthSize else {
            throw CorruptRing(length: count, available: available)
        }
        assert(RingLayout.lengthSize + count <= capacity, "a message taken lies in the ring whole")
        var message = [UInt8](repeating: 0, count: count)
        message.withUnsafeMutableBytes { copyOut($0, at: start &+ UInt64(RingLayout.lengthSize)) }
        head.store(start &+ UInt64(RingLayout.lengthSize + count), ordering: .releasing)
        return message
    }

    private func copyIn(_ bytes: UnsafeRawBufferPointer, at position: UInt64) {
        guard !bytes.isEmpty else { return }
        assert(bytes.count <= capacity, "a copy never laps the ring")
        let offset = Int(position % UInt64(capacity))
        let first = min(bytes.count, capacity - offset)
        assert(first > 0 && bytes.count - first <= offset, "the wrapped part ends before the first part starts")
        (data + offset).copyMemory(from: bytes.baseAddress!, byteCount: first)
        if first < bytes.count { data.copyMemory(from: bytes.baseAddress! + first, byteCount: bytes.count - first) }
    }

    private func copyOut(_ bytes: UnsafeMutableRawBufferPointer, at position: UInt64) {
        guard !bytes.isEmpty else { return }
        assert(bytes.count <= capacity, "a copy never laps the ring")
        let offset = Int(position % UInt64(capacity))
        let first = min(bytes.count, capacity - offset)
        assert(first > 0 && bytes.count - first <= offset, "the wrapped part ends before the first part starts")
        bytes.baseAddress!.copyMemory(from: data + offset, byteCount: first)
        if first < bytes.count { (bytes.baseAddress! + first).copyMemory(from: data, byteCount: bytes.count - first) }
    }
}
