import CLinuxShims
import Glibc
import Platform
import SystemPackage

/// Blocking I/O behind the engine protocol, for kernels or sandboxes without io_uring: a
/// durable write is one `pwritev2(RWF_DSYNC)`, a sync is `fdatasync` (or `fsync` for a
/// directory). `flush` runs every queued chain before it returns.
///
/// In power-cut mode (`powercut`, for `stress --power-cut`) a write not made durable stays in
/// this process's memory until a sync of its file, so killing the process loses exactly what
/// a power cut would lose of file data (directory entries are not modelled: creations and
/// renames reach the kernel at once).
public final class SyncEngine: RealFileEngine, BlockingChainEngine {
    public let name: String
    var files = RealFiles()
    package var chains = BlockingChains()
    /// Power-cut mode: the writes each file (by path: any descriptor's sync flushes them, as
    /// the page cache is the file's) holds until its next sync.
    private var unsynced: [String: [(offset: Int, bytes: [UInt8])]]?

    /// `powerCut`: the power-cut mode, where killing the process loses what a power cut would.
    public init(powerCut: Bool = false) {
        name = powerCut ? "powercut" : "sync"
        unsynced = powerCut ? [:] : nil
    }

    package func perform(_ operation: IOOperation) throws(IOEngineError) {
        switch operation {
        case .write(let file, let bytes, let offset, let durable):
            if unsynced != nil, !durable {
                unsynced?[files.path(of: file), default: []].append((offset, bytes))
                return
            }
            try write(file, bytes, offset: offset, durable: durable)
        case .sync(let file):
            for held in unsynced?.removeValue(forKey: files.path(of: file)) ?? [] {
                try write(file, held.bytes, offset: held.offset, durable: false)
            }
            let directory = files.isDirectory(file)
            guard retryingOnInterrupt({ directory ? fsync(file.rawValue) : fdatasync(file.rawValue) }) == 0 else {
                throw IOEngineError(
                    directory ? "fsync" : "fdatasync", path: files.path(of: file), errno: Errno(rawValue: errno))
            }
        }
    }

    /// From a copy in an aligned buffer for a direct file, as the ring engine writes: the same
    /// write (one `pwritev2(RWF_DSYNC)` when durable) whichever engine runs.
    private func write(_ file: EngineFile, _ bytes: [UInt8], offset: Int, durable: Bool) throws(IOEngineError) {
        let aligned = files.directAlignment(of: file) == nil ? nil : try files.writeBuffer(bytes, for: file)
        var done = 0
        while done < bytes.count {
            let written = retryingOnInterrupt {
                bytes.withUnsafeBytes { buffer in
                    let start = (aligned.map { UnsafeRawPointer($0.base) } ?? buffer.baseAddress!) + done
                    let remaining = buffer.count - done
                    return durable
                        ? wh_pwrite_dsync(file.rawValue, start, remaining, off_t(offset + done))
                        : pwrite(file.rawValue, start, remaining, off_t(offset + done))
                }
            }
            if written < 0 {
                throw IOEngineError(
                    durable ? "pwritev2(RWF_DSYNC)" : "pwrite", path: files.path(of: file),
                    errno: Errno(rawValue: errno))
            }
            // A short write is resumed for the remainder, as the ring engine does.
            done += written
        }
    }
}

/// An engine whose data path runs on the caller's thread: chains run at `flush`, and their
/// completions wait for `reap`, so a simulated power cut in between leaves durable writes
/// that were never acknowledged, as on a real disk. Package-visible for the test-support
/// target's simulated disk (`FaultEngine`).
package protocol BlockingChainEngine: IOEngine {
    var chains: BlockingChains { get set }
    func perform(_ operation: IOOperation) throws(IOEngineError)
}

extension BlockingChainEngine {
    public var inFlight: Int { chains.count }
    public func returnToReap(_ completions: [IOCompletion]) { chains.returnFinished(completions) }
    public var hasCompletionsToReap: Bool { chains.hasFinished }
    public func submit(_ chain: [IOOperation]) -> IOTicket { chains.submit(chain) }
    public func flush() throws(IOEngineError) {
        chains.run { operation throws(IOEngineError) in try perform(operation) }
    }

    public func reap(waiting: Bool) throws(IOEngineError) -> [IOCompletion] {
        try flush()
        return chains.takeFinished()
    }
}

/// The data path of the engines that do the work on the caller's thread (blocking, simulated):
/// chains queued by `submit`, run in order at `run` (each stops at its first failure), their
/// completions held until taken, as a ring holds them until reaped.
package struct BlockingChains {
    private var queued: [(IOTicket, [IOOperation])] = []
    private var finished: [IOCompletion] = []
    private var tickets = TicketCounter()

    package init() {}

    package var count: Int { queued.count + finished.count }

    package mutating func submit(_ chain: [IOOperation]) -> IOTicket {
        let ticket = tickets.next()
        queued.append((ticket, chain))
        return ticket
    }

    package var queuedCount: Int { queued.count }

    /// The chains queued, in order: what a simulated power cut finds in flight.
    package var queuedChains: [[IOOperation]] { queued.map(\.1) }

    package mutating func run(_ step: (IOOperation) throws(IOEngineError) -> Void) {
        while !queued.isEmpty { runChain(at: 0, step) }
    }

    /// Runs the chain at `index` of those queued, stopping at its first failure.
    package mutating func runChain(at index: Int, _ step: (IOOperation) throws(IOEngineError) -> Void) {
        let (ticket, chain) = queued.remove(at: index)
        var result = Result<Void, IOEngineError>.success(())
        for operation in chain {
            do {
                try step(operation)
            } catch {
                result = .failure(error)
                break
            }
        }
        finished.append(IOCompletion(ticket: ticket, result: result))
    }

    package var hasFinished: Bool { !finished.isEmpty }

    /// Completions taken and given back (`IOEngine.returnToReap`): taken again first.
    package mutating func returnFinished(_ completions: [IOCompletion]) {
        finished.insert(contentsOf: completions, at: 0)
    }

    package mutating func takeFinished() -> [IOCompletion] {
        defer { finished.removeAll(keepingCapacity: true) }
        return finished
    }

    /// Everything queued or finished is forgotten (a simulated power cut).
    package mutating func drop() {
        queued.removeAll()
        finished.removeAll()
    }
}

/// Tickets in submission order, never reused by one engine.
struct TicketCounter {
    private var last: UInt64 = 0
    mutating func next() -> IOTicket {
        last += 1
        return IOTicket(rawValue: last)
    }
}
