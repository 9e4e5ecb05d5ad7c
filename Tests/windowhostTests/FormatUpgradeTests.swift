import BrowserModel
import Foundation
import HostControl
import IOUring
import SessionFormat
import SessionStore
import Supervisor
import SystemPackage
import TestSupport
import Testing

/// Issue 14 item 2: sessions the v1 releases wrote restore tab for tab with today's code, and
/// are rewritten in the new format at their next compaction. The fixtures were written by the
/// old binaries themselves, through their CLI (`Fixtures/make-v1-fixture.sh`): `v1-9df0f5e` ends with
/// a clean shutdown, `v1-690d51b` with the supervisor SIGKILLed after every command was
/// acknowledged durable. Each holds two windows, one with incognito tabs, openers, a closed and
/// a replaced tab, an active tab other than the last, a tab unrealized when its snapshot was
/// written and a journal with saves after its snapshot; `expected.json` is the old binary's own
/// view (`inspect --json` after it stopped, `ctl dump --json` of each window before).
@Suite struct FormatUpgradeTests {
    /// The fixtures under `SessionStoreTests/Fixtures/`, each named for the commit that wrote it.
    static let fixtures = ["v1-9df0f5e", "v1-690d51b"]

    /// The snapshot format the next compaction writes (issue 14).
    static let upgradedVersion: UInt16 = 2

    // MARK: restore, as a user's next start would

