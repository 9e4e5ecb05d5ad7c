import Foundation
import Glibc
import HostControl
import Testing

/// `ctl kill --aim-move STAGE` with real processes and real SIGKILLs: a kill held until a move
/// its window takes part in enters STAGE lands in that stage, on either side, whatever the
/// stage's length; and whatever the kill cut short, once both windows are back the tab is in
/// exactly one of them, in the destination iff the move was answered ok.
@Suite(.serialized) struct MoveAimedKillProcessTests {
    /// `kill --aim-move stage --wait` of `window` written on a connection of its own, held by the
    /// supervisor once this returns: the connection, its reply to be read.
    private func arm(_ host: HostProcess, _ window: UUID, at stage: MoveStage) throws -> Int32 {
        var line = try JSONEncoder().encode(
            ControlRequest.window(window, .kill(signal: SIGKILL, wait: true, aim: .move(stage))))
        line.append(UInt8(ascii: "\n"))
        let killer = try rawSocketSend(host.socket, Array(line))
        var bound = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(killer, SOL_SOCKET, SO_RCVTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
        // A round trip through the loop after the kill's line was written: the kill is held.
        _ = host.call(.status)
        return killer
    }

    /// Each stage in turn, the move's direction alternating. Every (side, stage) pair happens:
    /// the kill waits for the stage to be entered, not for its window to be asked something, so
    /// the source is killed while B imports or commits and B while A exports, drops or settles
    /// (the move then goes on: `died` of the side not asked changes nothing, and a drop sent to
    /// a source restarting is sent again once it is back).
    @Test(arguments: ["source", "destination"])
    func aKillAimedAtEachStageLandsInItAndTheTabEndsInExactlyOneWindow(_ side: String) throws {
        let root = temporaryRoot("move-aim-\(side)")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        var outcomes: [String] = []
        for (round, stage) in MoveStage.allCases.enumerated() {
            let (a, b) = round % 2 == 0 ? (ids[0], ids[1]) : (ids[1], ids[0])
            let url = "https://\(stage.rawValue)-\(side).example/"
            let tab = try #require(host.open(a, url), "\(host.log)")
            // Durable before it moves: a tab lost with an unsaved open is no move's doing.
            try #require(host.call(.waitDurable(seq: nil), window: a).code == .ok)
            let victim = try #require(UUID(uuidString: side == "source" ? a : b))
            let killer = try arm(host, victim, at: stage)
            defer { close(killer) }
            let moved = host.call(
                .moveToWindow(
                    from: try #require(UUID(uuidString: a)), tab: tab, to: try #require(UUID(uuidString: b)),
                    index: nil),
                timeout: 30)
            let answer = try JSONDecoder().decode(ControlReply.self, from: Data(rawSocketReceive(killer)))
            let killed = try answer.decode(KillReply.self)
            #expect(killed.moveStage == stage, "\(side) at \(stage): \(answer) \(host.log.suffix(4000))")
            #expect(killed.pid != nil && killed.pid != killed.killedPid, "answered once its replacement serves")
            try #require(
                MoveProcessTests.ready(host, ids), "\(side) at \(stage): both windows back: \(host.log.suffix(4000))")
            let inA = MoveProcessTests.urls(host, a).filter { $0 == url }.count
            let inB = MoveProcessTests.urls(host, b).filter { $0 == url }.count
            #expect(inA + inB == 1, "\(side) at \(stage): the tab in exactly one window (A \(inA), B \(inB))")
            #expect(
                (inB == 1) == (moved.code == .ok), "\(side) at \(stage): in B iff the move was answered ok: \(moved)")
            outcomes.append("\(stage.rawValue): \(moved.code == .ok ? "moved" : "stayed (\(moved.code.rawValue))")")
        }
        print("\(side) killed at each stage: \(outcomes.joined(separator: ", "))")
        #expect(host.terminate() == 0)
    }

    /// With no move to aim at, the kill is sent after 1 s and says so (no stage); one whose
    /// window goes meanwhile is answered 75 as any aimed kill is; the CLI takes the stages by
    /// name, one aim at a time.
    @Test func anAimWithNoMoveIsSentAfterASecondAndTheCLIRefusesTwoAims() throws {
        let root = temporaryRoot("move-aim-none")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        let started = Date()
        let killed = try host.ctl(["--json", "kill", "--window", window, "--aim-move", "committing"])
        let waited = Date().timeIntervalSince(started)
        #expect(
            killed.status == 0 && killed.output.contains("killed_pid") && !killed.output.contains("move_stage"),
            "\(killed.output)")
        #expect(waited >= 1, "held for its full second: \(waited) s")
        let both = try host.ctl(["kill", "--window", window, "--while-saving", "--aim-move", "importing"])
        #expect(both.status == 64 && both.output.contains("one aim, not both"), "\(both.output)")
        let unknown = try host.ctl(["kill", "--window", window, "--aim-move", "asking"])
        #expect(unknown.status == 64, "\(unknown.output)")
        let killer = try arm(host, try #require(UUID(uuidString: window)), at: .dropping)
        defer { close(killer) }
        #expect(host.call(.scene(.disconnect), window: window).code == .ok)
        let answer = try JSONDecoder().decode(ControlReply.self, from: Data(rawSocketReceive(killer)))
        #expect(answer.code == .temporary && answer.error?.contains("has no worker now") == true, "\(answer)")
        let help = try runWindowhost(["ctl", "kill", "--help"]).output.split(whereSeparator: \.isWhitespace)
        #expect(help.joined(separator: " ").contains("exporting, importing, committing, dropping, settling"), "\(help)")
        #expect(host.terminate() == 0)
    }
}
