import IOUring
import Platform
import SystemPackage

/// A deterministic simulated disk behind the engine protocol, for crash-consistency tests. It
/// models the page cache the way LevelDB's fault-injection Env and ALICE do:
/// - every file has the bytes a reader sees and the bytes that are durable; a write reaches the
///   durable copy only through `durable: true` (its own range) or a later sync of the file;
/// - every directory has the entries a reader sees and the durable ones; a created, renamed or
///   removed entry becomes durable only when its directory is synced;
/// - `powerCut` throws away everything not durable; with a seed it keeps a random prefix of
///   each file's unsynced writes, the last one possibly torn, as a disk might, and each write
///   in flight (durable or not) leaves a seeded sector-granular prefix of itself: none of it,
///   any whole number of `sectorSize` sectors, or all of it. In flight: the write the halt
///   refused, and the first step of every chain queued then (a ring runs them at once).
/// Each mutating operation is numbered from 1; `failures` fails chosen ones with an errno
/// (`ENOSPC`, `EIO`), `capacity` fails writes that would grow the files past it with `ENOSPC`,
/// and `haltAfter` makes every operation after the Nth fail, as a machine that lost power would.
public final class FaultEngine: BlockingChainEngine {
    public let name = "fault"
    /// Mutating operations done so far (writes, syncs, creations, renames, removals).
    public private(set) var operationCount = 0
    /// Operation number → the errno it fails with, without effect.
    public var failures: [Int: Errno] = [:]
    /// Opens of these paths fail with the errno given, whatever the mode (a shortage of
    /// descriptors, say, where one particular file is opened).
    public var failingOpens: [String: Errno] = [:]
    /// Total bytes the files may hold; writes that would pass it fail with `ENOSPC`.
    public var capacity: Int?
    /// Operations after this many fail with `EIO` and do nothing, until `powerCut`.
    public var haltAfter: Int?
    /// A disk writes whole sectors, in order within one write: what a cut write can leave.
    public static let sectorSize = 512
    /// Reads done so far: what a test counts to prove restore reads only what it needs.
    public private(set) var readCount = 0
    /// Given how many chains are queued, the index of the one to run next. When set, a flush
    /// runs nothing and each reap runs and completes one chain, the one picked: chains
    /// submitted together then land in any order, some while others are still in flight, as
    /// on a ring. Nil from it: none completes in that reap (a ring whose writes take longer).
    public var completionOrder: ((_ queued: Int) -> Int?)?
    /// What `enableDirectWrites` answers: the disk's direct-I/O alignment (512 B by default, as
    /// ext4 on a 512 B-sector disk reports), or nil for a file system in memory (tmpfs), whose
    /// writes stay buffered. A write to a file opened direct whose offset or length is not a
    /// multiple of the block fails with `EINVAL`, as the kernel refuses it.
    public var directAlignment: DirectIO.Alignment? = DirectIO.Alignment(memory: 512, block: 512)
    /// When set, the sector a write in flight was writing when the power went (the one its
    /// kept prefix stops in, or at) reads back as garbage, the bytes before the write's offset
    /// in that sector included: a disk whose sector writes are not atomic. An append into the
    /// sector that holds the end of an acknowledged save can then take that save with it.
    public var tornSectorsGarble = false

    private final class Inode {
        var data: [UInt8] = []
        var durable: [UInt8] = []
        var unsynced: [(offset: Int, bytes: [UInt8])] = []
    }

    private enum Node {
        case file(Inode)
        case directory
    }

    /// A write that had started and not finished when the power went.
    private struct InFlightWrite {
        let inode: Inode
        let offset: Int
        let bytes: [UInt8]
    }

    private var visible: [String: Node] = [:]
    private var persisted: [String: Node] = [:]
    private var handles: [Int32: (path: String, node: Node)] = [:]
    /// Handles `enableDirectWrites` turned direct.
    private var directHandles: Set<Int32> = []
    private var lastHandle: Int32 = 2
    package var chains = BlockingChains()
    /// The writes in flight at the moment the halt struck: what the store issues after it saw
    /// the halt's errors never reached a disk that had lost power. Nil until the halt strikes.
    private var inFlightAtHalt: [InFlightWrite]?
    /// Chains are running (the queue cannot be read until they stop).
    private var runningChains = false
    /// The halt struck during this run of chains: every write it refuses in the run was issued
    /// with the others (each the first failure of its chain), and what is still queued when
    /// the run ends was in flight too.
    private var catchingInFlight = false

