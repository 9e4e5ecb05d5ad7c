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

/// What a ring may be set up with, and given, beyond a plain one: what the io_uring maintainers
/// advise for a ring one thread both submits to and reaps from. `UringEngine` asks for all of
/// it and does without what the kernel refuses; tests ask for less, to run each such fallback.
public struct RingFeatures: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `IORING_SETUP_COOP_TASKRUN` with `IORING_SETUP_TASKRUN_FLAG` (Linux 5.19): a completion
    /// no longer interrupts the task with an IPI; its task work runs at the task's next system
    /// call. A task asleep in poll(2) is still woken for it, so the ring's descriptor keeps
    /// polling readable once a completion is ready.
    public static let cooperativeTaskRun = RingFeatures(rawValue: UInt32(WH_RING_COOPERATIVE.rawValue))
    /// `IORING_SETUP_SINGLE_ISSUER` (Linux 6.0): only the thread that set the ring up submits
    /// to it (another gets `EEXIST`), which spares the kernel its locking.
    public static let singleIssuer = RingFeatures(rawValue: UInt32(WH_RING_SINGLE_ISSUER.rawValue))
    /// Buffers registered once (`io_uring_register_buffers`) and written from with
    /// `IORING_OP_WRITE_FIXED`: the kernel pins them once, not per write.
    public static let registeredBuffers = RingFeatures(rawValue: 1 << 8)

    /// The ones chosen at setup (`io_uring_setup` flags).
    public static let setup: RingFeatures = [.cooperativeTaskRun, .singleIssuer]
    public static let all: RingFeatures = [.cooperativeTaskRun, .singleIssuer, .registeredBuffers]

    public var description: String {
        var names: [String] = []
        if contains(.cooperativeTaskRun) { names.append("COOP_TASKRUN") }
        if contains(.singleIssuer) { names.append("SINGLE_ISSUER") }
        if contains(.registeredBuffers) { names.append("registered buffers") }
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }
}

/// An io_uring instance: the caller queues entries, submits once per turn of its loop, and
/// collects completions by `userData`.
///
/// Not thread-safe by design: one ring belongs to one event loop, on the thread that made it
/// (with `.singleIssuer` the kernel holds it to that). A buffer passed to `prepareWrite` must
/// stay valid until its completion has been collected.
public final class Ring {
    private let handle: OpaquePointer
    /// Completions taken off the ring while making room (full queue, `EBUSY`), not yet handed out.
    private var pending: [Completion] = []
    /// The setup features the kernel took of those asked for.
    public let setup: RingFeatures
    /// The memory registered as fixed buffers: kept until the ring is gone (freed after
    /// `deinit` has torn the ring down, which unregisters it).
    private var registered: RegisteredBuffers?

    /// A ring with `entries` slots, set up with those of `features`' setup flags the kernel
    /// takes (`setup` says which).
    public init(entries: UInt32 = 64, features: RingFeatures = .setup) throws(IOUringError) {
        var handle: OpaquePointer?
        var granted: UInt32 = 0
        let result = wh_ring_create(entries, features.intersection(.setup).rawValue, &handle, &granted)
        guard result == 0, let handle else {
            throw IOUringError(setupErrno: Errno(rawValue: -result))
        }
        self.handle = handle
        setup = RingFeatures(rawValue: granted)
    }

    deinit { wh_ring_destroy(handle) }

    /// The ring's descriptor: poll(2) reports it readable once a completion is ready, so an
    /// event loop can wait for completions and other descriptors at once. (Not so with
    /// `IORING_SETUP_DEFER_TASKRUN`, whose completions wait for the next `io_uring_enter` and
    /// wake no poller: why the ring is not set up with it, see docs/benchmarks.md.)
    public var descriptor: Int32 { wh_ring_fd(handle) }

    /// Registers `buffers` as the ring's fixed buffers, once: writes from them then name their
    /// index (`prepareWrite`'s `fixedBuffer`). The kernel's errno when it refuses.
    public func register(_ buffers: RegisteredBuffers) throws(Errno) {
        precondition(registered == nil, "one set of buffers per ring")
        let result = wh_ring_register_buffers(handle, buffers.memory.base, buffers.bufferBytes, UInt32(buffers.count))
        guard result == 0 else { throw Errno(rawValue: -result) }
        registered = buffers
    }

    public enum Operation: String, Sendable, CaseIterable {
        case write, fsync, writeFixed

        var shimValue: wh_ring_op {
            switch self {
            case .write: WH_OP_WRITE
            case .fsync: WH_OP_FSYNC
            case .writeFixed: WH_OP_WRITE_FIXED
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
    /// `fixedBuffer`: the index of the registered buffer `buffer` lies in.
    public func prepareWrite(
        fd: FileDescriptor, buffer: UnsafeRawBufferPointer, offset: UInt64, userData: UInt64,
        dsync: Bool = false, fixedBuffer: Int? = nil
    ) throws(IOUringError) {
        if let fixedBuffer, let registered {
            assert(registered.contains(buffer, in: fixedBuffer), "a fixed write lies inside its registered buffer")
        }
        try withFreeSlot { handle in
            wh_ring_prep_write(
                handle, fd.rawValue, buffer.baseAddress, UInt32(buffer.count), offset, userData,
                dsync ? 1 : 0, Int32(fixedBuffer ?? -1))
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

    /// Submits everything queued and waits until at least `waitFor` completions are ready
    /// (none when some are already in hand).
    /// Returns how many entries the kernel took. Retries `EINTR`; on `EAGAIN`/`EBUSY` (the
    /// completion queue is short of room) it collects what has completed and tries again.
    @discardableResult
    public func submit(waitFor: UInt32 = 0) throws(IOUringError) -> Int {
        // Completions in hand (taken off while making room): waiting for another could outlast
        // every write in flight.
        var waitFor = pending.isEmpty ? waitFor : 0
        while true {
            let result = wh_ring_submit_and_wait(handle, waitFor)
            if result >= 0 { return Int(result) }
            let errno = Errno(rawValue: -result)
            switch errno {
            case .interrupted:
                continue
            case .resourceTemporarilyUnavailable, .resourceBusy:
                collectReady()
                if !pending.isEmpty { waitFor = 0 }
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

    /// Submits everything queued and blocks until at least one completion is ready, in one
    /// `io_uring_enter`, then returns all that are.
    public func submitAndWait() throws(IOUringError) -> [Completion] {
        collectReady()
        while pending.isEmpty {
            try submit(waitFor: 1)
            collectReady()
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
