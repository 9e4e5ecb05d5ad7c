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
private let windowID = UUID(uuidString: "0C0FFEE0-0000-4000-8000-000000000005")!

private func sceneWindow(_ engine: FaultEngine) throws -> SceneWindow {
    let store = WindowStore(
        root: root, windowID: windowID, engine: engine, saveDelayMilliseconds: 0,
        keys: engine.keyring.keys(for: windowID))
    _ = try store.recover()
    return SceneWindow(store: store) { Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000) }
}

/// A command through its ring encoding, as the supervisor sends it.
private func send(_ window: SceneWindow, _ command: TabCommand) -> WorkerReply {
    window.handle(WindowCommand.tab(command).message(request: 1))
}

private func open(_ window: SceneWindow, _ url: String, incognito: Bool = false) -> WorkerReply {
    send(window, .open(url: url, incognito: incognito, index: nil, opener: nil, background: false))
}

/// A URL of exactly `bytes` bytes.
private func url(_ bytes: Int, _ fill: Character = "u") -> String {
    let prefix = "https://\(fill).example/"
    return prefix + String(repeating: fill, count: bytes - prefix.utf8.count)
}

extension WorkerReply {
    fileprivate var applied: Bool { if case .done = outcome { true } else { false } }
    fileprivate var isDump: Bool { if case .dump = outcome { true } else { false } }
}

/// `Limits.maxWindowTextBytes`: a window takes commands up to it exactly, refuses one past it
/// with nothing applied and no seq taken, counts its text as tabs come, go and navigate, and
/// always dumps within `Limits.maxWorkerReplyBytes`.
@Suite struct WindowTextBoundTests {
    /// Eight tabs of the longest URL a tab holds, four in each Browser: the bound exactly.
    private func fullWindow() throws -> SceneWindow {
        let window = try sceneWindow(FaultEngine(directories: [root]))
        try #require(Limits.maxWindowTextBytes % Limits.maxURLBytes == 0)
        for index in 0..<(Limits.maxWindowTextBytes / Limits.maxURLBytes) {
            let reply = open(
                window, url(Limits.maxURLBytes, Character(String(UnicodeScalar(UInt8(97 + index))))),
                incognito: index % 2 == 1)
            try #require(reply.failure.message.isEmpty, "\(reply.failure.message)")
        }
        #expect(window.textBytes == Limits.maxWindowTextBytes)
        return window
    }

