import Foundation
import Histogram
import HostControl
import HostCoordination
import HostLimits

/// A window's line of `status` and of `stats`: what its controller knows, with what its slot
/// shows now when that checks (`WindowSlot.checkedStats`), else the stats it last accepted.
extension WindowController {
    func status(_ view: WindowSlot, now: UInt64) -> WindowStatus {
        let stats = view.checkedStats ?? lastStats
        let heartbeat = view.heartbeat
        return WindowStatus(
            uuid: id.uuidString, state: state.description, slot: slot, pid: isLive ? pid : 0,
            generation: generation,
            tabs: exactInJSON(stats.regularTabs.addingReportingOverflow(stats.incognitoTabs).partialValue),
            regularTabs: exactInJSON(stats.regularTabs), incognitoTabs: exactInJSON(stats.incognitoTabs),
            appliedSeq: stats.appliedSeq, durableSeq: stats.durableSeq,
            digest: String(format: "%016llx", stats.digest),
            saves: exactInJSON(view.savesCompleted), saveFailures: exactInJSON(view.saveFailures),
            compactionFailures: exactInJSON(view.compactionFailures), failing: FailingSaves(stats),
            restarts: history.restarts,
            savingSeq: exactInJSON(view.savingSeq),
            heartbeatAgeMs: heartbeat > 0 && isLive ? Double(now > heartbeat ? now - heartbeat : 0) / 1e6 : nil,
            lastRecoveryMs: lastRecoveryNanoseconds.map { Double($0) / 1e6 },
            lostSeqs: seqs.lost.ranges.map(SeqRange.init),
            incognitoStorage: IncognitoStorage(rawValue: stats.incognitoStorage) == .memoryOnly
                ? "memory_only" : "sealed")
    }

    /// Its save counters and latency since it was reserved (`saves`, read once from its slot
    /// for this line and the reply's total alike), and whether its journal writes are direct.
    func stats(_ view: WindowSlot, saves: SlotSaves, now: UInt64) -> StatsReply.WindowStats {
        let stats = view.checkedStats ?? lastStats
        let writes = JournalWrites(rawValue: stats.journalWrites) ?? .unknown
        return StatsReply.WindowStats(
            uuid: id.uuidString,
            saves: StatsReply.SaveSummary(
                saves.latency, saves: saves.completed, failures: (saves.failures, saves.compactionFailures),
                seconds: Double(now - reservedAt) / 1e9),
            failing: FailingSaves(stats), directIo: writes == .unknown ? nil : writes == .direct)
    }

    /// Its adoption ended: what the entry became.
    func adoptReply(_ adoption: Adoption) -> AdoptReply {
        AdoptReply(
            entry: adoption.entry, window: id.uuidString, pid: pid, asNewWindow: adoption.asNewWindow,
            regularTabs: exactInJSON(lastStats.regularTabs), incognitoTabs: exactInJSON(lastStats.incognitoTabs),
            durableSeq: lastStats.durableSeq)
    }
}

extension StatsReply.SaveSummary {
    /// Counters a worker wrote in shared memory are shown as exact JSON numbers, never trapped on.
    init(
        _ histogram: Histogram<UInt64>, saves: UInt64, failures: (saves: UInt64, compactions: UInt64),
        seconds: Double
    ) {
        self.init(
            saves: exactInJSON(saves), savesPerS: seconds > 0 ? Double(saves) / seconds : 0,
            p50Us: histogram.valueAtPercentile(50), p90Us: histogram.valueAtPercentile(90),
            p99Us: histogram.valueAtPercentile(99), p999Us: histogram.valueAtPercentile(99.9),
            maxUs: histogram.totalCount > 0 ? histogram.maxRecorded : 0,
            saveFailures: exactInJSON(failures.saves), compactionFailures: exactInJSON(failures.compactions))
    }
}

/// A slot's save figures read once: a `stats` reply's window line and its total show the same
/// reading, though the worker keeps saving meanwhile.
struct SlotSaves {
    let latency: Histogram<UInt64>
    let completed: UInt64
    let failures: UInt64
    let compactionFailures: UInt64

    init(_ view: WindowSlot) {
        (latency, completed) = (view.latency.histogram(), view.savesCompleted)
        (failures, compactionFailures) = (view.saveFailures, view.compactionFailures)
    }
}
