import BrowserModel
import Foundation
import Logging
import Platform
import SessionStore
import SystemPackage

/// `handed-out` as the supervisor keeps it: each window's ceilings and lost seqs as the file
/// holds them on disk, the file held open for writes in place, and the retry after a write the
/// disk refused. No reply shows a seq or tab id above its window's ceilings here (`record`).
final class HandedOutBook {
    private let files: SupervisorFiles
    private let logger: Logger
    /// Each window's entry as it is on disk.
    private(set) var windows: [UUID: HandedOutWindow]
    /// The file did not read at the start: windows on disk with no entry take the fallback
    /// floors (`WindowLifecycle.FloorProbe`).
    let damaged: Bool
    /// Held open for writes in place (`SupervisorFiles.writeHandedOut`): a full disk or a
    /// shortage of descriptors cannot stop them. Nil until the file is made.
    private var file: FileDescriptor?
    /// When a write that failed for want of space or of the supervisor's own resources is tried
    /// again: nil while none is behind.
    private(set) var retry: WriteRetry?

    /// Reads the file at the start: each window's entry whose session is still on disk or set
    /// aside. A damaged file is set aside (its reason added to `details`) and not trusted.
    init(files: SupervisorFiles, onDisk: [UUID], details: inout [String: String], logger: Logger) throws {
        (self.files, self.logger) = (files, logger)
        switch try files.handedOutRecord(at: Date()) {
        case .missing:
            (windows, damaged) = ([:], false)
        case .read(let record):
            // A window with no session left is gone for good: the next write drops it. One with
            // a session set aside is not: adopted back under its UUID, it numbers above these.
            let kept = Set(
                onDisk + ((try? SetAsideShelf.entries(root: files.root).entries) ?? []).compactMap(\.window))
            (windows, damaged) = (record.filter { kept.contains($0.key) }, false)
        case .damaged(let reason, let path):
            if let name = path?.lastComponent?.string { details[name] = reason }
            logger.error(
                "\(DiskLayout.handedOut) does not read: set aside, not trusted; each window's seqs and tab ids continue \(HandedOutCeiling.fallbackJump) above what it restores",
                metadata: ["path": "\(path?.string ?? "-")", "reason": "\(reason)"])
            (windows, damaged) = ([:], true)
        }
        // Held from the start, so later writes need neither space nor a descriptor; one of an
        // older form (or none) is made anew now, while there is room. Not after damage: the
        // windows' fallback floors are written as their probes answer.
        if !damaged { file = (try? files.openHandedOut()) ?? (try? files.makeHandedOut(windows)) }
    }

    /// Writes window `id`'s entry, durably, when it changed: its ceilings raised to cover
    /// `needed` (by `HandedOutCeiling.block` past it, so one write serves thousands of
    /// commands), its lost seqs. Why it could not be, or nil.
    func record(_ id: UUID, lost: LostSeqs, covering needed: HandedOutCeiling) -> String? {
        let current = windows[id] ?? .none
        let entry: HandedOutWindow
        do {
            entry = HandedOutWindow(ceiling: try current.ceiling.covering(needed), lost: lost)
        } catch {
            return "\(error)"
        }
        guard entry != current else { return nil }
        var next = windows
        next[id] = entry
        do {
            try write(next)
        } catch let error as Errno where error == .noSpace || error == .diskQuotaExceeded || error.isResourceShortage {
            // A full disk, or the supervisor short of descriptors or memory: the host keeps
            // serving while saves fail (they retry by themselves), so this serves too, and is
            // written again with backoff and at the next need; only a supervisor killed before
            // it lands may then hand out a seq again, or forget a lost one (docs/recovery.md,
            // Known limits).
            if retry == nil {
                logger.error(
                    "cannot write \(DiskLayout.handedOut) (\(error)): serving on, written again with backoff until it lands",
                    metadata: ["window": "\(id)"])
            }
            retry = WriteRetry(after: retry)
            return nil
        } catch {
            logger.error("cannot write \(DiskLayout.handedOut): \(error)", metadata: ["window": "\(id)"])
            return "\(error)"
        }
        if let retry {
            logger.notice("\(DiskLayout.handedOut) written again", metadata: ["failed_attempts": "\(retry.failures)"])
        }
        retry = nil
        windows = next
        // No reply shows a seq or tab id above what is durably recorded.
        precondition(
            entry.ceiling.seq >= needed.seq && entry.ceiling.tab >= needed.tab, "the ceiling covers what was asked")
        return nil
    }

    /// The retry is done once every open window's entry was written again.
    func retried() {
        retry = nil
    }

    /// At a stop, when no reply can come any more: each open window's ceiling comes down to
    /// the highest seq and tab id anything showed (and its floor, which covers what a supervisor
    /// before showed), so the next start continues at the next seq rather than a block above.
    /// Not written, the raised ceilings stay: as safe, only with a gap.
    func lowerToShown(_ shown: [UUID: HandedOutWindow]) {
        var next = windows
        for (id, entry) in shown where next[id] != nil { next[id] = entry }
        guard next != windows else { return }
        do {
            try write(next)
            windows = next
        } catch {
            logger.warning(
                "cannot lower the ceilings in \(DiskLayout.handedOut) at the stop; the next start numbers above them: \(error)"
            )
        }
    }

    /// Writes the file in place, or makes it anew (and holds it) when it is not open.
    private func write(_ record: [UUID: HandedOutWindow]) throws {
        if let fd = file {
            do {
                try SupervisorFiles.writeHandedOut(record, inPlace: fd)
                return
            } catch {
                // Made anew at the next attempt (an I/O error, a file too full of windows).
                try? fd.close()
                file = nil
                throw error
            }
        }
        file = try files.makeHandedOut(record)
    }
}

/// The next attempt at a root file's write the disk refused, and how many failed in a row, with
/// the session stores' backoff (`SavePolicy`: 100 ms doubling to 3.2 s).
struct WriteRetry {
    let at: UInt64
    let failures: Int

    init(after previous: WriteRetry?) {
        failures = (previous?.failures ?? 0) + 1
        assert(failures > 0, "one more failure")
        at = monotonicNanoseconds() + SavePolicy.retryDelayMilliseconds(afterFailures: failures) * 1_000_000
    }
}
