import BrowserModel
import Foundation
import HostCoordination
import IOUring
import SceneWorker
import SessionStore
import SystemPackage
import TestSupport
import Testing

private let root = FilePath("/sim")
private let windowID = UUID(uuidString: "0C0FFEE0-0000-4000-8000-000000000028")!

/// A clock the test drives: each reading is one second after the last.
private final class SteppingClock {
    private var seconds: Int64 = 1_700_000_000
    func now() -> Timestamp {
        seconds += 1
        return Timestamp(microsecondsSinceEpoch: seconds * 1_000_000)
    }
}

/// The window as a worker starts it: restored, then its displayed tabs shown.
private func startedWindow(_ engine: FaultEngine, foreground: Bool = true, clock: SteppingClock) throws -> SceneWindow {
    let store = WindowStore(
        root: root, windowID: windowID, engine: engine, saveDelayMilliseconds: 0,
        keys: engine.keyring.keys(for: windowID))
    _ = try store.recover()
    let window = SceneWindow(store: store, foreground: foreground, now: clock.now)
    window.displayActiveTabs()
    return window
}

/// `command` through the ring's message, as the worker loop hands it on.
private func send(_ window: SceneWindow, _ command: WindowCommand) -> WorkerReply {
    window.handle(command.message(request: 1))
}

/// Displaying realizes, and nothing else does: a foreground scene's active tab is realized when
/// the window starts, when a tab becomes active and when the scene comes forward; its
/// FindTabHelper then has its controller. Activation and coming forward stamp the tab's
/// last-active time from the window's clock, and an activation's time is journaled.
@Suite(.serialized) struct DisplayTests {
    /// Three tabs, each navigated (so realized), the last one active, all durable.
    private static func browsed(_ engine: FaultEngine, clock: SteppingClock) throws -> [Int64] {
        let window = try startedWindow(engine, clock: clock)
        var ids: [Int64] = []
        for index in 0..<3 {
            let reply = send(
                window,
                .tab(
                    .open(
                        url: "https://display\(index).example/", incognito: false, index: nil, opener: nil,
                        background: false)))
            ids.append(reply.done.tab)
            _ = send(window, .tab(.navigate(tab: reply.done.tab, url: "https://display\(index).example/next")))
        }
        try window.store.waitUntilDurable(window.store.appliedSeq)
        return ids
    }

    private static func realized(_ window: SceneWindow) -> [Int64] {
        window.store.regular.webStateList.webStates.filter(\.isRealized).map(\.id.rawValue)
    }

    private static func tab(_ window: SceneWindow, _ id: Int64) throws -> WebState {
        let list = window.store.regular.webStateList
        let webStateID = try #require(WebStateID(rawValue: id))
        let index = try #require(list.index(of: webStateID))
        return try list.webState(at: index)
    }

    @Test func aForegroundWindowRealizesItsActiveTabAndNoOther() throws {
        let engine = FaultEngine(directories: [root])
        let clock = SteppingClock()
        let ids = try Self.browsed(engine, clock: clock)
        let window = try startedWindow(engine, clock: clock)
        #expect(Self.realized(window) == [ids[2]], "only the displayed tab is realized after a restart")
        #expect(
            try Self.tab(window, ids[2]).helper(FindTabHelper.self)?.controller != nil,
            "the displayed tab's helper was told")
        #expect(try Self.tab(window, ids[0]).helper(FindTabHelper.self)?.controller == nil)
        _ = send(window, .dump)
        #expect(Self.realized(window) == [ids[2]], "a dump realizes nothing")

        let before = try Self.tab(window, ids[0]).lastActiveTime
        let activated = send(window, .tab(.activate(tab: ids[0])))
        #expect(activated.done.appliedSeq > 0)
        let first = try Self.tab(window, ids[0])
        #expect(first.isRealized && first.helper(FindTabHelper.self)?.controller != nil, "activation displays the tab")
        #expect(first.lastActiveTime > before, "activation stamps the tab")
        try window.store.waitUntilDurable(window.store.appliedSeq)