    /// The machine's keyring beside this disk: incognito keys of windows saved on it. A copy
    /// of the disk shares it (the same machine).
    public private(set) var keyring = SimulatedKeyring()

    /// A disk on which `directories` (and their parents) exist and are durable.
    public init(directories: [FilePath]) {
        for directory in directories {
            var path = directory
            while !path.isEmpty {
                visible[path.string] = .directory
                persisted[path.string] = .directory
                if path == FilePath("/") { break }
                path = path.removingLastComponent()
            }
        }
    }

    // MARK: the data path

    public func flush() throws(IOEngineError) {
        guard completionOrder == nil else { return }
        runChains { $0.run { operation throws(IOEngineError) in try perform(operation) } }
    }

    public func reap(waiting: Bool) throws(IOEngineError) -> [IOCompletion] {
        if let completionOrder {
            if chains.queuedCount > 0, let index = completionOrder(chains.queuedCount) {
                runChains { $0.runChain(at: index) { operation throws(IOEngineError) in try perform(operation) } }
            }
        } else {
            try flush()
        }
        return chains.takeFinished()
    }

    /// Runs queued chains through `body`; a halt that strikes meanwhile catches the chains
    /// still queued at the end in flight.
    private func runChains(_ body: (inout BlockingChains) -> Void) {
        assert(!runningChains, "chains run one batch at a time")
        runningChains = true
        body(&chains)
        runningChains = false
        if catchingInFlight {
            inFlightAtHalt?.append(contentsOf: queuedWrites())
            catchingInFlight = false
        }
    }

    package func perform(_ operation: IOOperation) throws(IOEngineError) {
        switch operation {
        case .write(let file, let bytes, let offset, let durable):
            let (path, inode) = try fileHandle(file, "write")
            if directHandles.contains(file.rawValue), let block = directAlignment?.block,
                offset % block != 0 || bytes.count % block != 0
            {
                throw IOEngineError("write(O_DIRECT)", path: path, errno: .invalidArgument)
            }
            try gate("write", path, writing: InFlightWrite(inode: inode, offset: offset, bytes: bytes))
            if let capacity, totalBytes() - inode.data.count + max(inode.data.count, offset + bytes.count) > capacity {
                throw IOEngineError("write", path: path, errno: .noSpace)
            }
            Self.apply(bytes, at: offset, to: &inode.data)
            if durable {
                Self.apply(bytes, at: offset, to: &inode.durable)
            } else {
                inode.unsynced.append((offset, bytes))
            }
        case .sync(let file):
            guard let handle = handles[file.rawValue] else {
                throw IOEngineError("sync", path: "?", errno: .badFileDescriptor)
            }
            try gate("sync", handle.path)
            switch handle.node {
            case .file(let inode):
                inode.durable = inode.data
                inode.unsynced.removeAll()
            case .directory:
                for path in Set(visible.keys).union(persisted.keys) where Self.parent(of: path) == handle.path {
                    persisted[path] = visible[path]
                }
            }
        }
    }

    // MARK: kill

    /// The process is killed with the power on: what it did stays as it is (visible now, durable
    /// once synced, as the kernel keeps it), nothing after the halt happens, and the writes it
    /// had queued and not yet run never run. Closes every handle and clears the halt and the
    /// failures still planned: the next process starts on this disk.
    public func processKilled() {
        handles.removeAll()
        directHandles.removeAll()
        chains.drop()
        haltAfter = nil
        inFlightAtHalt = nil
        catchingInFlight = false
        failures.removeAll()
    }

    // MARK: power

    /// Drops everything not durable, closes every handle and clears the halt and the failures
    /// still planned.
    public func powerCut() {
        var none: SystemRandomNumberGenerator? = nil
        cut(keepingUnsyncedWith: &none)
    }

    /// A power cut after which each file keeps a random prefix of its unsynced writes, the last
    /// one possibly torn: what a disk that wrote back part of its cache leaves.
    public func powerCut(keepingUnsyncedWith random: inout some RandomNumberGenerator) {
        var some = Optional(random)
        cut(keepingUnsyncedWith: &some)
        if let some { random = some }
    }

