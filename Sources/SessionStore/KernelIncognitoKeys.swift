import BrowserModel
import Foundation
import Glibc
import HostLimits
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

    /// A directory not made yet has no record. A key under the record's name that is none
    /// (planted by a same-uid process) holds nothing of ours: revoked, freeing the name.
    func recordedKeys() throws(IncognitoKeyError) -> [(window: UUID, key: [UInt8])] {
        try Self.recordedKeys(root: root, directory: DiskLayout.windowDirectory(root: root, name: window.uuidString))
    }

    /// The keys of `directory`'s record (none when it has none, or is no directory).
    static func recordedKeys(root: FilePath, directory: FilePath) throws(IncognitoKeyError) -> [(
        window: UUID, key: [UInt8]
    )] {
        let keyring = KernelKeyring()
        let name: SessionKeyName
        do {
            name = try SessionKeyName(root: root.string, directory: directory.string)
        } catch .noSuchFileOrDirectory, .notDirectory {
            // Not made yet, or no session directory (a symlink is never one): nothing recorded.
            return []
        } catch {
            throw .failed("stat \(directory): \(error)")
        }
        do {
            return try keyring.record(name)?.entries.map { ($0.window, $0.key) } ?? []
        } catch .notARecord {
            do { try keyring.revoke(name) } catch { throw Self.translate(error) }
            return []
        } catch {
            throw Self.translate(error)
        }
    }

    static func translate(_ error: KeyringError) -> IncognitoKeyError {
        switch error {
        case .unavailable: .unavailable("\(error)")
        case .failed, .notAWindowKey, .notARecord, .recordFull: .failed("\(error)")
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

/// The key records that go with session directories (`SessionKeyName`), as the supervisor
/// moves sessions: a window's key goes with its session when it is set aside, an adopting
/// window's key goes back with the session when the adoption is undone, and the record is
/// revoked when the entry is discarded or its adoption is done. Each call names the directory
/// as it is now; a rename keeps its identity, so the record follows it. Where the keyring is
/// refused nothing is sealed, and every call does nothing.
public enum SessionKeyRecords {
    /// Adds `window`'s key, if it has one, to the record of `directory` (made if there is
    /// none): before `directory` leaves the window (set aside, or an adoption undone), so the
    /// key outlives the window's. Whether a key was added.
    @discardableResult
    public static func keep(root: FilePath, window: UUID, directory: FilePath) throws(IncognitoKeyError) -> Bool {
        let key: [UInt8]
        do {
            guard let existing = try KernelIncognitoKeys(root: root, window: window).existingKey() else { return false }
            key = existing
        } catch .unavailable {
            return false
        }
        let name = try recordName(root: root, directory: directory)
        let kept = SessionKeyRecord.Entry(window: window, key: key)
        do throws(KeyringError) {
            let keyring = KernelKeyring()
            let record =
                try keyring.record(name).map { record throws(KeyringError) in try record.adding(kept) }
                ?? SessionKeyRecord([kept])
            try keyring.store(record, as: name)
        } catch {
            throw KernelIncognitoKeys.translate(error)
        }
        return true
    }

    /// Whether `directory`'s record can take one more key (`Limits.maxKeysPerSessionRecord`):
    /// an adoption of the session is begun only then, so the adopting window's key has a place
    /// to go back to if it is undone. A refused keyring has nothing to keep.
    public static func hasRoom(root: FilePath, directory: FilePath) throws(IncognitoKeyError) -> Bool {
        do {
            return try KernelIncognitoKeys.recordedKeys(root: root, directory: directory).count
                < Limits.maxKeysPerSessionRecord
        } catch .unavailable {
            return true
        }
    }

    /// Revokes the record of `directory` (none is fine): the session's keys die with it.
    public static func revoke(root: FilePath, directory: FilePath) throws(IncognitoKeyError) {
        let name = try recordName(root: root, directory: directory)
        do throws(KeyringError) {
            try KernelKeyring().revoke(name)
        } catch .unavailable {
            return
        } catch {
            throw KernelIncognitoKeys.translate(error)
        }
    }

    private static func recordName(root: FilePath, directory: FilePath) throws(IncognitoKeyError) -> SessionKeyName {
        do {
            return try SessionKeyName(root: root.string, directory: directory.string)
        } catch {
            throw .failed("stat \(directory): \(error)")
        }
    }
}
