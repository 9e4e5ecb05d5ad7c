import BrowserModel
import Foundation
import Glibc
import IOUring
import Platform
import SessionStore
import SystemPackage

/// Restoring a large window from disk: the time until its active tab is usable when every
/// other tab comes back unrealized (the store's way), against every tab realized (eager); warm
/// (files in the page cache) and cold (the files' pages dropped before the run).
public struct RestoreResult: Codable, Sendable, Equatable {
    public var tabs: Int
    public var unrealizedMilliseconds: Double
    public var eagerMilliseconds: Double
    public var coldUnrealizedMilliseconds: Double
    public var coldEagerMilliseconds: Double
    /// A window of long histories held in its journal only (`LongHistoryRestore`).
    public var longHistories: LongHistoryRestore?

    public init(
        tabs: Int, unrealizedMilliseconds: Double, eagerMilliseconds: Double, coldUnrealizedMilliseconds: Double,
        coldEagerMilliseconds: Double, longHistories: LongHistoryRestore? = nil
    ) {
        self.tabs = tabs
        self.unrealizedMilliseconds = unrealizedMilliseconds
        self.eagerMilliseconds = eagerMilliseconds
        self.coldUnrealizedMilliseconds = coldUnrealizedMilliseconds
        self.coldEagerMilliseconds = coldEagerMilliseconds
        self.longHistories = longHistories
    }

    enum CodingKeys: String, CodingKey {
        case tabs
        case unrealizedMilliseconds = "unrealized_ms"
        case eagerMilliseconds = "eager_ms"
        case coldUnrealizedMilliseconds = "cold_unrealized_ms"
        case coldEagerMilliseconds = "cold_eager_ms"
        case longHistories = "long_histories"
    }

    public var speedup: Double { ratio(eagerMilliseconds, unrealizedMilliseconds) }
    public var coldSpeedup: Double { ratio(coldEagerMilliseconds, coldUnrealizedMilliseconds) }

    private func ratio(_ eager: Double, _ unrealized: Double) -> Double { unrealized > 0 ? eager / unrealized : 0 }
}

/// Restoring, warm, a window whose tabs have long histories held in its journal only, each
/// navigation a record of its own: replay's cost per record, against the same window with half
/// as many navigations (about 2× when a tab's replay is linear in its records, 4× when
/// quadratic) and against the same window compacted into a snapshot.
public struct LongHistoryRestore: Codable, Sendable, Equatable {
    public var tabs: Int
    /// Navigation records a tab, each a page of about `RestoreBench.longHistoryURLBytes`.
    public var navigations: Int
    public var journalMilliseconds: Double
    public var halfJournalMilliseconds: Double
    public var compactedMilliseconds: Double

    enum CodingKeys: String, CodingKey {
        case tabs, navigations
        case journalMilliseconds = "journal_ms"
        case halfJournalMilliseconds = "half_journal_ms"
        case compactedMilliseconds = "compacted_ms"
    }

    /// The journal's time over its half's: 2 when replay is linear in a tab's records.
    public var overHalf: Double { halfJournalMilliseconds > 0 ? journalMilliseconds / halfJournalMilliseconds : 0 }
    /// The journal's time over the compacted window's.
    public var overCompacted: Double { compactedMilliseconds > 0 ? journalMilliseconds / compactedMilliseconds : 0 }
}

public enum RestoreBench {
    /// Saves a window of `tabs` tabs (five pages of history each, compacted into a snapshot)
    /// under `directory`, then restores it `repeats` times each way, warm and cold, alternating;
    /// the medians.
    public static func run(tabs: Int, repeats: Int, directory: FilePath) throws -> RestoreResult {
        let window = UUID()
        try save(window, tabs: tabs, directory: directory)
        var unrealized: [Double] = []
        var eager: [Double] = []
        var coldUnrealized: [Double] = []
        var coldEager: [Double] = []
        for _ in 0..<repeats {
            unrealized.append(try restore(window, directory: directory, realizingEveryTab: false))
            eager.append(try restore(window, directory: directory, realizingEveryTab: true))
            try dropPageCache(under: directory)
            coldUnrealized.append(try restore(window, directory: directory, realizingEveryTab: false))
            try dropPageCache(under: directory)
            coldEager.append(try restore(window, directory: directory, realizingEveryTab: true))
        }
        return RestoreResult(
            tabs: tabs, unrealizedMilliseconds: median(unrealized), eagerMilliseconds: median(eager),
            coldUnrealizedMilliseconds: median(coldUnrealized), coldEagerMilliseconds: median(coldEager),
            longHistories: try runLongHistories(repeats: repeats, directory: directory))
    }

