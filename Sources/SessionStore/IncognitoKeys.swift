import Foundation

/// Where a window's incognito key is kept: the kernel's user keyring in the host
/// (`KernelIncognitoKeys`), never a file. A key outlives the worker and the supervisor, and
/// dies with the machine or a revocation; files sealed with a key that is gone are never read
/// again.
public protocol IncognitoKeyStore {
    /// The window's key if one is held; nil when there is none (never made, or gone).
    func existingKey() throws(IncognitoKeyError) -> [UInt8]?
    /// The window's key, made now if none is held.
    func key() throws(IncognitoKeyError) -> [UInt8]
    /// The key is revoked: gone for every process at once. None held is fine.
    func revoke() throws(IncognitoKeyError)
    /// The keys of the window directory's own record (`SessionKeyRecords`), each with the
    /// window its records are bound to: a set-aside session's, while it is adopted. Empty when
    /// there is none.
    func recordedKeys() throws(IncognitoKeyError) -> [(window: UUID, key: [UInt8])]
}

extension IncognitoKeyStore {
    /// A store that keeps no records (a simulated keyring) has none.
    public func recordedKeys() throws(IncognitoKeyError) -> [(window: UUID, key: [UInt8])] { [] }
}

/// Why a key could not be had.
public enum IncognitoKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The keyring itself is refused (a sandbox, a kernel without it): incognito is kept in
    /// memory only, for the worker's life.
    case unavailable(String)
    /// The keyring answered with a failure (out of quota, a key of the wrong size under the
    /// window's name): the save fails and is tried again.
    case failed(String)

    public var description: String {
        switch self {
        case .unavailable(let reason): "the kernel keyring is unavailable: \(reason)"
        case .failed(let reason): "the kernel keyring failed: \(reason)"
        }
    }
}
