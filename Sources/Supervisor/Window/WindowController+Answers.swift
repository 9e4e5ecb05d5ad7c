import BrowserModel
import Foundation
import HostControl
import HostCoordination
import HostLimits
import SessionStore

/// What one window answers of its seqs, from its own state alone: durable answers, the
/// refusals a failing storage or an exhausted seq makes, the lost seqs a restore names, and the
/// ceiling `handed-out` must cover.
extension WindowController {
    /// A durable answer: the seq, and the seqs below it lost with a worker, which it does not cover.
    func durableReply(durable: UInt64) -> DurableReply {
        let lost = seqs.lost.ranges.filter { $0.lowerBound <= durable }.map(SeqRange.init)
        return DurableReply(window: id.uuidString, durableSeq: durable, lostSeqs: lost.isEmpty ? nil : lost)
    }

    /// What a request waiting on a save (or on the window's restart) is answered while the
    /// window's restore fails on storage (`restoreFailedOnStorage`): 74 now, since a retry
    /// meets the same storage. Nil otherwise. The window is restarted after its backoff and
    /// saves once the storage answers.
    var failedRestoreReply: ControlReply? {
        restoreFailedOnStorage.map { storage in
            .failure(
                .ioError,
                "window \(id) cannot save: \(storage); durable through \(lastStats.durableSeq) of \(seqs.applied); it is restarted after a backoff"
            )
        }
    }

    /// The answer to a durable wait for `target`, now durable through `durable`: exit 71 when a
    /// command up to `target` has its effect only in an incognito Browser kept in memory only.
    func durableAnswer(durable: UInt64, target: UInt64) -> ControlReply {
        var reply = durableReply(durable: durable)
        guard let since = memoryOnlySince, since <= target else { return .ok(reply) }
        reply.memoryOnlySince = since
        let memoryOnly = ControlReply.ok(reply)
        guard memoryOnly.code == .ok else { return memoryOnly }
        return ControlReply(
            code: .memoryOnly,
            error:
                "window \(id): commands from \(since) changed incognito tabs kept in memory only (the kernel keyring is refused), "
                + "never durable: a kill loses them; the regular Browser is durable through \(durable)",
            result: memoryOnly.result)
    }

    /// Why a durable wait failed: what shared memory says of the window's failing saves.
    var saveFailureMessage: String {
        let error = WorkerStats.describeErrno(lastStats.failingErrno)
        let browsers = BrowserKind.having(commitBits: lastStats.failingBrowsers).map(\.rawValue)
        return "a save of window \(id) failed (\(browsers.joined(separator: " and ")) Browser): \(error); "
            + "durable through \(lastStats.durableSeq) of \(seqs.applied); the window retries by itself"
    }

    /// The highest seq and tab id anything showed of the window (its floor covers what a
    /// supervisor before showed).
    var shownCeiling: HandedOutCeiling { seqs.ceiling(published: lastStats.appliedSeq) }

    /// Its worker restored the window, up to the seq its stats say (below the seqs the last
    /// worker applied if it lost them: the floor keeps them from being handed out again).
    /// `contradicted`: a lost range holding that seq, not believed (see below); `lost`: the seqs
    /// above it a client may have seen, lost with the last worker.
    func restored() -> (contradicted: ClosedRange<UInt64>?, lost: ClosedRange<UInt64>?) {
        seqs.restored(lastStats.appliedSeq)
        assert(lastStats.durableSeq <= seqs.applied, "stats are accepted only with durable ≤ applied (`violation`)")
        // What a window restores is durable: a lost range holding it is no range this host
        // recorded (lost seqs lie above what was restored when they were lost, and everything
        // saved since is above them), but a crafted or mixed-up `handed-out`; believed, it made
        // acknowledged commands answer 75 (hostile round 5).
        var contradicted: ClosedRange<UInt64>?
        if seqs.applied > 0, let range = seqs.lost.range(holding: seqs.applied) {
            if adoption != nil {
                // A session adopted back under its UUID, which restarted empty after the set-aside
                // and so named every seq it had shown lost, in one range with the seqs lost
                // before: only the seq restored is durable for sure, and the others stay lost
                // (saying a durable seq is lost is safe; the reverse never is).
                seqs.forgetLost(seq: seqs.applied)
            } else {
                seqs.forgetLost(range)
            }
            contradicted = range
        }
        return (contradicted, seqs.loseAboveRestored())
    }

    static func lostMessage(_ lost: ClosedRange<UInt64>) -> String {
        "commands \(lost.lowerBound)…\(lost.upperBound) were lost with the worker that applied them (killed before they were durable); "
            + "`dump` shows what the window holds"
    }

    /// Why a window at `Limits.maxCommandSeq` refuses a tab command, and what to do instead:
    /// no seq is renumbered (nothing could prove a renumbered window loses nothing).
    static func seqExhaustedMessage(_ window: UUID) -> String {
        "window \(window) has reached the highest command seq (\(Limits.maxCommandSeq)), which no window reaches by use "
            + "(its files were crafted or damaged): it takes no more tab commands, and retrying will not help. Its tabs "
            + "still read (ctl dump) and save; to go on, open them in a new window (ctl connect, then ctl open for each "
            + "URL ctl dump lists) and disconnect this one"
    }
}
