import HostLimits

/// Random access to stored bytes: an in-memory buffer in tests and tools, a file (pread) in the
/// store. `read` returns exactly `count` bytes or throws.
public protocol ByteSource {
    var size: Int { get }
    func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8]
}

extension ByteSource {
    /// Throws `.truncated` unless `count` bytes at `offset` lie within `start..<size`.
    public func checkRange(offset: Int, count: Int, start: Int = 0) throws(SessionFormatError) {
        guard offset >= start, count >= 0, offset <= size, count <= size - offset else {
            throw .truncated(offset: offset, needed: count, available: max(0, size - max(offset, start)))
        }
    }
}

public struct InMemoryBytes: ByteSource, Sendable {
    public let bytes: [UInt8]
    /// The file offset of `bytes[0]`: a piece read out of a file keeps reporting file offsets.
    public let base: Int

    public init(_ bytes: [UInt8], base: Int = 0) {
        self.bytes = bytes
        self.base = base
    }

    public var size: Int { base + bytes.count }

    public func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
        try checkRange(offset: offset, count: count, start: base)
        assert(offset - base >= 0 && offset - base + count <= bytes.count, "a checked range lies in the bytes")
        return Array(bytes[offset - base..<offset - base + count])
    }
}

/// The kinds of file; each has its own magic so one is never read as the other.
public enum SessionFileKind: Sendable, CaseIterable {
    case snapshot, journal

    var magic: [UInt8] {
        switch self {
        case .snapshot: Array("WHSS".utf8)
        case .journal: Array("WHJL".utf8)
        }
    }

    /// The layout this build writes, in the file header's version field. Snapshots are at 2
    /// (a fixed-width index, read in place); 1 (protobuf list metadata) is still read, and
    /// rewritten as 2 at the next compaction. Journals have one layout.
    public var currentVersion: Int {
        switch self {
        case .snapshot: 2
        case .journal: 1
        }
    }
}

/// The kinds of record a frame carries.
public enum RecordKind: UInt8, Sendable {
    case listMetadata = 1
    case navigation = 2
    case mutation = 3
    /// Ends one save's write in a journal: the records before it count only once it is there.
    case commit = 4
    /// More of a format-1 snapshot's list metadata, when it does not fit one record: right
    /// after the `listMetadata` record, as many as it says (`continuation_records`).
    case listMetadataContinuation = 5
    /// Zeros a journal writer puts where a save (or the file header) would otherwise end
    /// inside a block: right before a save's commit, so the commit stays its last bytes and
    /// ends on the block boundary where the next save starts. Read and skipped; never applied.
    case padding = 6
    /// A format-2 snapshot's fixed-width index: the list, then one entry per tab.
    case listIndex = 7
    /// Titles and URLs of a format-2 snapshot, right after its index, as many as it says.
    case strings = 8
}

/// Frames around every file and record: magic, version, length, CRC32C, all little endian.
/// See docs/storage-format.md for the byte layout.
///
/// File header (16 bytes): magic[4] · version u16 · header length u16 · flags u32 ·
/// CRC32C of the 12 bytes before it. The version is the file's layout (`currentVersion`); flag
/// bit 0 says its records are sealed (`RecordSeal`), and no other bit is set.
/// Record (12 bytes + payload): magic "WR" · kind u8 · version u8 · payload length u32 ·
/// CRC32C of the first 8 bytes and the payload. The version is the frame's own
/// (`frameVersion`), the same in every file.
public enum Framing {
    public static let frameVersion = 1
    public static let fileHeaderSize = 16
    public static let recordHeaderSize = 12
    static let recordMagic: [UInt8] = [0x57, 0x52]

    /// The header flag of a file whose records are sealed.
    static let sealedFlag: UInt32 = 1

    /// The header of a file of `kind` in layout `version` (today's unless said: tests write
    /// older ones), sealed or not.
    public static func fileHeader(_ kind: SessionFileKind, version: Int? = nil, sealed: Bool = false) -> [UInt8] {
        var header = kind.magic
        header.appendLittleEndian(UInt16(version ?? kind.currentVersion))
        header.appendLittleEndian(UInt16(fileHeaderSize))
        header.appendLittleEndian(sealed ? sealedFlag : 0)
        header.appendLittleEndian(CRC32C.checksum(header))
        assert(header.count == fileHeaderSize, "a file header is its fixed size")
        return header
    }

    /// Checks the header at the start of `source`; returns the offset of the first record, the
    /// file's layout version (1...`kind.currentVersion`) and whether its records are sealed.
    public static func checkFileHeader(_ source: some ByteSource, kind: SessionFileKind) throws(SessionFormatError)
        -> (firstRecord: Int, version: Int, sealed: Bool)
    {
        let header = try source.read(offset: 0, count: fileHeaderSize)
        guard Array(header[0..<4]) == kind.magic else { throw .badMagic(offset: 0) }
        let stored = header.littleEndian(UInt32.self, at: 12)
        let computed = CRC32C.checksum(header[0..<12])
        guard stored == computed else { throw .checksumMismatch(offset: 0, stored: stored, computed: computed) }
        let version = Int(header.littleEndian(UInt16.self, at: 4))
        guard version >= 1, version <= kind.currentVersion else {
            throw .unsupportedVersion(offset: 4, found: version, supported: kind.currentVersion)
        }
        let flags = header.littleEndian(UInt32.self, at: 8)
        guard flags & ~sealedFlag == 0 else { throw .unknownFileFlags(offset: 8, flags: flags) }
        // The version fixes the header's length; the field lets a later version grow it.
        return (fileHeaderSize, version, flags & sealedFlag != 0)
    }

