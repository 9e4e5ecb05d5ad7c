import Foundation
import Glibc
import HostControl
import Testing

@testable import HostCoordination

/// Workers that lie about a move between windows (issue 32, isolation). The test stops one
/// window's worker with SIGSTOP, reads the move's step from its command ring, and answers in
/// its place through its reply ring, as a compromised worker could: with another tab, bytes
/// that are not the tab, a time before the epoch, or the wrong kind of answer. The liar is
/// killed, the move is undone, the tab stays in its window, and the other window gets nothing.
@Suite(.serialized) struct MoveLiesTests {
    enum Lie: String, CaseIterable {
        /// Source: a tab other than the one asked for.
        case anotherTab
        /// Source: history bytes that do not read as one.
        case bytesThatAreNoHistory
        /// Source: a creation time before the epoch.
        case timeBeforeTheEpoch
        /// Source: a done where its tab was asked for (answering as a destination would).
        case doneForAnExport
        /// Destination: an import answered with no tab made.
        case importWithoutItsTab
        /// Destination: an import answered with a tab, as a source would.
        case tabForAnImport

        var liar: Liar { [.importWithoutItsTab, .tabForAnImport].contains(self) ? .destination : .source }
    }

    enum Liar { case source, destination }

    @Test(arguments: Lie.allCases) func aWorkerLyingAboutAMoveIsKilledAndNoTabMoves(_ lie: Lie) throws {
        let root = temporaryRoot("move-lie")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        defer { if host.process.isRunning { host.kill9() } }
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        let (a, b) = (ids[0], ids[1])
        let tab = try #require(host.open(a, "https://moving.example/"))
        let other = try #require(host.open(a, "https://other.example/"))
        #expect(host.call(.waitDurable(seq: nil), window: a).code == .ok)
        let liar = lie.liar == .source ? a : b
        let pid = try #require(readyPID(host, liar, not: 0))
        kill(pid, SIGSTOP)
        let mover = Process()
        mover.executableURL = windowhostBinary
        mover.arguments = [
            "ctl", "--socket", host.socket, "move-to-window", "--window", a, "--tab", "\(tab)", "--to", b,
        ]
        mover.standardOutput = FileHandle.nullDevice
        mover.standardError = FileHandle.nullDevice
        try mover.run()
        let (memory, size) = try mapSlot(of: pid)
        defer { munmap(memory, size) }
        let slot = try #require(SlotMemory.attachedView(memory, size: size))
        var asked: WorkerCommand?
        _ = waitFor(
            {
                asked = (try? slot.commandRing.receive()).flatMap { $0 }.flatMap {
                    try? WorkerCommand(serializedBytes: $0)
                }
                return asked != nil
            }, seconds: 10)
        let command = try #require(asked, "the liar is asked its step: \(host.log)")
        var reply = WorkerReply()
        reply.request = command.request
        switch lie {
        case .anotherTab:
            #expect(command.exportTab.tab == tab)
            reply.movedTab = MovedTab.with { ($0.tab, $0.navigation) = (other, Data()) }
        case .bytesThatAreNoHistory:
            reply.movedTab = MovedTab.with { ($0.tab, $0.navigation) = (tab, Data([0xff, 0xff, 0xff, 0x01])) }
        case .timeBeforeTheEpoch:
            reply.movedTab = MovedTab.with { ($0.tab, $0.creationTimeUs) = (tab, -5) }
        case .doneForAnExport:
            reply.done = CommandDone.with { ($0.appliedSeq, $0.tab) = (1, tab) }
        case .importWithoutItsTab:
            #expect(command.importTab.tab.tab == tab)
            reply.done = CommandDone.with { $0.appliedSeq = 1 }
        case .tabForAnImport:
            reply.movedTab = command.importTab.tab
        }
        try slot.replyRing.send(try reply.serializedBytes())
        if let bell = descriptor(.supervisorBell, of: pid) {
            var one: UInt64 = 1
            _ = write(bell, &one, 8)
            close(bell)
        }
        mover.waitUntilExit()
        kill(pid, SIGCONT)
        #expect(mover.terminationStatus != 0, "\(lie): a lie is never answered as a move")
        _ = try #require(readyPID(host, liar, not: pid, seconds: 30), "the liar is replaced: \(host.log)")
        let misbehaved = host.log.split(separator: "\n").filter { $0.contains("worker misbehaved") }
        #expect(misbehaved.count == 1 && misbehaved[0].contains("window=\(liar)"), "\(misbehaved)")
        #expect(
            waitFor({ (try? host.call(.status).decode(StatusReply.self))?.moves?.isEmpty == true }, seconds: 20),
            "the move is over: \(host.log)")
        let inA = host.call(.dump, window: a).result?["regular"]?["tabs"]?.array?.compactMap { $0["url"]?.string }
        let inB = host.call(.dump, window: b).result?["regular"]?["tabs"]?.array?.compactMap { $0["url"]?.string }
        #expect(
            inA == ["https://moving.example/", "https://other.example/"] && inB == [],
            "\(lie): A \(inA ?? []), B \(inB ?? [])")
        #expect(host.terminate() == 0)
    }
}
