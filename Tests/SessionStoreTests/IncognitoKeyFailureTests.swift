import BrowserModel
import Foundation
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// A keyring that fails for a while (a spent quota; the root's stat failing while the root is
/// moved away) fails the incognito save, which is retried; it never turns incognito to memory
/// only (only a keyring refused outright does), and nothing acknowledged is lost.
@Suite struct IncognitoKeyFailureTests: KeyedWindowFixtures {
    static let urls = (0..<4).map { "https://key-failure-\($0)-\(UUID().uuidString.prefix(8)).example/" }

    func open(_ store: WindowStore, _ kind: BrowserKind, _ url: String) throws {
        let browser = store.browser(kind)
        try store.apply(seq: store.appliedSeq + 1) { try browser.webStateList.insert(tab(browser.profile, url)) }
    }

    func urls(_ store: WindowStore, _ kind: BrowserKind) throws -> [String] {
        try TabListContents(store.browser(kind).webStateList, realizing: true).tabs.map {
            $0.history?.items.last?.url ?? ""
        }
    }

    /// The reproduction at unit level: A durable; the keyring fails while B is opened;
    /// C and regular D after it heals. Before, the failure kept incognito in memory only: B and
    /// C were never written, D's save acknowledged them, and a restart brought back only A.
    @Test func aTransientFailureIsAFailedSaveRetriedNotMemoryOnly() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let keyring = SimulatedKeyring()
            let store = window(root, id, keyring)
            _ = try store.recover()
            try open(store, .incognito, Self.urls[0])
            try store.waitUntilDurable(store.appliedSeq)
            keyring.failing = [.existingKey, .key]
            try open(store, .incognito, Self.urls[1])
            #expect(throws: StoreError.keyring(.failed("existingKey failing (simulated)"))) {
                try store.waitUntilDurable(store.appliedSeq)
            }
            #expect(!store.incognitoInMemoryOnly, "a transient failure changed incognito to memory only")
            #expect(store.durableSeq < store.appliedSeq, "B answered durable while its save failed")
            #expect(store.failingBrowsers == [.incognito])
            keyring.failing = []
            try open(store, .incognito, Self.urls[2])
            try open(store, .regular, Self.urls[3])
            try store.waitUntilDurable(store.appliedSeq)
            #expect(store.durableSeq == store.appliedSeq && store.failingBrowsers.isEmpty)
            let again = window(root, id, keyring)
            _ = try again.recover()
            #expect(try urls(again, .incognito) == Array(Self.urls[0..<3]))
            #expect(try urls(again, .regular) == [Self.urls[3]])
        }
    }

    /// The keyring failing at restore fails the restore, the sealed files left as they were:
    /// not read as "no key" (the session discarded) nor as memory only (its files destroyed).
    @Test func aFailureAtRestoreFailsTheRestoreAndKeepsTheFiles() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let keyring = SimulatedKeyring()
            let store = window(root, id, keyring)
            _ = try store.recover()
            try open(store, .incognito, Self.urls[0])
            try store.waitUntilDurable(store.appliedSeq)
            keyring.failing = [.existingKey]
            #expect(throws: StoreError.keyring(.failed("existingKey failing (simulated)"))) {
                try window(root, id, keyring).recover()
            }
            keyring.failing = []
            let again = window(root, id, keyring)
            _ = try again.recover()
            #expect(try urls(again, .incognito) == [Self.urls[0]])
        }
    }

    /// The closed session's key could not be revoked: the next session must not seal under it
    /// (a copy of the closed session's files would open), so it is revoked first and a new key
    /// made; while the revocation fails, that save fails and is retried.
    @Test func aFailedRevocationIsRetriedBeforeTheNextSessionsKey() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let keyring = SimulatedKeyring()
            let store = window(root, id, keyring)
            _ = try store.recover()
            try open(store, .incognito, Self.urls[0])
            try store.waitUntilDurable(store.appliedSeq)
            keyring.failing = [.revoke]
            let incognito = store.incognito
            try store.apply(seq: store.appliedSeq + 1) { try incognito.webStateList.close(at: 0) }
            try store.waitUntilDurable(store.appliedSeq)
            #expect(keyring.holdsKey(for: id), "the simulated revocation did not fail")
            try open(store, .incognito, Self.urls[1])
            #expect(throws: StoreError.keyring(.failed("revoke failing (simulated)"))) {
                try store.waitUntilDurable(store.appliedSeq)
            }
            keyring.failing = []
            try store.waitUntilDurable(store.appliedSeq)
            #expect(
                keyring.made.filter { $0 == id }.count == 2, "the next session sealed under the closed session's key")
            let again = window(root, id, keyring)
            _ = try again.recover()
            #expect(try urls(again, .incognito) == [Self.urls[1]])
        }
    }

    /// A refused keyring: an incognito change takes a seq, which the regular journal commits,
    /// and the store names it (`memoryOnlySince`): what the worker publishes so that no durable
    /// answer covers it. Before, it took no seq, and the next regular save acknowledged it.
    @Test func aMemoryOnlyChangeTakesASeqAndIsNamed() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let keyring = SimulatedKeyring()
            keyring.refused = true
            let store = window(root, id, keyring)
            _ = try store.recover()
            try open(store, .regular, Self.urls[0])
            try store.waitUntilDurable(store.appliedSeq)
            #expect(store.memoryOnlySince == nil)
            try open(store, .incognito, Self.urls[1])
            #expect(store.appliedSeq == 2 && store.memoryOnlySince == 2 && store.hasUnsavedChanges)
            try store.waitUntilDurable(store.appliedSeq)
            #expect(store.durableSeq == 2 && !store.hasUnsavedChanges)
            try open(store, .regular, Self.urls[2])
            try store.waitUntilDurable(store.appliedSeq)
            #expect(store.memoryOnlySince == 2)
            let again = window(root, id, keyring)
            #expect(try again.recover().seq == 3)
            #expect(try urls(again, .incognito).isEmpty)
        }
    }

    /// The keyring refused after incognito changes were staged: they are dropped with the mode
    /// change, so they are named memory only from the first of them.
    @Test func changesStagedWhenTheKeyringIsRefusedAreNamedMemoryOnly() throws {
        try withTemporaryDirectory { root in
            let id = UUID()
            let keyring = SimulatedKeyring()
            let store = window(root, id, keyring)
            _ = try store.recover()
            try open(store, .incognito, Self.urls[0])
            try store.waitUntilDurable(store.appliedSeq)
            try open(store, .regular, Self.urls[1])
            try open(store, .incognito, Self.urls[2])
            keyring.refused = true
            try store.waitUntilDurable(store.appliedSeq)
            #expect(store.incognitoInMemoryOnly)
            #expect(
                store.memoryOnlySince.map { $0 <= 3 && $0 > 1 } == true, "\(String(describing: store.memoryOnlySince))")
        }
    }
}
