import Foundation
import HostControl
import HostCoordination
import Synchronization

/// One point of the dashboard's latency chart: the saves every window made durable in one
/// interval, and their latency.
public struct LivePoint: Codable, Sendable, Equatable {
    /// Seconds since the supervisor started (the events' axis).
    public let seconds: Double
    public let saves: UInt64
    /// Nil when no save was made in the interval.
    public let p50Milliseconds: Double?
    public let p99Milliseconds: Double?
    public let maxMilliseconds: Double?

    enum CodingKeys: String, CodingKey {
        case seconds, saves
        case p50Milliseconds = "p50_ms"
        case p99Milliseconds = "p99_ms"
        case maxMilliseconds = "max_ms"
    }
}

/// One window's save latency since it opened, for its card.
public struct WindowLatency: Codable, Sendable, Equatable {
    public let p50Milliseconds: Double
    public let p99Milliseconds: Double

    enum CodingKeys: String, CodingKey {
        case p50Milliseconds = "p50_ms"
        case p99Milliseconds = "p99_ms"
    }
}

/// What `/api/live` sends each interval.
public struct LiveTick: Codable, Sendable {
    public let point: LivePoint
    public let status: StatusReply?
    public let latency: [String: WindowLatency]
}

/// The dashboard's feed: every `interval`, one `LivePoint` from the rise of every window's
/// latency buckets in shared memory, kept for the last `historyCapacity` intervals so a page
/// opened late draws the recent past. One feed for every open page: each interval's shared
/// memory is read once, however many pages watch.
public final class LiveFeed: Sendable {
    private let observation: HostObservation
    private let state = Mutex(State())

    /// Ten minutes at one point a second.
    public static let historyCapacity = 600

    struct State {
        var seen: [String: LatencyCounts] = [:]
        var points: [LivePoint] = []
        var last: LiveTick?
    }

    public init(observation: HostObservation) {
        self.observation = observation
    }

    /// Reads shared memory and the published status once: the interval's point, kept.
    @discardableResult
    public func advance() -> LiveTick {
        let status = observation.status()
        let region = observation.region
        var interval = LatencyCounts(perBucket: [])
        var latency: [String: WindowLatency] = [:]
        let tick = state.withLock { state in
            var seen: [String: LatencyCounts] = [:]
            for window in status?.windows ?? [] {
                guard let counts = region?.slot(holding: window)?.latency.counts() else { continue }
                interval = interval.adding(counts.since(state.seen[window.uuid]))
                seen[window.uuid] = counts
                let whole = counts.histogram()
                if whole.totalCount > 0 {
                    latency[window.uuid] = WindowLatency(
                        p50Milliseconds: Double(whole.valueAtPercentile(50)) / 1000,
                        p99Milliseconds: Double(whole.valueAtPercentile(99)) / 1000)
                }
            }
            // Windows gone are forgotten: the map holds the open ones only.
            state.seen = seen
            let histogram = interval.histogram()
            let saves = histogram.totalCount
            func milliseconds(_ percentile: Double) -> Double? {
                saves > 0 ? Double(histogram.valueAtPercentile(percentile)) / 1000 : nil
            }
            let point = LivePoint(
                seconds: observation.secondsSinceStart(), saves: saves, p50Milliseconds: milliseconds(50),
                p99Milliseconds: milliseconds(99),
                maxMilliseconds: saves > 0 ? Double(histogram.maxRecorded) / 1000 : nil)
            state.points.append(point)
            if state.points.count > Self.historyCapacity {
                state.points.removeFirst(state.points.count - Self.historyCapacity)
            }
            let tick = LiveTick(point: point, status: status, latency: latency)
            state.last = tick
            return tick
        }
        return tick
    }

    /// The last tick, and the points kept.
    public func current() -> (tick: LiveTick?, points: [LivePoint]) {
        state.withLock { ($0.last, $0.points) }
    }
}

extension LatencyCounts {
    /// Both counts, bucket by bucket (the empty count adds nothing).
    func adding(_ other: LatencyCounts) -> LatencyCounts {
        guard !perBucket.isEmpty else { return other }
        guard other.perBucket.count == perBucket.count else { return self }
        return LatencyCounts(perBucket: zip(perBucket, other.perBucket).map { $0 &+ $1 })
    }
}
