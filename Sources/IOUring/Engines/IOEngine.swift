import Glibc
import Platform
import SystemPackage

/// A file opened through an engine. For the real engines it wraps the descriptor; for the
/// fault engine it names a simulated file.
public struct EngineFile: Hashable, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
}

/// One step of the data path.
public enum IOOperation: Sendable {
    /// Writes `bytes` at `offset`; with `durable` it completes only once the bytes are on stable
    /// storage (`RWF_DSYNC`: one flush, no separate fsync request).
    case write(EngineFile, [UInt8], offset: Int, durable: Bool)
    /// fdatasync for a file; fsync for a directory (makes its entries durable).
    case sync(EngineFile)
}

/// Names a submitted chain; its completion comes back with the same ticket.
public struct IOTicket: Hashable, Sendable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
}

/// What finished: the chain's ticket and whether every step of it succeeded.
public struct IOCompletion: Sendable {
    public let ticket: IOTicket
    public let result: Result<Void, IOEngineError>
}

/// An operation the storage refused, with the path it was about and the kernel's errno.
public struct IOEngineError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A durable write whose file is no longer at `path` (see `IOEngine.isAt`): `found` says
    /// what is at the first place on the way that is not what it should be (`ESTALE`).
    public static func notInPlace(_ path: String, found: String) -> IOEngineError {
        IOEngineError("written, then found \(found) at", path: path, errno: .staleNFSFileHandle)
    }

    /// Whether this is a `notInPlace` failure (or the kernel's own ESTALE: a file that is
    /// no longer where it was, either way).
    public var isNotInPlace: Bool { errno == .staleNFSFileHandle }

    public let operation: String
    public let path: String
    public let errno: Errno

    public init(_ operation: String, path: String, errno: Errno) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    public var description: String { "\(operation) \(path): \(errno)" }

    /// The process ran short of memory, descriptors or the like (`Errno.isResourceShortage`):
    /// nothing to do with the file named, so no reason to set it aside.
    public var isResourceShortage: Bool { errno.isResourceShortage }

    /// The file system as a whole failed (`Errno.isStorageUnavailable`): nothing to do with the
    /// file named, so no reason to set it, or its window, aside.
    public var isStorageUnavailable: Bool { errno.isStorageUnavailable }
}

extension Errno {
    /// Whether the kernel refused for want of something the process or the system runs short
    /// of, which comes back by itself: descriptors (EMFILE, ENFILE), memory (ENOMEM), or what
    /// EAGAIN says is short for the call that returns it (processes and threads for `fork` and
    /// `clone`, locked memory or rings for `io_uring_setup`, memory for `memfd_create` and
    /// `mmap`, a lease held on a file opened `O_NONBLOCK`). Such a failure says nothing of the
    /// file or the window it was about: it is retried after a backoff, never taken for damage
    /// or counted as a failed start. The one definition: `IOEngineError`, `IOUringError` and the
    /// supervisor's `RestartPolicy.isShortage` all ask it.
    public var isResourceShortage: Bool {
        self == .tooManyOpenFiles || self == .tooManyOpenFilesInSystem || self == .noMemory
            || self == .resourceTemporarilyUnavailable
    }

    /// Whether the file system under a path failed as a whole, which says nothing of the files
    /// on it: the device erred or left (EIO, ENOMEDIUM), a network or FUSE file
    /// system lost its server or daemon (ENOTCONN, ESTALE, ETIMEDOUT, EHOSTDOWN, EHOSTUNREACH,
    /// ENETDOWN, ENETUNREACH, ECONNRESET, ECONNABORTED, ECONNREFUSED, ENOLINK, EREMOTEIO,
    /// ESHUTDOWN), it went read-only or full (EROFS, ENOSPC, EDQUOT), or it needs a repair
    /// (EUCLEAN). A restore that meets one is retried once the storage may answer; the session
    /// is never set aside for it (moving it aside would meet the same file system, or succeed
    /// the moment the storage came back and start a whole window empty). ENXIO and ENODEV are
    /// not: they name the entry itself (a FIFO with no reader, a device node with no driver).
    public var isStorageUnavailable: Bool { Self.storageUnavailable.contains(self) }

    private static let storageUnavailable: Set<Errno> = Set(
        ([
            Glibc.EIO, Glibc.ENOTCONN, Glibc.ESTALE, Glibc.ETIMEDOUT, Glibc.EHOSTDOWN,
            Glibc.EHOSTUNREACH, Glibc.ENETDOWN, Glibc.ENETUNREACH, Glibc.ECONNRESET, Glibc.ECONNABORTED,
            Glibc.ECONNREFUSED,
            Glibc.ENOLINK, Glibc.ESHUTDOWN, Glibc.EROFS, Glibc.ENOSPC, Glibc.EDQUOT,
            // ENOMEDIUM, EREMOTEIO, EUCLEAN (asm-generic/errno.h: one numbering on every
            // architecture Linux runs this on), which the Glibc module does not export.
            123, 121, 117,
        ] as [Int32]).map { Errno(rawValue: $0) })
}

