import BrowserModel
import Foundation
import IOUring
import SystemPackage
import TestSupport

@testable import SessionStore

/// What the incognito-at-rest suites build their windows and tabs from.
protocol KeyedWindowFixtures {}

extension KeyedWindowFixtures {
    /// A window on the blocking engine that saves at once, its keys in `keyring`.
    func window(_ root: FilePath, _ id: UUID, _ keyring: SimulatedKeyring) -> WindowStore {
        WindowStore(
            root: root, windowID: id, engine: SyncEngine(), saveDelayMilliseconds: 0, keys: keyring.keys(for: id))
    }

    /// A realized tab with one page.
    func tab(_ profile: Profile, _ url: String) -> WebState {
        var history = NavigationHistory()
        history.commit(NavigationItem(url: url, title: "", timestamp: Timestamp(microsecondsSinceEpoch: 1)))
        return WebState(
            id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 1), history: history)
    }
}