    /// Today's `inspect --deep` reads every file whole and shows what the old binary showed,
    /// and a host started on the session serves every tab as the old one did, with no damage.
    @Test(arguments: fixtures)
    func restoresTabForTab(fixture: String) throws {
        let expected = try FixtureView(fixture)
        try withFixtureRoot(fixture) { root in
            let inspected = try inspect(root)
            #expect(inspected.status == 0, "\(inspected.output)")
            #expect(try inspected.view().windows == expected.inspect.windows)

            let host = try HostProcess(root: root, scenes: expected.dumps.count)
            #expect(Set(host.windowIDs()) == Set(expected.dumps.map(\.window)))
            for window in expected.dumps {
                let dump = try dump(window.window, host)
                #expect(dump.lists == window.lists, "window \(window.window)")
                #expect(
                    dump.appliedSeq == window.appliedSeq && dump.durableSeq == window.durableSeq,
                    "window \(window.window)")
                // Restored lazily, snapshot and journal alike: only each Browser's displayed
                // (active) tab is realized.
                let shown = try host.call(.dump, window: window.window).decode(DumpReply.self)
                for list in [shown.regular, shown.incognito] {
                    let active = list.activeIndex.map { [list.tabs[Int($0)].id] } ?? []
                    #expect(
                        list.tabs.filter(\.realized).map(\.id) == active,
                        "window \(window.window): \(list.tabs.map { ($0.id, $0.realized) })")
                }
            }
            #expect(host.terminate() == 0, "\(host.log)")
            #expect(damageSetAside(root).isEmpty)
        }
    }

    // MARK: the upgrade at the next compaction

    /// New tabs in every Browser that has some make each compact: every snapshot the new
    /// generations hold is in the new format, and the session restores as it was plus the new
    /// tabs. The version check fails until the v2 writer lands.
    @Test(arguments: fixtures)
    func theNextCompactionWritesTheNewFormat(fixture: String) throws {
        let expected = try FixtureView(fixture)
        try withFixtureRoot(fixture) { root in
            let before = snapshotGenerations(root)
            let host = try HostProcess(root: root, scenes: expected.dumps.count, arguments: ["--compact-after", "4"])
            var after: [String: FixtureView.Lists] = [:]
            for window in expected.dumps {
                var lists = window.lists
                for incognito in [false, true] where !lists[incognito].tabs.isEmpty {
                    for page in 1...6 {
                        let url =
                            "https://upgrade.example/\(window.window.prefix(8))/\(incognito ? "incognito" : "regular")/\(page)"
                        lists[incognito].tabs.append(try open(url, in: window.window, incognito: incognito, host))
                    }
                }
                #expect(try host.ctl(["wait-durable", "--window", window.window]).status == 0)
                #expect(try dump(window.window, host).lists == lists, "window \(window.window)")
                after[window.window] = lists
            }
            #expect(host.terminate() == 0, "\(host.log)")

            // (a) Every Browser compacted, each new snapshot in the new format.
            let written = snapshotGenerations(root)
            for (directory, generations) in before {
                let new = (written[directory] ?? []).filter { $0 > (generations.max() ?? 0) }
                #expect(!new.isEmpty, "\(directory.path) compacted")
                for generation in new {
                    let version = try snapshotVersion(directory, generation)
                    #expect(
                        version == Self.upgradedVersion,
                        "\(directory.path)/\(DiskLayout.snapshotName(generation)) is version \(version)")
                }
            }

            // (b) And it restores as it was, with the new tabs.
            let again = try HostProcess(root: root, scenes: expected.dumps.count)
            for (window, lists) in after { #expect(try dump(window, again).lists == lists, "window \(window)") }
            #expect(again.terminate() == 0, "\(again.log)")
            #expect(try inspect(root).status == 0)
            #expect(damageSetAside(root).isEmpty)
        }
    }

    /// The newest generation (written by today's code) damaged: recovery falls back to the
    /// generation before it and replays every journal after it, so every acknowledged tab comes
    /// back, the saves after the compaction included. After `v1-690d51b` that generation is the
    /// old binary's, kept as the fallback; `v1-9df0f5e`'s journal predates block framing and is
    /// not appended to, so the first save writes two generations from memory (the twin) and the
    /// old one goes: the fallback is the twin's first.
    @Test(arguments: fixtures)
    func aDamagedNewGenerationFallsBackToTheOneBefore(fixture: String) throws {
        let expected = try FixtureView(fixture)
        let writtenFromMemory = fixture == "v1-9df0f5e"
        let window = try #require(expected.dumps.max { $0.lists.regular.tabs.count < $1.lists.regular.tabs.count })
        try withFixtureRoot(fixture) { root in
            let directory = browserDirectory(root, window.window, incognito: false)
            let old = try #require(snapshotGenerations(root)[directory]?.max())
            #expect(try snapshotVersion(directory, old) == 1)
            let host = try HostProcess(root: root, scenes: expected.dumps.count, arguments: ["--compact-after", "4"])
            var lists = window.lists
            // One tab at a time until a compaction has written a generation past the old one,
            // then two saves into its journal (fewer than compact the next).
            var page = 0
            while snapshotGenerations(root)[directory]?.max() == old, page < 12 {
                page += 1
                lists.regular.tabs.append(
                    try open("https://fallback.example/\(page)", in: window.window, incognito: false, host))
                #expect(try host.ctl(["wait-durable", "--window", window.window]).status == 0)
            }
            let newest = try #require(snapshotGenerations(root)[directory]?.max())
            #expect(newest == old + (writtenFromMemory ? 2 : 1), "one compaction")
            for later in 1...2 {
                lists.regular.tabs.append(
                    try open("https://after.example/\(later)", in: window.window, incognito: false, host))
            }
            #expect(try host.ctl(["wait-durable", "--window", window.window]).status == 0)
            #expect(try dump(window.window, host).lists == lists)
            #expect(host.terminate() == 0, "\(host.log)")
            #expect(
                snapshotGenerations(root)[directory] == [newest - 1, newest],
                "the generation before is kept as the fallback")
            if !writtenFromMemory {
                #expect(try snapshotVersion(directory, old) == 1, "the fallback is the old binary's")
            }

            // A byte of the list metadata, which restore reads, so the damage shows at once.
            let path = directory.appendingPathComponent(DiskLayout.snapshotName(newest))
            var bytes = try [UInt8](Data(contentsOf: path))
            bytes[Framing.fileHeaderSize + Framing.recordHeaderSize] ^= 0xFF
            try Data(bytes).write(to: path)

            let inspected = try inspect(root)
            #expect(inspected.status == 65, "inspect reports the damage: \(inspected.output)")
            let again = try HostProcess(root: root, scenes: expected.dumps.count)
            #expect(try dump(window.window, again).lists == lists)
            #expect(again.terminate() == 0, "\(again.log)")
            let setAside = damageSetAside(root)
            #expect(
                setAside.contains {
                    $0.hasPrefix("windows/\(window.window)/regular/damaged/\(DiskLayout.snapshotName(newest))")
                }, "\(setAside)")
        }
    }

    // MARK: damage to the old binary's snapshot

    /// Bytes of the fixture's newest regular snapshot (the one holding an unrealized tab)
    /// flipped, one at a time: recovery never traps and brings every tab back, from the
    /// generation before where the newest fails its checks; what it cannot give whole it reports.
    @Test(arguments: fixtures)
    func byteFlipsOfTheOldSnapshot(fixture: String) throws {
        try sweep(fixture) { bytes, offset in
            var damaged = bytes
            damaged[offset] ^= 0xFF
            return ("byte \(offset) flipped", damaged)
        }
    }

    /// Truncations of the same snapshot, judged the same way.
    @Test(arguments: fixtures)
    func truncationsOfTheOldSnapshot(fixture: String) throws {
        try sweep(fixture) { bytes, length in ("cut to \(length) bytes", Array(bytes[..<length])) }
    }

    /// Positions a sweep damages: every header byte, and a seeded sample of the rest
    /// (`WINDOWHOST_UPGRADE_SWEEP=all`: every byte; recovery on the simulated disk takes about
    /// 30 ms in a debug build).
    private func positions(_ count: Int, seed: UInt64) -> [Int] {
        let sample = 300
        guard ProcessInfo.processInfo.environment["WINDOWHOST_UPGRADE_SWEEP"] != "all",
            count > Framing.fileHeaderSize + sample
        else {
            return Array(0..<count)
        }
        var random = SeededGenerator(seed: seed)
        var rest = Array(Framing.fileHeaderSize..<count)
        rest.shuffle(using: &random)
        return Array(0..<Framing.fileHeaderSize) + rest.prefix(sample).sorted()
    }

    /// Loads the fixture's window with the most regular tabs onto a simulated disk, and for each
    /// position, the damaged version of its newest regular snapshot `damage` makes there,
    /// recovers a copy: the
    /// exact tabs and seq the old binary acknowledged, or damage reported (files set aside,
    /// degraded tabs, a typed error). Counts of each are checked so the sweep cannot pass empty.
    private func sweep(_ fixture: String, damage: (_ bytes: [UInt8], _ position: Int) -> (String, [UInt8])) throws {
        let expected = try FixtureView(fixture)
        let window = try #require(expected.dumps.max { $0.lists.regular.tabs.count < $1.lists.regular.tabs.count })
        let id = try #require(UUID(uuidString: window.window))
        let root = FilePath("/sim")
        let base = FaultEngine(directories: [root])
        let source = Self.fixtureURL(fixture).appendingPathComponent(DiskLayout.windows).appendingPathComponent(
            window.window)
        for kind in try FileManager.default.contentsOfDirectory(atPath: source.path) {
            let directory = root.appending(DiskLayout.windows).appending(window.window).appending(kind)
            try base.makeDirectories(directory)
            for name in try FileManager.default.contentsOfDirectory(atPath: source.appendingPathComponent(kind).path) {
                let bytes = try [UInt8](
                    Data(contentsOf: source.appendingPathComponent(kind).appendingPathComponent(name)))
                let file = try base.open(directory.appending(name), .create)
                try base.perform([.write(file, bytes, offset: 0, durable: false), .sync(file)])
                base.close(file)
            }
            try base.syncDirectory(directory)
        }
        let regular = root.appending(DiskLayout.windows).appending(window.window).appending(
            BrowserKind.regular.rawValue)
        let generation = try #require(
            snapshotGenerations(in: source.appendingPathComponent(BrowserKind.regular.rawValue)).max())
        let snapshot = regular.appending(DiskLayout.snapshotName(generation))
        let pristine = try #require(base.contents(of: snapshot))
        #expect(pristine.count > Framing.fileHeaderSize)

        var exact = 0
        var reported = 0
        let tried = positions(pristine.count, seed: 14)
        for (what, bytes) in tried.map({ damage(pristine, $0) }) {
            let disk = base.copy()
            disk.overwrite(snapshot, with: bytes)
            // A small preallocation: recovery rewrites a damaged Browser into a new generation.
            let store = WindowStore(
                root: root, windowID: id, engine: disk, options: StoreOptions(journalPreallocation: 8 << 10),
                saveDelayMilliseconds: 0)
            let recovery: WindowRecovery
            do {
                recovery = try store.recover()
            } catch {
                reported += 1
                continue
            }
            let setAside = recovery.regular.damaged + recovery.incognito.damaged
            let degraded = recovery.regular.degradedTabs + recovery.incognito.degradedTabs
            let lists = try FixtureView.Lists(store)
            if lists == window.lists && recovery.seq == window.appliedSeq {
                exact += 1
            } else {
                #expect(
                    !setAside.isEmpty || !degraded.isEmpty,
                    "\(fixture): \(what) came back changed with no damage reported: \(lists)")
                reported += 1
            }
        }
        // A flip or cut that leaves the snapshot whole does not exist (every byte is framed and
        // checked, or a history read on demand), yet each falls back to a whole generation.
        #expect(exact > 0 && exact + reported == tried.count, "\(fixture): \(exact) exact, \(reported) reported")
        #expect(
            reported == 0,
            "\(fixture): \(reported) of \(tried.count) lost acknowledged tabs though the fallback is whole")
    }

    // MARK: files

    /// The committed fixture `name` (its files are the old binary's; git keeps no modes).
    static func fixtureURL(_ name: String) -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("SessionStoreTests/Fixtures/\(name)")
    }

    /// A private copy of fixture `name` as the old binary left it (directories 0700, files 0600),
    /// without `expected.json`, as the root `body` runs on.
    private func withFixtureRoot(_ name: String, _ body: (URL) throws -> Void) throws {
        try withTemporaryDirectory { directory in
            let root = URL(fileURLWithPath: directory.string).appendingPathComponent("root")
            func copy(_ source: URL, to target: URL) throws {
                try FileManager.default.createDirectory(
                    at: target, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
                for name in try FileManager.default.contentsOfDirectory(atPath: source.path)
                where name != "expected.json" {
                    let from = source.appendingPathComponent(name)
                    let to = target.appendingPathComponent(name)
                    var isDirectory: ObjCBool = false
                    _ = FileManager.default.fileExists(atPath: from.path, isDirectory: &isDirectory)
                    if isDirectory.boolValue {
                        try copy(from, to: to)
                    } else {
                        try FileManager.default.copyItem(at: from, to: to)
                        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: to.path)
                    }
                }
            }
            try copy(Self.fixtureURL(name), to: root)
            try body(root)
        }
    }

    /// Where a Browser of `window` keeps its generations under `root`.
    private func browserDirectory(_ root: URL, _ window: String, incognito: Bool) -> URL {
        root.appendingPathComponent(DiskLayout.windows).appendingPathComponent(window).appendingPathComponent(
            incognito ? "incognito" : "regular")
    }

    /// Each Browser directory under `root/windows` and the snapshot generations it holds.
    private func snapshotGenerations(_ root: URL) -> [URL: Set<UInt64>] {
        let windows = root.appendingPathComponent(DiskLayout.windows)
        var found: [URL: Set<UInt64>] = [:]
        for window in (try? FileManager.default.contentsOfDirectory(atPath: windows.path)) ?? [] {
            for kind in ["regular", "incognito"] {
                let directory = windows.appendingPathComponent(window).appendingPathComponent(kind)
                if FileManager.default.fileExists(atPath: directory.path) {
                    found[directory] = snapshotGenerations(in: directory)
                }
            }
        }
        return found
    }

    /// The snapshot generations one Browser directory holds, by name.
    private func snapshotGenerations(in directory: URL) -> Set<UInt64> {
        Set(
            ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
                .compactMap { DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix) })
    }

    /// The format version in a snapshot's file header (magic "WHSS" · version u16 LE · …), read
    /// from the bytes rather than through the reader under test.
    private func snapshotVersion(_ directory: URL, _ generation: UInt64) throws -> UInt16 {
        let bytes = try [UInt8](Data(contentsOf: directory.appendingPathComponent(DiskLayout.snapshotName(generation))))
        try #require(bytes.count >= 6 && Array(bytes[0..<4]) == Array("WHSS".utf8))
        return UInt16(bytes[4]) | UInt16(bytes[5]) << 8
    }

    /// Paths under `root` (relative) of anything recovery or the supervisor set aside.
    private func damageSetAside(_ root: URL) -> [String] {
        let paths = (FileManager.default.enumerator(atPath: root.path)?.allObjects as? [String]) ?? []
        return paths.filter { path in
            path.split(separator: "/").contains { $0 == DiskLayout.damagedDirectory || $0 == DiskLayout.setAside }
                || path.contains(DiskLayout.damagedInPlaceInfix)
        }.sorted()
    }

    // MARK: the binary

    /// Today's `inspect ROOT --deep --json`: its status, its output, and the output decoded.
    private func inspect(_ root: URL) throws -> (status: Int32, output: String, view: () throws -> FixtureView.Inspect)
    {
        let run = try runWindowhost(["inspect", root.path, "--deep", "--json"])
        return (
            run.status, run.output,
            { try FixtureView.decoder.decode(FixtureView.Inspect.self, from: Data(run.output.utf8)) }
        )
    }

    /// Today's `ctl dump --window W --json`, which must succeed.
    private func dump(_ window: String, _ host: HostProcess) throws -> FixtureView.Dump {
        let run = try host.ctl(["dump", "--window", window, "--json"])
        try #require(run.status == 0, "\(run.output)")
        return try FixtureView.decoder.decode(FixtureView.Dump.self, from: Data(run.output.utf8))
    }

    /// Opens `url` at the end of a Browser, in the background (the active tab stays): the tab
    /// as `dump` then shows it.
    private func open(_ url: String, in window: String, incognito: Bool, _ host: HostProcess) throws -> FixtureView.Tab
    {
        let run = try host.ctl(
            ["open", "--window", window, "--url", url, "--background"] + (incognito ? ["--incognito"] : []))
        try #require(run.status == 0, "\(run.output)")
        let id = try #require(Int64(run.output.trimmingCharacters(in: .whitespacesAndNewlines)), "\(run.output)")
        return FixtureView.Tab(id: id, url: url, title: "", pinned: false, opener: nil)
    }
}

