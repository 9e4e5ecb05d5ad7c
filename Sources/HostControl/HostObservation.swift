import CoreMetrics
import Foundation
import HostCoordination
import IOUring
import Platform
import Synchronization

/// Why a worker was started again: the `reason` label of `windowhost_worker_restarts_total`.
public enum RestartReason: String, Sendable, CaseIterable, Codable {
    /// It died by itself (a signal, an exit), or was killed for breaking the protocol.
    case crash
    /// The supervisor killed it for want of a heartbeat, or of a restore in time.
    case watchdog
    /// Killed on purpose: `ctl kill`, or the supervisor replacing it (a floor probe).
    case kill
}

/// Something the dashboard marks as it happens: a worker's death (by its restart's reason) or
/// a window's recovery.
public struct HostEvent: Sendable, Codable, Equatable {
    public enum Kind: String, Sendable, Codable {
        case crash, watchdog, kill
        case recovered
    }

    /// Counts from 1, one per event: a reader asks for the events after the last it saw.
    public let id: UInt64
    /// Seconds since the supervisor started.
    public let seconds: Double
    public let window: String
    public let kind: Kind
    /// For `recovered`: from the death to the new worker's readiness.
    public let recoveryMilliseconds: Double?

    package init(id: UInt64, seconds: Double, window: String, kind: Kind, recoveryMilliseconds: Double?) {
        self.id = id
        self.seconds = seconds
        self.window = window
        self.kind = kind
        self.recoveryMilliseconds = recoveryMilliseconds
    }

    enum CodingKeys: String, CodingKey {
        case id, seconds, window, kind
        case recoveryMilliseconds = "recovery_ms"
    }
}

/// What the supervisor's loop publishes for readers on other threads (`run --http`): the last
/// `status` it built, the recent events, and the metrics it counts itself (commands, restarts,
/// recovery times) through swift-metrics, into whatever factory it was given. Readers never
/// call into the loop: what they read is a copy taken under a lock the loop holds only to
/// replace it, so a slow reader delays no command.
///
/// Save counts and latencies are not here: readers take them from the shared region
/// (`region`), where workers publish them.
public final class HostObservation: Sendable {
    /// The region the supervisor created, held here so a reader's mapping outlives the loop.
    public var region: SharedRegion? { state.withLock { $0.region } }

    private let state = Mutex(State())
    private let commands: [Verb: CoreMetrics.Counter]
    private let restarts: [RestartReason: CoreMetrics.Counter]
    private let recoveries: CoreMetrics.Timer
    private let movesSettled: CoreMetrics.Counter
    private let movesUndone: CoreMetrics.Counter
    private let moveDurations: CoreMetrics.Timer

    /// The events a reader can still get; older ones are dropped.
    public static let eventCapacity = 512

    struct State {
        var region: SharedRegion?
        /// The supervisor's start (monotonic nanoseconds): the events' and charts' zero.
        var startedAt: UInt64 = 0
        var status: StatusReply?
        var events: [HostEvent] = []
        var nextEventID: UInt64 = 1
    }

    /// The metrics are made once, from `factory`, under the names `docs/observability.md` lists.
    public init(factory: any MetricsFactory) {
        commands = Dictionary(
            uniqueKeysWithValues: Verb.allCases.map { verb in
                (
                    verb,
                    CoreMetrics.Counter(
                        label: Self.commandsMetric, dimensions: [("verb", verb.rawValue)], factory: factory)
                )
            })
        restarts = Dictionary(
            uniqueKeysWithValues: RestartReason.allCases.map { reason in
                (
                    reason,
                    CoreMetrics.Counter(
                        label: Self.restartsMetric, dimensions: [("reason", reason.rawValue)], factory: factory)
                )
            })
        recoveries = CoreMetrics.Timer(label: Self.recoveryMetric, dimensions: [], factory: factory)
        movesSettled = CoreMetrics.Counter(
            label: Self.movesMetric, dimensions: [("outcome", "settled")], factory: factory)
        movesUndone = CoreMetrics.Counter(
            label: Self.movesMetric, dimensions: [("outcome", "undone")], factory: factory)
        moveDurations = CoreMetrics.Timer(label: Self.moveDurationMetric, dimensions: [], factory: factory)
    }

    public static let commandsMetric = "windowhost_commands_total"
    public static let restartsMetric = "windowhost_worker_restarts_total"
    public static let recoveryMetric = "windowhost_recovery_duration_seconds"
    public static let movesMetric = "windowhost_moves_total"
    public static let moveDurationMetric = "windowhost_move_duration_seconds"

    /// Seconds since the supervisor started, on the events' axis.
    public func secondsSinceStart() -> Double {
        let startedAt = state.withLock { $0.startedAt }
        return Double(monotonicNanoseconds() &- startedAt) / 1e9
    }

    /// The last status the loop published; nil before its first.
    public func status() -> StatusReply? { state.withLock { $0.status } }

    /// The events after `id`, oldest first (as many as are still held), and the newest id.
    public func events(after id: UInt64) -> (events: [HostEvent], last: UInt64) {
        state.withLock { state in
            (state.events.filter { $0.id > id }, state.nextEventID - 1)
        }
    }

    // MARK: the loop's side

    package func attach(_ region: SharedRegion, startedAt: UInt64) {
        state.withLock { state in
            state.region = region
            state.startedAt = startedAt
        }
    }

    package func publish(_ status: StatusReply) { state.withLock { $0.status = status } }

    package func counted(_ verb: Verb) { commands[verb]?.increment() }

    /// A worker died and another is coming: counted, and marked.
    package func restarting(_ window: UUID, _ reason: RestartReason, at seconds: Double) {
        restarts[reason]?.increment()
        let kind: HostEvent.Kind =
            switch reason {
            case .crash: .crash
            case .watchdog: .watchdog
            case .kill: .kill
            }
        append(window, kind, at: seconds, recovery: nil)
    }

    package func recovered(_ window: UUID, nanoseconds: UInt64, at seconds: Double) {
        recoveries.recordNanoseconds(Int64(clamping: nanoseconds))
        append(window, .recovered, at: seconds, recovery: Double(nanoseconds) / 1e6)
    }

    /// A move between windows settled, `nanoseconds` from its request to durable on both sides.
    package func moveSettled(nanoseconds: UInt64) {
        movesSettled.increment()
        moveDurations.recordNanoseconds(Int64(clamping: nanoseconds))
    }

    package func moveUndone() { movesUndone.increment() }

    private func append(_ window: UUID, _ kind: HostEvent.Kind, at seconds: Double, recovery: Double?) {
        state.withLock { state in
            state.events.append(
                HostEvent(
                    id: state.nextEventID, seconds: seconds, window: window.uuidString, kind: kind,
                    recoveryMilliseconds: recovery))
            state.nextEventID += 1
            if state.events.count > Self.eventCapacity {
                state.events.removeFirst(state.events.count - Self.eventCapacity)
            }
        }
    }
}
