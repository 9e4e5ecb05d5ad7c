import CLinuxShims
import CTestShims
import Foundation
import Glibc
import HostLimits
import SessionKeys
import SystemPackage
import Testing

@Suite struct KernelKeyringTests {
    let keyring = KernelKeyring()

    @Test func aCreatedKeyIsFoundOwnerOnlyInTheUserKeyring() throws {
        let name = uniqueName()
        defer { cleanUp(name) }
        #expect(try keyring.find(name) == nil)
        let key = try keyring.create(name)
        #expect(key.count == 32)
        #expect(key != [UInt8](repeating: 0, count: 32))
        #expect(try keyring.find(name) == key)
        #expect(try keyring.findOrCreate(name) == key)

        // serial flags usage expiry perm uid gid type description: length
        let line = try #require(try procKeysLine(name))
        let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        #expect(fields.count >= 9)
        #expect(fields[4] == "3f3f0000")
        #expect(fields[5] == String(getuid()))
        #expect(fields[7] == "user")
        #expect(fields[8].hasPrefix("windowhost:"))
        #expect(name.description == "windowhost:\(name.rootDevice):\(name.rootInode):\(name.window.uuidString)")
    }

    @Test func aSecondCreateOfTheSameNameReturnsTheFirstKey() throws {
        let name = uniqueName()
        defer { cleanUp(name) }
        let first = try keyring.create(name)
        // The second one's staged key loses the exclusive move and reads the first.
        #expect(try keyring.create(name) == first)
        #expect(try keyring.find(name) == first)
    }

    @Test func threadsRacingToCreateOneKeyAllGetTheSameBytes() throws {
        let name = uniqueName()
        defer { cleanUp(name) }
        final class Results: @unchecked Sendable {
            let lock = NSLock()
            var keys: [[UInt8]] = []
            var errors: [KeyringError] = []
        }
        let results = Results()
        onDedicatedThreads(8) { _ in
            do throws(KeyringError) {
                let key = try KernelKeyring().create(name)
                results.lock.withLock { results.keys.append(key) }
            } catch {
                results.lock.withLock { results.errors.append(error) }
            }
        }
        #expect(results.errors.isEmpty)
        #expect(results.keys.count == 8)
        #expect(Set(results.keys).count == 1)
        #expect(try keyring.find(name) == results.keys.first)
    }

    @Test func anotherProcessFindsTheKey() throws {
        let name = uniqueName()
        defer { cleanUp(name) }
        let key = try keyring.create(name)
        #expect(try readFromAnotherProcess(name) == hex(key))
    }

    @Test func aRevokedKeyIsGoneHereAndInAnotherProcessAndItsNameIsFree() throws {
        let name = uniqueName()
        defer { cleanUp(name) }
        let key = try keyring.create(name)
        try keyring.revoke(name)
        #expect(try keyring.find(name) == nil)
        #expect(try readFromAnotherProcess(name) == "none \(ENOKEY)")
        // Revoking what is not there is no error.
        try keyring.revoke(name)
        // The name is free at once: a new key, not the old one, and not an EEXIST.
        let next = try keyring.findOrCreate(name)
        #expect(next != key)
        #expect(try keyring.find(name) == next)
    }

    @Test func copiesOfARootNeverShareOrRevokeEachOthersKeys() throws {
        let window = UUID()
        let original = uniqueName(window: window)
        let copy = WindowKeyName(rootDevice: original.rootDevice, rootInode: original.rootInode &+ 1, window: window)
        defer {
            cleanUp(original)
            cleanUp(copy)
        }
        let originalKey = try keyring.create(original)
        let copyKey = try keyring.create(copy)
        #expect(originalKey != copyKey)
        try keyring.revoke(copy)
        #expect(try keyring.find(copy) == nil)
        #expect(try keyring.find(original) == originalKey)
        #expect(try readFromAnotherProcess(original) == hex(originalKey))
    }

    @Test func aKeyOfTheWrongLengthUnderOurNameIsRefused() throws {
        let name = uniqueName()
        defer { cleanUp(name) }
        // Someone else's 16-byte key under this window's name, put there with raw add_key.
        let foreign = [UInt8](repeating: 0xAB, count: 16)
        let serial = foreign.withUnsafeBytes { wh_key_add_staged(name.description, $0.baseAddress, $0.count) }
        try #require(serial > 0)
        #expect(wh_key_set_owner_only(serial) == 0)
        #expect(wh_key_publish(serial) == 0)

        #expect(throws: KeyringError.notAWindowKey(payloadBytes: 16)) { try keyring.find(name) }
        #expect(throws: KeyringError.notAWindowKey(payloadBytes: 16)) { try keyring.findOrCreate(name) }
        #expect(throws: KeyringError.notAWindowKey(payloadBytes: 16)) { try keyring.create(name) }
        // Revoking it frees the name for a real key.
        try keyring.revoke(name)
        #expect(try keyring.findOrCreate(name).count == 32)
    }
}

