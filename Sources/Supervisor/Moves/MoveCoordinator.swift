import BrowserModel
import Foundation
import HostControl
import HostCoordination
import HostLimits
import Logging
import Platform
import SessionFormat

/// What a step of a move came back with, as its window's controller hands it on.
enum MoveStepOutcome {
    case exported(MovedTab)
    case done(CommandDone)
    case failed(CommandFailure)
}

/// What the coordinator reaches besides a window's resources: the open windows by UUID.
protocol MoveHost: WindowHost {
    func openWindow(_ id: UUID) -> WindowController?
}

/// Moves of tabs between windows (`ctl move-to-window`): the supervisor as the coordinator of a
/// two-phase commit between two untrusted workers. Each move's course is a `MoveLifecycle`
/// this type only dispatches; its lane in `ROOT/moves` (`MoveBook`) names it from before the
/// destination is asked until it is over. A window takes part in one move at a time, and while
/// it does, what could undo the move (closing the tab, its Browser or the window) waits (75).
/// A kill aimed at a stage (`ctl kill --aim-move`) is held here and sent as a move enters it.
final class MoveCoordinator {
    typealias ClientID = ControlServer.ClientID

    struct Move {
        let id: MoveID
        let source: UUID
        let tab: Int64
        let destination: UUID
        let index: Int?
        /// Which Browser the tab is in: known once exported, or from the log.
        var incognito: Bool?
        var course: MoveLifecycle
        var client: ClientID?
        /// The tab as the source exported it, until the destination has it.
        var exported: MovedTab?
        /// The destination's id for the tab, once it said, and its applied seq then.
        var madeTab: Int64?
        var madeSeq: UInt64?
        /// The source's applied seq once it dropped the tab.
        var droppedSeq: UInt64?
        /// What `undo` answers the client.
        var undoReply = ControlReply.failure(.temporary, "the move was undone; the tab stays where it was")
        /// In the log (`MoveBook`) from `recordAndImport`.
        var recorded: Bool
        let startedAt: UInt64

        func side(of window: UUID) -> MoveLifecycle.Side? {
            window == source ? .source : window == destination ? .destination : nil
        }
    }

    private(set) var moves: [MoveID: Move] = [:]
    private let book: MoveBook
    /// Kills aimed at a stage of a move, sent as one enters it (`entered`).
    private(set) var aimedKills = MoveAimedKills()

    /// Takes up the moves a supervisor before left in the log: each is asked about once its
    /// destination is back (`MoveLifecycle(resumed:)`).
    init(book: MoveBook, now: UInt64) {
        self.book = book
        for entry in book.lanes.values {
            moves[entry.move] = Move(
                id: entry.move, source: entry.source, tab: entry.tab, destination: entry.destination, index: nil,
                incognito: entry.incognito, course: MoveLifecycle(resumed: true), recorded: true, startedAt: now)
        }
    }

    /// The move window `id` takes part in, if any.
    func move(involving id: UUID) -> Move? { moves.values.first { $0.side(of: id) != nil } }

    // MARK: requests

    /// `move-to-window`: refused at once when either window is not open and ready or is in
    /// another move; else the source is asked for the tab.
    func begin(
        from: UUID, tab: Int64, to: UUID, index: Int?, for client: ClientID, in host: some MoveHost
    ) {
        assert(from != to, "the request refuses a move to the same window")
        for id in [from, to] {
            guard let window = host.openWindow(id) else {
                return host.answer(client, .failure(.badData, "no open window \(id)"))
            }
            if let busy = move(involving: id) {
                return host.answer(
                    client,
                    .failure(.temporary, "window \(id) is in move \(busy.id), not settled yet; retry once it is"))
            }
            guard window.isReady else {
                return host.answer(
                    client, .failure(.temporary, "window \(id) is \(window.state) (worker restarting); retry"))
            }
        }
        // An export names no move: an undone move's, still owed, would be taken for this one's.
        if host.openWindow(from)?.owesMoveExport == true {
            return host.answer(
                client, .failure(.temporary, "window \(from) has yet to answer an undone move's export; retry"))
        }
        let move = Move(
            id: MoveID.random(), source: from, tab: tab, destination: to, index: index, course: MoveLifecycle(),
            client: client, recorded: false, startedAt: monotonicNanoseconds())
        assert(moves[move.id] == nil, "a move id is drawn once")
        moves[move.id] = move
        host.logger.info(
            "move started", metadata: ["move": "\(move.id)", "from": "\(from)", "tab": "\(tab)", "to": "\(to)"])
        let sent = host.openWindow(from)?.sendMoveStep(.export(tab: tab), in: host) == true
        entered(move, in: host)
        if !sent { dispatch(.died(.source), move.id, in: host) }
    }

