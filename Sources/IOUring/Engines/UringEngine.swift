import HostLimits
import SystemPackage

/// io_uring behind the engine protocol. Everything queued between two `flush` calls goes to
/// the kernel in one `io_uring_enter`; completions advance each chain one step, resubmit the
/// rest of a short write, and go back in the next single submit.
///
/// A chain keeps one entry in flight at a time instead of IOSQE_IO_LINK: a short write breaks a
/// link (the rest complete `-ECANCELED`), and resuming it is simpler when nothing follows it in
/// the kernel. Chains are only used where the extra step costs microseconds against a
/// flush's milliseconds (snapshot write → fdatasync); a save is one durable write.
public final class UringEngine: RealFileEngine {
    public let name = "uring"
    var files = RealFiles()
    private let ring: Ring
    public var completionDescriptor: Int32? { ring.descriptor }
    private var tickets = TicketCounter()
    private var queued: [IOTicket] = []
    private var chains: [IOTicket: ChainState] = [:]
    private var finished: [IOCompletion] = []
    /// Entries prepared and not yet handed to the kernel.
    private var unsubmitted = 0

    /// The buffers registered with the ring, nil where the kernel refused them (or they were
    /// not asked for).
    let pool: RegisteredBuffers?
    /// What the kernel refused of the features asked for, and why: the engine runs without
    /// them. Said once by whoever made the engine (`windowhost` on stderr, a worker in its log).
    public let refusals: [String]
    /// The features the ring runs with.
    public var features: RingFeatures { pool == nil ? ring.setup : ring.setup.union(.registeredBuffers) }

    /// A chain's progress: the step running, and for a write the bytes the kernel writes from
    /// (kept until it has finished with them; aligned for a direct file) and how many are
    /// written.
    private struct ChainState {
        let operations: [IOOperation]
        var step = 0
        var buffer: WriteBuffer?
        var written = 0
    }

    /// Where a write's bytes are while the kernel writes them.
    private enum WriteBuffer {
        /// A registered buffer, by index: copied into, nothing allocated or pinned.
        case registered(Int, UnsafeMutableRawBufferPointer)
        /// A private copy: the write is larger than a registered buffer, none is free, or
        /// the ring has none.
        case copied(AlignedBytes)
    }

    /// Sets up a ring with `features` (every one by default; tests ask for fewer), doing
    /// without those the kernel refuses, and checks that it implements what the store needs.
    public init(entries: UInt32 = Limits.ringEntries, features: RingFeatures = .all) throws(IOUringError) {
        ring = try Ring(entries: entries, features: features)
        try ring.require([.write, .fsync])
        var refusals: [String] = []
        let refusedSetup = features.intersection(.setup).subtracting(ring.setup)
        if !refusedSetup.isEmpty { refusals.append("\(refusedSetup) (io_uring_setup: \(Errno.invalidArgument))") }
        pool = features.contains(.registeredBuffers) ? Self.registeredBuffers(on: ring, refusals: &refusals) : nil
        self.refusals = refusals
    }

    /// A pool registered with `ring`, or nil and the reason in `refusals`.
    private static func registeredBuffers(on ring: Ring, refusals: inout [String]) -> RegisteredBuffers? {
        guard ring.supports(.writeFixed) else {
            refusals.append("registered buffers (the kernel has no IORING_OP_WRITE_FIXED)")
            return nil
        }
        do {
            let pool = try RegisteredBuffers()
            try ring.register(pool)
            return pool
        } catch {
            refusals.append("registered buffers (io_uring_register: \(error))")
            return nil
        }
    }

    public var inFlight: Int { queued.count + chains.count + finished.count }

    public func returnToReap(_ completions: [IOCompletion]) { finished.insert(contentsOf: completions, at: 0) }
    public var hasCompletionsToReap: Bool { !finished.isEmpty }

    public func submit(_ chain: [IOOperation]) -> IOTicket {
        let ticket = tickets.next()
        chains[ticket] = ChainState(operations: chain)
        queued.append(ticket)
        return ticket
    }

    public func flush() throws(IOEngineError) {
        try startQueued()
        try submitPrepared()
    }

    public func flushAndWait() throws(IOEngineError) {
        try startQueued()
        guard finished.isEmpty, !chains.isEmpty else { return try submitPrepared() }
        do {
            try ring.submit(waitFor: 1)
        } catch {
            throw IOEngineError("io_uring_enter", path: "ring", errno: error.errno)
        }
        unsubmitted = 0
    }

    public func reap(waiting: Bool) throws(IOEngineError) -> [IOCompletion] {
        try startQueued()
        var completions = ring.completions()
        if completions.isEmpty, finished.isEmpty, waiting, !chains.isEmpty {
            // What is prepared goes to the kernel and the wait starts in one io_uring_enter.
            do {
                completions = try ring.submitAndWait()
            } catch {
                throw IOEngineError("io_uring_enter", path: "ring", errno: error.errno)
            }
            unsubmitted = 0
        }
        for completion in completions {
            try advance(IOTicket(rawValue: completion.userData), result: completion.result)
        }
        try submitPrepared()
        defer { finished.removeAll(keepingCapacity: true) }
        return finished
    }

