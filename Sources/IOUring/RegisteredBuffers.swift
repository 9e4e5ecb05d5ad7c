import HostLimits
import SystemPackage

/// A pool of equal buffers in one page-aligned region, registered with a ring once and reused
/// write after write (`IORING_OP_WRITE_FIXED`): no allocation and no pinning per write. A
/// buffer taken stays out of the pool until the write from it has completed.
public final class RegisteredBuffers {
    /// Each buffer's address is a multiple of this: enough for any direct write whose memory
    /// alignment is no larger.
    public static let alignment = 4096

    let memory: AlignedBytes
    public let bufferBytes: Int
    public let count: Int
    private var free: [Int]

    /// `count` buffers of `bufferBytes` (a multiple of `alignment`) each; ENOMEM when there is no room.
    public init(count: Int = Limits.ringRegisteredBuffers, bufferBytes: Int = Limits.ringRegisteredBufferBytes)
        throws(Errno)
    {
        precondition(
            count > 0 && bufferBytes > 0 && bufferBytes % Self.alignment == 0, "whole pages, at least one buffer")
        memory = try AlignedBytes(count: count * bufferBytes, alignment: Self.alignment)
        self.bufferBytes = bufferBytes
        self.count = count
        free = Array((0..<count).reversed())
    }

    /// A free buffer's index, or nil when every one is in use.
    func take() -> Int? { free.popLast() }

    /// Returns a buffer taken with `take`, once nothing is written from it any more.
    func giveBack(_ index: Int) {
        assert(index >= 0 && index < count && !free.contains(index), "a buffer given back once")
        free.append(index)
    }

    /// The memory of buffer `index`.
    func buffer(_ index: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: memory.base + index * bufferBytes, count: bufferBytes)
    }

    /// Whether `bytes` lies inside buffer `index`.
    func contains(_ bytes: UnsafeRawBufferPointer, in index: Int) -> Bool {
        guard let start = bytes.baseAddress, index >= 0, index < count else { return false }
        let first = UnsafeRawPointer(memory.base + index * bufferBytes)
        return start >= first && start + bytes.count <= first + bufferBytes
    }

    /// Buffers not in use now.
    public var freeCount: Int { free.count }
}
