import BrowserModel
import Foundation
import IOUring
import SessionFormat
@testable import SessionStore
import SystemPackage
import TestSupport
import Testing

/// Attacks on incognito at rest (issue 16) from someone who can write the root: records of an
/// older incognito session of the same window must never open in a newer one.
@Suite(.serialized) struct SealedIncognitoAttackTests {
    static let old = "https://old-session-\(UUID().uuidString.prefix(8)).example/"
    static let new = "https://new-session-\(UUID().uuidString.prefix(8)).example/"

    func window(_ root: FilePath, _ id: UUID, _ keyring: SimulatedKeyring) -> WindowStore {
        WindowStore(root: root, windowID: id, engine: SyncEngine(), saveDelayMilliseconds: 0, keys: keyring.keys(for: id))
    }

    func tab(_ profile: Profile, _ url: String) -> WebState {
        var history = NavigationHistory()
        history.commit(NavigationItem(url: url, title: "", timestamp: Timestamp(microsecondsSinceEpoch: 1)))
        return WebState(id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 1), history: history)
    }

    func openIncognito(_ store: WindowStore, _ url: String) throws {
        let incognito = store.incognito
        try store.apply(seq: store.appliedSeq + 1) { try incognito.webStateList.insert(tab(incognito.profile, url)) }
        try store.waitUntilDurable(store.appliedSeq)
    }

    func urls(_ store: WindowStore) throws -> [String] {
        try TabListContents(store.incognito.webStateList, realizing: true).tabs.map { $0.history?.items.last?.url ?? "" }
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
            #expect(try !urls(third).contains(Self.old), "the set-aside session's records opened in the new session (same key, window and generation)")
        }
    }
}
