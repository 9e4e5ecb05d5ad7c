import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import IOUring
import SessionFormat
import SessionKeys
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Attacks on incognito at rest (issue 16): records of an older incognito session of the same
/// window must never open in a newer one; a session in the clear from before sealing must not
/// stay in the clear while its tabs are open; a generation in the clear must not be forged above
/// a sealed one; a key of the wrong size planted under the window's name must not stop the
/// regular Browser from being acknowledged; a revoked key still linked (same uid) fails the
/// incognito save until the name is free, and loses nothing.
@Suite(.serialized) struct SealedIncognitoAttackTests: KeyedWindowFixtures {
    static let old = "https://old-session-\(UUID().uuidString.prefix(8)).example/"
    static let new = "https://new-session-\(UUID().uuidString.prefix(8)).example/"

    func openIncognito(_ store: WindowStore, _ url: String) throws {
        let incognito = store.incognito
        try store.apply(seq: store.appliedSeq + 1) { try incognito.webStateList.insert(tab(incognito.profile, url)) }
        try store.waitUntilDurable(store.appliedSeq)
    }

    func urls(_ store: WindowStore) throws -> [String] {
        try TabListContents(store.incognito.webStateList, realizing: true).tabs.map {
            $0.history?.items.last?.url ?? ""
        }
    }

