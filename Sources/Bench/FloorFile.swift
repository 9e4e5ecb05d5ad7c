import CLinuxShims
import Glibc
import Histogram
import IOUring
import Platform
import SystemPackage

/// The file the floor and the device measurements write into: written with zeros and synced
/// before anything is timed (space only `fallocate`d would make each first write of a block
/// convert an unwritten extent, a cost no journal in steady state pays), then opened for direct
/// I/O where the file system takes it. On tmpfs it stays buffered and says so (`method`).
final class FloorFile {
    let descriptor: FileDescriptor
    let size: Int
    /// The direct I/O alignment every write respects; nil when writes go through the page cache.
    let alignment: DirectIO.Alignment?
    /// Why writes go through the page cache (nil when they are direct).
    let refusal: DirectIO.Refusal?

    /// `path` created (or emptied) and pre-written to at least `size` bytes, a whole number of MiB.
    init(path: FilePath, size: Int) throws {
        self.size = (size + (1 << 20) - 1) & ~((1 << 20) - 1)
        let descriptor = try FileDescriptor.open(
            path, .readWrite, options: [.create, .truncate], permissions: [.ownerReadWrite])
        self.descriptor = descriptor
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        do {
            while offset < self.size {
                offset += try zeros.withUnsafeBytes { try descriptor.write(toAbsoluteOffset: Int64(offset), $0) }
            }
            guard fsync(descriptor.rawValue) == 0 else {
                throw BenchError.system("fsync \(path)", Errno(rawValue: errno))
            }
        } catch {
            try? descriptor.close()  // deinit does not run for an instance not yet whole
            throw error
        }
        switch DirectIO.alignment(of: descriptor) {
        case .success(let found):
            do throws(DirectIO.Refusal) {
                try DirectIO.enable(descriptor)
                (alignment, refusal) = (found, nil)
            } catch {
                (alignment, refusal) = (nil, error)
            }
        case .failure(let error): (alignment, refusal) = (nil, error)
        }
    }

    deinit { try? descriptor.close() }

    /// How the writes reach the disk, for the report.
    var method: String {
        if let alignment { return "O_DIRECT, \(alignment.block) B blocks" }
        return "buffered (\(refusal.map { "\($0)" } ?? "no direct I/O"))"
    }

    /// The smallest direct write: one block (one byte when buffered).
    var block: Int { alignment?.block ?? 1 }

    /// `bytes` in memory a direct write can take: aligned, padded with zeros to the block.
    func buffer(holding bytes: [UInt8]) throws -> AlignedBytes {
        do throws(Errno) {
            guard let alignment else { return try AlignedBytes(padding: bytes, to: Self.unaligned) }
            return try AlignedBytes(padding: bytes, to: alignment)
        } catch {
            throw BenchError.system("posix_memalign", error)
        }
    }

    /// One `pwritev2(RWF_DSYNC)` of `buffer` at `offset`, issued by the caller: durable when it returns.
    func writeDurably(_ buffer: AlignedBytes, at offset: Int) throws {
        guard wh_pwrite_dsync(descriptor.rawValue, buffer.base, buffer.count, off_t(offset)) == buffer.count else {
            throw BenchError.system("pwritev2(RWF_DSYNC)", Errno(rawValue: errno))
        }
    }

    /// A plain `pwrite`: with O_DIRECT it reaches the device (its volatile cache), not the platter.
    func write(_ buffer: AlignedBytes, at offset: Int) throws {
        guard pwrite(descriptor.rawValue, buffer.base, buffer.count, off_t(offset)) == buffer.count else {
            throw BenchError.system("pwrite", Errno(rawValue: errno))
        }
    }

    func flush() throws {
        guard fdatasync(descriptor.rawValue) == 0 else { throw BenchError.system("fdatasync", Errno(rawValue: errno)) }
    }

    /// Buffered writes need no alignment (a power of two for `AlignedBytes`, 1 for no padding).
    private static let unaligned =
        DirectIO.Alignment(memory: 16, block: 1) ?? { preconditionFailure("16 and 1 are powers of two") }()
}

/// The device's two parts of a durable write, measured in the same run as the saves: a direct
/// write of one block alone (into the device's cache), and a flush with nothing to write back.
public struct DeviceResult: Codable, Sendable, Equatable {
    public var writeP50: UInt64
    public var flushP50: UInt64
    /// How the floor's and these writes reach the disk: direct, or buffered and why.
    public var method: String

    public init(writeP50: UInt64, flushP50: UInt64, method: String) {
        self.writeP50 = writeP50
        self.flushP50 = flushP50
        self.method = method
    }

    enum CodingKeys: String, CodingKey {
        case method
        case writeP50 = "write_p50_us"
        case flushP50 = "flush_p50_us"
    }
}

public enum DeviceBench {
    /// `iterations` one-block writes at distinct offsets of a pre-written file, then (their data
    /// flushed once, untimed) `iterations` `fdatasync`s of the unchanged file.
    public static func run(iterations: Int, directory: FilePath) throws -> DeviceResult {
        let file = try FloorFile(path: directory.appending("device"), size: 1 << 20)
        let buffer = try file.buffer(holding: [UInt8](repeating: 0x5A, count: max(file.block, 512)))
        let slots = file.size / buffer.count
        var writes = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        for index in 0..<iterations {
            let start = monotonicNanoseconds()
            try file.write(buffer, at: (index % slots) * buffer.count)
            _ = writes.record(max(1, (monotonicNanoseconds() - start) / 1000))
        }
        try file.flush()
        var flushes = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        for _ in 0..<iterations {
            let start = monotonicNanoseconds()
            try file.flush()
            _ = flushes.record(max(1, (monotonicNanoseconds() - start) / 1000))
        }
        return DeviceResult(
            writeP50: writes.valueAtPercentile(50), flushP50: flushes.valueAtPercentile(50), method: file.method)
    }
}
