import BrowserModel
import Foundation
import Glibc
import HostLimits
import IOUring
import Platform
import SystemPackage

/// The fixed names the host owns directly under its root, and what each must be. One owner for
/// both the supervisor (which refuses to start on a wrong one) and `inspect` (which reports it).
/// The names are spelled once, in `DiskLayout` (BrowserModel), with the rest of the layout.
///
/// - `windows/` (a directory), `windows.order` and `supervisor.lock` (regular files) hold what
///   the host must not lose or must not share: anything else under their name (a symlink, a
///   FIFO, the wrong kind) is refused (`misplacedEntries`), never followed nor replaced, for the
///   user to move away.
/// - `set-aside/` is where windows are moved: something else under its name is itself moved
///   out of the way (`SupervisorFiles`), since it only has to exist.
/// - `handed-out` (a regular file) holds each window's ceilings for seqs and tab ids
///   (`HandedOut` in the supervisor): anything else under its name is set aside like a damaged
///   one, which a safe rule replaces.
/// - `windows.order.tmp` and `handed-out.tmp` are the host's scratch names: whatever has one is
///   removed as itself.
public enum RootLayout {
    /// The entries that must be of one kind, and that kind.
    static let required: [(name: String, kind: EntryKind)] = [
        (DiskLayout.windows, .directory), (DiskLayout.order, .file), (DiskLayout.lock, .file),
    ]

    /// Every required entry under `root` that exists and is not of its kind, checked as itself
    /// (`lstat`): a missing one is fine (the host creates it).
    public static func misplacedEntries(root: FilePath) -> [MisplacedEntry] {
        required.compactMap { name, kind in
            let path = root.appending(name)
            guard let found = EntryDescription(path), found.kind != kind else { return nil }
            return MisplacedEntry(
                path: path.string, found: found.text, expected: kind == .directory ? "a directory" : "a regular file")
        }
    }

    /// `windows.order`'s UUIDs, any spelling, in order; lines that are not UUIDs are skipped.
    /// Empty when it is missing, not a regular file (never followed nor opened), or larger than
    /// `Limits.maxWindowsOrderBytes` (never read past that). The one parse of the file: the
    /// supervisor orders its windows by it, `inspect` its listing. A file that is there and
    /// does not read (EIO, EMFILE) is thrown, never taken for no order: the supervisor would
    /// write its windows back in name order, and the saved order would be lost.
    public static func savedOrder(root: FilePath, engine: any IOEngine) throws(IOEngineError) -> [UUID] {
        let path = root.appending(DiskLayout.order)
        let bytes: EngineBytes
        do {
            bytes = try EngineBytes(engine, path: path)
        } catch
            where [.noSuchFileOrDirectory, .tooManySymbolicLinkLevels, .isDirectory, .noSuchAddressOrDevice].contains(
                error.errno)
        {
            return []
        }
        guard bytes.size <= Limits.maxWindowsOrderBytes else { return [] }
        let text: [UInt8]
        do {
            text = try bytes.read(offset: 0, count: bytes.size)
        } catch {
            throw IOEngineError("pread", path: path.string, errno: .ioError)
        }
        return String(decoding: text, as: UTF8.self).split(separator: "\n").compactMap { UUID(uuidString: String($0)) }
    }
}

/// A fixed entry of the root's layout that is not what the host needs there. The host never
/// follows a symlink under its root nor replaces what it did not write: the user moves it away.
public struct MisplacedEntry: Error, Equatable, Sendable, Encodable, CustomStringConvertible {
    public let path: String
    /// What is there, as itself: "a symlink to /x", "a FIFO", "a directory".
    public let found: String
    public let expected: String

    public var description: String {
        "\(path) is \(found), not \(expected); windowhost never follows symlinks under its root nor replaces what it did not write. "
            + "Move it away (`mv \(path) \(path).old`)"
            + (expected == "a directory" ? ", or replace it with the real directory" : "") + ", then start again"
    }
}

/// What an entry is as itself, said for a person: `lstat`, and the target of a symlink.
struct EntryDescription {
    let kind: EntryKind
    let text: String

    /// Nil when nothing has that name.
    init?(_ path: FilePath) {
        var status = stat()
        guard lstat(path.string, &status) == 0 else { return nil }
        switch status.st_mode & S_IFMT {
        case S_IFDIR: (kind, text) = (.directory, "a directory")
        case S_IFREG: (kind, text) = (.file, "a regular file")
        case S_IFLNK:
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlink(path.string, &buffer, buffer.count - 1)
            let target =
                count >= 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
            (kind, text) = (.symlink, "a symlink to \(target)")
        case S_IFIFO: (kind, text) = (.other, "a FIFO")
        case S_IFSOCK: (kind, text) = (.other, "a socket")
        default: (kind, text) = (.other, "a device")
        }
    }
}
