import Atomics
import CLinuxShims
import Glibc
import HostLimits
import SystemPackage

/// Why a slot's memory could not be created or attached.
public enum RegionError: Error, Equatable, CustomStringConvertible {
    case system(String, Errno)
    /// The descriptor maps something that is not a slot of this layout (another binary).
    case mismatch(String)

    public var description: String {
        switch self {
        case .system(let call, let errno): "\(call): \(errno)"
        case .mismatch(let reason): "shared memory refused: \(reason)"
        }
    }
}

/// One window slot's shared memory: its own anonymous memfd holding a small header, then the
/// slot (docs/shared-memory.md). The supervisor creates one per slot and hands a worker only its
/// own, as descriptor 3: a worker can reach no other window's memory, whatever it writes.
///
/// The memfd's size is sealed (`F_SEAL_GROW | F_SEAL_SHRINK`, then `F_SEAL_SEAL`): a worker
/// holds a descriptor it could `ftruncate`, and a shrunk file would make the supervisor's
/// reads of the mapping fault (SIGBUS) instead of reading bytes it does not trust.
public final class SlotMemory: @unchecked Sendable {
    /// The bytes "WNDWHOST": a mapping that does not start with them is not a slot.
    public static let magic: UInt64 = 0x5453_4F48_5744_4E57
    /// Bumped on any change of layout: a worker of another version refuses to attach.
    /// 2: one memfd per slot (1 was one region holding every slot).
    /// 4: the stats hold the first memory-only seq.
    /// 5: a reply longer than a reply-ring message comes in parts (`ReplyParts`).
    public static let layoutVersion: UInt32 = 5
    public static let headerSize = 4096
    /// Everything in the memfd: the header, then the slot.
    public static let size = headerSize + WindowSlot.size

    /// The header's variable fields; the rest are this binary's constants.
    struct Header {
        let index: UInt32
        let supervisorPID: Int32

        func write(at base: UnsafeMutableRawPointer) {
            base.storeBytes(of: SlotMemory.magic, toByteOffset: HeaderOffset.magic, as: UInt64.self)
            base.storeBytes(of: SlotMemory.layoutVersion, toByteOffset: HeaderOffset.version, as: UInt32.self)
            base.storeBytes(of: UInt32(SlotMemory.headerSize), toByteOffset: HeaderOffset.headerSize, as: UInt32.self)
            base.storeBytes(of: UInt64(WindowSlot.size), toByteOffset: HeaderOffset.slotSize, as: UInt64.self)
            base.storeBytes(of: index, toByteOffset: HeaderOffset.slotIndex, as: UInt32.self)
            base.storeBytes(of: supervisorPID, toByteOffset: HeaderOffset.supervisorPID, as: Int32.self)
            base.storeBytes(of: UInt64(SlotMemory.size), toByteOffset: HeaderOffset.totalSize, as: UInt64.self)
        }
    }

    public let descriptor: FileDescriptor
    /// Which of the supervisor's slots this is, as the supervisor wrote it at creation.
    public let index: Int
    /// The pid of the supervisor that created it, as written at creation.
    public let supervisorPID: Int32
    public let slot: WindowSlot
    let base: UnsafeMutableRawPointer

    /// A new, free slot numbered `index` (supervisor).
    public init(index: Int, supervisorPID: Int32) throws(RegionError) {
        let fd = wh_memfd_create_sealable("windowhost-slot-\(index)")
        guard fd >= 0 else { throw .system("memfd_create", Errno(rawValue: errno)) }
        func fail(_ call: String) -> RegionError {
            let error = Errno(rawValue: errno)
            close(fd)
            return .system(call, error)
        }
        guard ftruncate(fd, off_t(Self.size)) == 0 else { throw fail("ftruncate") }
        guard wh_memfd_seal_size(fd) == 0 else { throw fail("F_ADD_SEALS") }
        // A memfd is created 0777; only its holders can reach it, but say 0600.
        guard fchmod(fd, 0o600) == 0 else { throw fail("fchmod") }
        let base: UnsafeMutableRawPointer
        do {
            base = try Self.map(fd)
        } catch {
            close(fd)
            throw error
        }
        let header = Header(index: UInt32(index), supervisorPID: supervisorPID)
        header.write(at: base)
        descriptor = FileDescriptor(rawValue: fd)
        self.index = index
        self.supervisorPID = supervisorPID
        self.base = base
        slot = WindowSlot(base + Self.headerSize, header: header)
    }