    /// The long-history window's tabs, navigation records a tab, and URL bytes a page.
    public static let longHistoryTabs = 100
    public static let longHistoryNavigations = 50
    static let longHistoryURLBytes = 1 << 10

    /// Saves the long-history window three ways under `directory` (in its journal, the same
    /// with half the navigations, compacted), then restores each `repeats` times, alternating;
    /// the medians.
    static func runLongHistories(repeats: Int, directory: FilePath) throws -> LongHistoryRestore {
        let window = UUID()
        let navigations = longHistoryNavigations
        let shapes = [(navigations, false), (navigations / 2, false), (navigations, true)].map { shape in
            (shape, directory.appending("long-\(shape.0)" + (shape.1 ? "-compacted" : "")))
        }
        var times = [[Double]](repeating: [], count: shapes.count)
        for ((navigations, compacted), root) in shapes {
            try saveLongHistories(
                window, tabs: longHistoryTabs, navigations: navigations, compacted: compacted, directory: root)
        }
        for _ in 0..<repeats {
            for (index, (_, root)) in shapes.enumerated() {
                times[index].append(try restore(window, directory: root, realizingEveryTab: false))
            }
        }
        return LongHistoryRestore(
            tabs: longHistoryTabs, navigations: navigations, journalMilliseconds: median(times[0]),
            halfJournalMilliseconds: median(times[1]), compactedMilliseconds: median(times[2]))
    }

    /// Saves window `window` of `tabs` tabs of one page each, then `navigations` commands each
    /// navigating every tab to a new page, held in its journal only; `compacted`, then compacted
    /// into a snapshot by one activation more.
    static func saveLongHistories(_ window: UUID, tabs: Int, navigations: Int, compacted: Bool, directory: FilePath)
        throws
    {
        let bytes = 1 << 30
        let store = WindowStore(
            root: directory, windowID: window, engine: SyncEngine(),
            options: StoreOptions(compactAfterRecords: bytes, compactAfterBytes: bytes, journalPreallocation: 64 << 10),
            saveDelayMilliseconds: 0)
        _ = try store.recover()
        let browser = store.regular
        func page(_ tab: Int, _ number: Int) -> NavigationItem {
            let url = "https://site\(tab).example/page/\(number)?"
            return NavigationItem(
                url: url + String(repeating: "q", count: max(0, longHistoryURLBytes - url.utf8.count)),
                title: "Site \(tab), page \(number)", timestamp: Timestamp(microsecondsSinceEpoch: Int64(number)))
        }
        try store.apply(seq: 1) {
            for index in 0..<tabs {
                var history = NavigationHistory()
                history.commit(page(index, 0))
                _ = try browser.webStateList.insert(
                    WebState(id: browser.profile.makeWebStateID(), creationTime: .zero, history: history),
                    InsertionParams(activate: index == tabs / 2))
            }
        }
        for number in 1...navigations {
            try store.apply(seq: UInt64(number) + 1) {
                for (index, webState) in browser.webStateList.webStates.enumerated() {
                    try webState.commitNavigation(to: page(index, number))
                }
            }
        }
        try store.waitUntilDurable(UInt64(navigations) + 1)
        try store.teardown()
        guard compacted else { return }
        let compacting = WindowStore(
            root: directory, windowID: window, engine: SyncEngine(), options: StoreOptions(compactAfterRecords: 1),
            saveDelayMilliseconds: 0)
        _ = try compacting.recover()
        let seq = UInt64(navigations) + 2
        try compacting.apply(seq: seq) { try compacting.regular.webStateList.activate(at: 0) }
        try compacting.waitUntilDurable(seq)
        try compacting.teardown()
    }

