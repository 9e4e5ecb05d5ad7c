import Foundation
import Glibc
import SessionKeys
import SystemPackage

/// A window's incognito key in the kernel's user keyring (`SessionKeys`), named for the root's
/// device and inode and the window's UUID: two copies of a root never share a key.
struct KernelIncognitoKeys: IncognitoKeyStore {
    let root: FilePath
    let window: UUID
    let keyring = KernelKeyring()

    /// The key's name, from the root as it is now (stat, not following a symlink).
    private func name() throws(IncognitoKeyError) -> WindowKeyName {
        do {
            return try WindowKeyName(root: root.string, window: window)
        } catch {
            throw .failed("stat \(root): \(error)")
        }
    }

    /// A key of another size under the window's name was never one of ours (a same-uid process
    /// planted it): nothing was sealed with it, so it is revoked and unlinked, freeing the name,
    /// and the window has no key. Left in place, it would fail every incognito save for good.
    func existingKey() throws(IncognitoKeyError) -> [UInt8]? {
        let name = try name()
        do {
            return try keyring.find(name)
        } catch .notAWindowKey {
            do {
                try keyring.revoke(name)
                return try keyring.find(name)
            } catch {
                throw Self.translate(error)
            }
        } catch {
            throw Self.translate(error)
        }
    }

    func key() throws(IncognitoKeyError) -> [UInt8] {
        if let existing = try existingKey() { return existing }
        let name = try name()
        do {
            return try keyring.create(name)
        } catch {
            throw Self.translate(error)
        }
    }

    func revoke() throws(IncognitoKeyError) {
        let name = try name()
        do {
            try keyring.revoke(name)
        } catch {
            throw Self.translate(error)
        }
    }

    private static func translate(_ error: KeyringError) -> IncognitoKeyError {
        switch error {
        case .unavailable: .unavailable("\(error)")
        case .failed, .notAWindowKey: .failed("\(error)")
        }
    }
}

/// A window closed for good (`ctl close-window`): its incognito key is revoked, so whatever
/// copy of its sealed files survives is never read again.
public enum ClosedWindowKey {
    public static func revoke(root: FilePath, window: UUID) throws(IncognitoKeyError) {
        try KernelIncognitoKeys(root: root, window: window).revoke()
    }
}