    private func cut<R: RandomNumberGenerator>(keepingUnsyncedWith random: inout R?) {
        // An entry whose directory did not survive is unreachable: it goes too.
        var survivors: [String: Node] = [:]
        for path in persisted.keys.sorted(by: { $0.count < $1.count }) {
            let parent = Self.parent(of: path)
            if parent == path {
                survivors[path] = persisted[path]
            } else if case .directory? = survivors[parent] {
                survivors[path] = persisted[path]
            }
        }
        var inodes: [ObjectIdentifier: Inode] = [:]
        for case .file(let inode) in survivors.values { inodes[ObjectIdentifier(inode)] = inode }
        for inode in inodes.values {
            inode.data = inode.durable
            if random != nil {
                let kept = Int.random(in: 0...inode.unsynced.count, using: &random!)
                for (index, write) in inode.unsynced.prefix(kept).enumerated() {
                    let length =
                        index == kept - 1 ? Int.random(in: 0...write.bytes.count, using: &random!) : write.bytes.count
                    Self.apply(Array(write.bytes.prefix(length)), at: write.offset, to: &inode.data)
                }
            }
        }
        // Writes in flight came after every unsynced one: they land on top, each cut at a
        // sector boundary of its file. A file the cut made unreachable keeps nothing.
        if random != nil {
            for write in inFlightAtHalt ?? queuedWrites() where inodes[ObjectIdentifier(write.inode)] != nil {
                let ends = Self.sectorBoundaries(offset: write.offset, count: write.bytes.count)
                let end = ends[Int.random(in: 0..<ends.count, using: &random!)]
                assert(end >= write.offset && end <= write.offset + write.bytes.count)
                Self.apply(Array(write.bytes.prefix(end - write.offset)), at: write.offset, to: &write.inode.data)
                if tornSectorsGarble, end < write.offset + write.bytes.count {
                    let sector = end - end % Self.sectorSize
                    Self.apply([UInt8](repeating: 0xA5, count: Self.sectorSize), at: sector, to: &write.inode.data)
                }
            }
        }
        for inode in inodes.values {
            inode.durable = inode.data
            inode.unsynced.removeAll()
        }
        visible = survivors
        persisted = survivors
        handles.removeAll()
        directHandles.removeAll()
        chains.drop()
        haltAfter = nil
        inFlightAtHalt = nil
        failures.removeAll()
    }

    /// Where a write of `count` bytes at `offset` can stop when the power goes: its start,
    /// every sector boundary within it, its end.
    private static func sectorBoundaries(offset: Int, count: Int) -> [Int] {
        let end = offset + count
        guard count > 0 else { return [offset] }
        let firstBoundary = (offset / sectorSize + 1) * sectorSize
        return [offset] + Array(stride(from: firstBoundary, to: end, by: sectorSize)) + [end]
    }

    /// The first step of every chain queued, when it is a write to a file still open: the
    /// writes a ring would have in flight.
    private func queuedWrites() -> [InFlightWrite] {
        chains.queuedChains.compactMap { chain in
            guard case .write(let file, let bytes, let offset, _)? = chain.first, let handle = handles[file.rawValue],
                case .file(let inode) = handle.node
            else { return nil }
            return InFlightWrite(inode: inode, offset: offset, bytes: bytes)
        }
    }

    // MARK: files and directories

    public func open(_ path: FilePath, _ mode: OpenMode) throws(IOEngineError) -> EngineFile {
        let key = path.string
        if let errno = failingOpens[key] { throw IOEngineError("open", path: key, errno: errno) }
        switch visible[key] {
        case .file(let inode)?:
            guard mode != .create else { throw IOEngineError("open", path: key, errno: .fileExists) }
            return makeHandle(key, .file(inode))
        case .directory?:
            throw IOEngineError("open", path: key, errno: mode == .create ? .fileExists : .isDirectory)
        case nil:
            guard mode == .create else { throw IOEngineError("open", path: key, errno: .noSuchFileOrDirectory) }
            try requireParent(of: key, "open")
            try gate("open", key)
            let node = Node.file(Inode())
            visible[key] = node
            return makeHandle(key, node)
        }
    }

    public func openDirectory(_ path: FilePath) throws(IOEngineError) -> EngineFile {
        guard case .directory? = visible[path.string] else {
            throw IOEngineError("open", path: path.string, errno: .noSuchFileOrDirectory)
        }
        return makeHandle(path.string, .directory)
    }

    public func close(_ file: EngineFile) {
        handles[file.rawValue] = nil
        directHandles.remove(file.rawValue)
    }

