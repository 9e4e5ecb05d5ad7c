/// One move's course between its two windows, as a table the coordinator only dispatches
/// (`MoveCoordinator`): the supervisor is the coordinator of a two-phase commit whose commit
/// point is the destination's durable import (docs/recovery.md, "Moving a tab between windows").
///
/// | state                 | event                      | next                  | action          |
/// |-----------------------|----------------------------|-----------------------|-----------------|
/// | exporting             | exported                   | importing             | recordAndImport |
/// | exporting             | refused, died(either)      | undone                | undo            |
/// | importing             | applied(s)                 | committing(s)         |                 |
/// | importing             | refused                    | undone                | undo            |
/// | importing             | uncertain                  | asking                | askHeld         |
/// | importing, committing | died(destination)          | awaitingDestination   |                 |
/// | committing(s)         | durable(destination, ≥ s)  | dropping              | drop            |
/// | awaitingDestination   | ready(destination)         | asking                | askHeld         |
/// | asking                | held(s)                    | committing(s)         |                 |
/// | asking                | notHeld                    | undone                | undo            |
/// | asking                | died(destination)          | awaitingDestination   |                 |
/// | dropping              | applied(s)                 | settling(s)           |                 |
/// | dropping, settling    | died(source)               | awaitingSource        |                 |
/// | awaitingSource        | ready(source)              | dropping              | drop            |
/// | settling(s)           | durable(source, ≥ s)       | settled               | finish          |
///
/// Any other pair changes nothing. Before `recordAndImport` nothing of the move is on disk;
/// from it until `finish` or `undo` its lane in `ROOT/moves` names it, so a supervisor started
/// after a crash takes it up at `awaitingDestination`.
struct MoveLifecycle: Equatable {
    enum Side: Equatable, Sendable { case source, destination }

    enum State: Equatable, Sendable {
        /// The source was asked for the tab.
        case exporting
        /// The move is in the log; the destination was asked to make the tab.
        case importing
        /// The destination made the tab at seq `seq`: the commit, once that seq is durable.
        case committing(seq: UInt64)
        /// Committed: the source was asked to drop the tab.
        case dropping
        /// The source dropped the tab at `seq`: settled once that seq is durable.
        case settling(seq: UInt64)
        /// Cut short before the commit was known: the destination is asked once it is ready.
        case awaitingDestination
        /// The destination was asked whether it holds the move.
        case asking
        /// Committed, and the source's drop must be sent again once it is ready.
        case awaitingSource
        case settled
        case undone

        /// Its name in `status` (`MoveStatus.state`).
        var name: String {
            switch self {
            case .exporting: "exporting"
            case .importing: "importing"
            case .committing: "committing"
            case .dropping: "dropping"
            case .settling: "settling"
            case .awaitingDestination: "awaiting_destination"
            case .asking: "asking"
            case .awaitingSource: "awaiting_source"
            case .settled: "settled"
            case .undone: "undone"
            }
        }

        /// Whether the move is over, its lane free.
        var isOver: Bool { self == .settled || self == .undone }
        /// Whether the destination holds the tab for good whatever happens next.
        var isCommitted: Bool {
            switch self {
            case .dropping, .settling, .awaitingSource, .settled: true
            default: false
            }
        }
    }

    enum Event: Equatable, Sendable {
        /// The source's tab came back and passed the supervisor's checks.
        case exported
        /// A step was refused as bad data (an unknown tab, an index out of range).
        case refused
        /// The destination's import or the source's drop applied, at `seq`.
        case applied(seq: UInt64)
        /// The import's save failed: whether the destination holds the move is asked.
        case uncertain
        case held(seq: UInt64)
        case notHeld
        /// A side's durable seq as its slot now shows it.
        case durable(Side, seq: UInt64)
        /// A side's worker died, or a step could not be sent to it.
        case died(Side)
        case ready(Side)
    }

    enum Action: Equatable, Sendable {
        case recordAndImport
        case askHeld
        case drop
        /// The lane freed, the client told where the tab is.
        case finish
        /// The lane freed (if written), the client told why the tab stayed.
        case undo
    }

    private(set) var state: State

    init(resumed: Bool = false) { state = resumed ? .awaitingDestination : .exporting }

    /// Moves the course by `event`: what to carry out, in order.
    mutating func handle(_ event: Event) -> [Action] {
        let before = state
        let (next, actions) = Self.transition(from: state, on: event)
        state = next
        assert(!before.isCommitted || next.isCommitted, "a committed move is never undone")
        assert(!before.isOver || next == before, "a move over stays over")
        assert(actions.isEmpty || next != before, "an action comes with a step of the course")
        return actions
    }

    private static func transition(from state: State, on event: Event) -> (State, [Action]) {
        switch (state, event) {
        case (.exporting, .exported): (.importing, [.recordAndImport])
        case (.exporting, .refused), (.exporting, .died): (.undone, [.undo])
        case (.importing, .applied(let seq)): (.committing(seq: seq), [])
        case (.importing, .refused): (.undone, [.undo])
        case (.importing, .uncertain): (.asking, [.askHeld])
        case (.importing, .died(.destination)), (.committing, .died(.destination)), (.asking, .died(.destination)):
            (.awaitingDestination, [])
        case (.committing(let seq), .durable(.destination, let durable)) where durable >= seq: (.dropping, [.drop])
        case (.awaitingDestination, .ready(.destination)): (.asking, [.askHeld])
        case (.asking, .held(let seq)): (.committing(seq: seq), [])
        case (.asking, .notHeld): (.undone, [.undo])
        case (.dropping, .applied(let seq)): (.settling(seq: seq), [])
        case (.dropping, .died(.source)), (.settling, .died(.source)): (.awaitingSource, [])
        case (.awaitingSource, .ready(.source)): (.dropping, [.drop])
        case (.settling(let seq), .durable(.source, let durable)) where durable >= seq: (.settled, [.finish])
        default: (state, [])
        }
    }
}
