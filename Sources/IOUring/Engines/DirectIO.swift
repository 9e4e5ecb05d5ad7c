import CLinuxShims
import Glibc
import SystemPackage

/// Writes that bypass the page cache (`O_DIRECT`): what a file needs for them, and why a file
/// does without. A direct write into space already written completes in the kernel's submitting
/// context, where a buffered `RWF_DSYNC` write is always handed to an io-wq thread (ext4 declares
/// no asynchronous buffered writes): the difference that lets a ring beat a blocking call.
public enum DirectIO {
    /// What every direct write to a file respects: its buffer's address a multiple of `memory`,
    /// its offset and length multiples of `block`.
    public struct Alignment: Sendable, Equatable, CustomStringConvertible {
        public let memory: Int
        public let block: Int

        /// Both are powers of two up to 64 KiB: numbers from the kernel or sysfs are checked
        /// before anything is sized by them.
        public init?(memory: Int, block: Int) {
            guard Self.isPlausible(memory), Self.isPlausible(block) else { return nil }
            self.memory = memory
            self.block = block
        }

        /// Where an aligned write ends that holds `count` bytes from `offset` (a block boundary):
        /// the next block boundary at or past them. Nil when it would pass `Int.max`.
        public func paddedEnd(of count: Int, from offset: Int) -> Int? {
            let (end, overflow) = offset.addingReportingOverflow(count)
            guard !overflow, end >= 0 else { return nil }
            let remainder = end % block
            if remainder == 0 { return end }
            let (padded, paddingOverflow) = end.addingReportingOverflow(block - remainder)
            return paddingOverflow ? nil : padded
        }

        public var description: String { "memory \(memory) B, offset and length \(block) B" }

        private static func isPlausible(_ value: Int) -> Bool {
            value > 0 && value <= 1 << 16 && value & (value - 1) == 0
        }
    }

    /// Why a file's writes go through the page cache instead.
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// The file lives in memory (tmpfs). Kernels from 6.6 accept `O_DIRECT` there but report
        /// no alignment, and a "direct" write is a memory copy like any other.
        case inMemory
        /// The kernel reported no alignment (`STATX_DIOALIGN`, from 6.1) and the device's
        /// logical block size could not be read.
        case noAlignment
        /// `statx`, `fstatfs` or `fcntl(F_SETFL, O_DIRECT)` failed (`EINVAL`: the file
        /// system takes no direct I/O).
        case failed(String, Errno)

        public var description: String {
            switch self {
            case .inMemory: "the file system is in memory (tmpfs)"
            case .noAlignment:
                "the kernel reports no direct I/O alignment and the device's logical block size is unknown"
            case .failed(let call, let errno): "\(call): \(errno)"
            }
        }
    }

    /// tmpfs's `statfs` type.
    public static let tmpfsMagic: Int64 = 0x0102_1994

    /// Whether `path` is on tmpfs: nothing written there reaches a disk.
    public static func isInMemory(_ path: FilePath) -> Bool { wh_filesystem_type(path.string) == tmpfsMagic }

    /// The alignment direct writes to `fd` need: the kernel's `STATX_DIOALIGN` where it reports
    /// one, else the logical block size of the file's device (sysfs) for both.
    public static func alignment(of fd: FileDescriptor) -> Result<Alignment, Refusal> {
        var geometry = wh_direct_io_geometry()
        guard wh_direct_io_geometry_of(fd.rawValue, &geometry) == 0 else {
            return .failure(.failed("statx", Errno(rawValue: errno)))
        }
        if geometry.fs_type == tmpfsMagic { return .failure(.inMemory) }
        if geometry.memory_align > 0, geometry.offset_align > 0 {
            return Alignment(memory: Int(geometry.memory_align), block: Int(geometry.offset_align)).map { .success($0) }
                ?? .failure(.noAlignment)
        }
        guard let logical = logicalBlockSize(major: geometry.dev_major, minor: geometry.dev_minor),
            let alignment = Alignment(memory: logical, block: logical)
        else { return .failure(.noAlignment) }
        return .success(alignment)
    }

    /// Turns on `O_DIRECT` for an open file.
    public static func enable(_ fd: FileDescriptor) throws(Refusal) {
        let flags = fcntl(fd.rawValue, F_GETFL)
        guard flags >= 0 else { throw .failed("fcntl(F_GETFL)", Errno(rawValue: errno)) }
        guard fcntl(fd.rawValue, F_SETFL, flags | wh_open_flag_direct()) == 0 else {
            throw .failed("fcntl(F_SETFL, O_DIRECT)", Errno(rawValue: errno))
        }
    }

    /// `queue/logical_block_size` of the device, or of the whole disk for a partition.
    private static func logicalBlockSize(major: UInt32, minor: UInt32) -> Int? {
        for path in [
            "/sys/dev/block/\(major):\(minor)/queue/logical_block_size",
            "/sys/dev/block/\(major):\(minor)/../queue/logical_block_size",
        ] {
            guard let fd = try? FileDescriptor.open(path, .readOnly) else { continue }
            defer { try? fd.close() }
            var buffer = [UInt8](repeating: 0, count: 32)
            guard let count = try? buffer.withUnsafeMutableBytes({ try fd.read(into: $0) }), count > 0 else { continue }
            let digits = buffer[..<count].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            if let value = Int(String(decoding: digits, as: UTF8.self)) { return value }
        }
        return nil
    }
}

/// Zero-filled memory at an address aligned for direct I/O, freed with its owner. A write from
/// it must not be in flight when it goes: its owner keeps it until the write completes.
public final class AlignedBytes {
    public let base: UnsafeMutableRawPointer
    public let count: Int

    /// `count` bytes at a multiple of `alignment` (a power of two); ENOMEM when there is no room.
    public init(count: Int, alignment: Int) throws(Errno) {
        precondition(
            count >= 0 && alignment > 0 && alignment & (alignment - 1) == 0, "a count and a power-of-two alignment")
        var memory: UnsafeMutableRawPointer?
        let result = posix_memalign(&memory, max(alignment, MemoryLayout<UnsafeRawPointer>.size), max(count, 1))
        guard result == 0, let memory else { throw Errno(rawValue: result == 0 ? ENOMEM : result) }
        memset(memory, 0, max(count, 1))
        base = memory
        self.count = count
    }

    /// A copy of `bytes` at a multiple of `alignment`, followed by zeros to `count` (at least
    /// as many as `bytes`).
    public convenience init(copying bytes: [UInt8], count: Int, alignment: Int) throws(Errno) {
        precondition(count >= bytes.count, "room for the bytes copied")
        try self.init(count: count, alignment: alignment)
        bytes.withUnsafeBytes { source in
            if let start = source.baseAddress { base.copyMemory(from: start, byteCount: source.count) }
        }
    }

    /// A copy of `bytes`, followed by zeros to the next multiple of `alignment.block`.
    public convenience init(padding bytes: [UInt8], to alignment: DirectIO.Alignment) throws(Errno) {
        guard let end = alignment.paddedEnd(of: bytes.count, from: 0) else { throw .fileTooLarge }
        try self.init(copying: bytes, count: end, alignment: max(alignment.memory, alignment.block))
    }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    deinit { free(base) }
}