    @Test func aWindowAtTheBoundDumpsWithinTheWorkersReplyBound() throws {
        let window = try fullWindow()
        let reply = window.handle(WindowCommand.dump.message(request: 2))
        #expect(reply.failure.message.isEmpty)
        let bytes: [UInt8] = try reply.serializedBytes()
        #expect(bytes.count > Limits.maxWindowTextBytes && bytes.count <= Limits.maxWorkerReplyBytes)
        #expect(
            ReplyParts.messages(reply, maximumMessage: 1 << 20)?.count == (bytes.count + ReplyParts.chunkBytes - 1)
                / ReplyParts.chunkBytes)
    }

    @Test func everyCommandThatWouldPassTheBoundIsRefusedWithNothingApplied() throws {
        let window = try fullWindow()
        let tab = window.dump().regular.tabs[0].id
        // One byte shorter, and a tab of one byte: the bound exactly, with a tab that can grow.
        #expect(send(window, .navigate(tab: tab, url: url(Limits.maxURLBytes - 1))).applied)
        #expect(open(window, "x").applied)
        #expect(window.textBytes == Limits.maxWindowTextBytes)
        let before = window.dump()
        let refusals: [(String, TabCommand)] = [
            ("open", .open(url: "y", incognito: false, index: nil, opener: nil, background: false)),
            ("open incognito", .open(url: "y", incognito: true, index: nil, opener: nil, background: true)),
            ("navigate", .navigate(tab: tab, url: url(Limits.maxURLBytes))),
            ("replace", .replace(tab: tab, url: url(Limits.maxURLBytes))),
        ]
        for (name, command) in refusals {
            let reply = send(window, command)
            #expect(
                reply.failure.kind == .badData && reply.failure.message.contains("Limits.maxWindowTextBytes"), "\(name)"
            )
        }
        let after = window.dump()
        #expect(after.digest == before.digest && after.appliedSeq == before.appliedSeq, "nothing applied, no seq taken")
        #expect(window.textBytes == Limits.maxWindowTextBytes)
        // The same size is no growth: taken.
        #expect(
            send(window, .navigate(tab: tab, url: url(Limits.maxURLBytes - 1, "z"))).done.appliedSeq == before
                .appliedSeq + 1)
        #expect(send(window, .replace(tab: tab, url: url(Limits.maxURLBytes - 1, "y"))).applied)
        #expect(window.textBytes == Limits.maxWindowTextBytes)
    }

    /// Back to a longer entry is growth too: refused while the window is full, taken once a
    /// tab closed makes room.
    @Test func aStepBackToALongerEntryCountsAndClosingMakesRoom() throws {
        let window = try fullWindow()
        let tabs = window.dump().regular.tabs.map(\.id)
        #expect(send(window, .navigate(tab: tabs[0], url: "https://short.example/")).applied)
        let freed = Limits.maxURLBytes - "https://short.example/".utf8.count
        #expect(window.textBytes == Limits.maxWindowTextBytes - freed)
        #expect(open(window, url(freed)).applied, "the room freed is taken exactly")
        let seq = window.dump().appliedSeq
        let back = send(window, .go(tab: tabs[0], .back))
        #expect(back.failure.message.contains("Limits.maxWindowTextBytes"), "\(back.failure.message)")
        #expect(window.dump().regular.tabs[0].url == "https://short.example/" && window.dump().appliedSeq == seq)
        #expect(send(window, .close(tab: tabs[1])).applied)
        #expect(window.textBytes == Limits.maxWindowTextBytes - Limits.maxURLBytes)
        #expect(send(window, .go(tab: tabs[0], .back)).applied)
        #expect(window.textBytes == Limits.maxWindowTextBytes - "https://short.example/".utf8.count)
        // Closing every tab of a Browser counts them all out.
        #expect(send(window, .closeAll(incognito: true)).applied)
        #expect(
            window.textBytes == window.dump().regular.tabs.reduce(0) { $0 + $1.url.utf8.count + $1.title.utf8.count })
    }

    /// A session past the bound (only a file written elsewhere gets there) restores whole: every
    /// tab is kept, its dump says why it cannot be shown and where to read it, commands that
    /// shrink it are taken, and once within the bound it dumps again.
    @Test func aWindowRestoredPastTheBoundKeepsEveryTabAndItsDumpSaysWhy() throws {
        let engine = FaultEngine(directories: [root])
        let window = try fullWindow(engine)
        let list = window.store.regular.webStateList
        let profile = window.store.regular.profile
        // Past the window's commands, as a file written by other means holds it.
        window.store.apply(seq: window.nextSeqBase + 1) {
            var history = NavigationHistory()
            history.commit(NavigationItem(url: url(1000), timestamp: Timestamp(microsecondsSinceEpoch: 1)))
            _ = try? list.insert(
                WebState(
                    id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 1), history: history))
        }
        try window.store.save()
        try window.store.settle()

        let restored = try sceneWindow(engine)
        #expect(restored.textBytes == Limits.maxWindowTextBytes + 1000)
        #expect(
            restored.store.regular.webStateList.count + restored.store.incognito.webStateList.count == 9,
            "every tab restored")
        let dump = restored.handle(WindowCommand.dump.message(request: 3))
        #expect(dump.failure.kind == .badData)
        #expect(
            dump.failure.message.contains("Limits.maxWindowTextBytes")
                && dump.failure.message.contains("windowhost inspect"), "\(dump.failure.message)")
        // The supervisor's floor probe (seqs and tab ids) is still answered: such a window
        // whose `handed-out` entry is gone, or adopted back, still starts.
        let probe = restored.handle(WindowCommand.probe.message(request: 5))
        #expect(probe.isDump && probe.dump.regular.tabs.count + probe.dump.incognito.tabs.count == 9)
        #expect((probe.dump.regular.tabs + probe.dump.incognito.tabs).allSatisfy { $0.url.isEmpty && $0.id > 0 })
        #expect(probe.dump.appliedSeq == restored.store.appliedSeq)
        #expect(open(restored, "x").failure.message.contains("Limits.maxWindowTextBytes"))
        let last = try #require(restored.store.regular.webStateList.webStates.last?.id.rawValue)
        #expect(send(restored, .close(tab: last)).applied)
        #expect(restored.handle(WindowCommand.dump.message(request: 4)).isDump)
    }

    private func fullWindow(_ engine: FaultEngine) throws -> SceneWindow {
        let window = try sceneWindow(engine)
        for index in 0..<(Limits.maxWindowTextBytes / Limits.maxURLBytes) {
            #expect(open(window, url(Limits.maxURLBytes), incognito: index % 2 == 1).applied)
        }
        return window
    }
}
