import Foundation
import Glibc
import HostControl
import Testing

/// An export is the one step of a move that names no move: its answer is the source's next one
/// to an export. A move undone while its source still owes that answer (the destination killed
/// meanwhile) must not let a later move take it for its own: the honest source would be killed
/// for answering another tab, or a later move would carry the tab as it was before commands
/// acknowledged since.
@Suite(.serialized) struct MoveStaleExportTests {
    @Test func aMoveWaitsWhileItsSourceOwesAnUndoneMovesExport() throws {
        let root = temporaryRoot("move-stale-export")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 3)
        defer { if host.process.isRunning { host.kill9() } }
        let ids = host.windowIDs()
        try #require(ids.count == 3)
        let (a, b, c) = (ids[0], ids[1], ids[2])
        let first = try #require(host.open(a, "https://first.example/"))
        let second = try #require(host.open(a, "https://second.example/"))
        #expect(host.call(.waitDurable(seq: nil), window: a).code == .ok)
        let source = try #require(readyPID(host, a, not: 0))
        kill(source, SIGSTOP)
        let mover = Process()
        mover.executableURL = windowhostBinary
        mover.arguments = [
            "ctl", "--socket", host.socket, "move-to-window", "--window", a, "--tab", "\(first)", "--to", b,
        ]
        try mover.run()
        #expect(
            waitFor({ (try? host.call(.status).decode(StatusReply.self))?.moves?.count == 1 }, seconds: 10),
            "the first move is under way: \(host.log)")
        kill(try #require(readyPID(host, b, not: 0)), SIGKILL)
        mover.waitUntilExit()
        #expect(mover.terminationStatus == 75, "the first move is undone with its destination")
        let later = Process()
        later.executableURL = windowhostBinary
        later.arguments = [
            "ctl", "--socket", host.socket, "move-to-window", "--window", a, "--tab", "\(second)", "--to", c,
        ]
        try later.run()
        // Answered at once, or under way: either way before the watchdog finds the source hung.
        _ = waitFor(
            { !later.isRunning || (try? host.call(.status).decode(StatusReply.self))?.moves?.count == 1 }, seconds: 1)
        kill(source, SIGCONT)
        later.waitUntilExit()
        #expect(later.terminationStatus == 75, "a move waits for its source's owed export")
        #expect(waitFor({ (try? host.call(.status).decode(StatusReply.self))?.moves?.isEmpty == true }, seconds: 10))
        #expect(!host.log.contains("worker misbehaved"), "\(host.log)")
        #expect(readyPID(host, a, not: 0) == source, "the honest source is not killed: \(host.log)")
        #expect(host.terminate() == 0)
    }
}
