import BrowserModel
import CLinuxShims
import CTestShims
import Foundation
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Incognito at rest (issue 16), on a real disk with the real kernel keyring: while incognito
/// tabs are open and durable no file under the root holds their URLs; they come back with the
/// key; without it (a reboot) the session is discarded and the regular one is untouched;
/// closing the last incognito tab deletes the files and revokes the key; where the keyring is
/// refused, incognito is kept in memory only; a session in the clear from before sealing is
/// sealed at its next save; and a flipped bit in a sealed record is damage, set aside.
@Suite(.serialized) struct SealedIncognitoTests: KeyedWindowFixtures {
    static let secrets = (0..<4).map { "https://secret-\($0)-\(UUID().uuidString.prefix(8)).example/path" }
    static let regularURL = "https://plain-\(UUID().uuidString.prefix(8)).example/"

    func window(_ root: FilePath, _ id: UUID) -> WindowStore {
        WindowStore(root: root, windowID: id, engine: SyncEngine(), saveDelayMilliseconds: 0)
    }

    /// Opens the secrets incognito (one navigated) and one regular tab; waits until durable.
    func browse(_ store: WindowStore) throws {
        var seq = store.appliedSeq
        func next() -> UInt64 {
            seq += 1
            return seq
        }
        try store.apply(seq: next()) {
            try store.regular.webStateList.insert(tab(store.regular.profile, Self.regularURL))
        }
        // Durable alone: a damaged incognito save after it leaves it standing.
        try store.waitUntilDurable(seq)
        for url in Self.secrets {
            let incognito = store.incognito
            try store.apply(seq: next()) { try incognito.webStateList.insert(tab(incognito.profile, url)) }
        }
        try store.apply(seq: next()) {
            _ = try store.incognito.webStateList.webState(at: 0).commitNavigation(
                to: NavigationItem(
                    url: Self.secrets[0] + "/deeper", title: "secret title",
                    timestamp: Timestamp(microsecondsSinceEpoch: 2)))
        }
        try store.waitUntilDurable(store.appliedSeq)
    }

    /// A window of `root` recovered and browsed (`browse`).
    func browsedWindow(_ root: FilePath, _ id: UUID) throws -> WindowStore {
        let store = window(root, id)
        _ = try store.recover()
        try browse(store)
        return store
    }

    func keys(_ root: FilePath, _ id: UUID) -> KernelIncognitoKeys { KernelIncognitoKeys(root: root, window: id) }