@Suite struct KeyringRefusalTests {
    /// A sandbox that refuses the keyring, made real with a seccomp filter on one thread: every
    /// call reports `.unavailable` with the errno the sandbox chose.
    @Test(arguments: [EPERM, ENOSYS, EACCES])
    func aSandboxRefusalIsReportedAsUnavailable(errnoValue: Int32) throws {
        final class Outcome: @unchecked Sendable {
            var installed: Int32 = -1
            var errors: [KeyringError?] = []
        }
        let outcome = Outcome()
        let name = uniqueName()
        onDedicatedThreads(1) { _ in
            outcome.installed = wh_deny_keyring_in_this_thread(errnoValue)
            let keyring = KernelKeyring()
            func caught(_ body: () throws(KeyringError) -> Void) -> KeyringError? {
                do throws(KeyringError) {
                    try body()
                    return nil
                } catch { return error }
            }
            outcome.errors = [
                caught { () throws(KeyringError) in _ = try keyring.find(name) },
                caught { () throws(KeyringError) in _ = try keyring.create(name) },
                caught { () throws(KeyringError) in _ = try keyring.findOrCreate(name) },
                caught { () throws(KeyringError) in try keyring.revoke(name) },
            ]
        }
        #expect(outcome.installed == 0)
        #expect(outcome.errors == Array(repeating: .unavailable(Errno(rawValue: errnoValue)), count: 4))
        // The test thread has no filter: nothing was made under the name.
        #expect(try KernelKeyring().find(name) == nil)
    }
}

/// A session directory's key record in the real keyring: stored, read back, changed in place,
/// bounded, revoked; a key of another shape under its name is refused.
@Suite(.serialized) struct SessionKeyRecordTests {
    static func name() -> SessionKeyName {
        SessionKeyName(
            rootDevice: 1, rootInode: UInt64.random(in: 1...UInt64.max), directoryDevice: 1,
            directoryInode: UInt64.random(in: 1...UInt64.max))
    }

    static func entry() -> SessionKeyRecord.Entry {
        SessionKeyRecord.Entry(window: UUID(), key: (0..<KernelKeyring.keyBytes).map { _ in UInt8.random(in: 0...255) })
    }

    @Test func aRecordIsStoredChangedInPlaceAndRevoked() throws {
        let keyring = KernelKeyring()
        let name = Self.name()
        defer { try? keyring.revoke(name) }
        #expect(try keyring.record(name) == nil)
        let first = SessionKeyRecord([Self.entry()])
        try keyring.store(first, as: name)
        #expect(try keyring.record(name) == first)
        let second = try first.adding(Self.entry())
        #expect(try second.adding(second.entries[1]) == second, "a key held already is not added twice")
        try keyring.store(second, as: name)
        #expect(try keyring.record(name) == second)
        try keyring.revoke(name)
        #expect(try keyring.record(name) == nil)
    }

    @Test func aRecordHoldsAtMostItsBound() throws {
        var record = SessionKeyRecord([Self.entry()])
        for _ in 1..<Limits.maxKeysPerSessionRecord { record = try record.adding(Self.entry()) }
        #expect(record.entries.count == Limits.maxKeysPerSessionRecord)
        #expect(throws: KeyringError.recordFull) { try record.adding(Self.entry()) }
        let keyring = KernelKeyring()
        let name = Self.name()
        defer { try? keyring.revoke(name) }
        try keyring.store(record, as: name)
        #expect(try keyring.record(name) == record)
    }

    @Test func aKeyOfAnotherShapeUnderARecordsNameIsNoRecord() throws {
        let keyring = KernelKeyring()
        let name = Self.name()
        defer { try? keyring.revoke(name) }
        // A window key's 32 bytes under the record's name, put there with raw add_key.
        let foreign = [UInt8](repeating: 0xAB, count: KernelKeyring.keyBytes)
        let serial = foreign.withUnsafeBytes { wh_key_add_staged(name.description, $0.baseAddress, $0.count) }
        try #require(serial > 0)
        #expect(wh_key_set_owner_only(serial) == 0)
        #expect(wh_key_publish(serial) == 0)
        #expect(throws: KeyringError.notARecord(payloadBytes: KernelKeyring.keyBytes)) { try keyring.record(name) }
    }
}
