import BrowserModel
import Foundation
import HostCoordination
import HostLimits
import IOUring
import SceneWorker
import SessionStore
import SystemPackage
import TestSupport
import Testing

private let root = FilePath("/sim")
private let windowID = UUID(uuidString: "0C0FFEE0-0000-4000-8000-000000000001")!

/// A window on a simulated disk, restored, its clock fixed so histories compare.
private func sceneWindow(_ engine: FaultEngine, floor: WorkerFloor = .none, options: StoreOptions = StoreOptions())
    throws -> SceneWindow
{
    let store = WindowStore(
        root: root, windowID: windowID, engine: engine, options: options, saveDelayMilliseconds: 0,
        keys: engine.keyring.keys(for: windowID))
    _ = try store.recover()
    return SceneWindow(store: store, floor: floor) { Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000) }
}

/// A command; `step` names it (its request is `step + 1000`). The window numbers it.
private func command(_ step: UInt64, _ build: (inout WorkerCommand) -> Void) -> WorkerCommand {
    var command = WorkerCommand()
    command.request = step + 1000
    build(&command)
    return command
}

private func open(_ step: UInt64, _ url: String, incognito: Bool = false, opener: Int64? = nil, index: Int32? = nil)
    -> WorkerCommand
{
    command(step) {
        var open = OpenTab()
        open.url = url
        open.incognito = incognito
        if let opener { open.opener = opener }
        if let index { open.index = index }
        $0.open = open
    }
}

/// A tab command through its ring encoding, as the supervisor sends it.
private func tab(_ step: UInt64, _ command: TabCommand) -> WorkerCommand {
    WindowCommand.tab(command).message(request: step + 1000)
}

@Suite struct SceneWindowTests {
    /// A profile whose identifiers were restored up to the highest there is (a crafted file
    /// can hold it): opening a tab is refused with a reason, never a trap, and the window
    /// keeps serving.
    @Test func aWindowWhoseTabIdentifiersRanOutRefusesNewTabs() throws {
        let window = try sceneWindow(FaultEngine(directories: [root]))
        #expect(window.handle(open(1, "https://a.example/")).done.tab == 1)
        window.store.regular.profile.reserveWebStateID(try #require(WebStateID(rawValue: Limits.maxWebStateID)))
        let refused = window.handle(open(2, "https://b.example/"))
        #expect(refused.failure.message.contains("identifiers"))
        // The refused open took no seq.
        #expect(
            window.handle(
                command(3) {
                    var navigate = NavigateTab()
                    navigate.tab = 1
                    navigate.url = "https://a.example/2"
                    $0.navigate = navigate
                }
            ).done.appliedSeq == 2)
    }

    @Test func tabCommandsChangeTheWindowAndAnswerWithTheirSeqAndTab() throws {
        let window = try sceneWindow(FaultEngine(directories: [root]))
        let first = window.handle(open(1, "https://a.example/"))
        #expect(first.request == 1001 && first.done.tab == 1 && first.done.appliedSeq == 1)
        #expect(window.handle(open(2, "https://b.example/", opener: 1)).done.tab == 2)
        #expect(window.dump().regular.tabs[1].opener == 1, "the opener is kept as an id")
        #expect(window.handle(open(3, "https://private.example/", incognito: true)).done.tab == 3)
        _ = window.handle(
            command(4) {
                var navigate = NavigateTab()
                navigate.tab = 1
                navigate.url = "https://a.example/2"
                $0.navigate = navigate
            })
        _ = window.handle(
            command(5) {
                var move = MoveTab()
                move.tab = 2
                move.index = 0
                $0.move = move
            })
        let replaced = window.handle(
            command(6) {
                var replace = ReplaceTab()
                replace.tab = 1
                replace.url = "https://prerendered.example/"
                $0.replace = replace
            })
        #expect(replaced.done.tab == 4)
        // Tab 2 is already active: a command that changes nothing takes no seq.
        let activated = window.handle(
            command(7) {
                var activate = ActivateTab()
                activate.tab = 2
                $0.activate = activate
            })
        #expect(activated.done.appliedSeq == 6)

        let dump = window.dump()
        #expect(
            dump.regular.tabs.map(\.id) == [2, 4]
                && dump.regular.tabs.map(\.url) == ["https://b.example/", "https://prerendered.example/"])
        #expect(dump.regular.activeIndex == 0)
        #expect(!dump.regular.tabs[0].hasOpener, "its opener was replaced: the link goes with it")
        #expect(dump.incognito.tabs.map(\.url) == ["https://private.example/"])
        #expect(dump.appliedSeq == 6)

