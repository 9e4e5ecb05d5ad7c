import BrowserModel
import Foundation
import HostControl
import HostCoordination
import HostLimits
import SessionFormat
import SessionStore
import SystemPackage

/// What a worker publishes (its stats in shared memory, a dump in its reply ring) checked
/// before the supervisor acts on it or any reply shows it: a worker that publishes the
/// impossible misbehaves (a bug, or damage it read and did not refuse), and is treated as
/// Chromium treats a compromised renderer.
extension WorkerStats {
    /// What makes these stats impossible, if anything.
    var violation: String? {
        guard Limits.isValidCommandSeq(appliedSeq) else {
            return "applied seq \(appliedSeq) above \(Limits.maxCommandSeq)"
        }
        guard durableSeq <= appliedSeq else {
            return "durable seq \(durableSeq) above applied seq \(appliedSeq)"
        }
        guard JournalWrites(rawValue: journalWrites) != nil else {
            return "journal writes \(journalWrites), no such mode"
        }
        guard IncognitoStorage(rawValue: incognitoStorage) != nil else {
            return "incognito storage \(incognitoStorage), no such mode"
        }
        guard memoryOnlySince <= appliedSeq else {
            return "memory-only seq \(memoryOnlySince) above applied seq \(appliedSeq)"
        }
        return nil
    }

    /// An errno a worker published, named; a number no errno has is shown as the worker wrote
    /// it, never clamped into a different one.
    static func describeErrno(_ raw: UInt64) -> String {
        guard let code = Int32(exactly: raw) else { return "errno \(raw) (not an errno)" }
        return "\(Errno(rawValue: code))"
    }
}

extension WindowSlot {
    /// The slot's stats now, unless they are impossible: reports show only stats the
    /// supervisor would act on.
    var checkedStats: WorkerStats? {
        readStats().flatMap { $0.violation == nil ? $0 : nil }
    }
}

extension WindowDump {
    /// What makes this dump impossible, if anything: numbers a client's tools compute with are
    /// within the model's bounds before any reply shows them.
    var violation: String? {
        for tab in regular.tabs + incognito.tabs {
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
}

extension FailingSaves {
    /// While a window's saves fail: the error and the Browsers failing; nil otherwise.
    init?(_ stats: WorkerStats) {
        guard stats.failingErrno != 0 else { return nil }
        self.init(
            error: WorkerStats.describeErrno(stats.failingErrno),
            browsers: BrowserKind.having(commitBits: stats.failingBrowsers).map(\.rawValue))
    }
}

extension DumpReply {
    /// A checked dump (`WindowDump.violation` is nil) as the control protocol shows it.
    init(_ dump: WindowDump, window: UUID) {
        assert(dump.violation == nil, "only a checked dump is shown")
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
        self.init(
            window: window.uuidString, appliedSeq: dump.appliedSeq, durableSeq: dump.durableSeq,
            digest: String(format: "%016llx", dump.digest), regular: browser(dump.regular),
            incognito: browser(dump.incognito))
    }
}

extension CommandDone {
    /// What makes a command's reply impossible, if anything: a seq or tab id past the model's.
    var violation: String? {
        guard Limits.isValidCommandSeq(appliedSeq) else {
            return "reply with applied seq \(appliedSeq) above \(Limits.maxCommandSeq)"
        }
        guard !hasTab || (1...Limits.maxWebStateID).contains(tab) else {
            return "reply with tab id \(tab) outside 1...\(Limits.maxWebStateID)"
        }
        return nil
    }
}