/// How a store reaches storage. The data path is asynchronous and batched: `submit` queues a
/// chain (its steps run in order and it stops at the first failure), `flush` hands everything
/// queued to the kernel at once (one submit per turn of the caller's loop), `reap` collects
/// finished chains. Namespace operations and reads are blocking: they are rare (open, compaction,
/// recovery) and not on the save path.
///
/// Engines are single-threaded by design: one belongs to one event loop.
public protocol IOEngine: AnyObject {
    /// `uring`, `sync` or `fault`: said at start so a run tells which one it measured.
    var name: String { get }

    /// Queues `chain`; nothing reaches storage before `flush`.
    func submit(_ chain: [IOOperation]) -> IOTicket
    /// Starts everything queued.
    func flush() throws(IOEngineError)
    /// `flush`, then blocks until a chain in flight has a completion for `reap` (on a ring, in
    /// the submit's own `io_uring_enter`): for a caller that would wait in its next `reap`.
    func flushAndWait() throws(IOEngineError)
    /// Chains that finished. With `waiting`, blocks until at least one has when any is in flight.
    func reap(waiting: Bool) throws(IOEngineError) -> [IOCompletion]
    /// Completions a blocking call (`perform`) reaped for other chains: the next `reap` returns
    /// them first, so a save in flight never loses its completion to a blocking call.
    func returnToReap(_ completions: [IOCompletion])
    /// Whether `reap` has completions to return without waiting (some were given back).
    var hasCompletionsToReap: Bool { get }
    /// Chains submitted and not yet reaped.
    var inFlight: Int { get }
    /// A descriptor that polls readable when a completion is ready, for engines whose writes
    /// complete asynchronously; nil when they complete during `flush`.
    var completionDescriptor: Int32? { get }
    /// What the kernel refused of what the engine asked for, each with its reason: the engine
    /// works without it. Empty for the blocking engines.
    var refusals: [String] { get }

    /// A regular file (never through a symlink; see `OpenMode` and `NoFollow.open`).
    func open(_ path: FilePath, _ mode: OpenMode) throws(IOEngineError) -> EngineFile
    func openDirectory(_ path: FilePath) throws(IOEngineError) -> EngineFile
    func close(_ file: EngineFile)
    /// Turns on direct writes (`O_DIRECT`) for `file`, opened for writing: the alignment every
    /// write to it must respect from now on (the engine copies each into an aligned buffer it
    /// keeps until the write completes), or why its writes stay buffered. One answer per file,
    /// learned once: the store frames its saves by it.
    func enableDirectWrites(_ file: EngineFile) -> Result<DirectIO.Alignment, DirectIO.Refusal>
    func size(of file: EngineFile) throws(IOEngineError) -> Int
    /// Exactly `count` bytes at `offset`, or an error (`EIO` for bytes past the end).
    func read(_ file: EngineFile, offset: Int, count: Int) throws(IOEngineError) -> [UInt8]

    /// What `path` is as itself (a symlink is not followed); nil when nothing has that name.
    func kind(_ path: FilePath) throws(IOEngineError) -> EntryKind?
    func makeDirectory(_ path: FilePath) throws(IOEngineError)
    /// Moves the entry itself, whatever it is (a symlink moves, its target stays).
    func rename(_ source: FilePath, to destination: FilePath) throws(IOEngineError)
    /// Removes a file, or a symlink, FIFO or socket as itself; never a directory.
    func removeFile(_ path: FilePath) throws(IOEngineError)
    func removeDirectory(_ path: FilePath) throws(IOEngineError)
    /// Entries with what each is, sorted by name; nil when `path` is not a directory (a
    /// symlink to one included: it is not followed). Each name is the entry's bytes exactly,
    /// so `path.appending(name)` names that entry even when the name is not UTF-8: what a
    /// caller acting on whatever it lists (deleting a session) goes by.
    func listDirectory(_ path: FilePath) throws(IOEngineError) -> [(name: FilePath.Component, kind: EntryKind)]?
    /// Entry names as strings, sorted; nil when `path` is not a directory. For matching the
    /// names the host writes (ASCII): a name that is not UTF-8 comes out with U+FFFD in it and
    /// names nothing, so whatever acts on every entry lists with `listDirectory`. (A requirement
    /// so the real engines can list without making a `FilePath.Component` per entry.)
    func directoryEntries(_ path: FilePath) throws(IOEngineError) -> [String]?
    /// Removes `path` whatever it is, a directory with everything under it, each entry as
    /// itself: a symlink is unlinked, never followed, so nothing outside `path` is touched.
    /// Without recursion: a planted tree of any depth cannot overflow the stack (real files:
    /// `NoFollow.removeTree`, the one implementation the supervisor uses too).
    func removeTree(_ path: FilePath) throws(IOEngineError)

