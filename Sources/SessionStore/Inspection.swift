import BrowserModel
import Foundation
import HostLimits
import IOUring
import Platform
import SessionFormat
import SystemPackage

/// An offline, read-only view of what is on disk under a root: `windowhost inspect`.
public struct WindowInspection: Encodable, Sendable {
    /// The window's UUID, canonical (uppercase) whatever the spelling on disk.
    public let uuid: String
    /// The entry's name under `windows/`: another spelling than `uuid` is renamed to it when
    /// the host next starts.
    public let directory: String
    public let browsers: [BrowserInspection]
    /// Damage of the window as a whole: what keeps its directory from being read at all (a
    /// symlink in its place), or a tab id both its Browsers hold.
    public let damaged: [BrowserInspection.Damage]

    /// Whether anything of the window failed its checks.
    public var isDamaged: Bool { !damaged.isEmpty || browsers.contains { !$0.damaged.isEmpty } }
}

public struct BrowserInspection: Encodable, Sendable {
    public struct Tab: Encodable, Sendable {
        public let id: Int64
        public let url: String
        public let title: String
        public let pinned: Bool
        /// Whether the tab had been realized (loaded) when it was saved.
        public let realizedAtSave: Bool
        /// When the tab was last activated or shown, in microseconds since the epoch.
        public let lastActiveTimeUs: Int64
    }

    /// A session file read, and the layout version its header names.
    public struct StoredFile: Encodable, Sendable {
        public let name: String
        public let version: Int
    }

    /// A move between windows the Browser received (`ctl move-to-window`): the move's id as
    /// the supervisor names it (hex) and the tab it made here.
    public struct MoveReceived: Encodable, Sendable {
        public let move: String
        public let tab: Int64
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
    /// The snapshot and journals the Browser's tabs were read from, oldest first.
    public let files: [StoredFile]
    /// The moves it remembers receiving, oldest first (`Limits.movesRemembered`).
    public let movesReceived: [MoveReceived]
    public let damaged: [Damage]
}

public enum SessionInspector {
    /// The windows under `root`, in `windows.order` order and then by name; only `window` when
    /// given. Opens everything read only and changes nothing, so a read-only copy works. A
    /// window or Browser that cannot be read is shown with what failed, and the others still
    /// are. With `deep`, every stored history is read and checked too (a plain look reads
    /// only the list metadata and journals). Throws `.io` when `root/windows` cannot be listed
    /// or `windows.order` is there and does not read; a `windows` that is not a directory lists
    /// nothing (`RootLayout.misplacedEntries` says what it is).
    public static func inspect(
        root: FilePath, window: UUID? = nil, deep: Bool = false, engine: any IOEngine = SyncEngine()
    )
        throws(StoreError) -> [WindowInspection]
    {
        let windows = root.appending(DiskLayout.windows)
        let onDisk = try io { try engine.listDirectory(windows) } ?? []
        let order = try io { try RootLayout.savedOrder(root: root, engine: engine) }
        var entries = onDisk.compactMap { entry in
            UUID(uuidString: entry.name.string).map { (entry.name.string, $0, entry.kind) }
        }
        let rank = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        entries.sort { (rank[$0.1] ?? Int.max, $0.0) < (rank[$1.1] ?? Int.max, $1.0) }
        if let window { entries = entries.filter { $0.1 == window } }
        return entries.map { name, id, kind in
            Self.window(
                at: DiskLayout.windowDirectory(root: root, name: name), id: id, kind: kind, root: root, deep: deep,
                engine: engine)
        }
    }

    /// A set-aside entry as `inspect` shows a window: its Browsers (what can be read of damaged
    /// files, with what failed), read only; an entry that is no directory shows as such.
    public static func inspect(
        setAside entry: SetAsideEntry, root: FilePath, deep: Bool = false, engine: any IOEngine = SyncEngine()
    ) -> WindowInspection {
        window(at: entry.path, id: entry.window ?? noWindow, kind: entry.kind, root: root, deep: deep, engine: engine)
    }

