import BrowserModel
import Foundation
import HostCoordination
import HostLimits
import IOUring
import SceneWorker
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

private let root = FilePath("/sim")
private let source = UUID(uuidString: "0C0FFEE0-0000-4000-8000-00000000000A")!
private let destination = UUID(uuidString: "0C0FFEE0-0000-4000-8000-00000000000B")!
private let clock = Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000)

/// The worker's half of a move between windows (issue 32): window A exports a tab, window B
/// imports it under a move id (the commit), A drops it; B answers for the move after restarts.
/// Both windows are real `WindowStore`s, each on a simulated disk and engine of its own.
@Suite struct MoveBetweenWindowsTests {
    static func window(_ engine: FaultEngine, _ id: UUID, options: StoreOptions = StoreOptions()) throws
        -> SceneWindow
    {
        let store = WindowStore(
            root: root, windowID: id, engine: engine, options: options, saveDelayMilliseconds: 0,
            keys: engine.keyring.keys(for: id))
        _ = try store.recover()
        return SceneWindow(store: store) { clock }
    }

    static func send(_ window: SceneWindow, _ command: WindowCommand) -> WorkerReply {
        window.handle(command.message(request: 7))
    }

    static func open(_ window: SceneWindow, _ url: String, incognito: Bool = false) -> Int64 {
        send(window, .tab(.open(url: url, incognito: incognito, index: nil, opener: nil, background: false))).done.tab
    }

    /// Window A with tab 1 (three entries, the second current) and tab 2, durable, restarted:
    /// its tabs unrealized, tab 1 stored in a snapshot (every save compacts).
    static func restoredSource(_ engine: FaultEngine, incognito: Bool = false) throws -> SceneWindow {
        let options = StoreOptions(compactAfterRecords: 1)
        let first = try window(engine, source, options: options)
        let tab = open(first, "https://moved.example/0", incognito: incognito)
        for step in 1...2 { _ = send(first, .tab(.navigate(tab: tab, url: "https://moved.example/\(step)"))) }
        _ = send(first, .tab(.go(tab: tab, .back)))
        _ = open(first, "https://stays.example/", incognito: incognito)
        try first.store.waitUntilDurable(first.store.appliedSeq)
        try first.store.settle()
        return try window(engine, source, options: options)
    }

    static func movedTab(_ reply: WorkerReply) throws -> MovedTab {
        guard case .movedTab(let tab)? = reply.outcome else {
            Issue.record("no moved tab: \(reply)")
            throw CancellationError()
        }
        return tab
    }

    @Test func exportCarriesAnUnrealizedTabsStoredBytesAndChangesNothing() throws {
        let engine = FaultEngine(directories: [root])
        let a = try Self.restoredSource(engine)
        // As every command's reply leaves it: the active tab (2) displayed.
        a.displayActiveTabs()
        let before = a.dump()
        let moved = try Self.movedTab(Self.send(a, .move(.export(tab: 1))))
        let reader = try #require(a.store.stores[0].historySources.restored)
        let id = try #require(WebStateID(rawValue: 1))
        let index = try #require(reader.index(of: id))
        #expect([UInt8](moved.navigation) == (try reader.historyPayload(at: index)), "the stored bytes, unread")
        #expect(moved.tab == 1 && !moved.realized && !moved.incognito && !moved.pinned)
        #expect(moved.creationTimeUs == clock.microsecondsSinceEpoch)
        let history = try MovedHistory(checking: [UInt8](moved.navigation), tab: 1)
        #expect(history.itemCount == 3 && history.currentIndex == 1)
        #expect(a.dump() == before, "an export changes nothing, takes no seq, realizes nothing")
        #expect(!a.dump().regular.tabs[0].realized)
        let unknown = Self.send(a, .move(.export(tab: 99)))
        #expect(unknown.failure.kind == .badData && unknown.failure.message.contains("no tab"))
    }