    /// Attaches to the slot behind `descriptor` (worker), refusing one of another layout. The
    /// header is read once, here: the supervisor never reads it back.
    public init(attaching descriptor: FileDescriptor) throws(RegionError) {
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else { throw .system("fstat", Errno(rawValue: errno)) }
        // Mapped only at this binary's size: a file of any other size is refused unread.
        guard status.st_size == off_t(Self.size) else {
            throw .mismatch("\(status.st_size) bytes, not this binary's slot of \(Self.size) (header and slot)")
        }
        let base = try Self.map(descriptor.rawValue)
        func refuse(_ reason: String) -> RegionError {
            munmap(base, Self.size)
            return .mismatch(reason)
        }
        let magic = base.load(fromByteOffset: HeaderOffset.magic, as: UInt64.self)
        guard magic == Self.magic else { throw refuse("magic \(String(magic, radix: 16)), not a windowhost slot") }
        let version = base.load(fromByteOffset: HeaderOffset.version, as: UInt32.self)
        guard version == Self.layoutVersion else {
            throw refuse("layout version \(version), this binary reads \(Self.layoutVersion)")
        }
        let headerSize = base.load(fromByteOffset: HeaderOffset.headerSize, as: UInt32.self)
        let slotSize = base.load(fromByteOffset: HeaderOffset.slotSize, as: UInt64.self)
        let recorded = base.load(fromByteOffset: HeaderOffset.totalSize, as: UInt64.self)
        guard headerSize == Self.headerSize, slotSize == WindowSlot.size, recorded == Self.size else {
            throw refuse(
                "header \(headerSize) + slot \(slotSize) in \(recorded) bytes, not this binary's \(Self.headerSize) + \(WindowSlot.size)"
            )
        }
        let header = Header(
            index: base.load(fromByteOffset: HeaderOffset.slotIndex, as: UInt32.self),
            supervisorPID: base.load(fromByteOffset: HeaderOffset.supervisorPID, as: Int32.self))
        self.descriptor = descriptor
        index = Int(header.index)
        supervisorPID = header.supervisorPID
        self.base = base
        slot = WindowSlot(base + Self.headerSize, header: header)
    }

    private static func map(_ fd: Int32) throws(RegionError) -> UnsafeMutableRawPointer {
        guard let pointer = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), pointer != MAP_FAILED else {
            throw .system("mmap", Errno(rawValue: errno))
        }
        return pointer
    }

    deinit {
        munmap(base, Self.size)
        try? descriptor.close()
    }
}

/// The supervisor's slots: one `SlotMemory` each, created up front (`run --capacity`). Only the
/// supervisor holds them all; `descriptor(ofSlot:)` is what one worker inherits.
public final class SharedRegion: @unchecked Sendable {

    private let slots: [SlotMemory]

    /// `slotCount` new, free slots (supervisor).
    public init(slotCount: Int, supervisorPID: Int32) throws(RegionError) {
        precondition((1...Limits.maxOpenWindows).contains(slotCount), "slot count within 1...\(Limits.maxOpenWindows)")
        var slots: [SlotMemory] = []
        for index in 0..<slotCount { slots.append(try SlotMemory(index: index, supervisorPID: supervisorPID)) }
        self.slots = slots
    }

    public var slotCount: Int { slots.count }

    public func slot(_ index: Int) -> WindowSlot {
        precondition(index >= 0 && index < slotCount, "slot \(index) of \(slotCount)")
        return slots[index].slot
    }

    /// The memfd of slot `index` alone: what its worker inherits as descriptor 3.
    public func descriptor(ofSlot index: Int) -> FileDescriptor {
        precondition(index >= 0 && index < slotCount, "slot \(index) of \(slotCount)")
        return slots[index].descriptor
    }
}
