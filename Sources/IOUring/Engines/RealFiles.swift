import CLinuxShims
import Glibc
import Platform
import SystemPackage

/// The blocking file-system calls both real engines share (all through `NoFollow`), and the
/// descriptor → path table their errors name paths from. Files are created 0600, directories
/// 0700.
struct RealFiles {
    private var paths: [Int32: String] = [:]
    private var directories: Set<Int32> = []
    /// Open files' identities, learned at their first `isAt`: a descriptor's never changes, so
    /// a durable write's check costs the path's lookup alone.
    private var identities: [Int32: FileIdentity] = [:]
    /// Files written with `O_DIRECT`, and the alignment their writes respect.
    private var directAlignments: [Int32: DirectIO.Alignment] = [:]

    func path(of file: EngineFile) -> String { paths[file.rawValue] ?? "fd \(file.rawValue)" }

    /// Directories take a full fsync: their entries are metadata, which fdatasync may skip.
    func isDirectory(_ file: EngineFile) -> Bool { directories.contains(file.rawValue) }

    func descriptor(_ file: EngineFile) -> FileDescriptor { FileDescriptor(rawValue: file.rawValue) }

    mutating func open(_ path: FilePath, _ mode: OpenMode) throws(IOEngineError) -> EngineFile {
        let fd = try call("open", path) { () throws(Errno) in try NoFollow.open(path, mode) }
        paths[fd.rawValue] = path.string
        return EngineFile(rawValue: fd.rawValue)
    }

    mutating func openDirectory(_ path: FilePath) throws(IOEngineError) -> EngineFile {
        let fd = try call("open", path) { () throws(Errno) in try NoFollow.openDirectory(path) }
        paths[fd.rawValue] = path.string
        directories.insert(fd.rawValue)
        return EngineFile(rawValue: fd.rawValue)
    }

    /// The alignment a direct write to `file` needs; nil for a buffered file.
    func directAlignment(of file: EngineFile) -> DirectIO.Alignment? { directAlignments[file.rawValue] }

    /// `O_DIRECT` on, where the file's file system takes it (not tmpfs, see `DirectIO`).
    mutating func enableDirectWrites(_ file: EngineFile) -> Result<DirectIO.Alignment, DirectIO.Refusal> {
        if let known = directAlignments[file.rawValue] { return .success(known) }
        let result = DirectIO.alignment(of: descriptor(file))
        guard case .success(let alignment) = result else { return result }
        do {
            try DirectIO.enable(descriptor(file))
        } catch {
            return .failure(error)
        }
        directAlignments[file.rawValue] = alignment
        return .success(alignment)
    }

    /// A copy of `bytes` the kernel may write from: aligned for a direct file (whose offset
    /// and length the caller aligned), else at 16 bytes.
    func writeBuffer(_ bytes: [UInt8], for file: EngineFile) throws(IOEngineError) -> AlignedBytes {
        let alignment = directAlignments[file.rawValue].map { max($0.memory, $0.block) } ?? 16
        do {
            return try AlignedBytes(copying: bytes, count: bytes.count, alignment: alignment)
        } catch {
            throw IOEngineError("posix_memalign", path: path(of: file), errno: error)
        }
    }

    mutating func close(_ file: EngineFile) {
        paths[file.rawValue] = nil
        directories.remove(file.rawValue)
        directAlignments[file.rawValue] = nil
        identities[file.rawValue] = nil
        try? descriptor(file).close()
    }

    func size(of file: EngineFile) throws(IOEngineError) -> Int {
        do {
            return Int(try descriptor(file).seek(offset: 0, from: .end))
        } catch {
            throw IOEngineError("seek", path: path(of: file), errno: (error as? Errno) ?? .ioError)
        }
    }

