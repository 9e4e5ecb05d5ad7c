import CLinuxShims
import Glibc
import HostLimits
import SystemPackage

/// Windows' incognito keys in the kernel's user keyring (`KEY_SPEC_USER_KEYRING`), one `user`
/// key per window (`WindowKeyName`), readable and writable by this uid only (permissions
/// 0x3f3f0000: possessor and owner everything, group and others nothing).
///
/// The keyring, not a file, holds them: a key outlives any process of this uid that dies (the
/// user keyring stays in the user namespace's registry), so a worker or a supervisor killed
/// with SIGKILL leaves it for the next one, and it never reaches a disk, so a reboot or a
/// `revoke` shreds every file it encrypted. Where the keyring is refused, every call throws
/// `.unavailable`, and the caller keeps incognito tabs in memory only.
///
/// Every call is synchronous and finishes on the thread that made it (a new key is staged in
/// that thread's keyring). Key bytes are returned to the caller and never logged.
public struct KernelKeyring: Sendable {
    /// A window key's length: AES-256's.
    public static let keyBytes = 32

    /// The user keyring of the calling process's uid.
    public init() {}

    /// The bytes of `name`'s key, or nil when there is none (never made, revoked, expired).
    /// Throws `.notAWindowKey` when the key under the name is not `keyBytes` long.
    public func find(_ name: WindowKeyName) throws(KeyringError) -> [UInt8]? {
        guard let serial = try search(name.description), let (bytes, length) = try read(serial, capacity: Self.keyBytes)
        else { return nil }
        guard length == Self.keyBytes else { throw .notAWindowKey(payloadBytes: length) }
        return bytes
    }

    /// The key record of a session directory, or nil when there is none (never made, revoked).
    /// Throws `.notARecord` when the key under the name does not decode as one.
    public func record(_ name: SessionKeyName) throws(KeyringError) -> SessionKeyRecord? {
        let capacity = Limits.maxKeysPerSessionRecord * SessionKeyRecord.entryBytes
        guard let serial = try search(name.description), let (bytes, length) = try read(serial, capacity: capacity)
        else { return nil }
        guard length <= capacity, let record = SessionKeyRecord(bytes: bytes) else {
            throw .notARecord(payloadBytes: length)
        }
        return record
    }

    /// Makes `record` the key record under `name`: the key there has its payload replaced at
    /// once (`KEYCTL_UPDATE`: every reader sees the old record or the new one), or, with none
    /// there, a new key is published as `create` publishes one (owner-only from its birth).
    public func store(_ record: SessionKeyRecord, as name: SessionKeyName) throws(KeyringError) {
        let bytes = record.bytes
        for _ in 0..<2 {
            if let serial = try search(name.description) {
                if bytes.withUnsafeBytes({ wh_key_update(serial, $0.baseAddress, $0.count) }) == 0 { return }
                let errno = Errno(rawValue: Glibc.errno)
                // Revoked since the search: the name is freed below, and a new key published.
                guard Self.isGone(errno) else { throw KeyringError(call: .update, errno: errno) }
                try revoke(description: name.description)
            }
            // Another process publishing one first is no failure: the loop updates that one.
            if try publish(bytes, as: name.description) { return }
        }
        throw .failed(.move, .fileExists)
    }

    /// Revokes and unlinks a session directory's key record (`revoke` of a window's key).
    public func revoke(_ name: SessionKeyName) throws(KeyringError) {
        try revoke(description: name.description)
    }

