import Foundation
import Histogram
import HostControl
import HostCoordination
import Platform

/// What `status` and `stats` answer: each window's line is its controller's
/// (`WindowController+Reports`); the host's own figures are added here.
extension Supervisor {
    func statusReply() -> StatusReply {
        let now = monotonicNanoseconds()
        let list = windows.keys.sorted().compactMap { slot in windows[slot]?.status(region.slot(slot), now: now) }
        var reply = StatusReply(
            supervisorPid: getpid(), root: configuration.root.string, socket: configuration.socketPath.string,
            windows: list,
            setAside: shelf.list(), order: registry.order.map(\.uuidString), closedWindows: registry.closed.count,
            keepClosed: configuration.keepClosed ?? configuration.capacity, closedWindowsEvicted: closedWindowsEvicted)
        reply.spare = spare?.lifecycle.shown ?? .off
        reply.moves = moves.status(now: now)
        return reply
    }

    func statsReply(withHistogram: Bool) -> StatsReply {
        let now = monotonicNanoseconds()
        var total = Histogram<UInt64>(
            highestTrackableValue: LatencyBuckets.highestMicroseconds, numberOfSignificantValueDigits: .three)
        var totalSaves: UInt64 = 0
        var totalFailures: (saves: UInt64, compactions: UInt64) = (0, 0)
        let list: [StatsReply.WindowStats] = windows.keys.sorted().compactMap { slot in
            guard let window = windows[slot] else { return nil }
            let view = region.slot(slot)
            let saves = SlotSaves(view)
            total.add(saves.latency)
            // Counters a worker writes in shared memory: summed without trapping.
            totalSaves &+= saves.completed
            totalFailures.saves &+= saves.failures
            totalFailures.compactions &+= saves.compactionFailures
            return window.stats(view, saves: saves, now: now)
        }
        let uptime = Double(now - startedAt) / 1e9
        let histogram = withHistogram ? (try? JSONEncoder().encode(total))?.base64EncodedString() : nil
        return StatsReply(
            windows: list,
            total: StatsReply.TotalStats(
                saves: StatsReply.SaveSummary(total, saves: totalSaves, failures: totalFailures, seconds: uptime),
                histogram: histogram),
            uptimeS: uptime)
    }
}
