import Foundation
import Glibc
import IOUring
import Platform
import SystemPackage

/// A report a command writes where its user asked (`stress` and `bench`, `--html` and
/// `--json`): private to the user (0600), there whole or not at all, never written through a
/// symlink.
public enum ReportFile {
    /// A report path that is a symlink.
    public struct SymlinkRefused: Error, CustomStringConvertible {
        public let path: FilePath
        public var description: String {
            "\(path) is a symlink: a report is never written through one; remove it or choose another file"
        }
    }

    /// Writes `bytes` to `path` atomically: into a new temporary file beside it (`O_CREAT|O_EXCL|
    /// O_NOFOLLOW`, 0600 whatever the umask), synced, then renamed over `path`. The directory
    /// the user named is resolved once (`realpath`); `path` itself, when it is a symlink, is
    /// refused (a rename would replace it, but the user may have meant its target).
    public static func write(_ bytes: [UInt8], to path: FilePath) throws {
        guard let name = path.lastComponent else { throw Errno.invalidArgument }
        let named = path.removingLastComponent()
        guard let resolved = realpath(named.isEmpty ? "." : named.string, nil) else { throw Errno(rawValue: errno) }
        let directory = FilePath(platformString: resolved)
        free(resolved)
        let target = directory.appending(name)
        guard try NoFollow.kind(target) != .symlink else { throw SymlinkRefused(path: path) }
        let temporary = directory.appending(".\(name).\(getpid()).tmp")
        try NoFollow.replace(target, through: temporary, with: bytes)
    }
}
