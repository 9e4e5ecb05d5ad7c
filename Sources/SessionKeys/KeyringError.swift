import HostLimits
import SystemPackage

/// A keyring system call, named in the errors it reports.
public enum KeyringCall: String, Sendable {
    /// `add_key(2)` of a new key into the thread keyring.
    case addKey = "add_key"
    /// `keyctl(KEYCTL_SETPERM)`.
    case setPermissions = "keyctl(KEYCTL_SETPERM)"
    /// `keyctl(KEYCTL_MOVE)` from the thread keyring to the user keyring.
    case move = "keyctl(KEYCTL_MOVE)"
    /// `keyctl(KEYCTL_SEARCH)` of the user keyring.
    case search = "keyctl(KEYCTL_SEARCH)"
    /// `keyctl(KEYCTL_READ)`.
    case read = "keyctl(KEYCTL_READ)"
    /// `keyctl(KEYCTL_REVOKE)`.
    case revoke = "keyctl(KEYCTL_REVOKE)"
    /// `keyctl(KEYCTL_UNLINK)` from the user keyring.
    case unlink = "keyctl(KEYCTL_UNLINK)"
    /// `keyctl(KEYCTL_UPDATE)` of a session directory's key record.
    case update = "keyctl(KEYCTL_UPDATE)"
    /// `keyctl(KEYCTL_READ)` of the user keyring itself: the keys it holds.
    case list = "keyctl(KEYCTL_READ) of the user keyring"
}

/// Why a window's key could not be found, made or revoked. No case carries key bytes.
public enum KeyringError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kernel or a sandbox refuses the keyring itself (`ENOSYS`: no keys in this kernel;
    /// `EPERM`/`EACCES`: a seccomp profile or security module; `EOPNOTSUPP`: a kernel older
    /// than 5.7, without the exclusive move a new key needs). Incognito tabs are then kept in
    /// memory only: never with a key on disk.
    case unavailable(Errno)
    /// `call` failed for another reason (`EDQUOT`: the user's key quota is spent; `EEXIST`
    /// from `.move` with no live key to read: a revoked key still holds the name until the
    /// kernel collects it).
    case failed(KeyringCall, Errno)
    /// The key under the window's name holds `payloadBytes` bytes, not a window key's
    /// `KernelKeyring.keyBytes`: someone else's key, never used.
    case notAWindowKey(payloadBytes: Int)
    /// The key under a session directory's name is no record (`SessionKeyRecord`): never used.
    case notARecord(payloadBytes: Int)
    /// A record would hold more than `Limits.maxKeysPerSessionRecord` keys.
    case recordFull

    /// Sorts the errno of a failed `call`: refusals of the keyring itself become `.unavailable`.
    init(call: KeyringCall, errno: Errno) {
        switch errno {
        case .noFunction, .notPermitted, .permissionDenied, .notSupported: self = .unavailable(errno)
        default: self = .failed(call, errno)
        }
    }

    /// A line for logs.
    public var description: String {
        switch self {
        case .unavailable(let errno): "the kernel keyring is unavailable: \(errno)"
        case .failed(let call, let errno): "\(call.rawValue) failed: \(errno)"
        case .notAWindowKey(let bytes):
            "the key under this window's name holds \(bytes) bytes, not \(KernelKeyring.keyBytes)"
        case .notARecord(let bytes):
            "the key under this session directory's name holds \(bytes) bytes, which is no key record"
        case .recordFull: "the session directory's key record holds \(Limits.maxKeysPerSessionRecord) keys already"
        }
    }
}
