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

    /// A chain's progress: the step running, and for a write its private copy of the bytes
    /// (kept until the kernel has finished with them; aligned for a direct file) and how many
    /// are written.
    private struct ChainState {
        let operations: [IOOperation]
        var step = 0
        var buffer: AlignedBytes?
        var written = 0
    }

    /// Sets up a ring and checks that the kernel implements what the store needs.
    public init(entries: UInt32 = 256) throws(IOUringError) {
        ring = try Ring(entries: entries)
        try ring.require([.write, .fsync])
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
        for ticket in queued { try startStep(of: ticket) }
        queued.removeAll(keepingCapacity: true)
        try submitPrepared()
    }

    public func reap(waiting: Bool) throws(IOEngineError) -> [IOCompletion] {
        try flush()
        var completions = ring.completions()
        if completions.isEmpty, finished.isEmpty, waiting, !chains.isEmpty {
            do {
                completions = try ring.waitCompletions()
            } catch {
                throw IOEngineError("io_uring_enter", path: "ring", errno: error.errno)
            }
        }
        for completion in completions { try advance(IOTicket(rawValue: completion.userData), result: completion.result) }
        try submitPrepared()
        defer { finished.removeAll(keepingCapacity: true) }
        return finished
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
                state.buffer = try files.writeBuffer(bytes, for: file)
            } catch {
                finish(ticket, .failure(error))
                return
            }
            chains[ticket] = state
        }
        try prepare(ticket)
    }

    /// Queues the running step, or for a write the part of it not yet written.
    private func prepare(_ ticket: IOTicket) throws(IOEngineError) {
        guard let state = chains[ticket] else { return }
        do {
            switch state.operations[state.step] {
            case .write(let file, let bytes, let offset, let durable):
                let remaining = UnsafeRawBufferPointer(rebasing: state.buffer!.bytes[state.written..<bytes.count])
                try ring.prepareWrite(
                    fd: files.descriptor(file), buffer: remaining, offset: UInt64(offset + state.written),
                    userData: ticket.rawValue, dsync: durable)
            case .sync(let file):
                try ring.prepareFsync(fd: files.descriptor(file), dataOnly: !files.isDirectory(file), userData: ticket.rawValue)
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

    private func finish(_ ticket: IOTicket, _ result: Result<Void, IOEngineError>) {
        chains.removeValue(forKey: ticket)
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
        case .unavailable(let errno), .setupFailed(let errno), .submitFailed(let errno), .waitFailed(let errno): errno
        case .operationUnsupported: .noFunction
        }
    }
}