    /// The UUID an entry that names no window is read under (it holds no key, matches no window).
    static let noWindow = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    /// One window directory (`directory`, of window `id`): each of its Browsers as recovery
    /// reads them.
    private static func window(
        at directory: FilePath, id: UUID, kind: EntryKind, root: FilePath, deep: Bool, engine: any IOEngine
    ) -> WindowInspection {
        let name = directory.lastComponent?.string ?? ""
        guard kind == .directory else {
            let damage = BrowserInspection.Damage(
                file: directory.string, offset: nil, error: "a \(kind) where a window directory belongs (not followed)")
            return WindowInspection(uuid: id.uuidString, directory: name, browsers: [], damaged: [damage])
        }
        let profile = Profile(stateDirectory: root)
        var browsers: [BrowserInspection] = []
        for kind in BrowserKind.allCases {
            let owner = kind == .regular ? profile : profile.offTheRecordProfile
            // The window's own Browsers, as recovery reads them: replaying one checks its tab
            // ids against the other's (a record bringing in an id the other holds is damage).
            let store = BrowserStore(
                kind: kind, window: id, directory: DiskLayout.browserDirectory(window: directory, kind: kind),
                list: owner.browserList.browser(for: id).webStateList, profile: owner, engine: engine,
                options: StoreOptions(), readOnly: true)
            // The incognito Browser's files open with the window's key when the keyring
            // holds it (the same user on the running machine); without it they show as
            // sealed files whose key is gone.
            if kind == .incognito, let key = try? KernelIncognitoKeys(root: root, window: id).existingKey() {
                store.sealing = try? RecordSeal.Key(key)
            }
            // A set-aside session's (or one being adopted) open with the keys that went with it.
            if kind == .incognito,
                let recorded = try? KernelIncognitoKeys.recordedKeys(root: root, directory: directory)
            {
                store.alternateSeals = recorded.compactMap { recorded in
                    (try? RecordSeal.Key(recorded.key)).map {
                        BrowserStore.SealIdentity(window: recorded.window, key: $0)
                    }
                }
            }
            do throws(StoreError) {
                guard try io({ try engine.kind(store.directory) }) != nil else { continue }
                browsers.append(try inspect(store, deep: deep))
            } catch {
                browsers.append(BrowserInspection(unreadable: store, error))
            }
        }
        return WindowInspection(
            uuid: id.uuidString, directory: name, browsers: browsers, damaged: sharedTabIDs(browsers, directory))
    }

    /// Tab ids both Browsers of a window hold (from their snapshots: a journal record that would
    /// bring one in is already reported where it is). Ids are unique across a window, since
    /// commands address tabs by id alone.
    private static func sharedTabIDs(_ browsers: [BrowserInspection], _ directory: FilePath) -> [BrowserInspection
        .Damage]
    {
        guard browsers.count == 2 else { return [] }
        let shared = Set(browsers[0].tabs.map(\.id)).intersection(browsers[1].tabs.map(\.id))
        return shared.sorted().map { id in
            BrowserInspection.Damage(
                file: directory.string, offset: nil,
                error:
                    "tab identifier \(id) appears twice: both the \(browsers[0].kind) and the \(browsers[1].kind) Browser hold it"
            )
        }
    }