        let again = try startedWindow(engine, clock: clock)
        #expect(Self.realized(again) == [ids[0]])
        #expect(
            try Self.tab(again, ids[0]).lastActiveTime == first.lastActiveTime, "the activation's time was journaled")
    }

    /// Closing the active tab activates its successor (here its left neighbour): that is an
    /// activation, stamped and journaled like one; closing another tab stamps nothing.
    @Test func closingTheActiveTabStampsTheTabThatTakesItsPlace() throws {
        let engine = FaultEngine(directories: [root])
        let clock = SteppingClock()
        let ids = try Self.browsed(engine, clock: clock)
        let window = try startedWindow(engine, clock: clock)
        let left = try Self.tab(window, ids[1])
        let before = left.lastActiveTime
        _ = send(window, .tab(.close(tab: ids[0])))
        #expect(left.lastActiveTime == before, "closing a tab that is not active activates nothing")
        _ = send(window, .tab(.close(tab: ids[2])))
        #expect(window.store.regular.webStateList.activeWebState === left)
        #expect(left.lastActiveTime > before, "the tab that took the closed one's place was stamped")
        #expect(Self.realized(window).contains(ids[1]), "and displayed")
        try window.store.waitUntilDurable(window.store.appliedSeq)

        let again = try startedWindow(engine, clock: clock)
        #expect(again.store.regular.webStateList.webStates.map(\.id.rawValue) == [ids[1]])
        #expect(try Self.tab(again, ids[1]).lastActiveTime == left.lastActiveTime, "the stamp was journaled")
    }

    @Test func aBackgroundWindowRealizesNothingUntilItComesForward() throws {
        let engine = FaultEngine(directories: [root])
        let clock = SteppingClock()
        let ids = try Self.browsed(engine, clock: clock)
        let window = try startedWindow(engine, foreground: false, clock: clock)
        #expect(Self.realized(window).isEmpty, "a background scene displays nothing")
        _ = send(window, .tab(.activate(tab: ids[1])))
        let second = try Self.tab(window, ids[1])
        #expect(
            !second.isRealized && second.helper(FindTabHelper.self)?.controller == nil,
            "activated in the background: not displayed")
        let activatedAt = second.lastActiveTime

        _ = send(window, .scene(.foreground))
        #expect(Self.realized(window) == [ids[1]])
        #expect(second.helper(FindTabHelper.self)?.controller != nil)
        #expect(second.lastActiveTime > activatedAt, "coming forward stamps the active tab")

        _ = send(window, .scene(.background))
        _ = send(window, .tab(.activate(tab: ids[0])))
        #expect(Self.realized(window) == [ids[1]], "realized stays realized; the new active tab is not displayed")
    }

    /// A scene coming forward stamps its active tabs as a change: it takes the next seq, the
    /// stamp is journaled with it, and a restart restores the time. A Browser with no tab
    /// makes no record, and a window with no tab at all changes nothing.
    @Test func comingForwardTakesASeqAndJournalsTheStamp() throws {
        let engine = FaultEngine(directories: [root])
        let clock = SteppingClock()
        let ids = try Self.browsed(engine, clock: clock)
        let window = try startedWindow(engine, foreground: false, clock: clock)
        let before = window.store.appliedSeq
        let reply = send(window, .scene(.foreground))
        #expect(
            reply.done.appliedSeq == before + 1 && window.store.appliedSeq == before + 1, "the stamp took the next seq")
        let stamped = try Self.tab(window, ids[2]).lastActiveTime
        try window.store.waitUntilDurable(window.store.appliedSeq)
        #expect(window.store.durableSeq == before + 1)

        let again = try startedWindow(engine, foreground: false, clock: clock)
        #expect(again.store.appliedSeq == before + 1)
        #expect(try Self.tab(again, ids[2]).lastActiveTime == stamped, "the stamp was journaled")
        #expect(Self.realized(again).isEmpty, "replaying the stamp displays nothing")

        _ = send(again, .tab(.closeAll(incognito: false)))
        let empty = again.store.appliedSeq
        #expect(send(again, .scene(.foreground)).done.appliedSeq == empty, "nothing to stamp: no seq")
    }
}
