import Foundation
import HostControl
import HostCoordination
import Supervisor
import Testing

/// Restore is lazy whatever holds the window (a journal alone, or a snapshot and a journal):
/// after a worker kill, a clean restart or a killed supervisor, every tab comes back unrealized
/// but the displayed one (the active tab of a foreground scene), and the last-active times the
/// window had come back with it. Five tabs write about twenty records, far below a compaction,
/// so without `--compact-after` the window is held by its journal alone.
@Suite(.serialized) struct LazyRestoreProcessTests {
    static let tabs = 5

    /// Opens and navigates `tabs` tabs, then activates the second (not the last opened), and
    /// waits until all of it is durable. The dump as the window then stands.
    static func browse(_ host: HostProcess, _ window: String) throws -> DumpReply {
        var ids: [Int64] = []
        for index in 0..<tabs { ids.append(try #require(host.open(window, "https://lazy\(index).example/"))) }
        for (index, id) in ids.enumerated() {
            let navigated = host.call(
                .tab(.navigate(tab: id, url: "https://lazy\(index).example/next")), window: window)
            try #require(navigated.code == .ok, "\(navigated)")
        }
        // Activated after every other tab was made: its last-active time is the newest.
        try #require(host.call(.tab(.activate(tab: ids[1])), window: window).code == .ok)
        let durable = try host.ctl(["wait-durable", "--window", window])
        try #require(durable.status == 0, "\(durable.output)")
        let dump = try host.call(.dump, window: window).decode(DumpReply.self)
        try #require(dump.regular.activeIndex == 1 && dump.regular.tabs.count == tabs)
        return dump
    }

    /// Every tab unrealized but the active one; the same tabs, pages and last-active times as
    /// `before`.
    static func expectLazy(_ after: DumpReply, as before: DumpReply, displayed: Bool, _ how: String) {
        let realized = after.regular.tabs.filter(\.realized).map(\.id)
        let active = after.regular.activeIndex.map { after.regular.tabs[Int($0)].id }
        #expect(
            realized == (displayed ? active.map { [$0] } ?? [] : []),
            "after \(how): realized \(realized), active \(String(describing: active))")
        #expect(
            after.regular.tabs.map(\.id) == before.regular.tabs.map(\.id)
                && after.regular.activeIndex == before.regular.activeIndex, "after \(how)")
        #expect(
            after.regular.tabs.map(\.url) == before.regular.tabs.map(\.url),
            "after \(how): pages answered without realizing")
        #expect(after.regular.tabs.map(\.title) == before.regular.tabs.map(\.title), "after \(how)")
        #expect(after.digest == before.digest, "after \(how)")
        // The time the activation stamped (journaled in its record) comes back.
        let times = { (dump: DumpReply) in dump.regular.tabs.map(\.lastActiveTimeUs) }
        #expect(
            times(after) == times(before), "after \(how): last-active times \(times(after)), saved \(times(before))")
    }

    @Test func aKilledWorkerRestoresItsJournalLazily() throws {
        try checkKilledWorker(arguments: [])
    }

    /// The same with a compaction every 8 records: a snapshot and a journal hold the window.
    @Test func aKilledWorkerRestoresSnapshotAndJournalLazily() throws {
        try checkKilledWorker(arguments: ["--compact-after", "8"])
    }

    private func checkKilledWorker(arguments: [String]) throws {
        let root = temporaryRoot("lazy-kill")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, arguments: arguments)
        let window = try #require(host.windowIDs().first)
        let before = try Self.browse(host, window)
        let navigated = before.regular.tabs.allSatisfy(\.realized)
        #expect(navigated, "every tab was navigated, so realized: \(before.regular.tabs)")
        let active = before.regular.tabs[1]
        #expect(
            before.regular.tabs.allSatisfy {
                $0.id == active.id || ($0.lastActiveTimeUs ?? 0) < (active.lastActiveTimeUs ?? 0)
            }, "activation stamped the tab")
        let killed = try host.ctl(["kill", "--window", window])
        #expect(killed.status == 0, "\(killed.output)")
        let after = try host.call(.dump, window: window).decode(DumpReply.self)
        Self.expectLazy(after, as: before, displayed: true, "ctl kill")
        // Inspect reads the files the same way, realizing nothing, and shows the times.
        let inspect = try runWindowhost(["inspect", root.path, "--json"])
        #expect(
            inspect.output.contains("\"last_active_time_us\":\(active.lastActiveTimeUs ?? -1)"),
            "\(inspect.output.prefix(2000))")
        #expect(host.terminate() == 0)
    }

    @Test func aCleanRestartRestoresLazily() throws {
        let root = temporaryRoot("lazy-restart")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        let before = try Self.browse(host, window)
        let shutdown = try host.ctl(["shutdown"])
        #expect(shutdown.status == 0, "\(shutdown.output)")
        host.process.waitUntilExit()
        let next = try HostProcess(root: root, scenes: 1)
        let after = try next.call(.dump, window: window).decode(DumpReply.self)
        Self.expectLazy(after, as: before, displayed: true, "shutdown then run")
        #expect(next.terminate() == 0)
    }

    @Test func aKilledSupervisorRestoresLazily() throws {
        let root = temporaryRoot("lazy-sigkill")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        let before = try Self.browse(host, window)
        let worker = try #require(host.windows()[window]?.pid)
        host.kill9()
        #expect(waitFor({ !isRunning(worker) }, seconds: 5), "the worker died with its supervisor")
        let next = try HostProcess(root: root, scenes: 1)
        let after = try next.call(.dump, window: window).decode(DumpReply.self)
        Self.expectLazy(after, as: before, displayed: true, "a SIGKILLed supervisor")
        #expect(next.terminate() == 0)
    }

    /// A background scene displays nothing: restarted, none of its tabs is realized, and
    /// activating one does not realize it either. Coming to the foreground realizes the active
    /// tab and stamps it.
    @Test func aBackgroundSceneRealizesNothingUntilItComesForward() throws {
        let root = temporaryRoot("lazy-background")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        let before = try Self.browse(host, window)
        #expect(host.call(.scene(.background), window: window).code == .ok)
        let killed = try host.ctl(["kill", "--window", window])
        #expect(killed.status == 0, "\(killed.output)")
        #expect(host.windows()[window]?.state == "background")
        let after = try host.call(.dump, window: window).decode(DumpReply.self)
        Self.expectLazy(after, as: before, displayed: false, "ctl kill in the background")
        let third = before.regular.tabs[2].id
        #expect(host.call(.tab(.activate(tab: third)), window: window).code == .ok)
        let activated = try host.call(.dump, window: window).decode(DumpReply.self)
        #expect(activated.regular.tabs.filter(\.realized).isEmpty, "a background scene's active tab stays unrealized")
        #expect(
            (activated.regular.tabs[2].lastActiveTimeUs ?? 0) > (before.regular.tabs[1].lastActiveTimeUs ?? 0),
            "activation stamps the time")

        let forward = host.call(.scene(.foreground), window: window)
        #expect(forward.code == .ok, "\(forward)")
        #expect(try forward.decode(CommandReply.self).seq == activated.appliedSeq + 1, "the stamp takes the next seq")
        let shown = try host.call(.dump, window: window).decode(DumpReply.self)
        #expect(shown.regular.tabs.filter(\.realized).map(\.id) == [third], "\(shown.regular.tabs)")
        #expect(
            (shown.regular.tabs[2].lastActiveTimeUs ?? 0) > (activated.regular.tabs[2].lastActiveTimeUs ?? 0),
            "coming forward stamps the active tab")
        // Neither dump nor status realized anything meanwhile.
        _ = host.windows()
        let again = try host.call(.dump, window: window).decode(DumpReply.self)
        #expect(again.regular.tabs.map(\.realized) == shown.regular.tabs.map(\.realized))
        // Durable through wait-durable, so a SIGKILL keeps it.
        let durable = try host.ctl(["wait-durable", "--window", window])
        #expect(durable.status == 0, "\(durable.output)")
        let killedAgain = try host.ctl(["kill", "--window", window])
        #expect(killedAgain.status == 0, "\(killedAgain.output)")
        let restored = try host.call(.dump, window: window).decode(DumpReply.self)
        #expect(
            restored.appliedSeq == shown.appliedSeq
                && restored.regular.tabs[2].lastActiveTimeUs == shown.regular.tabs[2].lastActiveTimeUs,
            "the foreground's stamp was journaled")
        #expect(host.terminate() == 0)
    }
}
