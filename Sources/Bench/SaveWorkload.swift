import BrowserModel
import Foundation
import IOUring
import SessionFormat
import SessionStore
import SystemPackage

/// Who saves: the physical floor, the store on each engine, or the mobile browsers' way.
public enum Contender: String, CaseIterable, Codable, Sendable {
    /// The physical limit of a save that starts on a fresh block: one aligned `O_DIRECT`
    /// `pwritev2(RWF_DSYNC)` of the save's bytes padded to the block (a small save: one block),
    /// into a file written and synced before the clock starts, issued by the caller. Buffered
    /// where the file system takes no direct I/O (tmpfs), and the report says so.
    case floor
    /// The floor as it was before direct I/O: buffered `RWF_DSYNC` appends of the save's
    /// exact bytes into a preallocated, zero-filled file.
    case floorBuffered = "floor-buffered"
    /// The session store on the io_uring engine.
    case uring
    /// The session store on the blocking engine.
    case sync
    /// The whole session rewritten atomically per save (tmp, fdatasync, rename, directory
    /// fsync), blocking: what Chrome and Firefox for iOS do.
    case rewrite
}

/// What one save carries.
public enum SaveSize: String, CaseIterable, Codable, Sendable {
    /// One navigation in the active tab of a 20-tab window (the floor: 256 bytes).
    case small
    /// A 500-tab window's full state: every tab replaced (the floor: as many bytes as the
    /// rewrite's session file).
    case large
    /// `small`, in an incognito window: sealed with AES-256-GCM under the window's key. The
    /// store's engines only: the floor and the rewrite seal nothing.
    case incognito

    var windowTabs: Int { self == .large ? 500 : 20 }

    /// Whether `contender` is measured at this size.
    public func applies(to contender: Contender) -> Bool {
        self != .incognito || contender == .uring || contender == .sync
    }
}

/// One window saving on one contender: `prepare()` builds the next change's tabs (not timed:
/// making web pages is not saving them), `save()` applies it and returns once it is durable.
/// Everything lives under `directory`, which the workload owns.
public protocol SaveWorkload: AnyObject {
    func prepare() throws
    func save() throws
    /// Bytes written to the disk so far.
    var bytesWritten: UInt64 { get }
}

public enum Workloads {
    /// The workload of `contender` for saves of `size`, set up (its window built and saved
    /// once) under `directory`.
    public static func make(_ contender: Contender, size: SaveSize, directory: FilePath) throws -> any SaveWorkload {
        try FileManager.default.createDirectory(
            atPath: directory.string, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        switch contender {
        case .floor:
            return try FloorWorkload(directory: directory, recordSize: size == .small ? 256 : try largeSessionBytes())
        case .floorBuffered:
            return try BufferedFloorWorkload(
                directory: directory, recordSize: size == .small ? 256 : try largeSessionBytes())
        case .uring:
            return try StoreWorkload(engine: try UringEngine(), size: size, directory: directory)
        case .sync:
            return try StoreWorkload(engine: SyncEngine(), size: size, directory: directory)
        case .rewrite:
            return try RewriteWorkload(size: size, directory: directory)
        }
    }

    /// The size of a 500-tab window's session file: what a large floor write carries.
    static func largeSessionBytes() throws -> Int {
        let profile = Profile(stateDirectory: "/")
        let list = WebStateList()
        try fill(list, tabs: SaveSize.large.windowTabs, profile: profile, round: 0)
        return try encodeSession(list, seq: 1).count
    }
}

/// A new page for tab `index`; `round` makes each rewrite of the window differ.
func page(_ index: Int, round: UInt64) -> NavigationItem {
    NavigationItem(
        url: "https://site\(index).example/articles/\(round)", title: "Site \(index), page \(round)",
        timestamp: Timestamp(microsecondsSinceEpoch: Int64(round)))
}

/// `tabs` new tabs of one page each.
private func makeTabs(_ tabs: Int, profile: Profile, round: UInt64) -> [WebState] {
    (0..<tabs).map { index in
        var history = NavigationHistory()
        history.commit(page(index, round: round))
        return WebState(
            id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: Int64(round)),
            history: history)
    }
}