    func read(_ file: EngineFile, offset: Int, count: Int) throws(IOEngineError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let read: Int
            do {
                read = try bytes.withUnsafeMutableBytes { buffer in
                    try descriptor(file).read(
                        fromAbsoluteOffset: Int64(offset + done),
                        into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]))
                }
            } catch {
                throw IOEngineError("pread", path: path(of: file), errno: (error as? Errno) ?? .ioError)
            }
            guard read > 0 else { throw IOEngineError("pread", path: path(of: file), errno: .ioError) }
            done += read
        }
        return bytes
    }

    func kind(_ path: FilePath) throws(IOEngineError) -> EntryKind? {
        try call("fstatat", path) { () throws(Errno) in try NoFollow.kind(path) }
    }

    func makeDirectory(_ path: FilePath) throws(IOEngineError) {
        try call("mkdirat", path) { () throws(Errno) in try NoFollow.makeDirectory(path) }
    }

    func rename(_ source: FilePath, to destination: FilePath) throws(IOEngineError) {
        try call("renameat", "\(source) → \(destination)") { () throws(Errno) in
            try NoFollow.rename(source, to: destination)
        }
    }

    func removeFile(_ path: FilePath) throws(IOEngineError) {
        try call("unlinkat", path) { () throws(Errno) in try NoFollow.remove(path) }
    }

    func removeDirectory(_ path: FilePath) throws(IOEngineError) {
        try call("unlinkat(AT_REMOVEDIR)", path) { () throws(Errno) in try NoFollow.remove(path, directory: true) }
    }

    func removeTree(_ path: FilePath) throws(IOEngineError) {
        try call("remove tree", path) { () throws(Errno) in try NoFollow.removeTree(path) }
    }

    mutating func isAt(_ file: EngineFile, _ path: FilePath) throws(IOEngineError) -> Bool {
        let identity: FileIdentity
        if let known = identities[file.rawValue] {
            identity = known
        } else {
            identity = try call("fstat", path) { () throws(Errno) in try NoFollow.identity(of: descriptor(file)) }
            identities[file.rawValue] = identity
        }
        return try call("fstatat", path) { () throws(Errno) in try NoFollow.isAt(identity, path) }
    }

    func listDirectory(_ path: FilePath) throws(IOEngineError) -> [(name: FilePath.Component, kind: EntryKind)]? {
        try call("opendir", path) { () throws(Errno) in try NoFollow.entries(path) }
    }

    func directoryEntries(_ path: FilePath) throws(IOEngineError) -> [String]? {
        try call("opendir", path) { () throws(Errno) in try NoFollow.entryNames(path)?.map(\.name) }
    }

    private func call<T>(_ operation: String, _ path: FilePath, _ body: () throws(Errno) -> T) throws(IOEngineError)
        -> T
    {
        try call(operation, path.string, body)
    }

    private func call<T>(_ operation: String, _ path: String, _ body: () throws(Errno) -> T) throws(IOEngineError) -> T
    {
        do {
            return try body()
        } catch {
            throw IOEngineError(operation, path: path, errno: error)
        }
    }
}

/// The engine calls that only pass through to `RealFiles`.
protocol RealFileEngine: IOEngine {
    var files: RealFiles { get set }
}

extension RealFileEngine {
    public func open(_ path: FilePath, _ mode: OpenMode) throws(IOEngineError) -> EngineFile {
        try files.open(path, mode)
    }
    public func openDirectory(_ path: FilePath) throws(IOEngineError) -> EngineFile { try files.openDirectory(path) }
    public func close(_ file: EngineFile) { files.close(file) }
    public func enableDirectWrites(_ file: EngineFile) -> Result<DirectIO.Alignment, DirectIO.Refusal> {
        files.enableDirectWrites(file)
    }
    public func size(of file: EngineFile) throws(IOEngineError) -> Int { try files.size(of: file) }
    public func read(_ file: EngineFile, offset: Int, count: Int) throws(IOEngineError) -> [UInt8] {
        try files.read(file, offset: offset, count: count)
    }
    public func kind(_ path: FilePath) throws(IOEngineError) -> EntryKind? { try files.kind(path) }
    public func makeDirectory(_ path: FilePath) throws(IOEngineError) { try files.makeDirectory(path) }
    public func rename(_ source: FilePath, to destination: FilePath) throws(IOEngineError) {
        try files.rename(source, to: destination)
    }
    public func removeFile(_ path: FilePath) throws(IOEngineError) { try files.removeFile(path) }
    public func removeDirectory(_ path: FilePath) throws(IOEngineError) { try files.removeDirectory(path) }
    public func removeTree(_ path: FilePath) throws(IOEngineError) { try files.removeTree(path) }
    public func isAt(_ file: EngineFile, _ path: FilePath) throws(IOEngineError) -> Bool { try files.isAt(file, path) }
    public func listDirectory(_ path: FilePath) throws(IOEngineError) -> [(name: FilePath.Component, kind: EntryKind)]?
    {
        try files.listDirectory(path)
    }
    public func directoryEntries(_ path: FilePath) throws(IOEngineError) -> [String]? {
        try files.directoryEntries(path)
    }
}

extension FilePath {
    /// `self/base`, or `self/base-N` for the first N from 2 that `taken` says no entry has:
    /// where something moved aside goes, never over what is there.
    public func appendingUnusedName<E: Error>(_ base: String, taken: (FilePath) throws(E) -> Bool) throws(E) -> FilePath
    {
        var target = appending(base)
        var attempt = 1
        while try taken(target) {
            attempt += 1
            target = appending("\(base)-\(attempt)")
        }
        return target
    }
}
