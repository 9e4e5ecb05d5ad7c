import BrowserModel
import Foundation
import IOUring
import SessionFormat
import SystemPackage

/// An offline, read-only view of what is on disk under a root: `windowhost inspect`.
public struct WindowInspection: Encodable, Sendable {
    public let uuid: String
    public let browsers: [BrowserInspection]
}

public struct BrowserInspection: Encodable, Sendable {
    public struct Tab: Encodable, Sendable {
        public let id: Int64
        public let url: String
        public let title: String
        public let pinned: Bool
        /// Whether the tab had been realized (loaded) when it was saved.
        public let realizedAtSave: Bool
    }

    public struct Damage: Encodable, Sendable {
        public let file: String
        public let offset: Int?
        public let error: String
    }

    public let kind: String
    public let tabs: [Tab]
    public let activeIndex: Int?
    /// The last command sequence number the files cover.
    public let durableSeq: UInt64
    public let generation: UInt64
    public let snapshotBytes: Int
    /// Bytes of saves in the journal (its file is preallocated larger).
    public let journalBytes: Int
    /// An unfinished last save, discarded on recovery: where it starts.
    public let tornTailAt: Int?
    public let damaged: [Damage]
}

public enum SessionInspector {
    /// The windows under `root`, in `windows.order` order and then by UUID; only `window` when
    /// given. Throws `.io` when `root/windows` cannot be listed.
    public static func inspect(root: FilePath, window: UUID? = nil, engine: any IOEngine = SyncEngine()) throws(StoreError)
        -> [WindowInspection]
    {
        let windows = root.appending("windows")
        let onDisk = try io { try engine.directoryEntries(windows) } ?? []
        let order = (try? String(contentsOfFile: root.appending("windows.order").string, encoding: .utf8))?
            .split(separator: "\n").map(String.init) ?? []
        var names = order.filter(onDisk.contains) + onDisk.filter { !order.contains($0) }
        if let window { names = names.filter { $0 == window.uuidString } }
        return try names.map { name throws(StoreError) in
            let profile = Profile(stateDirectory: root)
            var browsers: [BrowserInspection] = []
            for kind in BrowserKind.allCases {
                let directory = windows.appending(name).appending(kind.rawValue)
                guard try io({ try engine.directoryEntries(directory) }) != nil else { continue }
                let owner = kind == .regular ? profile : profile.offTheRecordProfile
                let store = BrowserStore(
                    kind: kind, directory: directory, list: WebStateList(), profile: owner, engine: engine,
                    options: StoreOptions(), readOnly: true)
                browsers.append(try inspect(store))
            }
            return WindowInspection(uuid: name, browsers: browsers)
        }
    }

    private static func inspect(_ store: BrowserStore) throws(StoreError) -> BrowserInspection {
        let loaded = try store.load()
        let (seq, damaged) = store.replayForInspection(loaded)
        let realizedAtSave = Dictionary(
            (loaded.reader?.items ?? []).map { ($0.id, $0.realizedAtSave) }, uniquingKeysWith: { first, _ in first })
        let list = store.list
        let tabs = list.webStates.enumerated().map { index, webState in
            BrowserInspection.Tab(
                id: webState.id.rawValue, url: webState.url, title: webState.title, pinned: list.isPinned(at: index),
                // A tab the journal added was live, so realized, when saved.
                realizedAtSave: realizedAtSave[webState.id] ?? true)
        }
        let snapshotBytes = loaded.reader.map { _ in fileSize(store, StoreLayout.snapshotName(loaded.generation)) } ?? 0
        return BrowserInspection(
            kind: store.kind.rawValue, tabs: tabs, activeIndex: list.activeIndex, durableSeq: seq,
            generation: loaded.generation, snapshotBytes: snapshotBytes,
            journalBytes: loaded.journals.reduce(0) { $0 + $1.tail - Framing.fileHeaderSize },
            tornTailAt: loaded.tornTailAt,
            damaged: damaged.map { BrowserInspection.Damage(file: $0.path, offset: $0.error.offset, error: "\($0.error)") })
    }

    private static func fileSize(_ store: BrowserStore, _ name: String) -> Int {
        guard let file = try? store.engine.open(store.directory.appending(name), creating: false) else { return 0 }
        defer { store.engine.close(file) }
        return (try? store.engine.size(of: file)) ?? 0
    }
}
