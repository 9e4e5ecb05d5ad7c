import CLinuxShims
import SystemPackage

/// One finished operation: the `userData` it was submitted with and the kernel's result
/// (bytes transferred, 0, or a negative errno).
public struct Completion: Equatable, Sendable {
    public let userData: UInt64
    public let result: Int32

    public init(userData: UInt64, result: Int32) {
        self.userData = userData
        self.result = result
    }

    /// The errno of a failed operation, nil when it succeeded.
    public var error: Errno? { result < 0 ? Errno(rawValue: -result) : nil }
}

/// An io_uring instance: the caller queues entries, submits once per turn of its loop, and
/// collects completions by `userData`.
///
/// Not thread-safe by design: one ring belongs to one event loop. A buffer passed to
/// `prepareWrite` must stay valid until its completion has been collected.
public final class Ring {
    private let handle: OpaquePointer
    /// Completions taken off the ring while making room (full queue, `EBUSY`), not yet handed out.
    private var pending: [Completion] = []

    public init(entries: UInt32 = 64) throws(IOUringError) {
        var handle: OpaquePointer?
        let result = wh_ring_create(entries, &handle)
        guard result == 0, let handle else {
            throw IOUringError(setupErrno: Errno(rawValue: -result))
        }
        self.handle = handle
    }

    deinit { wh_ring_destroy(handle) }

    /// The ring's descriptor: poll(2) reports it readable once a completion is ready, so an
    /// event loop can wait for completions and other descriptors at once.
    public var descriptor: Int32 { wh_ring_fd(handle) }

    public enum Operation: String, Sendable, CaseIterable {
        case write, fsync

        var shimValue: wh_ring_op {
            switch self {
            case .write: WH_OP_WRITE
            case .fsync: WH_OP_FSYNC
            }
        }
    }

    /// Asks the kernel whether it implements `operation`.
    public func supports(_ operation: Operation) -> Bool {
        wh_ring_supports(handle, operation.shimValue) == 1
    }

    /// Throws `.operationUnsupported` unless the kernel implements every operation listed.
    public func require(_ operations: [Operation]) throws(IOUringError) {
        for operation in operations where !supports(operation) {
            throw .operationUnsupported(operation.rawValue)
        }
    }

    /// Queues a write of `buffer` at `offset`; with `dsync` it completes only once durable.
    public func prepareWrite(
        fd: FileDescriptor, buffer: UnsafeRawBufferPointer, offset: UInt64, userData: UInt64,
        dsync: Bool = false
    ) throws(IOUringError) {
        try withFreeSlot { handle in
            wh_ring_prep_write(
                handle, fd.rawValue, buffer.baseAddress, UInt32(buffer.count), offset, userData,
                dsync ? 1 : 0)
        }
    }

    /// Queues an fsync of `fd`; `dataOnly` makes it an fdatasync.
    public func prepareFsync(
        fd: FileDescriptor, dataOnly: Bool = true, userData: UInt64
    ) throws(IOUringError) {
        try withFreeSlot { handle in
            wh_ring_prep_fsync(handle, fd.rawValue, dataOnly ? 1 : 0, userData)
        }
    }

    /// Submits everything queued and waits until at least `waitFor` completions are ready.
    /// Returns how many entries the kernel took. Retries `EINTR`; on `EAGAIN`/`EBUSY` (the
    /// completion queue is short of room) it collects what has completed and tries again.
    @discardableResult
    public func submit(waitFor: UInt32 = 0) throws(IOUringError) -> Int {
        while true {
            let result = wh_ring_submit_and_wait(handle, waitFor)
            if result >= 0 { return Int(result) }
            let errno = Errno(rawValue: -result)
            switch errno {
            case .interrupted:
                continue
            case .resourceTemporarilyUnavailable, .resourceBusy:
                collectReady()
            default:
                throw .submitFailed(errno)
            }
        }
    }

    /// Every completion that is ready now, without blocking.
    public func completions() -> [Completion] {
        collectReady()
        defer { pending.removeAll(keepingCapacity: true) }
        return pending
    }

    /// Blocks until at least one completion is ready, then returns all that are.
    public func waitCompletions() throws(IOUringError) -> [Completion] {
        while pending.isEmpty {
            let result = wh_ring_wait(handle)
            if result == 0 { break }
            let errno = Errno(rawValue: -result)
            guard errno == .interrupted else { throw .waitFailed(errno) }
        }
        return completions()
    }

    private func collectReady() {
        var userData: UInt64 = 0
        var result: Int32 = 0
        while wh_ring_pop(handle, &userData, &result) == 0 {
            pending.append(Completion(userData: userData, result: result))
        }
    }

    /// Runs `prepare` on a free slot; when the queue is full, submits what is queued first.
    private func withFreeSlot(_ prepare: (OpaquePointer) -> Int32) throws(IOUringError) {
        if prepare(handle) == 0 { return }
        try submit()
        guard prepare(handle) == 0 else { throw .submitFailed(.resourceBusy) }
    }
}