    private static func inspect(_ store: BrowserStore, deep: Bool) throws(StoreError) -> BrowserInspection {
        let loaded = try store.load()
        let (seq, damagedFiles, moves) = try store.replayForInspection(loaded)
        var damaged = damagedFiles.map {
            BrowserInspection.Damage(file: $0.path, offset: $0.error.offset, error: "\($0.error)")
        }
        if deep, let reader = loaded.reader {
            let path = store.directory.appending(DiskLayout.snapshotName(loaded.generation)).string
            for index in 0..<reader.count {
                do {
                    _ = try reader.history(at: index)
                } catch {
                    damaged.append(
                        BrowserInspection.Damage(
                            file: path, offset: error.offset,
                            error: "tab \(reader.id(at: index).rawValue)'s history: \(error)"))
                }
            }
        }
        let realizedAtSave =
            loaded.reader.map { reader in
                Dictionary(
                    (0..<reader.count).map { (reader.id(at: $0), reader.item(at: $0).realizedAtSave) },
                    uniquingKeysWith: { first, _ in first })
            } ?? [:]
        let list = store.list
        let tabs = list.webStates.enumerated().map { index, webState in
            BrowserInspection.Tab(
                id: webState.id.rawValue, url: webState.url, title: webState.title, pinned: list.isPinned(at: index),
                // A tab the journal added was live, so realized, when saved.
                realizedAtSave: realizedAtSave[webState.id] ?? true,
                lastActiveTimeUs: webState.lastActiveTime.microsecondsSinceEpoch)
        }
        let snapshotBytes = loaded.reader.map { _ in fileSize(store, DiskLayout.snapshotName(loaded.generation)) } ?? 0
        let files =
            (loaded.reader.map {
                [BrowserInspection.StoredFile(name: DiskLayout.snapshotName(loaded.generation), version: $0.version)]
            } ?? [])
            + loaded.journals.map {
                BrowserInspection.StoredFile(name: $0.path.lastComponent?.string ?? "", version: $0.scan.version)
            }
        return BrowserInspection(
            kind: store.kind.rawValue, tabs: tabs, activeIndex: list.activeIndex, durableSeq: seq,
            generation: loaded.generation, snapshotBytes: snapshotBytes,
            journalBytes: loaded.journals.reduce(0) { $0 + $1.tail - $1.scan.headerEnd },
            tornTailAt: loaded.tornTailAt, files: files,
            movesReceived: moves.moves.map {
                BrowserInspection.MoveReceived(move: String($0.move, radix: 16), tab: $0.tab.rawValue)
            },
            damaged: damaged)
    }

    private static func fileSize(_ store: BrowserStore, _ name: String) -> Int {
        guard let file = try? store.engine.open(store.directory.appending(name), .read) else { return 0 }
        defer { store.engine.close(file) }
        return (try? store.engine.size(of: file)) ?? 0
    }
}

extension BrowserInspection {
    /// A Browser whose directory could not be read at all: nothing shown but why.
    init(unreadable store: BrowserStore, _ error: StoreError) {
        self.init(
            kind: store.kind.rawValue, tabs: [], activeIndex: nil, durableSeq: 0, generation: 0, snapshotBytes: 0,
            journalBytes: 0,
            tornTailAt: nil, files: [], movesReceived: [],
            damaged: [Damage(file: store.directory.string, offset: nil, error: "\(error)")])
    }
}

/// What a set-aside entry holds, in a few numbers: what `inspect --set-aside ID --summary`
/// prints and the supervisor lists (`SetAsideStatus`), from a child process.
public struct SetAsideSummary: Codable, Equatable, Sendable {
    /// The Browsers it has a directory for: `regular`, `incognito`.
    public var browsers: [String]
    public var regularTabs: Int
    public var incognitoTabs: Int
    /// The newest durable seq readable in it: the higher of its Browsers'.
    public var durableSeq: UInt64
    public var damaged: Bool

    enum CodingKeys: String, CodingKey {
        case browsers, damaged
        case regularTabs = "regular_tabs"
        case incognitoTabs = "incognito_tabs"
        case durableSeq = "durable_seq"
    }

    public init(_ window: WindowInspection) {
        browsers = window.browsers.map(\.kind)
        regularTabs = window.browsers.first { $0.kind == BrowserKind.regular.rawValue }?.tabs.count ?? 0
        incognitoTabs = window.browsers.first { $0.kind == BrowserKind.incognito.rawValue }?.tabs.count ?? 0
        durableSeq = window.browsers.map(\.durableSeq).max() ?? 0
        damaged = window.isDamaged
    }

    /// Whether every number is one a session of this host can hold: the summary comes from a
    /// process that read untrusted files, and is checked before it is shown.
    public var isPlausible: Bool {
        browsers.count <= BrowserKind.allCases.count && Set(browsers).isSubset(of: BrowserKind.allCases.map(\.rawValue))
            && (0...Limits.maxTabsPerBrowser).contains(regularTabs)
            && (0...Limits.maxTabsPerBrowser).contains(incognitoTabs)
            && Limits.isValidCommandSeq(durableSeq)
    }
}
