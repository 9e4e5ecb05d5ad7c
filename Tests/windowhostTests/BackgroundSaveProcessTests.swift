import Foundation
import Glibc
import HostControl
import Supervisor
import SystemPackage
import Testing

/// Case 1 of the save policy through real processes: the scene goes to the background and its
/// window saves at once. The save delay is ten minutes, so within the test nothing but
/// `background` can make a change durable: `wait-durable` only waits (it asks for no save),
/// and the kills give no worker a chance to save on the way out.
@Suite(.serialized) struct BackgroundSaveProcessTests {
    static let saveDelayMilliseconds = 600_000
    /// Far below the delay, far above a save on a loaded machine.
    static let durableWithinSeconds = 10

    /// Opens tabs in both Browsers, none saved yet: the dump before `background`.
    static func browseUnsaved(_ host: HostProcess, _ window: String) throws -> JSONValue {
        for index in 0..<4 { _ = host.open(window, "https://background\(index).example/") }
        _ = host.open(window, "https://private.example/", incognito: true)
        let dump = try #require(host.call(.dump, window: window).result)
        try #require(
            dump["durable_seq"]?.int == 0 && dump["applied_seq"]?.int == 5, "the delayed save has not run: \(dump)")
        return dump
    }

    /// `background`, then a `wait-durable` that would time out long before the delay, then the
    /// supervisor killed with SIGKILL (its workers die with it, saving nothing): the next
    /// supervisor restores every change.
    @Test func backgroundIsDurableWithinSecondsAndSurvivesAKilledSupervisor() throws {
        let root = temporaryRoot("background")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, saveDelay: Self.saveDelayMilliseconds)
        let window = try #require(host.windowIDs().first)
        let before = try Self.browseUnsaved(host, window)
        #expect(host.call(.scene(.background), window: window).code == .ok)
        let waited = host.call(.waitDurable(seq: nil), window: window, timeout: Self.durableWithinSeconds)
        #expect(waited.code == .ok && waited.result?["durable_seq"]?.int == 5, "\(waited)")
        let worker = try #require(host.windows()[window]?.pid)
        host.kill9()
        #expect(waitFor({ !isRunning(worker) }, seconds: 5), "the worker died with its supervisor")

        let next = try HostProcess(root: root, scenes: 1, saveDelay: Self.saveDelayMilliseconds)
        let restored = try #require(next.call(.dump, window: window).result)
        #expect(restored["digest"] == before["digest"] && restored["applied_seq"]?.int == 5, "\(restored)")
        #expect(next.terminate() == 0)
    }

    /// `background`, then, once `status` shows the save durable (polling asks for no save), the
    /// worker killed with SIGKILL: it comes back with every change.
    @Test func backgroundIsDurableBeforeAKilledWorker() throws {
        let root = temporaryRoot("background-kill")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, saveDelay: Self.saveDelayMilliseconds)
        let window = try #require(host.windowIDs().first)
        let before = try Self.browseUnsaved(host, window)
        #expect(host.call(.scene(.background), window: window).code == .ok)
        let durable = waitFor({ host.windows()[window]?.durableSeq == 5 }, seconds: Double(Self.durableWithinSeconds))
        #expect(
            durable,
            "background saved nothing within \(Self.durableWithinSeconds) s: \(String(describing: host.windows()[window]))"
        )
        let killed = try host.ctl(["kill", "--window", window])
        #expect(killed.status == 0 && killed.output.contains("restored by"), "\(killed.output)")
        let restored = try #require(host.call(.dump, window: window).result)
        #expect(restored["digest"] == before["digest"] && restored["durable_seq"]?.int == 5, "\(restored)")
        let status = try #require(host.windows()[window])
        #expect(status.state == "background", "a restarted background scene stays in the background")
        #expect(host.terminate() == 0)
    }
}
