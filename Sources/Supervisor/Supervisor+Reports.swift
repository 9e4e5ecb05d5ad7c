import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import Histogram
import HostControl
import HostCoordination
import HostLimits
import IOUring
import Logging
import Platform
import SessionFormat
import SessionStore
import SystemPackage

/// What `status`, `stats` and `dump` answer.
extension Supervisor {
    func statusReply() -> StatusReply {
        let now = monotonicNanoseconds()
        let list: [WindowStatus] = windows.keys.sorted().compactMap { slot in
            guard let window = windows[slot] else { return nil }
            let view = region.slot(slot)
            let stats = checkedStats(view) ?? window.lastStats
            let heartbeat = view.heartbeat
            return WindowStatus(
                uuid: window.id.uuidString, state: window.state.description, slot: slot,
                pid: window.isLive ? window.pid : 0,
                generation: window.generation,
                tabs: exactInJSON(stats.regularTabs.addingReportingOverflow(stats.incognitoTabs).partialValue),
                regularTabs: exactInJSON(stats.regularTabs), incognitoTabs: exactInJSON(stats.incognitoTabs),
                appliedSeq: stats.appliedSeq, durableSeq: stats.durableSeq,
                digest: String(format: "%016llx", stats.digest),
                saves: exactInJSON(view.savesCompleted), saveFailures: exactInJSON(view.saveFailures),
                compactionFailures: exactInJSON(view.compactionFailures), failing: failing(stats),
                restarts: window.history.restarts,
                savingSeq: exactInJSON(view.savingSeq),
                heartbeatAgeMs: heartbeat > 0 && window.isLive
                    ? Double(now > heartbeat ? now - heartbeat : 0) / 1e6 : nil,
                lastRecoveryMs: window.lastRecoveryNanoseconds.map { Double($0) / 1e6 },
                lostSeqs: window.seqs.lost.ranges.map(SeqRange.init),
                incognitoStorage: IncognitoStorage(rawValue: stats.incognitoStorage) == .memoryOnly
                    ? "memory_only" : "sealed")
        }
        return StatusReply(
            supervisorPid: getpid(), root: configuration.root.string, socket: configuration.socketPath.string,
            windows: list,
            setAside: setAsideList(), order: registry.order.map(\.uuidString), closedWindows: registry.closed.count,
            keepClosed: configuration.keepClosed ?? configuration.capacity, closedWindowsEvicted: closedWindowsEvicted)
    }

    func statsReply(withHistogram: Bool) -> StatsReply {
        let now = monotonicNanoseconds()
        var total = Histogram<UInt64>(
            highestTrackableValue: LatencyBuckets.highestMicroseconds, numberOfSignificantValueDigits: .three)
        var totalSaves: UInt64 = 0
        var totalFailures: (saves: UInt64, compactions: UInt64) = (0, 0)
        func summary(
            _ histogram: Histogram<UInt64>, saves: UInt64, failures: (saves: UInt64, compactions: UInt64),
            seconds: Double
        )
            -> StatsReply.SaveSummary
        {
            StatsReply.SaveSummary(
                saves: exactInJSON(saves), savesPerS: seconds > 0 ? Double(saves) / seconds : 0,
                p50Us: histogram.valueAtPercentile(50), p90Us: histogram.valueAtPercentile(90),
                p99Us: histogram.valueAtPercentile(99), p999Us: histogram.valueAtPercentile(99.9),
                maxUs: histogram.totalCount > 0 ? histogram.maxRecorded : 0,
                saveFailures: exactInJSON(failures.saves), compactionFailures: exactInJSON(failures.compactions))
        }
        let list: [StatsReply.WindowStats] = windows.keys.sorted().compactMap { slot in
            guard let window = windows[slot] else { return nil }
            let view = region.slot(slot)
            let histogram = view.latency.histogram()
            total.add(histogram)
            // Counters a worker writes in shared memory: summed without trapping.
            let saves = view.savesCompleted
            totalSaves &+= saves
            let failures = (saves: view.saveFailures, compactions: view.compactionFailures)
            totalFailures.saves &+= failures.saves
            totalFailures.compactions &+= failures.compactions
            let stats = checkedStats(view) ?? window.lastStats
            let writes = JournalWrites(rawValue: stats.journalWrites) ?? .unknown
            return StatsReply.WindowStats(
                uuid: window.id.uuidString,
                saves: summary(
                    histogram, saves: saves, failures: failures, seconds: Double(now - window.reservedAt) / 1e9),
                failing: failing(stats), directIo: writes == .unknown ? nil : writes == .direct)
        }
        let uptime = Double(now - startedAt) / 1e9
        let histogram = withHistogram ? (try? JSONEncoder().encode(total))?.base64EncodedString() : nil
        return StatsReply(
            windows: list,
            total: StatsReply.TotalStats(
                saves: summary(total, saves: totalSaves, failures: totalFailures, seconds: uptime), histogram: histogram
            ),
            uptimeS: uptime)
    }

    /// While a window's saves fail: the error and the Browsers failing; nil otherwise.
    func failing(_ stats: WorkerStats) -> FailingSaves? {
        guard stats.failingErrno != 0 else { return nil }
        let browsers = BrowserKind.having(commitBits: stats.failingBrowsers).map(\.rawValue)
        return FailingSaves(error: Self.describeErrno(stats.failingErrno), browsers: browsers)
    }

    /// An errno a worker published in shared memory, named; a number no errno has is shown as
    /// the worker wrote it, never clamped into a different one.
    static func describeErrno(_ raw: UInt64) -> String {
        guard let code = Int32(exactly: raw) else { return "errno \(raw) (not an errno)" }
        return "\(Errno(rawValue: code))"
    }

    static func dumpReply(_ dump: WindowDump, window: UUID) -> DumpReply {
        func browser(_ browser: BrowserDump) -> DumpReply.BrowserContents {
            DumpReply.BrowserContents(
                activeIndex: browser.hasActiveIndex ? browser.activeIndex : nil,
                tabs: browser.tabs.map { tab in
                    DumpReply.Tab(
                        id: tab.id, url: tab.url, title: tab.title, realized: tab.realized, pinned: tab.pinned,
                        opener: tab.hasOpener ? tab.opener : nil,
                        historyIndex: tab.hasHistoryIndex ? tab.historyIndex : nil,
                        historyCount: tab.historyCount, lastActiveTimeUs: tab.lastActiveTimeUs)
                })
        }
        return DumpReply(
            window: window.uuidString, appliedSeq: dump.appliedSeq, durableSeq: dump.durableSeq,
            digest: String(format: "%016llx", dump.digest), regular: browser(dump.regular),
            incognito: browser(dump.incognito))
    }
}