    /// Appends one framed record, its payload sealed with `seal` if given (for a record of a
    /// kind `isSealed`) at the file offset it lands on: `start`, the file offset of `bytes[0]`,
    /// plus where it goes in `bytes`. Refuses a payload the reader would refuse
    /// (`Limits.maxRecordPayloadBytes`, sealed), writing nothing.
    public static func appendRecord(
        _ kind: RecordKind, payload: [UInt8], to bytes: inout [UInt8], seal: RecordSeal? = nil, start: Int = 0
    ) throws(SessionFormatError) {
        let offset = start + bytes.count
        let stored =
            try seal.map { seal throws(SessionFormatError) in
                kind.isSealed ? try seal.seal(payload, kind: kind, at: offset) : payload
            } ?? payload
        guard stored.count <= Limits.maxRecordPayloadBytes else {
            throw .recordTooLarge(offset: offset, length: stored.count)
        }
        appendFrame(kind, payload: stored, to: &bytes)
        assert(
            bytes.count == offset - start + frameSize(payload: payload.count, kind: kind, sealed: seal != nil),
            "a frame is as long as frameSize says")
    }

    /// The size of the frame `appendRecord` makes of a payload of `count` bytes.
    public static func frameSize(payload count: Int, kind: RecordKind, sealed: Bool) -> Int {
        recordHeaderSize + count + (sealed && kind.isSealed ? RecordSeal.overhead : 0)
    }

    public static func record(_ kind: RecordKind, payload: [UInt8]) throws(SessionFormatError) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(recordHeaderSize + payload.count)
        try appendRecord(kind, payload: payload, to: &bytes)
        return bytes
    }

    /// Frames a payload already known to be within the limit (a commit's nine bytes).
    static func appendFrame(_ kind: RecordKind, payload: [UInt8], to bytes: inout [UInt8]) {
        assert(payload.count <= Limits.maxRecordPayloadBytes)
        // The header goes straight into `bytes`, no array of its own: a large save frames 1,000.
        let start = bytes.count
        bytes += recordMagic
        bytes.append(kind.rawValue)
        bytes.append(UInt8(frameVersion))
        bytes.appendLittleEndian(UInt32(payload.count))
        let crc = CRC32C.checksum(payload, continuing: CRC32C.checksum(bytes[start...]))
        bytes.appendLittleEndian(crc)
        assert(bytes.count - start == recordHeaderSize, "a record header is its fixed size")
        bytes += payload
    }

    /// Reads and checks the record at `offset`; returns its payload and the offset after it.
    /// With `seal`, a payload of a sealed kind is opened (authenticated) before it is returned.
    public static func readRecord(
        _ source: some ByteSource, at offset: Int, expecting kind: RecordKind, seal: RecordSeal? = nil
    ) throws(SessionFormatError) -> (payload: [UInt8], end: Int) {
        let read = try readRecord(source, at: offset, expecting: [kind], seal: seal)
        return (read.payload, read.end)
    }

    /// Reads and checks the record at `offset`, which may be of any kind in `kinds`.
    public static func readRecord(
        _ source: some ByteSource, at offset: Int, expecting kinds: Set<RecordKind>, seal: RecordSeal? = nil
    ) throws(SessionFormatError) -> (kind: RecordKind, payload: [UInt8], end: Int) {
        let header = try source.read(offset: offset, count: recordHeaderSize)
        guard Array(header[0..<2]) == recordMagic else { throw .badMagic(offset: offset) }
        let length = Int(header.littleEndian(UInt32.self, at: 4))
        // Checked before anything is allocated for it.
        guard length <= Limits.maxRecordPayloadBytes else { throw .recordTooLarge(offset: offset, length: length) }
        let payload = try source.read(offset: offset + recordHeaderSize, count: length)
        let stored = header.littleEndian(UInt32.self, at: 8)
        let computed = CRC32C.checksum(payload, continuing: CRC32C.checksum(header[0..<8]))
        guard stored == computed else {
            throw .checksumMismatch(offset: offset, stored: stored, computed: computed)
        }
        let version = Int(header[3])
        guard version == frameVersion else {
            throw .unsupportedVersion(offset: offset + 3, found: version, supported: frameVersion)
        }
        guard let kind = RecordKind(rawValue: header[2]), kinds.contains(kind) else {
            throw .unexpectedRecordKind(
                offset: offset, found: Int(header[2]), expected: Int(kinds.map(\.rawValue).min() ?? 0))
        }
        guard let seal, kind.isSealed else { return (kind, payload, offset + recordHeaderSize + length) }
        return (kind, try seal.open(payload, kind: kind, at: offset), offset + recordHeaderSize + length)
    }
}

extension Array where Element == UInt8 {
    mutating func appendLittleEndian<Value: FixedWidthInteger>(_ value: Value) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// A protobuf base-128 varint.
    mutating func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        append(UInt8(value))
    }
}

extension Collection where Element == UInt8, Index == Int {
    func littleEndian<Value: FixedWidthInteger>(_ type: Value.Type, at offset: Int) -> Value {
        var value = Value.zero
        for index in 0..<MemoryLayout<Value>.size {
            value |= Value(self[startIndex + offset + index]) << (8 * index)
        }
        return value
    }
}
