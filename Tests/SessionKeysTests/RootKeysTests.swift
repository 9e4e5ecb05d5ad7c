import Foundation
import SessionKeys
import TestSupport
import Testing

/// What the owner of a root it is deleting calls (`windowhost stress` and `demo` with their
/// temporary roots, the tests with theirs): every key and record of that root goes, and
/// nothing of another's, on the real keyring.
@Suite struct RootKeysTests {
    @Test func everyKeyAndRecordOfTheRootGoesAndNoOtherRootsKey() throws {
        let keyring = KernelKeyring()
        let device = UInt64.random(in: 1...1 << 40)
        let inode = UInt64.random(in: 1...1 << 40)
        let first = WindowKeyName(rootDevice: device, rootInode: inode, window: UUID())
        let second = WindowKeyName(rootDevice: device, rootInode: inode, window: UUID())
        let record = SessionKeyName(
            rootDevice: device, rootInode: inode, directoryDevice: device, directoryInode: inode + 1)
        // Its inode starts with the first root's digits: only the whole number names a root.
        let other = WindowKeyName(rootDevice: device, rootInode: inode * 10 + 3, window: UUID())
        defer { cleanUp(other) }
        let key = try keyring.create(first)
        _ = try keyring.create(second)
        _ = try keyring.create(other)
        try keyring.store(SessionKeyRecord([.init(window: first.window, key: key)]), as: record)

        #expect(try keyring.revokeEveryKey(rootDevice: device, rootInode: inode) == 3)
        #expect(try keyring.find(first) == nil && keyring.find(second) == nil)
        #expect(try keyring.record(record) == nil)
        #expect(try keyring.find(other) != nil, "another root's key stays")
        #expect(try keyring.revokeEveryKey(rootDevice: device, rootInode: inode) == 0)
    }

    /// By path: the root as it is now (`lstat`), and nothing for a path with nothing there.
    @Test func byPathTheRootsIdentityNamesItsKeys() throws {
        try withTemporaryDirectory { root in
            let name = try WindowKeyName(root: root.string, window: UUID())
            _ = try KernelKeyring().create(name)
            #expect(try KernelKeyring().revokeEveryKey(ofRootAt: root.string) == 1)
            #expect(try KernelKeyring().find(name) == nil)
            #expect(try KernelKeyring().revokeEveryKey(ofRootAt: root.appending("absent").string) == 0)
        }
    }
}