    /// `request` to `window`, if the moves take it: refused while a move involves the window
    /// (75), or a kill aimed at a move's stage, held (`MoveAimedKills`). One to a window with no
    /// worker is the window's to answer.
    func take(_ request: WindowRequest, to window: WindowController, from client: ClientID, in host: some MoveHost)
        -> Bool
    {
        if let refusal = refusal(request, to: window.id) {
            host.answer(client, refusal)
            return true
        }
        guard case .kill(let signal, let wait, let aim) = request, case .move = aim, window.isLive else { return false }
        aimedKills.hold(.init(signal: signal, wait: wait, aim: aim), of: window.id, for: client)
        return true
    }

    /// What a request to `window` must wait for (75): closing or disconnecting a window in a
    /// move, a command on the moving tab on either side, or closing all tabs of its Browser.
    func refusal(_ request: WindowRequest, to window: UUID) -> ControlReply? {
        guard let move = move(involving: window) else { return nil }
        let busy = ControlReply.failure(
            .temporary, "window \(window) is in move \(move.id) of tab \(move.tab), not settled yet; retry once it is")
        switch request {
        case .scene(.disconnect):
            return busy
        case .tab(.closeAll(let incognito)):
            return move.incognito.map { $0 == incognito } ?? true ? busy : nil
        case .tab(let command):
            let moving = window == move.source ? move.tab : move.madeTab
            return moving != nil && command.namedTab == moving ? busy : nil
        default:
            return nil
        }
    }

    // MARK: what the windows say

    /// A step's reply from `window`'s worker. Replies are matched to their requests by the
    /// window's controller, so a worker can neither name a move it was not asked about nor
    /// answer for the other side: what it can do is answer with the wrong thing, and then it is
    /// killed (`misbehaved`) and the move goes on as after its death.
    func answered(_ window: WindowController, _ step: MoveStep, _ outcome: MoveStepOutcome, in host: some MoveHost) {
        let found =
            step.move.map { moves[$0] }
            ?? moves.values.first { $0.source == window.id && $0.course.state == .exporting }
        guard var move = found, let side = move.side(of: window.id) else { return }
        let event: MoveLifecycle.Event
        switch (step, outcome) {
        case (.export, .exported(let tab)):
            if let violation = Self.violation(of: tab, asked: move.tab) {
                move.undoReply = .failure(.software, "the source window's worker misbehaved; it is restarting")
                moves[move.id] = move
                window.misbehaved("a move's export: \(violation)", in: host)
                event = .refused
            } else {
                (move.exported, move.incognito) = (tab, tab.incognito)
                moves[move.id] = move
                event = .exported
            }
        case (.export, .failed(let failure)):
            move.undoReply = .failure(
                failure.kind == .io ? .ioError : .badData, "window \(window.id): \(failure.message)")
            moves[move.id] = move
            event = .refused
        case (.import, .failed(let failure)) where failure.kind == .badData:
            move.undoReply = .failure(.badData, "window \(window.id): \(failure.message)")
            moves[move.id] = move
            event = .refused
        case (.import, .done(let done)) where done.hasTab:
            (move.madeTab, move.madeSeq) = (done.tab, done.appliedSeq)
            moves[move.id] = move
            event = .applied(seq: done.appliedSeq)
        case (.import, .failed):
            event = .uncertain
        case (.drop, .done(let done)):
            move.droppedSeq = done.appliedSeq
            moves[move.id] = move
            event = .applied(seq: done.appliedSeq)
        case (.drop, .failed(let failure)) where failure.kind == .io:
            // Sent again: a drop of a tab already gone answers the seq its window has, which
            // covers the first.
            event = .died(.source)
        case (.held, .done(let done)):
            if done.hasTab {
                (move.madeTab, move.madeSeq) = (done.tab, done.appliedSeq)
                event = .held(seq: done.appliedSeq)
            } else {
                move.undoReply = .failure(
                    .temporary,
                    "window \(move.destination) restarted before the move was durable there; the tab stays in \(move.source)"
                )
                event = .notHeld
            }
            moves[move.id] = move
        default:
            window.misbehaved("a reply to a move's \(step.name) that is not its answer", in: host)
            event = .died(side)
        }
        dispatch(event, move.id, in: host)
    }

