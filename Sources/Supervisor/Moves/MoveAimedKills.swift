import Foundation
import HostControl
import Platform

/// `ctl kill --aim-move STAGE`s held until a move their window takes part in (either side)
/// enters STAGE. The coordinator sends each at that transition, inside its dispatch, right
/// after the transition's action (`MoveCoordinator.entered`): a stage shorter than a turn of
/// the loop (committing) is hit as surely as a long one. Past its time a kill is
/// sent anyway (`WindowController.aimMoveNanoseconds`), saying the stage its window was then in.
struct MoveAimedKills {
    struct Held {
        let window: UUID
        let stage: MoveStage
        let request: WindowController.KillRequest
        let client: ControlServer.ClientID
        let deadline: UInt64
    }

    private(set) var held: [Held] = []

    /// When the loop must next look at the held kills: the earliest deadline.
    var nextDeadline: UInt64? { held.map(\.deadline).min() }

    mutating func hold(_ request: WindowController.KillRequest, of window: UUID, for client: ControlServer.ClientID) {
        guard case .move(let stage) = request.aim else {
            preconditionFailure("only a kill aimed at a move's stage is held by the moves")
        }
        held.append(
            Held(
                window: window, stage: stage, request: request, client: client,
                deadline: monotonicNanoseconds() + WindowController.aimMoveNanoseconds))
    }

    /// The kills aimed at `stage` of any of `windows`, in the order they came.
    mutating func take(aimedAt stage: MoveStage, of windows: [UUID]) -> [Held] {
        take { $0.stage == stage && windows.contains($0.window) }
    }

    /// The kills whose time is up at `now`, or whose window has no worker to signal now.
    mutating func takeDue(now: UInt64, hasWorker: (UUID) -> Bool) -> [Held] {
        take { $0.deadline <= now || !hasWorker($0.window) }
    }

    private mutating func take(where matches: (Held) -> Bool) -> [Held] {
        let taken = held.filter(matches)
        held.removeAll(where: matches)
        assert(!held.contains(where: matches), "a kill taken is held no more")
        return taken
    }
}

extension MoveLifecycle.State {
    /// The stage a kill can be aimed at that this state is, if it is one.
    var stage: MoveStage? {
        switch self {
        case .exporting: .exporting
        case .importing: .importing
        case .committing: .committing
        case .dropping: .dropping
        case .settling: .settling
        case .awaitingDestination, .asking, .awaitingSource, .settled, .undone: nil
        }
    }
}
