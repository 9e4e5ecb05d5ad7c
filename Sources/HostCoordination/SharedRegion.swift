import Atomics
import CLinuxShims
import Glibc
import SystemPackage

/// Why a region could not be created or attached.
public enum RegionError: Error, Equatable, CustomStringConvertible {
    case system(String, Errno)
    /// The descriptor maps something that is not a region of this layout (another binary).
    case mismatch(String)

    public var description: String {
        switch self {
        case .system(let call, let errno): "\(call): \(errno)"
        case .mismatch(let reason): "shared memory region refused: \(reason)"
        }
    }
}

/// The shared memory region: a header, then one slot per window (docs/shared-memory.md).
/// The supervisor creates it as an anonymous memfd (nothing in /dev/shm, gone with the last
/// process that maps it) and hands it to each worker as descriptor 3. Only the supervisor and
/// its workers hold the descriptor, all running as one user.
public final class SharedRegion: @unchecked Sendable {
    /// The bytes "WNDWHOST": a mapping that does not start with them is not a region.
    public static let magic: UInt64 = 0x5453_4F48_5744_4E57
    /// Bumped on any change of layout: a worker of another version refuses to attach.
    public static let layoutVersion: UInt32 = 1
    public static let headerSize = 4096
    public static let maximumSlots = 64

    public let descriptor: FileDescriptor
    public let slotCount: Int
    let base: UnsafeMutableRawPointer
    let size: Int

    /// A new region of `slotCount` free slots (supervisor).
    public init(slotCount: Int, supervisorPID: Int32) throws(RegionError) {
        precondition((1...Self.maximumSlots).contains(slotCount), "slot count within 1...\(Self.maximumSlots)")
        let fd = wh_memfd_create("windowhost-region")
        guard fd >= 0 else { throw .system("memfd_create", Errno(rawValue: errno)) }
        let size = Self.headerSize + slotCount * WindowSlot.size
        guard ftruncate(fd, off_t(size)) == 0 else {
            let error = Errno(rawValue: errno)
            close(fd)
            throw .system("ftruncate", error)
        }
        // A memfd is created 0777 minus nothing; only its holders can reach it, but say 0600.
        fchmod(fd, 0o600)
        descriptor = FileDescriptor(rawValue: fd)
        self.slotCount = slotCount
        self.size = size
        base = try Self.map(fd, size: size)
        base.storeBytes(of: Self.magic, toByteOffset: 0, as: UInt64.self)
        base.storeBytes(of: Self.layoutVersion, toByteOffset: 8, as: UInt32.self)
        base.storeBytes(of: UInt32(Self.headerSize), toByteOffset: 12, as: UInt32.self)
        base.storeBytes(of: UInt64(WindowSlot.size), toByteOffset: 16, as: UInt64.self)
        base.storeBytes(of: UInt32(slotCount), toByteOffset: 24, as: UInt32.self)
        base.storeBytes(of: supervisorPID, toByteOffset: 28, as: Int32.self)
        base.storeBytes(of: UInt64(size), toByteOffset: 32, as: UInt64.self)
    }

    /// Attaches to the region behind `descriptor` (worker), refusing one of another layout.
    public init(attaching descriptor: FileDescriptor) throws(RegionError) {
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else { throw .system("fstat", Errno(rawValue: errno)) }
        let size = Int(status.st_size)
        guard size >= Self.headerSize else { throw .mismatch("\(size) bytes, less than a header") }
        let base = try Self.map(descriptor.rawValue, size: size)
        func refuse(_ reason: String) -> RegionError {
            munmap(base, size)
            return .mismatch(reason)
        }
        let magic = base.load(fromByteOffset: 0, as: UInt64.self)
        guard magic == Self.magic else { throw refuse("magic \(String(magic, radix: 16)), not a windowhost region") }
        let version = base.load(fromByteOffset: 8, as: UInt32.self)
        guard version == Self.layoutVersion else {
            throw refuse("layout version \(version), this binary reads \(Self.layoutVersion)")
        }
        let slotSize = base.load(fromByteOffset: 16, as: UInt64.self)
        let slotCount = Int(base.load(fromByteOffset: 24, as: UInt32.self))
        let recorded = base.load(fromByteOffset: 32, as: UInt64.self)
        guard slotSize == WindowSlot.size, recorded == size, size == Self.headerSize + slotCount * WindowSlot.size else {
            throw refuse("slot size \(slotSize) × \(slotCount) in \(size) bytes does not match this binary's \(WindowSlot.size)")
        }
        self.descriptor = descriptor
        self.slotCount = slotCount
        self.size = size
        self.base = base
    }

    private static func map(_ fd: Int32, size: Int) throws(RegionError) -> UnsafeMutableRawPointer {
        guard let pointer = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), pointer != MAP_FAILED else {
            throw .system("mmap", Errno(rawValue: errno))
        }
        return pointer
    }

    deinit {
        munmap(base, size)
        try? descriptor.close()
    }

    /// The pid of the supervisor that created the region.
    public var supervisorPID: Int32 { base.load(fromByteOffset: 28, as: Int32.self) }

    public func slot(_ index: Int) -> WindowSlot {
        precondition(index >= 0 && index < slotCount, "slot \(index) of \(slotCount)")
        return WindowSlot(base + Self.headerSize + index * WindowSlot.size)
    }
}