        // The digest is what an independent model of the same window computes.
        let model = WindowDigest.digest(
            regular: WindowDigest.List(
                tabs: [
                    .init(id: 2, openerID: nil, url: "https://b.example/", title: ""),
                    .init(id: 4, openerID: nil, url: "https://prerendered.example/", title: ""),
                ], activeIndex: 0, pinnedCount: 0),
            incognito: WindowDigest.List(
                tabs: [.init(id: 3, openerID: nil, url: "https://private.example/", title: "")], activeIndex: 0,
                pinnedCount: 0))
        #expect(dump.digest == model)

        _ = window.handle(
            command(8) {
                var closeAll = CloseAll()
                closeAll.incognito = true
                $0.closeAll = closeAll
            })
        _ = window.handle(
            command(9) {
                var close = CloseTab()
                close.tab = 4
                $0.close = close
            })
        #expect(window.dump().incognito.tabs.isEmpty && window.dump().regular.tabs.map(\.id) == [2])
    }

    @Test func commandsThatDoNotFitAreRefusedAsBadDataAndChangeNothing() throws {
        let window = try sceneWindow(FaultEngine(directories: [root]))
        _ = window.handle(open(1, "https://a.example/"))
        let before = window.dump().digest
        let refusals = [
            command(2) {
                var close = CloseTab()
                close.tab = 99
                $0.close = close
            },
            command(3) {
                var move = MoveTab()
                move.tab = 1
                move.index = 5
                $0.move = move
            },
            open(4, "https://b.example/", index: 7),
            open(5, "https://c.example/", incognito: true, opener: 1),
            command(6) { _ in },
            // The worker holds decoded commands to the rule for entered text (ForbiddenCharacter)
            // too: a supervisor of another version, or a compromised one, is not trusted with it.
            open(7, "https://nul.example/\u{0}x"),
            command(8) {
                var navigate = NavigateTab()
                navigate.tab = 1
                navigate.url = "https://tab.example/\tx"
                $0.navigate = navigate
            },
        ]
        for refused in refusals {
            let reply = window.handle(refused)
            #expect(reply.failure.kind == .badData && !reply.failure.message.isEmpty, "\(refused)")
        }
        #expect(window.dump().digest == before)
        #expect(window.dump().regular.tabs.count == 1)
        #expect(window.dump().appliedSeq == 1, "no refusal took a seq")
    }

    /// A worker restarted after its last commands were replied to and lost (killed before their
    /// save): it numbers above the floor the supervisor gives, so no seq and no tab id is handed
    /// out twice, while its own seqs stay what it holds (a durable seq is one on disk). Before,
    /// the window handed out its restored seq and tab ids again.
    @Test func aRestartedWindowNumbersAboveItsFloor() throws {
        let engine = FaultEngine(directories: [root])
        let first = try sceneWindow(engine)
        _ = first.handle(open(1, "https://kept.example/"))
        try first.store.waitUntilDurable(1)
        // Replied to, then lost with the worker: seq 2 and 3, tab 2 and 3.
        _ = first.handle(open(2, "https://lost.example/"))
        _ = first.handle(open(3, "https://lost-too.example/", incognito: true))

        let again = try sceneWindow(engine, floor: try #require(WorkerFloor(seq: 3, tab: 3)))
        #expect(
            again.dump().appliedSeq == 1 && again.dump().durableSeq == 1 && again.dump().regular.tabs.map(\.id) == [1],
            "restored at the durable seq")
        let nothing = again.handle(
            command(4) {
                var closeAll = CloseAll()
                closeAll.incognito = true
                $0.closeAll = closeAll
            })
        #expect(
            nothing.done.appliedSeq == 1, "a command that changes nothing takes no seq (the supervisor shows it as 3)")
        let opened = again.handle(open(5, "https://new.example/", incognito: true))
        #expect(opened.done.appliedSeq == 4 && opened.done.tab == 4, "\(opened)")
        #expect(again.handle(open(6, "https://newer.example/")).done.tab == 5)
        #expect(again.dump().durableSeq == 1, "the new commands are not durable yet")
        try again.store.waitUntilDurable(5)
        #expect(again.dump().durableSeq == 5)
    }

    /// A floor at the bounds of `Limits` (a crafted file, a compromised worker's last words)
    /// refuses tab commands with a reason, never traps, and the window keeps answering.
    @Test func aFloorAtTheLimitsRefusesWithoutTrapping() throws {
        #expect(WorkerFloor(seq: Limits.maxCommandSeq + 1, tab: 0) == nil)
        #expect(WorkerFloor(seq: 0, tab: Limits.maxWebStateID + 1) == nil)
        #expect(WorkerFloor(seq: 0, tab: -1) == nil)
        let seqs = try sceneWindow(
            FaultEngine(directories: [root]), floor: try #require(WorkerFloor(seq: Limits.maxCommandSeq, tab: 0)))
        let refused = seqs.handle(open(1, "https://a.example/"))
        #expect(refused.failure.kind == .badData && refused.failure.message.contains("highest"), "\(refused)")
        #expect(seqs.dump().regular.tabs.isEmpty)
        let tabs = try sceneWindow(
            FaultEngine(directories: [root]), floor: try #require(WorkerFloor(seq: 0, tab: Limits.maxWebStateID)))
        #expect(tabs.handle(open(1, "https://a.example/")).failure.message.contains("identifiers"))
    }

    @Test func aSavedWindowRestoresWithTheSameTabsAndDigest() throws {
        let engine = FaultEngine(directories: [root])
        let window = try sceneWindow(engine)
        for seq in 1...6 as ClosedRange<UInt64> { _ = window.handle(open(seq, "https://site\(seq).example/")) }
        _ = window.handle(
            command(0) {
                var event = SceneEvent()
                event.kind = .background
                $0.scene = event
            })
        try window.store.settle()
        #expect(window.store.durableSeq == 6)
        let saved = window.dump()

        let restored = try sceneWindow(engine)
        let dump = restored.dump()
        #expect(dump.regular.tabs.map(\.url) == saved.regular.tabs.map(\.url))
        #expect(dump.digest == saved.digest && dump.appliedSeq == 6)
    }

    /// Pinning moves a tab to the end of the pinned tabs, unpinning to the start of the others,
    /// each taking a seq; a tab already so changes nothing and takes none.
    @Test func pinningMovesTabsBetweenTheRegionsAndATabAlreadySoTakesNoSeq() throws {
        let window = try sceneWindow(FaultEngine(directories: [root]))
        for step in 1...4 as ClosedRange<UInt64> { _ = window.handle(open(step, "https://site\(step).example/")) }
        #expect(window.handle(tab(5, .setPinned(tab: 3, pinned: true))).done.appliedSeq == 5)
        #expect(window.handle(tab(6, .setPinned(tab: 2, pinned: true))).done.appliedSeq == 6)
        func order() -> ([Int64], [Bool]) {
            (window.dump().regular.tabs.map(\.id), window.dump().regular.tabs.map(\.pinned))
        }
        #expect(order() == ([3, 2, 1, 4], [true, true, false, false]), "each pinned tab goes after the pinned ones")
        #expect(
            window.handle(tab(7, .setPinned(tab: 2, pinned: true))).done.appliedSeq == 6,
            "already pinned: no change, no seq")
        #expect(
            window.handle(tab(8, .setPinned(tab: 4, pinned: false))).done.appliedSeq == 6,
            "already unpinned: no change, no seq")
        #expect(window.handle(tab(9, .setPinned(tab: 3, pinned: false))).done.appliedSeq == 7)
        #expect(order() == ([2, 3, 1, 4], [true, false, false, false]), "an unpinned tab goes first among the others")
        // The active tab (the last opened) stays the same tab while others move around it.
        #expect(window.dump().regular.tabs[Int(window.dump().regular.activeIndex)].id == 4)
    }

    /// Back and forward step one entry through the tab's history and take a seq; with nothing
    /// that way they change nothing and take none. Refusals change nothing either.
    @Test func backAndForwardStepThroughTheHistoryAndAtItsEndsTakeNoSeq() throws {
        let window = try sceneWindow(FaultEngine(directories: [root]))
        _ = window.handle(open(1, "https://a.example/0"))
        _ = window.handle(tab(2, .navigate(tab: 1, url: "https://a.example/1")))
        _ = window.handle(tab(3, .navigate(tab: 1, url: "https://a.example/2")))
        func current() -> (String, Int32, Int32) {
            let dumped = window.dump().regular.tabs[0]
            return (dumped.url, dumped.historyIndex, dumped.historyCount)
        }
        #expect(current() == ("https://a.example/2", 2, 3))
        #expect(window.handle(tab(4, .go(tab: 1, .forward))).done.appliedSeq == 3, "nothing ahead")
        #expect(window.handle(tab(5, .go(tab: 1, .back))).done.appliedSeq == 4)
        #expect(window.handle(tab(6, .go(tab: 1, .back))).done.appliedSeq == 5)
        #expect(current() == ("https://a.example/0", 0, 3))
        #expect(window.handle(tab(7, .go(tab: 1, .back))).done.appliedSeq == 5, "nothing behind")
        #expect(window.handle(tab(8, .go(tab: 1, .forward))).done.appliedSeq == 6)
        #expect(current() == ("https://a.example/1", 1, 3))
        for refused in [
            TabCommand.go(tab: 9, .back), .go(tab: -1, .forward), .go(tab: .max, .back),
            .setPinned(tab: 0, pinned: true), .setPinned(tab: .min, pinned: false),
        ] {
            let reply = window.handle(tab(9, refused))
            #expect(reply.failure.kind == .badData && reply.failure.message.contains("no tab"), "\(refused)")
        }
        #expect(window.dump().appliedSeq == 6 && current() == ("https://a.example/1", 1, 3))
        // A navigation after going back drops the entries ahead, as a browser does.
        _ = window.handle(tab(10, .navigate(tab: 1, url: "https://a.example/new")))
        #expect(current() == ("https://a.example/new", 2, 3))
    }

    /// Pinned order and each history's current entry come back from disk exactly: from the
    /// journal, and from a snapshot (every save compacts), whose tabs come back unrealized and
    /// are realized by the step itself.
    @Test(arguments: [false, true]) func pinnedOrderAndHistoryIndexRestoreAndAStepRealizes(compacting: Bool) throws {
        let engine = FaultEngine(directories: [root])
        let options = compacting ? StoreOptions(compactAfterRecords: 1) : StoreOptions()
        let window = try sceneWindow(engine, options: options)
        for step in 1...3 as ClosedRange<UInt64> { _ = window.handle(open(step, "https://site\(step).example/0")) }
        _ = window.handle(open(4, "https://private.example/0", incognito: true))
        for (step, url) in [(5, "https://site2.example/1"), (6, "https://site2.example/2")] as [(UInt64, String)] {
            _ = window.handle(tab(step, .navigate(tab: 2, url: url)))
        }
        for (step, command) in [
            (7, TabCommand.go(tab: 2, .back)), (8, .setPinned(tab: 3, pinned: true)),
            (9, .setPinned(tab: 4, pinned: true)),
        ] as [(UInt64, TabCommand)] {
            #expect(window.handle(tab(step, command)).done.appliedSeq == step, "\(command)")
        }
        _ = window.handle(
            command(10) {
                var event = SceneEvent()
                event.kind = .background
                $0.scene = event
            })
        try window.store.settle()
        #expect(window.store.durableSeq == 9)
        let saved = window.dump()

        let restored = try sceneWindow(engine, options: options)
        let dump = restored.dump()
        for (before, after) in [(saved.regular, dump.regular), (saved.incognito, dump.incognito)] {
            #expect(
                after.tabs.map(\.id) == before.tabs.map(\.id) && after.tabs.map(\.pinned) == before.tabs.map(\.pinned))
            #expect(
                after.tabs.map(\.url) == before.tabs.map(\.url)
                    && after.tabs.map(\.historyCount) == before.tabs.map(\.historyCount))
        }
        #expect(dump.regular.tabs.map(\.id) == [3, 1, 2] && dump.incognito.tabs.map(\.pinned) == [true])
        #expect(dump.digest == saved.digest && dump.appliedSeq == 9)
        let stepped = try #require(dump.regular.tabs.first { $0.id == 2 })
        if compacting {
            #expect(!stepped.realized && !stepped.hasHistoryIndex, "from a snapshot the tab waits unrealized")
        }
        #expect(restored.handle(tab(11, .go(tab: 2, .forward))).done.appliedSeq == 10)
        let forward = try #require(restored.dump().regular.tabs.first { $0.id == 2 })
        #expect(
            forward.realized && forward.url == "https://site2.example/2" && forward.historyIndex == 2,
            "the index came back as 1")
        #expect(restored.handle(tab(12, .go(tab: 2, .forward))).done.appliedSeq == 10, "nothing ahead")
    }
}