    /// Prepares the first step of every chain submitted since the last flush.
    private func startQueued() throws(IOEngineError) {
        for ticket in queued { try startStep(of: ticket) }
        queued.removeAll(keepingCapacity: true)
    }

    private func advance(_ ticket: IOTicket, result: Int32) throws(IOEngineError) {
        guard var state = chains[ticket] else { return }
        let operation = state.operations[state.step]
        if result < 0 {
            finish(ticket, .failure(error(for: operation, errno: Errno(rawValue: -result))))
            return
        }
        if case .write(_, let bytes, _, _) = operation {
            state.written += Int(result)
            // No progress on a non-empty write would loop for ever: call it an I/O error.
            if result == 0, state.written < bytes.count {
                finish(ticket, .failure(error(for: operation, errno: .ioError)))
                return
            }
            if state.written < bytes.count {
                chains[ticket] = state
                try prepare(ticket)
                return
            }
            release(state.buffer)
            state.buffer = nil
        }
        state.step += 1
        state.written = 0
        chains[ticket] = state
        if state.step == state.operations.count {
            finish(ticket, .success(()))
        } else {
            try startStep(of: ticket)
        }
    }

    private func startStep(of ticket: IOTicket) throws(IOEngineError) {
        guard var state = chains[ticket] else { return }
        guard state.step < state.operations.count else {
            finish(ticket, .success(()))
            return
        }
        if case .write(let file, let bytes, _, _) = state.operations[state.step] {
            do {
                state.buffer = try writeBuffer(bytes, for: file)
            } catch {
                finish(ticket, .failure(error))
                return
            }
            chains[ticket] = state
        }
        try prepare(ticket)
    }

    /// The bytes copied where the kernel may write from: a free registered buffer when they fit
    /// one (and a direct file's alignment is no more than a page), else a private copy.
    private func writeBuffer(_ bytes: [UInt8], for file: EngineFile) throws(IOEngineError) -> WriteBuffer {
        let alignment = files.directAlignment(of: file).map { max($0.memory, $0.block) } ?? 1
        if let pool, bytes.count <= pool.bufferBytes, alignment <= RegisteredBuffers.alignment, let index = pool.take()
        {
            let target = pool.buffer(index)
            bytes.withUnsafeBytes { source in target.copyMemory(from: source) }
            return .registered(index, target)
        }
        return .copied(try files.writeBuffer(bytes, for: file))
    }

    /// The memory `buffer` names, and its registered index if it has one.
    private func memory(of buffer: WriteBuffer) -> (bytes: UnsafeRawBufferPointer, index: Int?) {
        switch buffer {
        case .registered(let index, let target): (UnsafeRawBufferPointer(target), index)
        case .copied(let copy): (copy.bytes, nil)
        }
    }

    /// Gives a registered buffer back to the pool once the kernel is done with it.
    private func release(_ buffer: WriteBuffer?) {
        if case .registered(let index, _) = buffer { pool?.giveBack(index) }
    }

    /// Queues the running step, or for a write the part of it not yet written.
    private func prepare(_ ticket: IOTicket) throws(IOEngineError) {
        guard let state = chains[ticket] else { return }
        do {
            switch state.operations[state.step] {
            case .write(let file, let bytes, let offset, let durable):
                let source = memory(of: state.buffer!)
                let remaining = UnsafeRawBufferPointer(rebasing: source.bytes[state.written..<bytes.count])
                try ring.prepareWrite(
                    fd: files.descriptor(file), buffer: remaining, offset: UInt64(offset + state.written),
                    userData: ticket.rawValue, dsync: durable, fixedBuffer: source.index)
            case .sync(let file):
                try ring.prepareFsync(
                    fd: files.descriptor(file), dataOnly: !files.isDirectory(file), userData: ticket.rawValue)
            }
        } catch {
            throw IOEngineError("io_uring_enter", path: "ring", errno: error.errno)
        }
        unsubmitted += 1
    }

    private func submitPrepared() throws(IOEngineError) {
        guard unsubmitted > 0 else { return }
        do {
            try ring.submit()
        } catch {
            throw IOEngineError("io_uring_enter", path: "ring", errno: error.errno)
        }
        unsubmitted = 0
    }

    /// Ends a chain whose step is not in the kernel (it completed, or never went).
    private func finish(_ ticket: IOTicket, _ result: Result<Void, IOEngineError>) {
        release(chains.removeValue(forKey: ticket)?.buffer)
        finished.append(IOCompletion(ticket: ticket, result: result))
    }

    private func error(for operation: IOOperation, errno: Errno) -> IOEngineError {
        switch operation {
        case .write(let file, _, _, let durable):
            IOEngineError(durable ? "write(RWF_DSYNC)" : "write", path: files.path(of: file), errno: errno)
        case .sync(let file):
            IOEngineError(files.isDirectory(file) ? "fsync" : "fdatasync", path: files.path(of: file), errno: errno)
        }
    }
}

extension IOUringError {
    /// The kernel's errno behind the failure.
    public var errno: Errno {
        switch self {
        case .unavailable(let errno), .setupFailed(let errno), .submitFailed(let errno): errno
        case .operationUnsupported: .noFunction
        }
    }
}
