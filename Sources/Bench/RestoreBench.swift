import BrowserModel
import Foundation
import IOUring
import SessionStore
import SystemPackage

/// Restoring a large window from disk: the time until its active tab is usable when every
/// other tab comes back unrealized (the store's way), against every tab realized (eager).
public struct RestoreResult: Codable, Sendable, Equatable {
    public var tabs: Int
    public var unrealizedMilliseconds: Double
    public var eagerMilliseconds: Double

    enum CodingKeys: String, CodingKey {
        case tabs
        case unrealizedMilliseconds = "unrealized_ms"
        case eagerMilliseconds = "eager_ms"
    }

    public var speedup: Double { unrealizedMilliseconds > 0 ? eagerMilliseconds / unrealizedMilliseconds : 0 }
}

public enum RestoreBench {
    /// Saves a window of `tabs` tabs (five pages of history each, compacted into a snapshot)
    /// under `directory`, then restores it `repeats` times each way, alternating; the medians.
    public static func run(tabs: Int, repeats: Int, directory: FilePath) throws -> RestoreResult {
        let window = UUID()
        try save(window, tabs: tabs, directory: directory)
        var unrealized: [Double] = []
        var eager: [Double] = []
        for _ in 0..<repeats {
            unrealized.append(try restore(window, directory: directory, realizingEveryTab: false))
            eager.append(try restore(window, directory: directory, realizingEveryTab: true))
        }
        return RestoreResult(tabs: tabs, unrealizedMilliseconds: median(unrealized), eagerMilliseconds: median(eager))
    }

    private static func save(_ window: UUID, tabs: Int, directory: FilePath) throws {
        // A threshold below the tab count: the first save writes a snapshot, as a window this
        // large would have on disk.
        let store = WindowStore(
            root: directory, windowID: window, engine: SyncEngine(), options: StoreOptions(compactAfterRecords: tabs / 2),
            saveDelayMilliseconds: 0)
        _ = try store.recover()
        let browser = store.regular
        try store.apply(seq: 1) {
            for index in 0..<tabs {
                var history = NavigationHistory()
                for page in 0..<5 {
                    history.commit(
                        NavigationItem(
                            url: "https://site\(index).example/page/\(page)", title: "Site \(index), page \(page)",
                            timestamp: Timestamp(microsecondsSinceEpoch: Int64(page))))
                }
                _ = try browser.webStateList.insert(
                    WebState(id: browser.profile.makeWebStateID(), creationTime: .zero, history: history),
                    InsertionParams(activate: index == tabs / 2))
            }
        }
        try store.waitUntilDurable(1)
        try store.teardown()
    }

    /// Milliseconds from opening the store to the active tab's history in hand (and, eager,
    /// every tab's).
    private static func restore(_ window: UUID, directory: FilePath, realizingEveryTab: Bool) throws -> Double {
        let start = monotonicNanoseconds()
        let store = WindowStore(root: directory, windowID: window, engine: SyncEngine(), saveDelayMilliseconds: 0)
        _ = try store.recover()
        let list = store.regular.webStateList
        guard let active = list.activeWebState else { throw BenchError.worker("the restored window has no active tab") }
        _ = try active.navigationHistory()
        if realizingEveryTab {
            for webState in list.webStates { _ = try webState.navigationHistory() }
        }
        return Double(monotonicNanoseconds() - start) / 1e6
    }
}

func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
