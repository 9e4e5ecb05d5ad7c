import Foundation
import SessionStore

/// The kernel keyring beside a simulated disk (`FaultEngine`): keys outlive every store made
/// over the disk (a worker or supervisor killed) and a power cut, as the kernel's do, and go
/// when a test says the machine restarted (`reboot`) or a store revokes them. `refused` plays
/// a sandbox that refuses the keyring; `failing` a keyring that answers some calls with a
/// transient failure (a spent quota, the root's stat failing while it is moved).
public final class SimulatedKeyring: @unchecked Sendable {
    private var keys: [UUID: [UInt8]] = [:]
    /// Every key ever made or revoked, in order, for tests to look at.
    public private(set) var made: [UUID] = []
    public private(set) var revoked: [UUID] = []
    /// The keyring is refused, as a sandbox refuses `add_key`.
    public var refused = false
    /// The calls that fail now (`IncognitoKeyError.failed`), until a test clears them.
    public var failing: Set<Call> = []

    /// A call of `IncognitoKeyStore`.
    public enum Call: Hashable, Sendable { case existingKey, key, revoke }

    public init() {}

    /// The machine restarted: every key is gone.
    public func reboot() { keys.removeAll() }

    /// Whether `window` has a key now.
    public func holdsKey(for window: UUID) -> Bool { keys[window] != nil }

    /// The key store of one window.
    public func keys(for window: UUID) -> any IncognitoKeyStore { WindowKeys(keyring: self, window: window) }

    /// Throws what a refused or failing keyring answers `call`.
    private func check(_ call: Call) throws(IncognitoKeyError) {
        guard !refused else { throw .unavailable("refused (simulated)") }
        guard !failing.contains(call) else { throw .failed("\(call) failing (simulated)") }
    }

    private struct WindowKeys: IncognitoKeyStore {
        let keyring: SimulatedKeyring
        let window: UUID

        func existingKey() throws(IncognitoKeyError) -> [UInt8]? {
            try keyring.check(.existingKey)
            return keyring.keys[window]
        }

        func key() throws(IncognitoKeyError) -> [UInt8] {
            try keyring.check(.key)
            if let key = keyring.keys[window] { return key }
            var generator = SystemRandomNumberGenerator()
            let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            keyring.keys[window] = key
            keyring.made.append(window)
            return key
        }

        func revoke() throws(IncognitoKeyError) {
            try keyring.check(.revoke)
            keyring.keys[window] = nil
            keyring.revoked.append(window)
        }
    }
}
