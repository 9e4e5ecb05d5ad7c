import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import Histogram
import HostCoordination
import HostLimits
import IOUring
import Logging
import Platform
import SessionStore
import SystemPackage

/// The root's files the supervisor keeps: `windows.order` and `handed-out`, written with
/// retries when the disk refuses.
extension Supervisor {
    /// Writes `windows.order`. A failed write (a full disk) is retried by `runTimers` with
    /// backoff until one lands, with no order change needed; the episode is logged once, at
    /// its start and its end.
    func saveOrder() {
        assert(Set(registry.order).count == registry.order.count, "a window is named once in the order")
        do {
            try files.saveOrder(registry.order)
            if let retry = orderRetry {
                logger.notice("windows.order written again", metadata: ["failed_attempts": "\(retry.failures)"])
                orderRetry = nil
            }
        } catch {
            if orderRetry == nil {
                logger.error("cannot write windows.order; retried with backoff until it lands: \(error)")
            }
            orderRetry = Self.retry(after: orderRetry)
        }
    }

    /// Writes `window`'s entry of `handed-out`, durably, when it changed: its ceilings raised to
    /// cover `needed` (by `HandedOutCeiling.block` past it, so one write serves thousands of
    /// commands), its lost seqs. Why it could not be, or nil.
    func recordHandedOut(_ window: Window, covering needed: HandedOutCeiling = .zero) -> String? {
        let id = window.id
        let current = handedOut[id] ?? .none
        let entry: HandedOutWindow
        do {
            entry = HandedOutWindow(ceiling: try current.ceiling.covering(needed), lost: window.seqs.lost)
        } catch {
            return "\(error)"
        }
        guard entry != current else { return nil }
        var record = handedOut
        record[id] = entry
        do {
            try writeHandedOut(record)
        } catch let error as Errno where error == .noSpace || error == .diskQuotaExceeded || error.isResourceShortage {
            // A full disk, or the supervisor short of descriptors or memory: the host keeps
            // serving while saves fail (they retry by themselves), so this serves too, and is
            // written again with backoff (`runTimers`) and at the next need; only a supervisor
            // killed before it lands may then hand out a seq again, or forget a lost one
            // (docs/recovery.md, Known limits).
            if handedOutRetry == nil {
                logger.error(
                    "cannot write \(DiskLayout.handedOut) (\(error)): serving on, written again with backoff until it lands",
                    metadata: ["window": "\(id)"])
            }
            handedOutRetry = Self.retry(after: handedOutRetry)
            return nil
        } catch {
            logger.error("cannot write \(DiskLayout.handedOut): \(error)", metadata: ["window": "\(id)"])
            return "\(error)"
        }
        if let retry = handedOutRetry {
            logger.notice("\(DiskLayout.handedOut) written again", metadata: ["failed_attempts": "\(retry.failures)"])
        }
        handedOutRetry = nil
        handedOut = record
        // No reply shows a seq or tab id above what is durably recorded.
        precondition(
            entry.ceiling.seq >= needed.seq && entry.ceiling.tab >= needed.tab, "the ceiling covers what was asked")
        return nil
    }

    /// Writes `handed-out` in place, or makes it anew (and holds it) when it is not open.
    func writeHandedOut(_ record: [UUID: HandedOutWindow]) throws {
        if let fd = handedOutFile {
            do {
                try SupervisorFiles.writeHandedOut(record, inPlace: fd)
                return
            } catch {
                // Made anew at the next attempt (an I/O error, a file too full of windows).
                try? fd.close()
                handedOutFile = nil
                throw error
            }
        }
        handedOutFile = try files.makeHandedOut(record)
    }

    /// Every window's entry written again, its ceilings over everything shown.
    func retryHandedOut() {
        for window in windows.values.sorted(by: { $0.slot < $1.slot }) {
            let failuresBefore = handedOutRetry?.failures ?? 0
            _ = recordHandedOut(window, covering: window.shownCeiling)
            // Failed again: the backoff is set.
            if let retry = handedOutRetry, retry.failures > failuresBefore { return }
        }
        handedOutRetry = nil
    }

    /// At a stop, when no reply can come any more: each open window's ceiling comes down to
    /// the highest seq and tab id anything showed (and its floor, which covers what a supervisor
    /// before showed), so the next start continues at the next seq rather than a block above.
    /// Not written, the raised ceilings stay: as safe, only with a gap.
    func lowerHandedOutToShown() {
        var record = handedOut
        for window in windows.values where record[window.id] != nil {
            record[window.id] = HandedOutWindow(ceiling: window.shownCeiling, lost: window.seqs.lost)
        }
        guard record != handedOut else { return }
        do {
            try writeHandedOut(record)
            handedOut = record
        } catch {
            logger.warning(
                "cannot lower the ceilings in \(DiskLayout.handedOut) at the stop; the next start numbers above them: \(error)"
            )
        }
    }

    /// The next attempt after one more failure of a root file's write, with the session stores'
    /// backoff (`SavePolicy`: 100 ms doubling to 3.2 s).
    static func retry(after previous: (at: UInt64, failures: Int)?) -> (at: UInt64, failures: Int) {
        let failures = (previous?.failures ?? 0) + 1
        assert(failures > 0, "one more failure")
        let delay = SavePolicy.retryDelayMilliseconds(afterFailures: failures) * 1_000_000
        return (at: monotonicNanoseconds() + delay, failures: failures)
    }
}