    /// The whole move: B makes a tab of its own numbering with the same history, unrealized, at
    /// the index asked, not active, its bytes A's with only the identifier changed; after
    /// restarts (journal, compaction, a snapshot written from memory) B holds it and answers
    /// `held` with it; A drops once, and the drop survives a restart.
    @Test(arguments: ["journal", "compaction", "from memory"]) func aMoveCommitsInTheDestinationAndSurvivesRestarts(
        kept: String
    ) throws {
        let engine = FaultEngine(directories: [root])
        // Each window its own engine, as each worker has: one store's turn never reaps the other's.
        let engineB = FaultEngine(directories: [root])
        let a = try Self.restoredSource(engine)
        let options = kept == "compaction" ? StoreOptions(compactAfterRecords: 2) : StoreOptions()
        let b = try Self.window(engineB, destination, options: options)
        for step in 0..<3 { _ = Self.open(b, "https://b.example/\(step)") }
        let activeBefore = b.dump().regular.activeIndex
        let exported = try Self.movedTab(Self.send(a, .move(.export(tab: 1))))
        let move = try #require(MoveID(rawValue: 0xFEED_F00D))
        let seqBefore = b.dump().appliedSeq
        let imported = Self.send(b, .move(.import(move, exported, index: 1)))
        let tab = imported.done.tab
        #expect(tab == 4 && imported.done.appliedSeq == seqBefore + 1, "\(imported)")
        let landed = b.dump().regular
        #expect(landed.tabs.map(\.id) == [1, 4, 2, 3] && landed.activeIndex == activeBefore + 1, "not activated")
        #expect(!landed.tabs[1].realized && landed.tabs[1].historyCount == 3)
        #expect(landed.tabs[1].url == "https://moved.example/1", "the current entry the source had")
        let webState = try b.store.regular.webStateList.webState(at: 1)
        let stored = try b.store.storedHistoryBytes(of: webState, in: .regular)
        #expect(stored.count == exported.navigation.count && stored[1] == 4 && exported.navigation[1] == 1)
        #expect(stored.dropFirst(2) == [UInt8](exported.navigation).dropFirst(2), "spliced, not encoded again")
        // Repeated (a supervisor restarted): the same tab, no seq.
        let again = Self.send(b, .move(.import(move, exported, index: 0)))
        #expect(again.done.tab == tab && again.done.appliedSeq == seqBefore + 1 && b.dump().regular.tabs.count == 4)

        let dropped = Self.send(a, .move(.drop(tab: 1, move)))
        #expect(dropped.done.appliedSeq > 0 && a.dump().regular.tabs.map(\.id) == [2])
        let droppedSeq = a.dump().appliedSeq
        #expect(Self.send(a, .move(.drop(tab: 1, move))).done.appliedSeq == droppedSeq, "dropped once")

        switch kept {
        case "compaction":
            for step in 0..<4 { _ = Self.open(b, "https://b.example/later\(step)") }
        case "from memory":
            b.store.stores[0].needsRebase = true
            _ = Self.open(b, "https://b.example/later")
        default: break
        }
        try b.store.waitUntilDurable(b.store.appliedSeq)
        try b.store.settle()
        try a.store.waitUntilDurable(a.store.appliedSeq)
        try a.store.settle()
        if kept != "journal" {
            let regular = b.store.stores[0]
            #expect(regular.snapshotGeneration > 1, "a snapshot holds the move, not the journal that carried it")
        }
        let b2 = try Self.window(engineB, destination, options: options)
        #expect(b2.dump().regular.tabs.map(\.id).prefix(4) == [1, 4, 2, 3])
        #expect(Self.send(b2, .move(.held(move))).done.tab == tab)
        #expect(!Self.send(b2, .move(.held(try #require(MoveID(rawValue: 5))))).done.hasTab)
        let seq = b2.dump().appliedSeq
        #expect(Self.send(b2, .move(.import(move, exported, index: nil))).done.tab == tab)
        #expect(b2.dump().appliedSeq == seq && b2.dump().regular.tabs.filter { $0.id == tab }.count == 1)
        let a2 = try Self.window(engine, source)
        #expect(a2.dump().regular.tabs.map(\.id) == [2] && a2.dump().appliedSeq == droppedSeq)
    }