    @Test func noFileHoldsAnIncognitoURLAndTheTabsComeBack() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            defer { try? keys(root, id).revoke() }
            let store = try browsedWindow(root, id)
            let expected = try WindowContents(store)
            // The grep works: the regular URL is found.
            #expect(!filesHolding(Self.regularURL, under: root).isEmpty)
            for secret in Self.secrets + ["secret title"] {
                #expect(
                    filesHolding(secret, under: root).isEmpty,
                    "\(secret) is in the clear in \(filesHolding(secret, under: root))")
            }
            // A new process (the worker killed) finds the key and the tabs.
            let again = window(root, id)
            let recovery = try again.recover()
            #expect(recovery.incognito.damaged.isEmpty, "\(recovery)")
            #expect(try WindowContents(again) == expected)
        }
    }

    /// The key gone, as after a reboot: the incognito session is deleted durably at the next
    /// start, said once, and the regular one restores as always.
    @Test func withoutItsKeyTheIncognitoSessionIsDiscardedAndTheRegularOneKept() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let store = try browsedWindow(root, id)
            let regular = try TabListContents(store.regular.webStateList, realizing: true)
            try keys(root, id).revoke()
            let again = window(root, id)
            let recovery = try again.recover()
            #expect(try TabListContents(again.regular.webStateList, realizing: true) == regular)
            #expect(again.incognito.webStateList.isEmpty)
            #expect(recovery.incognito.damaged.isEmpty, "discarded, not damaged: \(recovery.incognito)")
            let events = again.takeEvents()
            #expect(events.filter { if case .discardedIncognito = $0 { true } else { false } }.count == 1, "\(events)")
            #expect(lstatKind(again.incognito.sessionDirectory) == nil, "the sealed session is still on disk")
            // And it stays gone: the next start says nothing more.
            let third = window(root, id)
            _ = try third.recover()
            #expect(!third.takeEvents().contains { if case .discardedIncognito = $0 { true } else { false } })
        }
    }

    /// A key under the window's name that does not open its files (one made after the root was
    /// mounted again, under its new device number): the sealed files are set aside as damage,
    /// and a save that named both Browsers stays in the regular one (no kill cut it from
    /// incognito: its files just do not say).
    @Test func aKeyThatDoesNotOpenTheSessionLeavesTheRegularSavesStanding() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            defer { try? keys(root, id).revoke() }
            let store = window(root, id)
            _ = try store.recover()
            let incognito = store.incognito
            try store.apply(seq: 1) {
                try store.regular.webStateList.insert(tab(store.regular.profile, Self.regularURL))
                try incognito.webStateList.insert(tab(incognito.profile, Self.secrets[0]))
            }
            try store.waitUntilDurable(1)
            let regular = try TabListContents(store.regular.webStateList, realizing: true)
            try keys(root, id).revoke()
            _ = try keys(root, id).key()
            let again = window(root, id)
            let recovery = try again.recover()
            #expect(
                !recovery.incognito.damaged.isEmpty, "the files the key does not open are damage: \(recovery.incognito)"
            )
            #expect(recovery.seq == 1 && recovery.regular.damaged.isEmpty)
            #expect(
                try TabListContents(again.regular.webStateList, realizing: true) == regular,
                "the acknowledged regular tab")
        }
    }

    @Test func closingTheLastIncognitoTabDeletesTheFilesAndRevokesTheKey() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            defer { try? keys(root, id).revoke() }
            let store = try browsedWindow(root, id)
            #expect(try keys(root, id).existingKey() != nil)
            let incognito = store.incognito
            store.apply(seq: store.appliedSeq + 1) { incognito.webStateList.closeAll() }
            try store.waitUntilDurable(store.appliedSeq)
            var events = store.takeEvents()
            for _ in 0..<20 where !events.contains(.deletedIncognito) { events += try store.poll(waiting: true) }
            #expect(events.contains(.deletedIncognito), "\(events)")
            #expect(try keys(root, id).existingKey() == nil, "the key outlived its session")
            #expect(lstatKind(incognito.sessionDirectory) == nil)
            // A new incognito session gets a new key.
            try store.apply(seq: store.appliedSeq + 1) {
                try incognito.webStateList.insert(tab(incognito.profile, Self.secrets[1]))
            }
            try store.waitUntilDurable(store.appliedSeq)
            #expect(try keys(root, id).existingKey() != nil)
            #expect(filesHolding(Self.secrets[1], under: root).isEmpty)
        }
    }

    /// The key revoked while the window runs (and another made in its place): the next
    /// incognito save writes the whole session under the key the keyring holds, so everything
    /// acknowledged reads back. Seen losing both tabs before (helper-54's sixth defect): the
    /// worker went on sealing with the key it had cached.
    @Test func aKeyReplacedWhileRunningLosesNothingAcknowledged() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            defer { try? keys(root, id).revoke() }
            let store = try browsedWindow(root, id)
            try keys(root, id).revoke()
            let replacement = try keys(root, id).key()
            let incognito = store.incognito
            try store.apply(seq: store.appliedSeq + 1) {
                try incognito.webStateList.insert(tab(incognito.profile, Self.secrets[2] + "after"))
            }
            try store.waitUntilDurable(store.appliedSeq)
            let expected = try WindowContents(store)
            #expect(try keys(root, id).existingKey() == replacement)
            let again = window(root, id)
            let recovery = try again.recover()
            #expect(recovery.incognito.damaged.isEmpty, "\(recovery.incognito)")
            #expect(try WindowContents(again) == expected)
        }
    }

    /// A sandbox that refuses the keyring (a seccomp filter on this thread): incognito is kept
    /// in memory only, said once; nothing of it reaches the disk; the regular Browser saves.
    @Test func aRefusedKeyringKeepsIncognitoInMemoryOnly() throws {
        try withTemporaryDirectory { root in
            let outcome = try onOwnThread {
                () throws -> (events: [SaveEvent], onDisk: Bool, durable: Bool, memoryOnly: Bool) in
                guard wh_deny_keyring_in_this_thread(EPERM) == 0 else {
                    throw HostFailure("seccomp refused: errno \(errno)")
                }
                let store = window(root, UUID())
                _ = try store.recover()
                try browse(store)
                return (
                    store.takeEvents(), lstatKind(store.incognito.sessionDirectory) != nil,
                    store.durableSeq == store.appliedSeq, store.incognitoInMemoryOnly
                )
            }
            #expect(outcome.memoryOnly && outcome.durable && !outcome.onDisk)
            #expect(
                outcome.events.filter { if case .incognitoInMemoryOnly = $0 { true } else { false } }.count == 1,
                "\(outcome.events)")
            #expect(filesHolding(Self.secrets[0], under: root).isEmpty)
            #expect(!filesHolding(Self.regularURL, under: root).isEmpty)
        }
    }

    /// An incognito session in the clear, written by a version before sealing (fixture
    /// v1-690d51b, made by that version's own binary): it restores whole, and is sealed by the
    /// restore itself; no file under the root holds its URLs any more, and it comes back again.
    @Test func aSessionInTheClearIsSealedAtRestore() throws {
        try withTemporaryDirectory { scratch in
            let root = scratch.appending("root")
            let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "Fixtures/v1-690d51b")
            try FileManager.default.copyItem(atPath: fixture.path, toPath: root.string)
            try FileManager.default.removeItem(atPath: root.string + "/expected.json")
            let id = try #require(UUID(uuidString: "44BDCB45-11FA-41EC-AA5B-D784BD75B9A2"))
            defer { try? keys(root, id).revoke() }
            let secrets = ["https://secret.example/2", "https://private.example/", "https://secret.example/later"]
            #expect(!filesHolding(secrets[1], under: root).isEmpty, "the fixture holds its incognito tabs in the clear")
            let store = window(root, id)
            let recovery = try store.recover()
            #expect(recovery.incognito.repairError == nil, "\(recovery.incognito)")
            let urls = try TabListContents(store.incognito.webStateList, realizing: true).tabs.compactMap {
                $0.history?.currentItem?.url
            }
            #expect(urls == secrets)
            for secret in secrets {
                #expect(filesHolding(secret, under: root).isEmpty, "\(secret) in \(filesHolding(secret, under: root))")
            }
            let again = window(root, id)
            _ = try again.recover()
            #expect(
                try TabListContents(again.incognito.webStateList, realizing: true)
                    == TabListContents(store.incognito.webStateList, realizing: true))
        }
    }

    /// A flipped bit in a sealed journal record (its CRC made right): set aside like any
    /// damage, nothing crashes, and what came before it restores.
    @Test func aFlipInASealedRecordIsSetAside() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            defer { try? keys(root, id).revoke() }
            _ = try browsedWindow(root, id)
            let journals = everyFile(under: root).filter {
                $0.path.contains("/incognito/") && $0.path.contains(DiskLayout.journalPrefix)
            }
            let journal = try #require(journals.first)
            // The first mutation record after the header block: flip a payload byte, fix its CRC.
            var bytes = journal.bytes
            var offset = Framing.fileHeaderSize
            while offset + Framing.recordHeaderSize <= bytes.count, bytes[offset + 2] != RecordKind.mutation.rawValue {
                offset += Framing.recordHeaderSize + Int(bytes.littleEndian(UInt32.self, at: offset + 4))
            }
            try #require(offset + Framing.recordHeaderSize < bytes.count)
            let length = Int(bytes.littleEndian(UInt32.self, at: offset + 4))
            bytes[offset + Framing.recordHeaderSize + length / 2] ^= 0x20
            let payload = bytes[(offset + Framing.recordHeaderSize)..<(offset + Framing.recordHeaderSize + length)]
            let crc = CRC32C.checksum(payload, continuing: CRC32C.checksum(bytes[offset..<(offset + 8)]))
            withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange((offset + 8)..<(offset + 12), with: $0) }
            try Data(bytes).write(to: URL(fileURLWithPath: journal.path))
            let again = window(root, id)
            let recovery = try again.recover()
            #expect(!recovery.incognito.damaged.isEmpty, "\(recovery.incognito)")
            #expect(
                recovery.incognito.damaged.contains { if case .unopenable = $0.error { true } else { false } },
                "\(recovery.incognito.damaged)")
            #expect(try TabListContents(again.regular.webStateList, realizing: true).tabs.count == 1, "\(recovery)")
        }
    }
}

/// Runs `body` on a thread of its own and waits: a seccomp filter installed there binds only it.
func onOwnThread<T>(_ body: @escaping @Sendable () throws -> T) throws -> T {
    let box = ThreadResult<T>()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        box.result = Result { try body() }
        done.signal()
    }
    thread.start()
    done.wait()
    guard let result = box.result else { throw HostFailure("the thread gave no result") }
    return try result.get()
}

/// What a thread's body gave, read once the thread signalled.
final class ThreadResult<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

struct HostFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Array where Element == UInt8 {
    func littleEndian<Value: FixedWidthInteger>(_ type: Value.Type, at offset: Int) -> Value {
        var value = Value.zero
        for index in 0..<MemoryLayout<Value>.size { value |= Value(self[offset + index]) << (8 * index) }
        return value
    }
}