    /// A new key for `name`: `keyBytes` random bytes (getrandom(2)), staged in this thread's
    /// keyring, cut to owner-only permissions, then moved into the user keyring only if no key
    /// of that name is there (`KEYCTL_MOVE_EXCL`). When one is, its bytes are returned instead,
    /// so processes that race to make the same window's key all get the one that won.
    public func create(_ name: WindowKeyName) throws(KeyringError) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<Self.keyBytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        if try publish(bytes, as: name.description) { return bytes }
        // Another process (or thread) published this window's key first: use that one. A dead
        // key that still holds the name (revoked by someone else and not yet collected) leaves
        // nothing to use.
        guard let existing = try find(name) else { throw .failed(.move, .fileExists) }
        return existing
    }

    /// Publishes a new key holding `bytes` under `description`: staged in this thread's
    /// keyring, cut to owner-only permissions, then moved into the user keyring only if no key
    /// of that name is there (`KEYCTL_MOVE_EXCL`). False when one is (it is left as it is).
    private func publish(_ bytes: [UInt8], as description: String) throws(KeyringError) -> Bool {
        // Staged in the thread keyring, the key is reachable from this thread alone until the
        // move, so the default permissions it is born with are never visible to anyone else.
        let staged = bytes.withUnsafeBytes { wh_key_add_staged(description, $0.baseAddress, $0.count) }
        if staged < 0 { throw KeyringError(call: .addKey, errno: Errno(rawValue: Glibc.errno)) }
        if wh_key_set_owner_only(staged) != 0 {
            let errno = Errno(rawValue: Glibc.errno)
            Self.discardStaged(staged)
            throw KeyringError(call: .setPermissions, errno: errno)
        }
        if wh_key_publish(staged) == 0 { return true }
        let errno = Errno(rawValue: Glibc.errno)
        Self.discardStaged(staged)
        guard errno == .fileExists else { throw KeyringError(call: .move, errno: errno) }
        return false
    }

    /// `name`'s key, made if there is none (`find`, then `create`).
    public func findOrCreate(_ name: WindowKeyName) throws(KeyringError) -> [UInt8] {
        if let existing = try find(name) { return existing }
        return try create(name)
    }

    /// Revokes `name`'s key: every process's next use of it fails and the kernel frees its
    /// bytes at once; then unlinks it, so the name is free for a new key. No key is no error.
    public func revoke(_ name: WindowKeyName) throws(KeyringError) {
        try revoke(description: name.description)
    }

    private func revoke(description: String) throws(KeyringError) {
        guard let serial = try search(description) else { return }
        try revoke(serial: serial)
    }

    private func revoke(serial: wh_key_serial) throws(KeyringError) {
        if wh_key_revoke(serial) != 0 {
            // Revoked by another process since the search: gone already, still to unlink.
            let errno = Errno(rawValue: Glibc.errno)
            if !Self.isGone(errno) { throw KeyringError(call: .revoke, errno: errno) }
        }
        // ENOENT: another process unlinked it first.
        if wh_key_unlink_from_user(serial) != 0 {
            let errno = Errno(rawValue: Glibc.errno)
            if errno != .noSuchFileOrDirectory, !Self.isGone(errno) { throw KeyringError(call: .unlink, errno: errno) }
        }
    }

    /// Revokes and unlinks every key and record of the root with device `rootDevice` and inode
    /// `rootInode` (`WindowKeyName.rootPrefix`): for a root being deleted, whose keys would
    /// otherwise stay in the user keyring until reboot, and name a new root that gets the same
    /// device and inode. Returns how many went.
    @discardableResult
    public func revokeEveryKey(rootDevice: UInt64, rootInode: UInt64) throws(KeyringError) -> Int {
        let prefix = WindowKeyName.rootPrefix(rootDevice: rootDevice, rootInode: rootInode)
        var revoked = 0
        for serial in try userKeys() {
            guard let description = try userKeyDescription(serial), description.hasPrefix(prefix) else { continue }
            try revoke(serial: serial)
            revoked += 1
        }
        return revoked
    }

    /// `revokeEveryKey` of the root at `root` as it is now (`lstat`: a symlink is never
    /// followed); none when nothing is there.
    @discardableResult
    public func revokeEveryKey(ofRootAt root: String) throws(KeyringError) -> Int {
        var status = stat()
        guard lstat(root, &status) == 0 else { return 0 }
        return try revokeEveryKey(rootDevice: UInt64(status.st_dev), rootInode: UInt64(status.st_ino))
    }

    /// The serials of the keys the user keyring holds now.
    private func userKeys() throws(KeyringError) -> [wh_key_serial] {
        var capacity = 64
        while true {
            var count = 0
            let serials = [wh_key_serial](unsafeUninitializedCapacity: capacity) { buffer, initialized in
                count = wh_key_list_user(buffer.baseAddress, buffer.count)
                initialized = (0...capacity).contains(count) ? count : 0
            }
            if count < 0 { throw KeyringError(call: .list, errno: Errno(rawValue: Glibc.errno)) }
            if count <= capacity { return serials }
            // Keys came meanwhile: read again with room for them.
            capacity = count
        }
    }

    /// The description of `serial` when it is a `user` key, nil for another type or a key gone
    /// since the listing (or not ours to describe).
    private func userKeyDescription(_ serial: wh_key_serial) throws(KeyringError) -> String? {
        var capacity = 256
        while true {
            var length = 0
            let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
                length = buffer.baseAddress.map { wh_key_describe(serial, $0, buffer.count) } ?? -1
                initialized = (1...capacity).contains(length) ? length - 1 : 0
            }
            if length < 0 {
                let errno = Errno(rawValue: Glibc.errno)
                if Self.isGone(errno) || errno == .permissionDenied { return nil }
                throw KeyringError(call: .list, errno: errno)
            }
            if length <= capacity {
                // `type;uid;gid;perm;description`: the description is the rest after the fourth `;`.
                let fields = String(decoding: bytes, as: UTF8.self).split(
                    separator: ";", maxSplits: 4, omittingEmptySubsequences: false)
                return fields.count == 5 && fields[0] == "user" ? String(fields[4]) : nil
            }
            capacity = length
        }
    }

    /// The serial of the live key under `description`; nil when there is none.
    private func search(_ description: String) throws(KeyringError) -> wh_key_serial? {
        let serial = wh_key_search_user(description)
        if serial < 0 {
            let errno = Errno(rawValue: Glibc.errno)
            if Self.isGone(errno) { return nil }
            throw KeyringError(call: .search, errno: errno)
        }
        return serial
    }

    /// The payload of the key `serial` and its length: the bytes only when it is at most
    /// `capacity` long (else none: no key of ours); nil when it died after the search.
    private func read(_ serial: wh_key_serial, capacity: Int) throws(KeyringError) -> (bytes: [UInt8], length: Int)? {
        var length = 0
        // Read straight into the result: no second copy of the bytes is left behind.
        let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            length = wh_key_read(serial, buffer.baseAddress, buffer.count)
            count = (0...capacity).contains(length) ? length : 0
        }
        if length < 0 {
            let errno = Errno(rawValue: Glibc.errno)
            if Self.isGone(errno) { return nil }
            throw KeyringError(call: .read, errno: errno)
        }
        return (bytes, length)
    }

    /// Whether a keyring call's errno says the key is not there or is dead.
    private static func isGone(_ errno: Errno) -> Bool {
        errno.rawValue == ENOKEY || errno.rawValue == EKEYREVOKED || errno.rawValue == EKEYEXPIRED
    }

    /// Revokes a staged key that will not be published and unlinks it from the thread keyring.
    /// Best effort: a staged key left behind is reachable from this thread only and dies with it.
    private static func discardStaged(_ serial: wh_key_serial) {
        _ = wh_key_revoke(serial)
        _ = wh_key_unlink_from_thread(serial)
    }
}
