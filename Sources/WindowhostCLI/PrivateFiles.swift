import ArgumentParser
import Foundation
import Glibc
import IOUring
import Platform
import SessionKeys
import Stress
import SystemPackage

/// Files and directories the host creates are private to its user: directories 0700, files 0600.
enum PrivateFiles {
    /// A new 0700 directory under `$TMPDIR` (else /tmp), its path resolved (`realpath`): the
    /// stores walk it without following symlinks, so one in `$TMPDIR` must not stay in it.
    static func makeTemporaryDirectory(prefix: String) throws -> FilePath {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw Errno(rawValue: errno) }
        let made = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        try setDirectoryMode(made)
        return try resolvedPath(made)
    }

    /// Creates `path` and its missing parents, each 0700 whatever the umask.
    /// Revokes the keys of a root this program made for one run, before it is deleted: they
    /// are named by the root's device and inode, so they would outlive its files in the user
    /// keyring and name the next root given the same inode. Best effort: the run's outcome is
    /// what it reports.
    static func forgetTemporaryRootKeys(_ root: FilePath) {
        // Resolved as `run` resolves the root it is given (`checkedRoot`): a symlink named as
        // the root is not the directory whose device and inode name the keys.
        let resolved = (try? resolvedPath(root)) ?? root
        _ = try? KernelKeyring().revokeEveryKey(ofRootAt: resolved.string)
    }

    static func makeDirectories(_ path: FilePath) throws {
        var current = path.root.map { FilePath(root: $0) } ?? FilePath()
        for component in path.components {
            current.append(component)
            if mkdir(current.string, 0o700) == 0 {
                try setDirectoryMode(current)
            } else if errno != EEXIST {
                throw Errno(rawValue: errno)
            }
        }
    }

    /// 0700 on a directory just made (`mkdir` and `mkdtemp` modes are cut by the umask).
    private static func setDirectoryMode(_ path: FilePath) throws {
        let fd = try FileDescriptor.open(path, .readOnly, options: [.directory, .noFollow, .closeOnExec])
        try fd.closeAfter { try NoFollow.setPrivateMode(fd.rawValue, 0o700) }
    }

    /// Writes `bytes` to a new or truncated file, 0600 whatever the umask.
    static func write(_ bytes: [UInt8], to path: FilePath) throws {
        let fd = try FileDescriptor.open(
            path, .writeOnly, options: [.create, .truncate, .closeOnExec], permissions: [.ownerReadWrite])
        try fd.closeAfter {
            try NoFollow.setPrivateMode(fd.rawValue, 0o600)
            _ = try fd.writeAll(bytes)
        }
    }

    /// The root a command that writes it may use, as ssh requires of `~/.ssh`: created 0700
    /// (with its missing parents) when it does not exist; otherwise a directory owned by the
    /// running user and writable by no one else. A symlink the user named as the root is
    /// followed, once, here: its target is what is checked and what is returned (resolved by
    /// `realpath`), and nothing below it is ever reached through a symlink.
    static func checkedRoot(_ path: FilePath) throws(RootRefusal) -> FilePath {
        if access(path.string, F_OK) != 0 {
            do {
                try makeDirectories(path)
            } catch {
                throw .cannotCreate(path, (error as? Errno) ?? .ioError)
            }
        }
        let root: FilePath
        do {
            root = try resolvedPath(path)
        } catch {
            throw .cannotCreate(path, error)
        }
        var status = stat()
        guard lstat(root.string, &status) == 0 else { throw .cannotCreate(root, Errno(rawValue: errno)) }
        guard status.st_mode & S_IFMT == S_IFDIR else { throw .notDirectory(root) }
        let user = geteuid()
        guard status.st_uid == user else { throw .notOwned(root, owner: status.st_uid, user: user) }
        guard status.st_mode & 0o022 == 0 else { throw .writableByOthers(root, mode: status.st_mode & 0o7777) }
        return root
    }

    /// `checkedRoot`, for a command: a refusal is said on stderr and becomes the exit status.
    static func checkedRootOrExit(_ path: FilePath) throws(ExitCode) -> FilePath {
        do {
            return try checkedRoot(path)
        } catch {
            StandardStreams.error("windowhost: \(error)\n")
            throw error.exitCode
        }
    }

    /// `realpath`: absolute, with every symlink resolved.
    static func resolvedPath(_ path: FilePath) throws(Errno) -> FilePath {
        guard let resolved = realpath(path.string, nil) else { throw Errno(rawValue: errno) }
        defer { free(resolved) }
        return FilePath(platformString: resolved)
    }
}

/// Why a root is refused: exit 77 (EX_NOPERM), with the fix named.
enum RootRefusal: Error, CustomStringConvertible {
    case notOwned(FilePath, owner: uid_t, user: uid_t)
    case writableByOthers(FilePath, mode: mode_t)
    case notDirectory(FilePath)
    case cannotCreate(FilePath, Errno)

    var description: String {
        switch self {
        case .notOwned(let root, let owner, let user):
            "\(root) belongs to uid \(owner), not to you (uid \(user)): another user could change your sessions. "
                + "Run `chown \(user) \(root)` as root, or choose another --root"
        case .writableByOthers(let root, let mode):
            "\(root) is writable by its group or others (mode \(String(mode, radix: 8))): "
                + "anyone could plant files in your sessions. Run `chmod 700 \(root)`"
        case .notDirectory(let root): "\(root) is not a directory: choose another --root"
        case .cannotCreate(let root, let error): "cannot create \(root): \(error)"
        }
    }

    /// 77 for a root that is someone else's or open to others; 74 when it could not be made.
    var exitCode: ExitCode {
        if case .cannotCreate = self { return ExitCode(.ioError) }
        return ExitCode(.permission)
    }
}
