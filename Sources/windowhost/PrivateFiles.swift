import Glibc
import SystemPackage

/// Files and directories the host creates are private to its user: directories 0700, files 0600.
enum PrivateFiles {
    static func makeTemporaryDirectory(prefix: String) throws -> FilePath {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw Errno(rawValue: errno) }
        return template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
    }

    /// Creates `path` and its missing parents, each 0700.
    static func makeDirectories(_ path: FilePath) throws {
        var current = path.root.map { FilePath(root: $0) } ?? FilePath()
        for component in path.components {
            current.append(component)
            if mkdir(current.string, 0o700) != 0, errno != EEXIST { throw Errno(rawValue: errno) }
        }
    }

    /// Writes `bytes` to a new or truncated 0600 file.
    static func write(_ bytes: [UInt8], to path: FilePath) throws {
        let fd = try FileDescriptor.open(
            path, .writeOnly, options: [.create, .truncate, .closeOnExec], permissions: [.ownerReadWrite])
        try fd.closeAfter { _ = try fd.writeAll(bytes) }
    }
}
