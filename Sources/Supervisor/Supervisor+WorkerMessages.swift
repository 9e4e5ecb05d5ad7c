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

/// The loop's half of what workers publish: each window serviced in turn (its own half is
/// `WindowController+Publications`), the checks of what a worker may publish, and the
/// registry's part when a window is first configured and when it goes.
extension Supervisor {
    /// Everything workers published since the last look: readiness, replies, durable seqs.
    func serviceWorkers() {
        repliesLeft = false
        for slot in windows.keys.sorted() {
            if windows[slot]?.service(in: self) == true { repliesLeft = true }
        }
    }

    /// The slot's stats now, unless they are impossible (`violation`): reports show only stats
    /// the supervisor would act on.
    func checkedStats(_ view: WindowSlot) -> WorkerStats? {
        view.readStats().flatMap { Self.violation(in: $0) == nil ? $0 : nil }
    }

    /// What makes a dump impossible, if anything: numbers a client's tools compute with are
    /// within the model's bounds before any reply shows them.
    static func violation(in dump: WindowDump) -> String? {
        for tab in dump.regular.tabs + dump.incognito.tabs {
            guard (0...Int32(Limits.maxNavigationEntries)).contains(tab.historyCount) else {
                return
                    "tab \(tab.id) with \(tab.historyCount) history entries, outside 0...\(Limits.maxNavigationEntries)"
            }
            guard !tab.hasHistoryIndex || (0..<tab.historyCount).contains(tab.historyIndex) else {
                return "tab \(tab.id) at history entry \(tab.historyIndex) of \(tab.historyCount)"
            }
        }
        return nil
    }

    /// What makes a worker's published stats impossible, if anything: a worker that publishes
    /// them misbehaves (a bug, or damage it read and did not refuse).
    static func violation(in stats: WorkerStats) -> String? {
        guard Limits.isValidCommandSeq(stats.appliedSeq) else {
            return "applied seq \(stats.appliedSeq) above \(Limits.maxCommandSeq)"
        }
        guard stats.durableSeq <= stats.appliedSeq else {
            return "durable seq \(stats.durableSeq) above applied seq \(stats.appliedSeq)"
        }
        guard JournalWrites(rawValue: stats.journalWrites) != nil else {
            return "journal writes \(stats.journalWrites), no such mode"
        }
        guard IncognitoStorage(rawValue: stats.incognitoStorage) != nil else {
            return "incognito storage \(stats.incognitoStorage), no such mode"
        }
        guard stats.memoryOnlySince <= stats.appliedSeq else {
            return "memory-only seq \(stats.memoryOnlySince) above applied seq \(stats.appliedSeq)"
        }
        return nil
    }

    /// A window's first restore: it is open in the registry and `windows.order`, and counts
    /// toward the initial scenes `run` waits for.
    func configured(_ window: Window) {
        assert(window.configured && windows[window.slot] === window, "an open window is configured once")
        registry.configured(window.id)
        saveOrder()
        if initialScenesPending > 0 { initialScenesPending -= 1 }
    }

    /// The window went: an adoption ends with it (complete if it restored and its disconnect
    /// saved), its slot is freed, and its UUID closed or released in the registry.
    func release(_ window: Window, cleanExit: Bool, description: String) {
        if window.adoption != nil {
            if cleanExit, window.workerRestored {
                completeAdoption(window)
            } else {
                abandonAdoption(window, why: "the window went (\(description)) before it had restored and saved")
            }
        }
        precondition(windows[window.slot] === window, "a window frees its own slot only")
        precondition(window.lifecycle.state == .gone, "a slot is freed only once its window's lifecycle is gone")
        precondition(!window.isLive, "a slot is freed only once its worker is gone")
        windows[window.slot] = nil
        keptUnsavedByWindowsGone += window.keptUnsaved.map { (window.id, $0) }
        let view = region.slot(window.slot)
        view.state = .free
        view.pid = 0
        if window.configured {
            registry.close(window.id, hasSession: files.hasSession(window.id))
            if registry.isClosed(window.id) { closedThisRun.insert(window.id) }
        } else {
            registry.release(window.id)
        }
        saveOrder()
        if let client = window.closingForGood { finishCloseForGood(window.id, client: client) }
        evictClosedWindows()
        logger.info("scene disconnected", metadata: ["window": "\(window.id)", "how": "\(description)"])
    }
}