    public func enableDirectWrites(_ file: EngineFile) -> Result<DirectIO.Alignment, DirectIO.Refusal> {
        guard let directAlignment else { return .failure(.inMemory) }
        directHandles.insert(file.rawValue)
        return .success(directAlignment)
    }

    public func size(of file: EngineFile) throws(IOEngineError) -> Int {
        try fileHandle(file, "stat").inode.data.count
    }

    public func read(_ file: EngineFile, offset: Int, count: Int) throws(IOEngineError) -> [UInt8] {
        let (path, inode) = try fileHandle(file, "pread")
        readCount += 1
        guard offset >= 0, count >= 0, offset + count <= inode.data.count else {
            throw IOEngineError("pread", path: path, errno: .ioError)
        }
        return Array(inode.data[offset..<offset + count])
    }

    public func makeDirectory(_ path: FilePath) throws(IOEngineError) {
        let key = path.string
        guard visible[key] == nil else { throw IOEngineError("mkdir", path: key, errno: .fileExists) }
        try requireParent(of: key, "mkdir")
        try gate("mkdir", key)
        visible[key] = .directory
    }

    public func rename(_ source: FilePath, to destination: FilePath) throws(IOEngineError) {
        let from = source.string
        let to = destination.string
        guard let node = visible[from] else { throw IOEngineError("rename", path: from, errno: .noSuchFileOrDirectory) }
        try requireParent(of: to, "rename")
        try gate("rename", from)
        visible[from] = nil
        visible[to] = node
        if case .directory = node {
            for path in visible.keys where path.hasPrefix(from + "/") {
                visible[to + path.dropFirst(from.count)] = visible.removeValue(forKey: path)
            }
        }
    }

    public func removeFile(_ path: FilePath) throws(IOEngineError) {
        guard case .file? = visible[path.string] else {
            throw IOEngineError("unlink", path: path.string, errno: .noSuchFileOrDirectory)
        }
        try gate("unlink", path.string)
        visible[path.string] = nil
    }

    public func removeDirectory(_ path: FilePath) throws(IOEngineError) {
        let key = path.string
        guard case .directory? = visible[key] else {
            throw IOEngineError("rmdir", path: key, errno: .noSuchFileOrDirectory)
        }
        guard !visible.keys.contains(where: { Self.parent(of: $0) == key && $0 != key }) else {
            throw IOEngineError("rmdir", path: key, errno: .directoryNotEmpty)
        }
        try gate("rmdir", key)
        visible[key] = nil
    }

    /// The simulated disk's `NoFollow.removeTree`, iterative too: post-order, entries sorted,
    /// so the operations it counts (and fails, see `failures`) are the same whatever the depth.
    public func removeTree(_ path: FilePath) throws(IOEngineError) {
        guard let top = try kind(path) else { return }
        guard top == .directory else { return try removeFile(path) }
        // Directories still to empty, each with the entries not yet removed (reversed: popLast
        // takes them in name order).
        var pending: [(path: FilePath, entries: [(name: FilePath.Component, kind: EntryKind)])] = [
            (path, (try listDirectory(path) ?? []).reversed())
        ]
        while let last = pending.indices.last {
            guard let entry = pending[last].entries.popLast() else {
                try removeDirectory(pending.removeLast().path)
                continue
            }
            let child = pending[last].path.appending(entry.name)
            if entry.kind == .directory {
                pending.append((child, (try listDirectory(child) ?? []).reversed()))
            } else {
                try removeFile(child)
            }
        }
    }

    /// Whether `path` still names the simulated file `file` is open on (a directory: any
    /// directory, the fault engine gives them no identity).
    public func isAt(_ file: EngineFile, _ path: FilePath) throws(IOEngineError) -> Bool {
        guard let handle = handles[file.rawValue] else {
            throw IOEngineError("fstat", path: "fd \(file.rawValue)", errno: .badFileDescriptor)
        }
        switch (handle.node, visible[path.string]) {
        case (.file(let open), .file(let named)?): return open === named
        case (.directory, .directory?): return true
        default: return false
        }
    }

    public func kind(_ path: FilePath) throws(IOEngineError) -> EntryKind? {
        switch visible[path.string] {
        case .file?: .file
        case .directory?: .directory
        case nil: nil
        }
    }

