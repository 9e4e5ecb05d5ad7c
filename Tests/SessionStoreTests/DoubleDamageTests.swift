import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// A tab's stored history damaged in the newest snapshot *and* in the one before: beyond the
/// one-fallback promise for that history, but never a reason to drop acknowledged saves. The
/// tab keeps the page its metadata names and the journal replays on over it.
@Suite struct DoubleDamageTests {
    static let directory = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
        BrowserKind.regular.rawValue)
    /// Only tab A's history frame holds this URL: the metadata names each tab's current page.
    static let lostURL = "https://lost.example/first"

    static func page(_ url: String, _ second: Int64) -> NavigationItem {
        NavigationItem(
            url: url, title: "title of \(url)",
            timestamp: Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000 + second * 1_000_000))
    }

    /// Two generations whose snapshots both hold tab A's three-item history, then acknowledged
    /// saves in the newest journal that navigate A (unless not `navigatingA`), open C and
    /// navigate B.
    static func prepared(navigatingA: Bool = true) throws -> (engine: FaultEngine, live: WindowContents, seq: UInt64) {
        let engine = FaultEngine(directories: [simulatedRoot])
        let options = StoreOptions(compactAfterRecords: 4, compactAfterBytes: 1 << 20, journalPreallocation: 4 << 10)
        let (store, _) = try simulatedWindow(engine, options: options)
        let list = store.regular.webStateList
        let profile = store.regular.profile
        let tabA = WebState(id: profile.makeWebStateID(), creationTime: .zero)
        let tabB = WebState(id: profile.makeWebStateID(), creationTime: .zero)
        var seq: UInt64 = 0
        func command(_ body: () throws -> Void) throws {
            seq += 1
            try store.apply(seq: seq, body)
            try store.waitUntilDurable(seq)
        }
        try command {
            try tabA.commitNavigation(to: page(lostURL, 1))
            try list.insert(tabA, InsertionParams(activate: true))
        }
        try command { try tabA.commitNavigation(to: page("https://lost.example/second", 2)) }
        try command { try tabA.commitNavigation(to: page("https://a.example/third", 3)) }
        try command {
            try tabB.commitNavigation(to: page("https://b.example/one", 4))
            try list.insert(tabB)
        }
        for index in [1, 0, 1, 0] { try command { try list.activate(at: index) } }
        // The newest snapshot is proven in the background.
        try store.settle()
        #expect(try engine.directoryEntries(directory)?.filter { $0.hasPrefix(DiskLayout.snapshotPrefix) }.count == 2)
        if navigatingA { try command { try tabA.commitNavigation(to: page("https://a.example/fourth", 5)) } }
        try command {
            let tabC = WebState(id: profile.makeWebStateID(), creationTime: .zero)
            try tabC.commitNavigation(to: page("https://c.example/one", 6))
            try list.insert(tabC)
        }
        try command { try tabB.commitNavigation(to: page("https://b.example/two", 7)) }
        try store.settle()
        return (engine, try WindowContents(store), seq)
    }

    /// Flips a byte of every occurrence of the lost URL in every snapshot (or only in
    /// `snapshot`): tab A's history frame fails its checksum in both generations.
    static func damageTabAInEverySnapshot(_ engine: FaultEngine, only snapshot: String? = nil) throws -> Int {
        let needle = Array(lostURL.utf8)
        var damaged = 0
        for name in try engine.directoryEntries(directory) ?? []
        where name.hasPrefix(DiskLayout.snapshotPrefix) && (snapshot == nil || name == snapshot) {
            let path = directory.appending(name)
            var bytes = try #require(engine.contents(of: path))
            var found = false
            for start in 0...(bytes.count - needle.count) where Array(bytes[start..<start + needle.count]) == needle {
                bytes[start + needle.count - 1] ^= 0x01
                found = true
            }
            #expect(found, "\(name) holds tab A's history")
            engine.overwrite(path, with: bytes)
            damaged += 1
        }
        return damaged
    }

    @Test func twoDamagedGenerationsKeepEveryAcknowledgedSave() throws {
        let (engine, live, seq) = try Self.prepared()
        #expect(try Self.damageTabAInEverySnapshot(engine) == 2)

        let (restored, recovery) = try simulatedWindow(engine)
        // Every acknowledged save is there: nothing was set aside, the seq is the last one.
        #expect(recovery.seq == seq)
        #expect(recovery.regular.damaged.allSatisfy { $0.setAsideAt == nil }, "\(recovery.regular.damaged)")
        #expect(try engine.directoryEntries(Self.directory.appending(DiskLayout.damagedDirectory)) == nil)
        let tabs = restored.regular.webStateList.webStates
        #expect(tabs.map(\.id) == live.regular.tabs.map(\.id))
        #expect(recovery.regular.degradedTabs == [tabs[0].id], "\(recovery.regular)")

        // Tab A: the page its metadata named, then the navigation the journal replayed.
        let history = try tabs[0].navigationHistory()
        #expect(history.items.map(\.url) == ["https://a.example/third", "https://a.example/fourth"])
        #expect(history.currentItem?.title == "title of https://a.example/fourth")
        // Every other tab, and the list itself, exactly as acknowledged.
        let got = try WindowContents(restored)
        #expect(got.regular.activeIndex == live.regular.activeIndex)
        #expect(Array(got.regular.tabs.dropFirst()) == Array(live.regular.tabs.dropFirst()))

        // The degraded history was written into a new generation: a later recovery reads it
        // whole, with no damage left to report.
        try restored.settle()
        let (again, second) = try simulatedWindow(engine)
        #expect(second.regular.damaged.isEmpty && second.regular.degradedTabs.isEmpty, "\(second.regular)")
        #expect(try WindowContents(again) == got)
    }

    /// Tab A's history damaged in the newest snapshot only, and the generation before (its
    /// fallback) out of reach for a moment: descriptors ran short as its snapshot opened. That
    /// is no damage: recovery throws, touching no file, instead of degrading the tab to one
    /// page (which the next snapshot would then make permanent); once descriptors are back,
    /// tab A comes back with its whole history.
    @Test func aShortageReadingTheFallbackFailsTheRestoreInsteadOfDegrading() throws {
        let (engine, live, seq) = try Self.prepared()
        let generations = try #require(try engine.directoryEntries(Self.directory)).compactMap {
            DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix)
        }.sorted()
        try #require(generations.count == 2)
        #expect(try Self.damageTabAInEverySnapshot(engine, only: DiskLayout.snapshotName(generations[1])) == 1)
        let fallback = Self.directory.appending(DiskLayout.snapshotName(generations[0]))
        func files() throws -> [String: [UInt8]] {
            var files: [String: [UInt8]] = [:]
            for name in try engine.directoryEntries(Self.directory) ?? [] {
                files[name] = engine.contents(of: Self.directory.appending(name))
            }
            return files
        }
        let before = try files()

        engine.failingOpens[fallback.string] = .tooManyOpenFiles
        #expect(throws: StoreError.io(IOEngineError("open", path: fallback.string, errno: .tooManyOpenFiles))) {
            try simulatedWindow(engine)
        }
        #expect(try files() == before, "nothing set aside, nothing rewritten")

        engine.failingOpens = [:]
        let (restored, recovery) = try simulatedWindow(engine)
        #expect(recovery.seq == seq)
        #expect(recovery.regular.degradedTabs.isEmpty, "\(recovery.regular)")
        let history = try restored.regular.webStateList.webState(at: 0).navigationHistory()
        #expect(
            history.items.map(\.url) == [
                Self.lostURL, "https://lost.example/second", "https://a.example/third", "https://a.example/fourth",
            ])
        #expect(try WindowContents(restored) == live)
    }

    /// Realized after recovery, not by replay: the tab degrades the same way, is reported
    /// (`SaveEvent.degradedTab`), and the next save writes its history into a new snapshot
    /// instead of indexing one that no file holds.
    @Test func aTabRealizedLaterDegradesAndIsRewritten() throws {
        let (engine, _, seq) = try Self.prepared(navigatingA: false)
        _ = try Self.damageTabAInEverySnapshot(engine)
        let (restored, recovery) = try simulatedWindow(engine)
        #expect(recovery.seq == seq)
        #expect(recovery.regular.degradedTabs.isEmpty, "no record realized A")
        let tabB = try restored.regular.webStateList.webState(at: 1)
        try restored.apply(seq: seq + 1) { try tabB.commitNavigation(to: Self.page("https://b.example/three", 8)) }
        try restored.waitUntilDurable(seq + 1)
        let tabA = try restored.regular.webStateList.webState(at: 0)
        try restored.apply(seq: seq + 2) { try tabA.commitNavigation(to: Self.page("https://a.example/fifth", 9)) }
        try restored.waitUntilDurable(seq + 2)
        try restored.settle()
        // Said, not only rewritten: the worker logs the event.
        let degraded = try restored.poll().filter { if case .degradedTab = $0 { true } else { false } }
        #expect(
            degraded.map { event in
                guard case .degradedTab(let browser, let id, _) = event else { return "" }
                return "\(browser.rawValue) \(id)"
            } == ["regular \(tabA.id)"])
        let live = try WindowContents(restored)
        #expect(
            try restored.regular.webStateList.webState(at: 0).navigationHistory().items.map(\.url) == [
                "https://a.example/third", "https://a.example/fifth",
            ])
        engine.powerCut()
        let (again, second) = try simulatedWindow(engine)
        #expect(second.regular.damaged.isEmpty, "\(second.regular)")
        #expect(try WindowContents(again) == live)
    }
}