    @Test func aPinnedTabLandsAmongThePinnedAndAnActiveOneDropsLikeAClose() throws {
        let engine = FaultEngine(directories: [root])
        // Each window its own engine, as each worker has: one store's turn never reaps the other's.
        let engineB = FaultEngine(directories: [root])
        let a = try Self.window(engine, source)
        let first = Self.open(a, "https://a.example/pinned")
        _ = Self.send(a, .tab(.setPinned(tab: first, pinned: true)))
        _ = Self.open(a, "https://a.example/other")
        _ = Self.send(a, .tab(.activate(tab: first)))
        let exported = try Self.movedTab(Self.send(a, .move(.export(tab: first))))
        #expect(exported.pinned && exported.realized)
        let b = try Self.window(engineB, destination)
        for step in 0..<2 { _ = Self.open(b, "https://b.example/\(step)") }
        let move = try #require(MoveID(rawValue: 9))
        let tab = Self.send(b, .move(.import(move, exported, index: 2))).done.tab
        let landed = b.dump().regular
        #expect(landed.tabs.first?.id == tab && landed.tabs[0].pinned, "index clamped into the pinned tabs")
        #expect(landed.tabs[0].realized, "a realized tab arrives realized")
        _ = Self.send(a, .move(.drop(tab: first, move)))
        #expect(a.dump().regular.tabs.map(\.id) == [2] && a.dump().regular.activeIndex == 0)
    }

    @Test func incognitoMovesToIncognito() throws {
        let engine = FaultEngine(directories: [root])
        // Each window its own engine, as each worker has: one store's turn never reaps the other's.
        let engineB = FaultEngine(directories: [root])
        let a = try Self.restoredSource(engine, incognito: true)
        let exported = try Self.movedTab(Self.send(a, .move(.export(tab: 1))))
        #expect(exported.incognito && !exported.realized)
        let b = try Self.window(engineB, destination)
        let move = try #require(MoveID(rawValue: 77))
        let tab = Self.send(b, .move(.import(move, exported, index: nil))).done.tab
        #expect(b.dump().incognito.tabs.map(\.id) == [tab] && b.dump().regular.tabs.isEmpty)
        try b.store.waitUntilDurable(b.store.appliedSeq)
        try b.store.settle()
        let b2 = try Self.window(engineB, destination)
        #expect(b2.dump().incognito.tabs.map(\.id) == [tab] && b2.dump().incognito.tabs[0].historyCount == 3)
        #expect(Self.send(b2, .move(.held(move))).done.tab == tab)
    }

    /// Whatever is wrong with what the other window sent, B refuses it with BAD_DATA and nothing
    /// changes: not its tabs, not its seq, not what it remembers.
    @Test func badInputIsRefusedAndChangesNothing() throws {
        let engine = FaultEngine(directories: [root])
        // Each window its own engine, as each worker has: one store's turn never reaps the other's.
        let engineB = FaultEngine(directories: [root])
        let a = try Self.restoredSource(engine)
        let exported = try Self.movedTab(Self.send(a, .move(.export(tab: 1))))
        let b = try Self.window(engineB, destination)
        _ = Self.open(b, "https://b.example/")
        let move = try #require(MoveID(rawValue: 3))
        func with(_ change: (inout MovedTab) -> Void) -> MovedTab {
            var tab = exported
            change(&tab)
            return tab
        }
        let itemsOnly = [UInt8](exported.navigation).dropFirst(2)
        let cases: [(String, MovedTab, Int?)] = [
            ("does not decode", with { $0.navigation = Data([0x0A, 0x7F, 0x01]) }, nil),
            ("another tab's history", with { $0.tab = 2 }, nil),
            (
                "current index out of range", with { $0.navigation = Data([0x08, 0x01] + itemsOnly + [0x10, 0x09]) },
                nil
            ),
            ("past the limit", with { $0.navigation = Data(count: Limits.maxMovedTabBytes + 1) }, nil),
            ("a time before 1970", with { $0.lastActiveTimeUs = -1 }, nil),
            ("index out of range", exported, 2),
            ("negative index", exported, -1),
        ]
        for (what, tab, index) in cases {
            let before = b.dump()
            let reply = Self.send(b, .move(.import(move, tab, index: index)))
            #expect(reply.failure.kind == .badData, "\(what): \(reply)")
            #expect(b.dump().digest == before.digest && b.dump().appliedSeq == before.appliedSeq, "\(what)")
            #expect(!Self.send(b, .move(.held(move))).done.hasTab, "\(what)")
        }
        let limit = Self.send(
            b, .move(.import(move, with { $0.navigation = Data(count: Limits.maxMovedTabBytes + 1) }, index: nil)))
        #expect(limit.failure.message.contains("\(Limits.maxMovedTabBytes)"))
        #expect(Self.send(b, .move(.import(move, exported, index: 1))).done.tab == 2, "good bytes still go in")
    }
}