/// Replaces whatever `list` holds by `tabs`, the first active.
private func fill(_ list: WebStateList, with tabs: [WebState]) throws {
    list.closeAll()
    for (index, webState) in tabs.enumerated() { _ = try list.insert(webState, InsertionParams(activate: index == 0)) }
}

/// `list` replaced by `tabs` new tabs of one page each, the first active.
func fill(_ list: WebStateList, tabs: Int, profile: Profile, round: UInt64) throws {
    try fill(list, with: makeTabs(tabs, profile: profile, round: round))
}

/// The next change of a window: a navigation in the active tab (small), or every tab replaced
/// by new ones made ahead of time (large).
private struct PendingChange {
    let size: SaveSize
    var tabs: [WebState] = []

    mutating func prepare(profile: Profile, round: UInt64) {
        if size == .large { tabs = makeTabs(size.windowTabs, profile: profile, round: round) }
    }

    func apply(to list: WebStateList, round: UInt64) throws {
        switch size {
        case .small, .incognito: try list.activeWebState?.commitNavigation(to: page(0, round: round))
        case .large: try fill(list, with: tabs)
        }
    }
}

/// A session file with every tab realized: what `rewrite` writes per save.
private func encodeSession(_ list: WebStateList, seq: UInt64) throws -> [UInt8] {
    try SnapshotEncoder.encode(list, lastCommandSeq: seq) {
        (webState: WebState) throws(SessionFormatError) -> [UInt8] in
        throw .readFailed(offset: 0, reason: "tab \(webState.id) is unrealized; the rewrite keeps every tab realized")
    }
}

final class FloorWorkload: SaveWorkload {
    private let file: FloorFile
    private let record: AlignedBytes
    private var offset = 0
    private(set) var bytesWritten: UInt64 = 0

    init(directory: FilePath, recordSize: Int) throws {
        file = try FloorFile(path: directory.appending("floor"), size: max(4 << 20, recordSize * 64))
        record = try file.buffer(holding: [UInt8](repeating: 0x5A, count: recordSize))
    }

    /// Whether the writes bypass the page cache (false on tmpfs).
    var isDirect: Bool { file.alignment != nil }

    func prepare() throws {}

    func save() throws {
        try file.writeDurably(record, at: offset)
        bytesWritten += UInt64(record.count)
        offset += record.count
        if offset + record.count > file.size { offset = 0 }
    }
}

final class BufferedFloorWorkload: SaveWorkload {
    private let engine = SyncEngine()
    private let file: EngineFile
    private let record: [UInt8]
    private let fileSize: Int
    private var offset = 0
    private(set) var bytesWritten: UInt64 = 0

    init(directory: FilePath, recordSize: Int) throws {
        record = [UInt8](repeating: 0x5A, count: recordSize)
        // Preallocated and synced, so an append changes no metadata: one flush per write.
        fileSize = max(4 << 20, recordSize * 64)
        file = try engine.open(directory.appending("floor"), .create)
        try engine.perform([
            .write(file, [UInt8](repeating: 0, count: fileSize), offset: 0, durable: false), .sync(file),
        ])
    }

    deinit { engine.close(file) }

    func prepare() throws {}

    func save() throws {
        try engine.perform([.write(file, record, offset: offset, durable: true)])
        bytesWritten += UInt64(record.count)
        offset += record.count
        if offset + record.count > fileSize { offset = 0 }
    }
}

final class StoreWorkload: SaveWorkload {
    private let store: WindowStore
    /// The regular Browser, or the incognito one (`SaveSize.incognito`).
    private let browser: Browser
    private var change: PendingChange
    private var seq: UInt64 = 1

