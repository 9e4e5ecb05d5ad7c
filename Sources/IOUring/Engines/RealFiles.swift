import Glibc
import SystemPackage

/// The blocking file-system calls both real engines share, and the descriptor → path table
/// their errors name paths from. Files are created 0600, directories 0700.
struct RealFiles {
    private var paths: [Int32: String] = [:]
    private var directories: Set<Int32> = []

    func path(of file: EngineFile) -> String { paths[file.rawValue] ?? "fd \(file.rawValue)" }

    /// Directories take a full fsync: their entries are metadata, which fdatasync may skip.
    func isDirectory(_ file: EngineFile) -> Bool { directories.contains(file.rawValue) }

    func descriptor(_ file: EngineFile) -> FileDescriptor { FileDescriptor(rawValue: file.rawValue) }

    mutating func open(_ path: FilePath, creating: Bool) throws(IOEngineError) -> EngineFile {
        let fd = try call("open", path) {
            try FileDescriptor.open(
                path, .readWrite, options: creating ? [.create, .closeOnExec] : [.closeOnExec],
                permissions: creating ? [.ownerReadWrite] : nil)
        }
        paths[fd.rawValue] = path.string
        return EngineFile(rawValue: fd.rawValue)
    }

    mutating func openDirectory(_ path: FilePath) throws(IOEngineError) -> EngineFile {
        let fd = try call("open", path) { try FileDescriptor.open(path, .readOnly, options: [.directory, .closeOnExec]) }
        paths[fd.rawValue] = path.string
        directories.insert(fd.rawValue)
        return EngineFile(rawValue: fd.rawValue)
    }

    mutating func close(_ file: EngineFile) {
        paths[file.rawValue] = nil
        directories.remove(file.rawValue)
        try? descriptor(file).close()
    }

    func size(of file: EngineFile) throws(IOEngineError) -> Int {
        Int(try call("seek", path(of: file)) { try descriptor(file).seek(offset: 0, from: .end) })
    }

    func read(_ file: EngineFile, offset: Int, count: Int) throws(IOEngineError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let read = try call("pread", path(of: file)) {
                try bytes.withUnsafeMutableBytes { buffer in
                    try descriptor(file).read(
                        fromAbsoluteOffset: Int64(offset + done), into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]))
                }
            }
            guard read > 0 else { throw IOEngineError("pread", path: path(of: file), errno: .ioError) }
            done += read
        }
        return bytes
    }

    func makeDirectory(_ path: FilePath) throws(IOEngineError) {
        if mkdir(path.string, 0o700) != 0 { throw IOEngineError("mkdir", path: path.string, errno: Errno(rawValue: errno)) }
    }

    func rename(_ source: FilePath, to destination: FilePath) throws(IOEngineError) {
        if Glibc.rename(source.string, destination.string) != 0 {
            throw IOEngineError("rename", path: "\(source) → \(destination)", errno: Errno(rawValue: errno))
        }
    }

    func removeFile(_ path: FilePath) throws(IOEngineError) {
        if unlink(path.string) != 0 { throw IOEngineError("unlink", path: path.string, errno: Errno(rawValue: errno)) }
    }

    func removeDirectory(_ path: FilePath) throws(IOEngineError) {
        if rmdir(path.string) != 0 { throw IOEngineError("rmdir", path: path.string, errno: Errno(rawValue: errno)) }
    }

    func directoryEntries(_ path: FilePath) throws(IOEngineError) -> [String]? {
        guard let directory = opendir(path.string) else {
            let error = Errno(rawValue: errno)
            if error == .noSuchFileOrDirectory || error == .notDirectory { return nil }
            throw IOEngineError("opendir", path: path.string, errno: error)
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    private func call<T>(_ operation: String, _ path: FilePath, _ body: () throws -> T) throws(IOEngineError) -> T {
        try call(operation, path.string, body)
    }

    private func call<T>(_ operation: String, _ path: String, _ body: () throws -> T) throws(IOEngineError) -> T {
        do {
            return try body()
        } catch let error as Errno {
            throw IOEngineError(operation, path: path, errno: error)
        } catch {
            throw IOEngineError(operation, path: path, errno: .ioError)
        }
    }
}

/// The engine calls that only pass through to `RealFiles`.
protocol RealFileEngine: IOEngine {
    var files: RealFiles { get set }
}

extension RealFileEngine {
    public func open(_ path: FilePath, creating: Bool) throws(IOEngineError) -> EngineFile {
        try files.open(path, creating: creating)
    }
    public func openDirectory(_ path: FilePath) throws(IOEngineError) -> EngineFile { try files.openDirectory(path) }
    public func close(_ file: EngineFile) { files.close(file) }
    public func size(of file: EngineFile) throws(IOEngineError) -> Int { try files.size(of: file) }
    public func read(_ file: EngineFile, offset: Int, count: Int) throws(IOEngineError) -> [UInt8] {
        try files.read(file, offset: offset, count: count)
    }
    public func makeDirectory(_ path: FilePath) throws(IOEngineError) { try files.makeDirectory(path) }
    public func rename(_ source: FilePath, to destination: FilePath) throws(IOEngineError) {
        try files.rename(source, to: destination)
    }
    public func removeFile(_ path: FilePath) throws(IOEngineError) { try files.removeFile(path) }
    public func removeDirectory(_ path: FilePath) throws(IOEngineError) { try files.removeDirectory(path) }
    public func directoryEntries(_ path: FilePath) throws(IOEngineError) -> [String]? {
        try files.directoryEntries(path)
    }
}