    /// Drops every file's pages under `directory` from the page cache
    /// (`posix_fadvise(POSIX_FADV_DONTNEED)`): the next restore reads them from the disk, as one
    /// after a reboot or under memory pressure would. The store synced them, so none is dirty.
    static func dropPageCache(under directory: FilePath) throws {
        guard let walk = FileManager.default.enumerator(atPath: directory.string) else {
            throw BenchError.worker("cannot list \(directory) to drop its pages")
        }
        for case let name as String in walk {
            let path = directory.appending(name)
            var status = stat()
            guard lstat(path.string, &status) == 0 else {
                throw BenchError.system("lstat \(path)", Errno(rawValue: errno))
            }
            guard status.st_mode & S_IFMT == S_IFREG else { continue }
            let fd = open(path.string, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw BenchError.system("open \(path)", Errno(rawValue: errno)) }
            defer { close(fd) }
            // posix_fadvise returns the error rather than setting errno.
            let result = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
            guard result == 0 else {
                throw BenchError.system("posix_fadvise(DONTNEED) \(path)", Errno(rawValue: result))
            }
        }
    }

    /// Saves window `window` of `tabs` tabs under `directory` as `run` restores it: compacted,
    /// then lived in (a few activations past a second compaction). The in-process benchmarks
    /// (Benchmarks/) restore the same shape.
    public static func save(_ window: UUID, tabs: Int, directory: FilePath) throws {
        // A threshold below the tab count: the first save writes a snapshot, as a window this
        // large would have on disk.
        try saveInOneCommand(
            window, tabs: tabs, directory: directory, options: StoreOptions(compactAfterRecords: tabs / 2))
        // Lived in: a few activations, past a second compaction, so the journals hold what a
        // window's hold between compactions. Right after the one save that made every tab, the
        // fallback generation's journal is that save (every tab's insert and history), which
        // the window reads after it is ready (`WindowStore.checkFallbacks`), past what is timed.
        let livedIn = WindowStore(
            root: directory, windowID: window, engine: SyncEngine(), options: StoreOptions(compactAfterRecords: 4),
            saveDelayMilliseconds: 0)
        _ = try livedIn.recover()
        for seq in UInt64(2)...7 {
            try livedIn.apply(seq: seq) { try livedIn.regular.webStateList.activate(at: Int(seq) % tabs) }
            try livedIn.waitUntilDurable(seq)
        }
        try livedIn.apply(seq: 8) { try livedIn.regular.webStateList.activate(at: tabs / 2) }
        try livedIn.waitUntilDurable(8)
        try livedIn.teardown()
    }

    /// Saves window `window` of `tabs` tabs under `directory` held in its first generation's
    /// journal only: a window that never compacted (`run` compacts at a save, and a window only
    /// restored and killed makes none). The journal is preallocated as `run`'s are (64 KiB and a
    /// little) and grows with the save: a larger preallocation would have every restore read
    /// its zeros past the last save, which no window that grew by appends carries.
    public static func saveInJournalOnly(_ window: UUID, tabs: Int, directory: FilePath) throws {
        let bytes = 1 << 30
        try saveInOneCommand(
            window, tabs: tabs, directory: directory,
            options: StoreOptions(compactAfterRecords: bytes, compactAfterBytes: bytes, journalPreallocation: 64 << 10))
    }

    /// One command opening `tabs` tabs of five pages each at the end, then activating the
    /// middle one, made durable. The tabs go in as one batch (`WebStateList.restore`), which
    /// journals the insert records `tabs` single inserts would, without a debug build's check
    /// of the whole list after each insert (10,000 of them take minutes there).
    private static func saveInOneCommand(_ window: UUID, tabs: Int, directory: FilePath, options: StoreOptions) throws {
        let store = WindowStore(
            root: directory, windowID: window, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
        _ = try store.recover()
        let browser = store.regular
        let opened = (0..<tabs).map { index in
            var history = NavigationHistory()
            for page in 0..<5 {
                history.commit(
                    NavigationItem(
                        url: "https://site\(index).example/page/\(page)", title: "Site \(index), page \(page)",
                        timestamp: Timestamp(microsecondsSinceEpoch: Int64(page))))
            }
            let webState = WebState(id: browser.profile.makeWebStateID(), creationTime: .zero, history: history)
            return RestoredTab(webState: webState, opener: nil)
        }
        try store.apply(seq: 1) {
            try browser.webStateList.restore(opened, activeIndex: nil, pinnedCount: 0)
            try browser.webStateList.activate(at: tabs / 2)
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
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