    /// `window`'s worker died: the steps it was sent are not answered.
    func workerDied(_ window: WindowController, in host: some MoveHost) {
        for move in moves.values.sorted(by: { $0.startedAt < $1.startedAt }) {
            guard let side = move.side(of: window.id) else { continue }
            dispatch(.died(side), move.id, in: host)
        }
    }

    /// Once a turn: what each move waits for, looked at (a window ready again, a seq durable),
    /// and a client told 74 when a side's saves fail while its move waits on them.
    func tend(in host: some MoveHost) {
        sendDueAimedKills(in: host)
        for id in moves.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard let move = moves[id] else { continue }
            switch move.course.state {
            case .awaitingDestination:
                if host.openWindow(move.destination)?.isReady == true { dispatch(.ready(.destination), id, in: host) }
            case .awaitingSource:
                if host.openWindow(move.source)?.isReady == true { dispatch(.ready(.source), id, in: host) }
            case .committing:
                waitDurable(.destination, id, in: host)
            case .settling:
                waitDurable(.source, id, in: host)
            default:
                break
            }
        }
    }

    private func waitDurable(_ side: MoveLifecycle.Side, _ id: MoveID, in host: some MoveHost) {
        guard var move = moves[id], let window = host.openWindow(side == .source ? move.source : move.destination),
            window.isReady
        else { return }
        if let client = move.client, window.lastStats.failingErrno != 0 {
            host.answer(
                client,
                .failure(
                    .ioError,
                    "window \(window.id)'s saves are failing (\(window.saveFailureMessage)); move \(id) completes by itself once they land"
                ))
            move.client = nil
            moves[id] = move
        }
        dispatch(.durable(side, seq: window.lastStats.durableSeq), id, in: host)
    }

    // MARK: the course

    /// Feeds `event` to move `id`'s course and carries out what it returns, then what those
    /// lead to, until nothing is left.
    private func dispatch(_ event: MoveLifecycle.Event, _ id: MoveID, in host: some MoveHost) {
        var events = [event]
        while !events.isEmpty {
            guard var move = moves[id] else { return }
            let before = move.course.state
            let actions = move.course.handle(events.removeFirst())
            moves[id] = move
            for action in actions {
                if let next = carryOut(action, id, in: host) { events.append(next) }
            }
            if move.course.state != before { entered(move, in: host) }
        }
    }

    /// One action of a move's course: the event its outcome is, if it has one.
    private func carryOut(_ action: MoveLifecycle.Action, _ id: MoveID, in host: some MoveHost) -> MoveLifecycle.Event?
    {
        guard var move = moves[id] else { return nil }
        switch action {
        case .recordAndImport:
            guard let tab = move.exported, let incognito = move.incognito else {
                preconditionFailure("a move is recorded once its tab is exported")
            }
            do {
                _ = try book.record(
                    MoveEntry(
                        move: id, source: move.source, tab: move.tab, destination: move.destination,
                        incognito: incognito))
            } catch {
                move.undoReply = .failure(
                    .ioError, "cannot record the move in \(DiskLayout.moves) (\(error)); nothing moved")
                moves[id] = move
                return .refused
            }
            move.recorded = true
            move.exported = nil
            moves[id] = move
            let sent = host.openWindow(move.destination)?.sendMoveStep(.import(id, tab, index: move.index), in: host)
            return sent == true ? nil : .died(.destination)
        case .askHeld:
            return host.openWindow(move.destination)?.sendMoveStep(.held(id), in: host) == true
                ? nil : .died(.destination)
        case .drop:
            return host.openWindow(move.source)?.sendMoveStep(.drop(tab: move.tab, id), in: host) == true
                ? nil : .died(.source)
        case .finish:
            finish(move, in: host)
        case .undo:
            undo(move, in: host)
        }
        return nil
    }

    private func finish(_ move: Move, in host: some MoveHost) {
        assert(move.course.state == .settled && move.recorded, "a move finishes once settled, from the log")
        guard let made = move.madeTab, let madeSeq = move.madeSeq, let droppedSeq = move.droppedSeq else {
            preconditionFailure("a settled move knows the tab its destination made and both sides' seqs")
        }
        book.clear(move.id)
        moves[move.id] = nil
        let elapsed = monotonicNanoseconds() &- move.startedAt
        host.configuration.observation?.moveSettled(nanoseconds: elapsed)
        host.logger.info(
            "move settled",
            metadata: [
                "move": "\(move.id)", "to": "\(move.destination)", "tab": "\(made)", "ms": "\(elapsed / 1_000_000)",
            ])
        guard let client = move.client else { return }
        host.answer(
            client,
            .ok(
                MoveReply(
                    window: move.destination.uuidString, tab: made, seq: madeSeq, from: move.source.uuidString,
                    fromTab: move.tab, fromSeq: droppedSeq, move: "\(move.id)")))
    }

    private func undo(_ move: Move, in host: some MoveHost) {
        assert(move.course.state == .undone, "a move is undone once its course says so")
        if move.recorded { book.clear(move.id) }
        moves[move.id] = nil
        host.configuration.observation?.moveUndone()
        host.logger.notice(
            "move undone: the tab stays in its window",
            metadata: ["move": "\(move.id)", "from": "\(move.source)", "tab": "\(move.tab)"])
        if let client = move.client { host.answer(client, move.undoReply) }
    }

    // MARK: kills aimed at a stage

    /// `move` entered its state, its action carried out: the kills aimed at that stage of
    /// either of its windows are sent now.
    private func entered(_ move: Move, in host: some MoveHost) {
        guard let stage = move.course.state.stage else { return }
        for aimed in aimedKills.take(aimedAt: stage, of: [move.source, move.destination]) {
            send(aimed, at: stage, in: host)
        }
    }

    /// Kills whose time is up, sent with the stage their window is in now; those of a window
    /// gone or with no worker (restarting, stopping) answered as a kill with no worker to signal is.
    private func sendDueAimedKills(in host: some MoveHost) {
        guard !aimedKills.held.isEmpty else { return }
        let due = aimedKills.takeDue(now: monotonicNanoseconds()) { host.openWindow($0)?.isLive == true }
        for aimed in due { send(aimed, at: move(involving: aimed.window)?.course.state.stage, in: host) }
    }

    private func send(_ aimed: MoveAimedKills.Held, at stage: MoveStage?, in host: some MoveHost) {
        guard let window = host.openWindow(aimed.window) else {
            return host.answer(aimed.client, WindowController.noWorker(aimed.window))
        }
        window.kill(aimed.request, aimed.client, moveStage: stage, in: host)
    }

    // MARK: what status shows

    /// The moves under way as `status` shows them, oldest first.
    func status(now: UInt64) -> [MoveStatus] {
        moves.values.sorted { $0.startedAt < $1.startedAt }.map { move in
            MoveStatus(
                move: "\(move.id)", from: move.source.uuidString, tab: move.tab, to: move.destination.uuidString,
                newTab: move.madeTab, state: move.course.state.name, committed: move.course.state.isCommitted,
                ms: Double(now &- move.startedAt) / 1e6)
        }
    }

    /// What is wrong with an exported tab, as input from an untrusted worker: nil when it is
    /// the tab asked for and reads as a stored history does.
    static func violation(of tab: MovedTab, asked: Int64) -> String? {
        guard tab.tab == asked else { return "tab \(tab.tab) in answer for tab \(asked)" }
        guard tab.creationTimeUs >= 0, tab.lastActiveTimeUs >= 0 else { return "a time before the epoch" }
        guard tab.navigation.count <= Limits.maxMovedTabBytes else {
            return "a history of \(tab.navigation.count) bytes, past Limits.maxMovedTabBytes"
        }
        do {
            _ = try MovedHistory(checking: Array(tab.navigation), tab: asked)
        } catch {
            return "a history that does not read: \(error)"
        }
        return nil
    }
}

extension MoveStep {
    /// The step's name in messages.
    var name: String {
        switch self {
        case .export: "export"
        case .import: "import"
        case .drop: "drop"
        case .held: "question"
        }
    }
}

extension TabCommand {
    /// The existing tab the command acts on, if it names one.
    var namedTab: Int64? {
        switch self {
        case .navigate(let tab, _), .close(let tab), .activate(let tab), .move(let tab, _), .replace(let tab, _),
            .setPinned(let tab, _), .go(let tab, _):
            tab
        case .open, .closeAll: nil
        }
    }
}
