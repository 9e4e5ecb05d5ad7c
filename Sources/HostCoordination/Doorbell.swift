import CLinuxShims
import Glibc
import SystemPackage

/// An eventfd one side rings after publishing into a ring and the other waits on with poll(2),
/// together with whatever else it waits for (io_uring completions, sockets, pidfds).
public struct Doorbell: Sendable {
    public let descriptor: FileDescriptor

    /// A new, non-blocking eventfd.
    public init() throws(RegionError) {
        let fd = wh_eventfd()
        guard fd >= 0 else { throw .system("eventfd", Errno(rawValue: errno)) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// One inherited at a known descriptor number.
    public init(descriptor: FileDescriptor) { self.descriptor = descriptor }

    public func ring() {
        var one: UInt64 = 1
        // EAGAIN only if the counter is near overflow: then it is rung already. Nothing else
        // fails on a non-blocking eventfd of ours with 8 bytes (EBADF would be a bug).
        let written = write(descriptor.rawValue, &one, 8)
        assert(written == 8 || errno == EAGAIN, "doorbell \(descriptor.rawValue): \(Errno(rawValue: errno))")
    }

    /// Clears the bell; true if it had been rung. Drain the rings after, never before.
    @discardableResult
    public func clear() -> Bool {
        var count: UInt64 = 0
        return read(descriptor.rawValue, &count, 8) == 8
    }

    public func close() { try? descriptor.close() }
}
