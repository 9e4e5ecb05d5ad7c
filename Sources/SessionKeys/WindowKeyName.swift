import FoundationEssentials
import Glibc
import HostLimits
import SystemPackage

/// The description of one window's key in the kernel's user keyring:
/// `windowhost:<root st_dev>:<root st_ino>:<window UUID>`. The root's device and inode, not its
/// path, tell two copies of a root apart (tests copy fixtures; a user may copy a profile), so
/// neither ever reads or revokes the other's keys, and a root that is renamed keeps its keys.
public struct WindowKeyName: Hashable, Sendable, CustomStringConvertible {
    /// What every description this program gives a key starts with.
    public static let prefix = "windowhost:"

    /// The root directory's device (`st_dev`).
    public let rootDevice: UInt64
    /// The root directory's inode (`st_ino`).
    public let rootInode: UInt64
    /// The window whose incognito tabs the key protects.
    public let window: UUID

    /// The name of `window`'s key in the root with device `rootDevice` and inode `rootInode`.
    public init(rootDevice: UInt64, rootInode: UInt64, window: UUID) {
        self.rootDevice = rootDevice
        self.rootInode = rootInode
        self.window = window
    }

    /// The name of `window`'s key in the root at `root` as it is now (`lstat`: a symlink is
    /// never followed): the one place a root's identity becomes a key's name.
    public init(root: String, window: UUID) throws(Errno) {
        var status = stat()
        guard lstat(root, &status) == 0 else { throw Errno(rawValue: errno) }
        self.init(rootDevice: UInt64(status.st_dev), rootInode: UInt64(status.st_ino), window: window)
    }

    /// The key's description in the keyring (it names the key, never holds its bytes).
    public var description: String {
        "\(Self.rootPrefix(rootDevice: rootDevice, rootInode: rootInode))\(window.uuidString)"
    }

    /// What the description of every key and record of one root starts with.
    public static func rootPrefix(rootDevice: UInt64, rootInode: UInt64) -> String {
        "\(prefix)\(rootDevice):\(rootInode):"
    }
}

/// The name of the key record that goes with one session directory (a window's directory, or
/// the set-aside entry it became): `windowhost:<root st_dev>:<root st_ino>:session:<directory
/// st_dev>:<directory st_ino>`. A rename keeps a directory's device and inode, so the record
/// follows the session wherever the host moves it (set aside, adopted, sent back) with no key
/// to rename: kernel keys cannot be. The record holds the keys the session's sealed files
/// need (`SessionKeyRecord`), each with the window its records are bound to.
public struct SessionKeyName: Hashable, Sendable, CustomStringConvertible {
    public let rootDevice: UInt64
    public let rootInode: UInt64
    public let directoryDevice: UInt64
    public let directoryInode: UInt64

    public init(rootDevice: UInt64, rootInode: UInt64, directoryDevice: UInt64, directoryInode: UInt64) {
        (self.rootDevice, self.rootInode) = (rootDevice, rootInode)
        (self.directoryDevice, self.directoryInode) = (directoryDevice, directoryInode)
    }

    /// The name of the record of the directory at `directory`, in the root at `root`, both as
    /// they are now (`lstat`: a symlink is never followed, and is no session directory).
    public init(root: String, directory: String) throws(Errno) {
        var rootStatus = stat()
        var status = stat()
        guard lstat(root, &rootStatus) == 0, lstat(directory, &status) == 0 else { throw Errno(rawValue: errno) }
        guard (status.st_mode & S_IFMT) == S_IFDIR else { throw Errno.notDirectory }
        self.init(
            rootDevice: UInt64(rootStatus.st_dev), rootInode: UInt64(rootStatus.st_ino),
            directoryDevice: UInt64(status.st_dev), directoryInode: UInt64(status.st_ino))
    }

    public var description: String {
        "\(WindowKeyName.rootPrefix(rootDevice: rootDevice, rootInode: rootInode))session:\(directoryDevice):\(directoryInode)"
    }
}

/// What a session directory's key record holds: window keys, each with the window whose UUID
/// its sealed records are bound to. The one encoding: per key, the window's 16 bytes then the
/// key's `KernelKeyring.keyBytes`; at least one key, at most `Limits.maxKeysPerSessionRecord`.
public struct SessionKeyRecord: Equatable, Sendable {
    public struct Entry: Equatable, Sendable {
        public let window: UUID
        public let key: [UInt8]

        public init(window: UUID, key: [UInt8]) {
            precondition(key.count == KernelKeyring.keyBytes, "a window key is \(KernelKeyring.keyBytes) bytes")
            (self.window, self.key) = (window, key)
        }
    }

    public private(set) var entries: [Entry]

    static let entryBytes = 16 + KernelKeyring.keyBytes

    public init(_ entries: [Entry]) {
        precondition(
            !entries.isEmpty && entries.count <= Limits.maxKeysPerSessionRecord,
            "a record holds 1...\(Limits.maxKeysPerSessionRecord) keys")
        self.entries = entries
    }

    /// `entry` added, unless a key with the same bytes and window is held already.
    public func adding(_ entry: Entry) throws(KeyringError) -> SessionKeyRecord {
        if entries.contains(entry) { return self }
        guard entries.count < Limits.maxKeysPerSessionRecord else { throw .recordFull }
        return SessionKeyRecord(entries + [entry])
    }

    var bytes: [UInt8] {
        entries.flatMap { entry in withUnsafeBytes(of: entry.window.uuid) { Array($0) } + entry.key }
    }

    /// The record `bytes` encode; nil for any other length.
    init?(bytes: [UInt8]) {
        guard !bytes.isEmpty, bytes.count % Self.entryBytes == 0,
            bytes.count / Self.entryBytes <= Limits.maxKeysPerSessionRecord
        else {
            return nil
        }
        entries = stride(from: 0, to: bytes.count, by: Self.entryBytes).map { start in
            let id = Array(bytes[start..<(start + 16)])
            let window = UUID(
                uuid: (
                    id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7], id[8], id[9], id[10], id[11], id[12],
                    id[13], id[14], id[15]
                ))
            return Entry(window: window, key: Array(bytes[(start + 16)..<(start + Self.entryBytes)]))
        }
    }
}