    public func listDirectory(_ path: FilePath) throws(IOEngineError) -> [(name: FilePath.Component, kind: EntryKind)]?
    {
        let key = path.string
        guard case .directory? = visible[key] else { return nil }
        return visible.filter { Self.parent(of: $0.key) == key && $0.key != key }
            .map { entry -> (name: String, kind: EntryKind) in
                let name = String(entry.key.dropFirst(key == "/" ? 1 : key.count + 1))
                if case .directory = entry.value { return (name, .directory) }
                return (name, .file)
            }
            .sorted { $0.name < $1.name }
            .compactMap { entry in FilePath.Component(entry.name).map { ($0, entry.kind) } }
    }

    /// The path each queued chain's first operation works on, oldest first: what a test's
    /// `completionOrder` picks by.
    public var queuedPaths: [String?] {
        chains.queuedChains.map { chain in
            switch chain.first {
            case .write(let file, _, _, _)?, .sync(let file)?: handles[file.rawValue]?.path
            case nil: nil
            }
        }
    }

    /// What a reader sees in `path` now, or nil: for tests that damage files on the simulated disk.
    public func contents(of path: FilePath) -> [UInt8]? {
        guard case .file(let inode)? = visible[path.string] else { return nil }
        return inode.data
    }

    /// Replaces what `path` holds, durably, outside the operation count: damage from outside.
    public func overwrite(_ path: FilePath, with bytes: [UInt8]) {
        guard case .file(let inode)? = visible[path.string] else { return }
        inode.data = bytes
        inode.durable = bytes
        inode.unsynced.removeAll()
    }

    /// An independent copy of the disk as it stands (no open files, nothing queued): one
    /// prepared session damaged a thousand ways.
    public func copy() -> FaultEngine {
        let copy = FaultEngine(directories: [])
        copy.keyring = keyring
        var inodes: [ObjectIdentifier: Inode] = [:]
        func clone(_ node: Node) -> Node {
            guard case .file(let inode) = node else { return node }
            if let existing = inodes[ObjectIdentifier(inode)] { return .file(existing) }
            let twin = Inode()
            twin.data = inode.data
            twin.durable = inode.durable
            twin.unsynced = inode.unsynced
            inodes[ObjectIdentifier(inode)] = twin
            return .file(twin)
        }
        copy.visible = visible.mapValues(clone)
        copy.persisted = persisted.mapValues(clone)
        return copy
    }

    // MARK: helpers

    /// Counts a mutating operation and fails it when planned; `writing` is the write it is,
    /// caught in flight if the halt strikes now.
    private func gate(_ operation: String, _ path: String, writing: InFlightWrite? = nil) throws(IOEngineError) {
        operationCount += 1
        if let haltAfter, operationCount > haltAfter {
            if inFlightAtHalt == nil {
                inFlightAtHalt = runningChains ? [] : queuedWrites()
                catchingInFlight = runningChains
            }
            if catchingInFlight, let writing { inFlightAtHalt?.append(writing) }
            throw IOEngineError(operation, path: path, errno: .ioError)
        }
        if let errno = failures[operationCount] { throw IOEngineError(operation, path: path, errno: errno) }
    }

    private func fileHandle(_ file: EngineFile, _ operation: String) throws(IOEngineError) -> (
        path: String, inode: Inode
    ) {
        guard let handle = handles[file.rawValue], case .file(let inode) = handle.node else {
            throw IOEngineError(operation, path: "fd \(file.rawValue)", errno: .badFileDescriptor)
        }
        return (handle.path, inode)
    }

    private func requireParent(of path: String, _ operation: String) throws(IOEngineError) {
        guard case .directory? = visible[Self.parent(of: path)] else {
            throw IOEngineError(operation, path: path, errno: .noSuchFileOrDirectory)
        }
    }

    private func makeHandle(_ path: String, _ node: Node) -> EngineFile {
        lastHandle += 1
        handles[lastHandle] = (path, node)
        return EngineFile(rawValue: lastHandle)
    }

    private func totalBytes() -> Int {
        var total = 0
        for case .file(let inode) in visible.values { total += inode.data.count }
        return total
    }

    /// The directory holding `path` (paths here are absolute and normalized by FilePath). Plain
    /// string work: it runs for every entry on every directory operation.
    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func apply(_ bytes: [UInt8], at offset: Int, to data: inout [UInt8]) {
        if data.count < offset + bytes.count { data += [UInt8](repeating: 0, count: offset + bytes.count - data.count) }
        data.replaceSubrange(offset..<offset + bytes.count, with: bytes)
    }
}
