import Foundation
import Glibc
import HostControl
import HostCoordination
import Platform

/// Moves of tabs between windows in a campaign (`move-to-window`), and kills aimed at them. The
/// oracle follows each move to its end and judges where the tab went from both windows' dumps
/// (`MoveObservation`): exactly one of them holds it, and the destination if the move was
/// acknowledged (docs/recovery.md, "Moving a tab between windows").
extension Campaign {
    /// Longest a supervisor kill waits after asking for a move: a move takes about a
    /// millisecond, so the kill lands before, inside and after it.
    static let supervisorAimMicroseconds: UInt32 = 4_000

    /// A move of a tab between two windows (seeded): from a window with a tab to another.
    func pickMove() -> MoveInFlight? {
        let ids = windows.keys.sorted()
        let sources = ids.filter { windows[$0].map { !$0.current.tabIDs.isEmpty } ?? false }
        guard let source = sources.randomElement(using: &random),
            let destination = ids.filter({ $0 != source }).randomElement(using: &random),
            let from = windows[source], let to = windows[destination]
        else { return nil }
        return MoveInFlight.pick(from: (source, from), to: (destination, to.current), using: &random)
    }

    /// A move with no kill: its reply, then where the tab went.
    func sendMove() {
        step += 1
        guard let move = pickMove(), let request = request(for: move) else { return }
        report.movesStarted += 1
        guard let reply = answer(to: request, orHang: "move of \(move.description)") else { return }
        // With no kill, a move is made, or waits (75) or its saves fail (74, the disk full).
        if reply.code != .ok, reply.code != .temporary, reply.code != .ioError {
            report.failures.append(
                reproduce("move of \(move.description) was refused: \(reply.code) \(reply.error ?? "?")"))
        }
        judge(move, reply: reply, killed: [])
    }

    /// A kill aimed at move `move`: one time in four the supervisor, a moment after the move
    /// was asked (the next supervisor finishes or undoes it from its log); otherwise the worker
    /// of one side, as the move enters a stage (`kill --aim-move`).
    func killDuringMove(_ move: MoveInFlight) throws {
        step += 1
        guard let request = request(for: move), supervisor != nil else { return }
        report.movesStarted += 1
        if Int.random(in: 0..<4, using: &random) == 0 {
            guard let pending = send(request, for: move) else { return }
            usleep(UInt32.random(in: 0...Self.supervisorAimMicroseconds, using: &random))
            report.supervisorKillsInMoves += 1
            return try killSupervisor(during: (move, pending))
        }
        let victim = Bool.random(using: &random) ? move.source : move.destination
        let stage = MoveStage.allCases.randomElement(using: &random) ?? .importing
        let at = secondsSinceStart
        guard let window = UUID(exactly: victim),
            let kill = send(.window(window, .kill(signal: SIGKILL, wait: true, aim: .move(stage))), for: move)
        else { return }
        // A round trip, so the kill is held before the move arrives.
        _ = call(.status)
        guard let reply = answer(to: request, orHang: "move of \(move.description)") else { return }
        let answered: ControlReply
        do {
            answered = try kill.reply()
        } catch {
            return abort("kill of \(victim)'s worker aimed at move stage \(stage): \(error)")
        }
        // Refused (75: no worker to signal, the window restarting) is no kill, but the window is
        // still judged as a recovery: it may have restarted.
        let killed = try? answered.decode(KillReply.self)
        let side = victim == move.source ? "source" : "destination"
        if killed?.moveStage == stage { report.moveKills["\(side) \(stage.rawValue)", default: 0] += 1 }
        let recovered = killed?.recoveryMs.map { UInt64(max($0, 0) * 1000) }
        if let recovered { _ = recoveryTimes.record(recovered) }
        mark(.workerKill, at: at, window: victim, recoveryMicroseconds: recovered)
        // A kill that found the move under way came before its reply; one sent after 1 s with
        // no move (the move over) came after it.
        judge(move, reply: reply, killed: [victim], restartedBeforeReply: killed?.moveStage == nil ? [] : [victim])
        guard var history = windows[victim] else { return }
        check(victim, &history)
        windows[victim] = history
    }

    /// `request` sent on a connection of its own, its reply read later; nil (a failure) when
    /// it could not be sent.
    private func send(_ request: ControlRequest, for move: MoveInFlight) -> ControlClient.Pending? {
        do {
            return try supervisor?.send(request)
        } catch {
            report.failures.append(reproduce("'\(request.verb.rawValue)' for move of \(move.description): \(error)"))
            return nil
        }
    }

    private func request(for move: MoveInFlight) -> ControlRequest? {
        guard let source = UUID(exactly: move.source), let destination = UUID(exactly: move.destination) else {
            report.failures.append(reproduce("the supervisor showed a window that is no UUID"))
            return nil
        }
        return .moveToWindow(from: source, tab: move.tab, to: destination, index: move.index)
    }