    init(engine: any IOEngine, size: SaveSize, directory: FilePath) throws {
        change = PendingChange(size: size)
        store = WindowStore(root: directory, windowID: UUID(), engine: engine, saveDelayMilliseconds: 0)
        _ = try store.recover()
        browser = size == .incognito ? store.incognito : store.regular
        let browser = browser
        try store.apply(seq: seq) {
            try fill(browser.webStateList, tabs: size.windowTabs, profile: browser.profile, round: 0)
        }
        try store.waitUntilDurable(seq)
    }

    deinit {
        // The bench's windows are thrown away: their incognito keys go with them.
        let incognito = store.incognito.webStateList
        if !incognito.isEmpty {
            store.apply(seq: seq + 1) { incognito.closeAll() }
            try? store.waitUntilDurable(seq + 1)
            _ = try? store.poll(waiting: true)
        }
    }

    var bytesWritten: UInt64 { store.bytesWritten }

    func prepare() throws { change.prepare(profile: browser.profile, round: seq + 1) }

    func save() throws {
        seq += 1
        let list = browser.webStateList
        let (change, round) = (change, seq)
        try store.apply(seq: seq) { try change.apply(to: list, round: round) }
        try store.waitUntilDurable(seq)
    }
}

/// The mobile browsers' save: each change applied to a `Browser` like the store's (its
/// list's delegate attaches the tab helpers, an observer of the list and of every tab hears
/// each change and marks the session dirty, as Chrome's session agent does), then the whole
/// session encoded and written atomically.
final class RewriteWorkload: SaveWorkload {
    private let engine = SyncEngine()
    private let directory: FilePath
    private var change: PendingChange
    /// The Browser's profile: the Browser holds it unowned.
    private let profile: Profile
    let browser: Browser
    private let changes: SessionChangeObserver
    private var seq: UInt64 = 1
    private(set) var bytesWritten: UInt64 = 0

    init(size: SaveSize, directory: FilePath) throws {
        self.directory = directory
        change = PendingChange(size: size)
        profile = Profile(stateDirectory: directory)
        browser = profile.browserList.browser(for: UUID())
        changes = SessionChangeObserver(list: browser.webStateList)
        try fill(browser.webStateList, tabs: size.windowTabs, profile: browser.profile, round: 0)
        try write()
    }

    func prepare() throws { change.prepare(profile: browser.profile, round: seq + 1) }

    func save() throws {
        seq += 1
        try change.apply(to: browser.webStateList, round: seq)
        try write()
    }

    private func write() throws {
        guard changes.takeDirty() else {
            throw BenchError.worker("rewrite: a change the session's observer did not hear")
        }
        let bytes = try encodeSession(browser.webStateList, seq: seq)
        let temporary = directory.appending("session.tmp")
        try? engine.removeFile(temporary)
        let file = try engine.open(temporary, .create)
        defer { engine.close(file) }
        try engine.perform([.write(file, bytes, offset: 0, durable: false), .sync(file)])
        try engine.rename(temporary, to: directory.appending("session"))
        try engine.syncDirectory(directory)
        bytesWritten += UInt64(bytes.count)
    }
}

/// Watches a list and each of its tabs, and says whether anything changed since it was last
/// asked: what tells a browser its session needs writing.
final class SessionChangeObserver: WebStateListObserver, WebStateObserver {
    private var dirty = false

    init(list: WebStateList) {
        list.addObserver(self)
        for webState in list.webStates { webState.addObserver(self) }
    }

    /// Whether a change came since the last call.
    func takeDirty() -> Bool {
        defer { dirty = false }
        return dirty
    }

    func webStateList(_ list: WebStateList, didChange change: WebStateListChange, status: WebStateListStatus) {
        switch change {
        case .inserted(let webState, _): webState.addObserver(self)
        case .removed(let webState, _, _): webState.removeObserver(self)
        case .replaced(let old, let new, _):
            old.removeObserver(self)
            new.addObserver(self)
        case .moved, .pinnedStateChanged, .activation: break
        }
        dirty = true
    }

    func webState(_ webState: WebState, didCommitNavigationAt index: Int, newItem: Bool) { dirty = true }
}