    /// Whether `file` is still the entry at `path`, walked from `/` without following a
    /// symlink (its (st_dev, st_ino) against the path's): false when nothing, or something
    /// else, has the name now, or a directory on the way was swapped for a symlink. A
    /// descriptor goes on writing to its file wherever it was moved; a durable write is
    /// acknowledged only once this holds, so an acknowledged save is under the root.
    func isAt(_ file: EngineFile, _ path: FilePath) throws(IOEngineError) -> Bool
}

extension IOEngine {
    public var completionDescriptor: Int32? { nil }
    public var refusals: [String] { [] }
    /// Engines whose writes complete during `flush` have nothing more to wait for.
    public func flushAndWait() throws(IOEngineError) { try flush() }

    /// `listDirectory`'s names as strings.
    public func directoryEntries(_ path: FilePath) throws(IOEngineError) -> [String]? {
        try listDirectory(path)?.map(\.name.string)
    }

    /// Submits `chain`, flushes, and waits for it: a blocking call (a directory's sync, a new
    /// file's first bytes). Completions of other chains reaped meanwhile go back to the engine
    /// for the next `reap`: a save in flight whose completion this took would never finish.
    public func perform(_ chain: [IOOperation]) throws(IOEngineError) {
        let ticket = submit(chain)
        try flush()
        var others: [IOCompletion] = []
        defer { returnToReap(others) }
        while true {
            let completions = try reap(waiting: true)
            others += completions.filter { $0.ticket != ticket }
            if let mine = completions.first(where: { $0.ticket == ticket }) {
                try mine.result.get()
                return
            }
        }
    }

    /// Creates `path` and its missing parents, each followed by a sync of its parent so the new
    /// entry survives a power cut.
    public func makeDirectories(_ path: FilePath) throws(IOEngineError) {
        var missing: [FilePath] = []
        var current = path
        while !current.isEmpty, current != FilePath("/"), try !isDirectory(current) {
            missing.append(current)
            current = current.removingLastComponent()
        }
        for directory in missing.reversed() {
            try makeDirectory(directory)
            try syncDirectory(directory.removingLastComponent())
        }
    }

    /// Whether `path` is a directory, reached without following a symlink: false where
    /// a listing would be nil (nothing there, a symlink or a file there or on the way). One
    /// `fstatat`, not a listing: this runs before every new generation.
    private func isDirectory(_ path: FilePath) throws(IOEngineError) -> Bool {
        do {
            return try kind(path) == .directory
        } catch  where error.errno == .notDirectory || error.errno == .tooManySymbolicLinkLevels {
            return false
        }
    }

    /// fsync of a directory: its entries (new, renamed, removed files) become durable.
    public func syncDirectory(_ path: FilePath) throws(IOEngineError) {
        let directory = try openDirectory(path)
        defer { close(directory) }
        try perform([.sync(directory)])
    }
}

/// Which engine a command runs on: `--io` and `WINDOWHOST_IO`.
public enum IOEngineChoice: String, Sendable, CaseIterable {
    case auto, uring, sync
    /// Blocking, with unsynced writes held in memory: killing the process is a power cut.
    case powercut

    /// The environment's `WINDOWHOST_IO`, or `auto`. Unknown values are an error, not a guess.
    public static func fromEnvironment(_ value: String?) throws(IOEngineSelectionError) -> IOEngineChoice {
        guard let value, !value.isEmpty else { return .auto }
        guard let choice = IOEngineChoice(rawValue: value) else { throw .unknownEngine(value) }
        return choice
    }

    /// The engine itself. `auto` tries io_uring and falls back to blocking I/O when the kernel
    /// or the sandbox refuses it; `fallbackReason` says why it fell back.
    public func makeEngine() throws(IOEngineSelectionError) -> (engine: any IOEngine, fallbackReason: IOUringError?) {
        switch self {
        case .sync:
            return (SyncEngine(), nil)
        case .powercut:
            return (SyncEngine(powerCut: true), nil)
        case .uring:
            do {
                return (try UringEngine(), nil)
            } catch {
                throw .uringUnavailable(error)
            }
        case .auto:
            do {
                return (try UringEngine(), nil)
            } catch {
                return (SyncEngine(), error)
            }
        }
    }
}

public enum IOEngineSelectionError: Error, Equatable, Sendable, CustomStringConvertible {
    case unknownEngine(String)
    case uringUnavailable(IOUringError)

    public var description: String {
        switch self {
        case .unknownEngine(let name): "unknown I/O engine '\(name)' (choose auto, uring or sync)"
        case .uringUnavailable(let error): "--io uring asked for, but \(error)"
        }
    }
}
