import FoundationEssentials
import Glibc
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
    public var description: String { "\(Self.prefix)\(rootDevice):\(rootInode):\(window.uuidString)" }
}