/// A fixture's `expected.json`: the old binary's view of its session, and the same shapes as
/// today's `inspect --json` and `ctl dump --json` decode into.
struct FixtureView: Decodable {
    let inspect: Inspect
    let dumps: [Dump]

    /// Both binaries write snake_case keys.
    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }()

    /// The `expected.json` of fixture `fixture`.
    init(_ fixture: String) throws {
        let url = FormatUpgradeTests.fixtureURL(fixture).appendingPathComponent("expected.json")
        self = try Self.decoder.decode(Self.self, from: Data(contentsOf: url))
    }

    /// A tab as `ctl dump` shows it (whether it is realized now is the running window's own
    /// business, not the session's).
    struct Tab: Decodable, Equatable, CustomStringConvertible {
        let id: Int64
        let url: String
        let title: String
        let pinned: Bool
        let opener: Int64?

        var description: String { "\(id) \(url)\(opener.map { " (opener \($0))" } ?? "")\(pinned ? " pinned" : "")" }
    }

    /// One Browser's tabs and its active index.
    struct List: Decodable, Equatable {
        var activeIndex: Int?
        var tabs: [Tab]
    }

    /// Both Browsers of a window.
    struct Lists: Equatable {
        var regular: List
        var incognito: List

        /// The incognito or the regular Browser's list.
        subscript(incognito: Bool) -> List {
            get { incognito ? self.incognito : regular }
            set { if incognito { self.incognito = newValue } else { regular = newValue } }
        }

        /// What a recovered store holds, in the same shape.
        init(_ store: WindowStore) throws {
            func list(_ list: WebStateList) throws -> List {
                let tabs = try list.webStates.indices.map { index in
                    let webState = try list.webState(at: index)
                    return Tab(
                        id: webState.id.rawValue, url: webState.url, title: webState.title,
                        pinned: list.isPinned(at: index),
                        opener: try list.opener(at: index)?.openerID.rawValue)
                }
                return List(activeIndex: list.activeIndex, tabs: tabs)
            }
            regular = try list(store.regular.webStateList)
            incognito = try list(store.incognito.webStateList)
        }

        /// Two lists as they are.
        init(regular: List, incognito: List) {
            self.regular = regular
            self.incognito = incognito
        }
    }

    /// `ctl dump --json` of one window.
    struct Dump: Decodable {
        let window: String
        let appliedSeq: UInt64
        let durableSeq: UInt64
        let regular: List
        let incognito: List

        /// Both lists, as a recovered store is compared.
        var lists: Lists { Lists(regular: regular, incognito: incognito) }
    }

    /// `inspect --json`: the windows in their saved order, what each Browser saved.
    struct Inspect: Decodable {
        let windows: [Window]
    }

    /// One window as `inspect` shows it.
    struct Window: Decodable, Equatable {
        let uuid: String
        let browsers: [SavedBrowser]
    }

    /// A Browser as saved; sizes and generations are left out (the same files, counted as each
    /// version counts them).
    struct SavedBrowser: Decodable, Equatable {
        let kind: String
        let activeIndex: Int?
        let durableSeq: UInt64
        let tabs: [SavedTab]
    }

    /// A tab as its snapshot or journal saved it.
    struct SavedTab: Decodable, Equatable {
        let id: Int64
        let url: String
        let title: String
        let pinned: Bool
        let realizedAtSave: Bool
    }
}
