import Foundation
import Glibc
import SystemPackage

/// What the supervisor keeps under its root, all private to the user (directories 0700, files
/// 0600): `windows/` (one directory per window, the stores'), `windows.order`, `set-aside/`,
/// `supervisor.lock` and the control socket.
struct SupervisorFiles {
    let root: FilePath

    var windows: FilePath { root.appending("windows") }
    var order: FilePath { root.appending("windows.order") }
    var setAside: FilePath { root.appending("set-aside") }
    var lock: FilePath { root.appending("supervisor.lock") }

    func windowDirectory(_ id: UUID) -> FilePath { windows.appending(id.uuidString) }

    func hasSession(_ id: UUID) -> Bool { access(windowDirectory(id).string, F_OK) == 0 }

    /// Windows with a directory under `windows/`.
    func windowsOnDisk() -> [UUID] {
        ((try? FileManager.default.contentsOfDirectory(atPath: windows.string)) ?? []).compactMap(UUID.init(uuidString:))
    }

    /// `windows.order` as saved; empty when missing. Lines that are not UUIDs are skipped.
    func savedOrder() -> [UUID] {
        guard let text = try? String(contentsOfFile: order.string, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { UUID(uuidString: String($0)) }
    }

    /// Replaces `windows.order` atomically: a synced temporary file renamed over it, then the
    /// root directory synced.
    func saveOrder(_ ids: [UUID]) throws {
        let temporary = root.appending("windows.order.tmp")
        let text = ids.map { $0.uuidString + "\n" }.joined()
        let fd = try FileDescriptor.open(temporary, .writeOnly, options: [.create, .truncate, .closeOnExec], permissions: [.ownerReadWrite])
        try fd.closeAfter {
            _ = try fd.writeAll(Array(text.utf8))
            guard fdatasync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
        }
        guard rename(temporary.string, order.string) == 0 else { throw Errno(rawValue: errno) }
        try Self.syncDirectory(root)
    }

    /// Moves a window's whole session to `set-aside/<UUID>-<UTC time>/`, never deleting it.
    /// Nil when the window has nothing on disk.
    func setAside(_ id: UUID, at date: Date) throws -> FilePath? {
        guard hasSession(id) else { return nil }
        try Self.makeDirectory(setAside)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let stamp = formatter.string(from: date)
        var destination = setAside.appending("\(id.uuidString)-\(stamp)")
        var attempt = 1
        while access(destination.string, F_OK) == 0 {
            attempt += 1
            destination = setAside.appending("\(id.uuidString)-\(stamp)-\(attempt)")
        }
        guard rename(windowDirectory(id).string, destination.string) == 0 else { throw Errno(rawValue: errno) }
        try Self.syncDirectory(setAside)
        try Self.syncDirectory(windows)
        return destination
    }

    static func makeDirectory(_ path: FilePath) throws {
        var current = path.root.map { FilePath(root: $0) } ?? FilePath()
        for component in path.components {
            current.append(component)
            if mkdir(current.string, 0o700) == 0 {
                try syncDirectory(current.removingLastComponent())
            } else if errno != EEXIST {
                throw Errno(rawValue: errno)
            }
        }
    }

    static func syncDirectory(_ path: FilePath) throws {
        let fd = try FileDescriptor.open(path, .readOnly, options: [.directory, .closeOnExec])
        try fd.closeAfter {
            guard fsync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
        }
    }
}