    /// Where `move` left its tab, once it is over: both windows dumped and judged, their models
    /// moved on to what they hold. `reply`: the move's, if one came; `killed`: the windows whose
    /// workers died meanwhile, which the caller checks as recoveries afterwards;
    /// `restartedBeforeReply`: those of them whose new worker gave the reply's seq, acknowledged
    /// once that check found the state the window restored (`WindowHistory.acknowledge`).
    func judge(
        _ move: MoveInFlight, reply: ControlReply?, killed: Set<String>, restartedBeforeReply: Set<String> = []
    ) {
        let moved = reply.flatMap { $0.code == .ok ? try? $0.decode(MoveReply.self) : nil }
        if reply?.code == .ok, moved == nil {
            report.failures.append(reproduce("move of \(move.description): an ok reply that is no MoveReply"))
        }
        if moved != nil { report.movesAcknowledged += 1 }
        // On a full disk a move waits for its saves (74 tells the client so): space comes back
        // here, or it would wait for the steps the campaign does not take meanwhile.
        if fullUntilStep != nil { freeDisk(unjudged: killed) }
        guard waitUntilOver(move),
            let sourceDump = dump(move.source, after: move), let destinationDump = dump(move.destination, after: move),
            var source = windows[move.source], var destination = windows[move.destination]
        else { return }
        let refused = reply.map { $0.code == .temporary || $0.code == .badData } ?? false
        let seen = MoveObservation(
            move, source: sourceDump, destination: destinationDump, destinationModel: destination.current,
            acknowledged: moved != nil, refused: refused, sourceKilled: killed.contains(move.source))
        report.movesResolved += 1
        if let received = seen.received {
            report.movesCommitted += 1
            if killed.contains(move.source) {
                source.rewrite { ($0.droppingMoved(move.tab), $0.tabIDs.contains(move.tab)) }
            } else {
                source.applied(seq: sourceDump.appliedSeq, window: source.current.droppingMoved(move.tab))
            }
            destination.applied(seq: destinationDump.appliedSeq, window: received)
            if let moved {
                report.acknowledged +=
                    source.acknowledge(moved.fromSeq, afterRecovery: restartedBeforeReply.contains(move.source))
                    + destination.acknowledge(moved.seq, afterRecovery: restartedBeforeReply.contains(move.destination))
            }
        }
        windows[move.source] = source
        windows[move.destination] = destination
        record(seen, of: move, reply: reply)
        for (id, dump, model) in [(move.source, sourceDump, source), (move.destination, destinationDump, destination)]
        where !killed.contains(id) {
            expect(dump, shows: model, after: move, seqs: moved)
        }
    }

    /// The verdict on a move, counted, marked on the timeline, and a failure when it is one.
    private func record(_ seen: MoveObservation, of move: MoveInFlight, reply: ControlReply?) {
        mark(.move, window: move.source, to: move.destination, outcome: seen.outcome, verdict: seen.verdict)
        let answered = reply.map { "answered \($0.code)\($0.error.map { " (\($0))" } ?? "")" } ?? "no reply"
        switch seen.verdict {
        case .intact:
            return
        case .duplicated:
            report.duplicated += 1
            report.failures.append(reproduce("move of \(move.description), \(answered): the tab is in both windows"))
        case .lostInMove:
            report.lostInMove += 1
            report.failures.append(reproduce("move of \(move.description), \(answered): the tab is in neither window"))
        case .lost:
            report.lost += 1
            report.failures.append(
                reproduce("move of \(move.description), acknowledged: the tab is not in the destination"))
        default:
            report.unexpected += 1
            report.failures.append(reproduce("move of \(move.description), \(answered): yet the tab moved"))
        }
    }

    /// A window of the move whose worker lived through it shows its model exactly, at the seq
    /// the move's reply gave.
    private func expect(_ dump: DumpReply, shows history: WindowHistory, after move: MoveInFlight, seqs: MoveReply?) {
        let isSource = dump.window == move.source
        let side = isSource ? "source" : "destination"
        if !history.current.isShown(by: dump) {
            report.torn += 1
            report.failures.append(
                reproduce(
                    "after move of \(move.description), the \(side) shows what its model does not: "
                        + history.current.differences(from: dump).joined(separator: "; ")))
        }
        let replied = isSource ? seqs?.fromSeq : seqs?.seq
        if let replied, replied != dump.appliedSeq {
            report.failures.append(
                reproduce(
                    "move of \(move.description) answered the \(side)'s seq \(replied), but it shows \(dump.appliedSeq)"
                ))
        }
    }

    /// Waits until neither window of `move` takes part in a move and both are ready: the move
    /// finished or undone by the supervisor that has it. False (a failure) past the timeout.
    private func waitUntilOver(_ move: MoveInFlight) -> Bool {
        let deadline = Date().addingTimeInterval(Double(options.replyTimeoutSeconds))
        let involved = [move.source, move.destination]
        // A window serving shows its scene's state; any other is one on its way.
        let serving = [SlotState.foreground, .background].map(\.description)
        while Date() < deadline {
            if let status = try? call(.status).decode(StatusReply.self),
                !(status.moves ?? []).contains(where: { involved.contains($0.from) || involved.contains($0.to) }),
                involved.allSatisfy({ id in status.windows.contains { $0.uuid == id && serving.contains($0.state) } })
            {
                return true
            }
            usleep(2_000)
        }
        abort("move of \(move.description) not over \(options.replyTimeoutSeconds) s after it was asked")
        return false
    }

    private func dump(_ id: String, after move: MoveInFlight) -> DumpReply? {
        guard let reply = answer(id, .dump, orHang: "dump of window \(id) after move of \(move.description)") else {
            return nil
        }
        do {
            return try reply.decode(DumpReply.self)
        } catch {
            report.failures.append(
                reproduce("window \(id) did not answer a dump after move of \(move.description): \(error.message)"))
            return nil
        }
    }
}