    /// The supervisor sets a crash-looping window aside (`set-aside/<UUID>-<time>`, the key
    /// left in the keyring) and restarts it empty under the same UUID. Its next incognito
    /// session must not be sealed so that the set-aside session's files open in its place: a
    /// copy of the old files put back must not restore the old (closed) incognito tabs.
    @Test func aSetAsideSessionDoesNotOpenInTheWindowsNextIncognitoSession() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let keyring = SimulatedKeyring()
            let first = window(root, id, keyring)
            _ = try first.recover()
            try openIncognito(first, Self.old)
            let incognitoDirectory = first.incognito.sessionDirectory
            let windowDirectory = incognitoDirectory.removingLastComponent()
            // Set aside as the supervisor does: the whole window directory, moved.
            let setAside = root.appending("set-aside-copy")
            try FileManager.default.moveItem(atPath: windowDirectory.string, toPath: setAside.string)
            let second = window(root, id, keyring)
            _ = try second.recover()
            #expect(try urls(second).isEmpty)
            try openIncognito(second, Self.new)
            // The attacker puts the set-aside incognito files back in place of the new ones.
            let oldIncognito = setAside.appending(incognitoDirectory.lastComponent!.string)
            for name in try FileManager.default.contentsOfDirectory(atPath: oldIncognito.string) {
                let target = incognitoDirectory.appending(name).string
                try? FileManager.default.removeItem(atPath: target)
                try FileManager.default.copyItem(atPath: oldIncognito.appending(name).string, toPath: target)
            }
            let third = window(root, id, keyring)
            _ = try third.recover()
            #expect(
                try !urls(third).contains(Self.old),
                "the set-aside session's records opened in the new session (same key, window and generation)")
        }
    }

    /// A plaintext incognito session of format 1 (the committed fixture) restored with a key at
    /// hand: once the window is durable again, no file under the root may hold its URLs, even
    /// when only the regular Browser changed since (a person who restores and keeps browsing in
    /// regular tabs). Today the files in the clear stay until the next incognito save.
    @Test func anUpgradedSessionInTheClearIsSealedWithoutWaitingForAnIncognitoChange() throws {
        try withTemporaryDirectory { root in
            let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "Fixtures/v1-690d51b/windows")
            let id = try #require(UUID(uuidString: "44BDCB45-11FA-41EC-AA5B-D784BD75B9A2"))
            try FileManager.default.createDirectory(
                atPath: root.appending(DiskLayout.windows).string, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                atPath: fixture.appendingPathComponent(id.uuidString).path,
                toPath: root.appending(DiskLayout.windows).appending(id.uuidString).string)
            let keyring = SimulatedKeyring()
            let store = window(root, id, keyring)
            _ = try store.recover()
            let restored = try urls(store)
            try #require(
                restored.contains { $0.contains("secret.example") }, "the fixture's incognito tabs: \(restored)")
            let regular = store.regular
            try store.apply(seq: store.appliedSeq + 1) {
                try regular.webStateList.insert(tab(regular.profile, Self.new))
            }
            try store.waitUntilDurable(store.appliedSeq)
            for secret in ["secret.example", "private.example"] {
                #expect(
                    filesHolding(secret, under: root).isEmpty,
                    "\(secret) in the clear while its tab is open: \(filesHolding(secret, under: root))")
            }
        }
    }

    /// A same-uid process plants a `user` key of 16 bytes under the window's name before the
    /// first incognito save. The incognito Browser cannot be sealed; the regular Browser must
    /// still be acknowledged (incognito kept in memory only, or the key replaced), not stall
    /// every later regular command behind an incognito save that can never succeed.
    @Test func aPlantedKeyOfTheWrongSizeDoesNotStallTheRegularBrowser() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let name = try WindowKeyName(root: root.string, window: id)
            defer { try? KernelKeyring().revoke(name) }
            let store = WindowStore(root: root, windowID: id, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try store.recover()
            let planted = [UInt8](repeating: 7, count: 16)
            let staged = planted.withUnsafeBytes { wh_key_add_staged(name.description, $0.baseAddress, $0.count) }
            try #require(staged > 0 && wh_key_publish(staged) == 0, "errno \(errno)")
            let regular = store.regular
            let incognito = store.incognito
            try store.apply(seq: store.appliedSeq + 1) {
                try incognito.webStateList.insert(tab(incognito.profile, Self.old))
            }
            try store.apply(seq: store.appliedSeq + 1) {
                try regular.webStateList.insert(tab(regular.profile, Self.new))
            }
            let regularSeq = store.appliedSeq
            // A failed wait is fine (a durable waiter hears of a failing save); five waits, each
            // retrying at once, that never see the regular tab durable are a stall.
            for _ in 0..<5 where store.durableSeq < regularSeq { try? store.waitUntilDurable(regularSeq) }
            #expect(
                store.durableSeq >= regularSeq,
                "the regular tab is never acknowledged: durable \(store.durableSeq) of \(regularSeq)")
            #expect(filesHolding(Self.old, under: root).isEmpty)
        }
    }

    /// `keyctl revoke` of the window's key (a user, or a same-uid process, standing in for a
    /// reboot) without an unlink: the dead key keeps the name until the kernel's garbage
    /// collection (`/proc/sys/kernel/keys/gc_delay`, 300 s by default), and the next incognito
    /// save cannot publish a new key (`KEYCTL_MOVE_EXCL`: EEXIST). That is a failed save,
    /// retried: never incognito kept in memory only (its staged tabs dropped while a later
    /// regular save acknowledged them), and never the window answered durable past the
    /// incognito change. Once the name is free, the retry saves everything acknowledged.
    @Test func aRevokedKeyStillLinkedFailsTheIncognitoSaveUntilTheNameIsFree() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let name = try WindowKeyName(root: root.string, window: id)
            defer { try? KernelKeyring().revoke(name) }
            let first = WindowStore(root: root, windowID: id, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try first.recover()
            try openIncognito(first, Self.old)
            let serial = wh_key_search_user(name.description)
            try #require(serial > 0 && wh_key_revoke(serial) == 0, "errno \(errno)")
            let store = WindowStore(root: root, windowID: id, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try store.recover()
            let regular = store.regular
            let incognito = store.incognito
            try store.apply(seq: store.appliedSeq + 1) {
                try incognito.webStateList.insert(tab(incognito.profile, Self.new))
            }
            let incognitoSeq = store.appliedSeq
            try store.apply(seq: store.appliedSeq + 1) {
                try regular.webStateList.insert(tab(regular.profile, Self.new))
            }
            #expect(throws: StoreError.self) { try store.waitUntilDurable(store.appliedSeq) }
            #expect(!store.incognitoInMemoryOnly && store.failingBrowsers == [.incognito])
            #expect(store.durableSeq < incognitoSeq, "durable \(store.durableSeq) past the incognito tab no save holds")
            // The kernel's collection, done now.
            #expect(wh_key_unlink_from_user(serial) == 0, "errno \(errno)")
            try store.waitUntilDurable(store.appliedSeq)
            let again = WindowStore(root: root, windowID: id, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try again.recover()
            #expect(try urls(again) == [Self.new])
            #expect(again.regular.webStateList.count == 1)
        }
    }

    /// Someone who can write the root (not the key) adds a generation in the clear above the
    /// sealed one: a snapshot of a forged tab. A store that holds the window's key and sealed
    /// this session must not read it as real (security.md: "a forged or moved record does not
    /// open"); the files in the clear a store accepts are those of a session from before
    /// sealing, never a generation newer than a sealed one.
    @Test func aForgedGenerationInTheClearAboveASealedOneIsNotRestored() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let keyring = SimulatedKeyring()
            let store = window(root, id, keyring)
            _ = try store.recover()
            try openIncognito(store, Self.old)
            let seq = store.appliedSeq
            let directory = store.incognito.sessionDirectory
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.string)
            let newest = try #require(
                names.compactMap { DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix) }.max())
            let forged = WebStateList()
            var history = NavigationHistory()
            history.commit(
                NavigationItem(url: Self.new, title: "forged", timestamp: Timestamp(microsecondsSinceEpoch: 1)))
            let profile = Profile(stateDirectory: root)
            try forged.restore(
                [
                    RestoredTab(
                        webState: WebState(
                            id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 1),
                            history: history), opener: nil)
                ],
                activeIndex: 0, pinnedCount: 0)
            let snapshot = try SnapshotEncoder.encode(forged, lastCommandSeq: seq) { _ throws(SessionFormatError) in []
            }
            try Data(snapshot).write(
                to: URL(fileURLWithPath: directory.appending(DiskLayout.snapshotName(newest + 1)).string))
            try Data(JournalFile.header + [UInt8](repeating: 0, count: 4096))
                .write(to: URL(fileURLWithPath: directory.appending(DiskLayout.journalName(newest + 1)).string))
            let again = window(root, id, keyring)
            _ = try again.recover()
            let restored = try urls(again)
            #expect(
                !restored.contains(Self.new),
                "a forged generation in the clear was restored as the sealed session: \(restored)")
        }
    }
}
