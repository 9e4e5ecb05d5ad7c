import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import HostControl
import HostCoordination
import Logging
import Platform
import SessionStore
import SystemPackage

/// `ROOT/set-aside/` as the supervisor shows it: the entries listed (at most
/// `maxListedEntries`), each one's summary read by a child process (`SummaryReader`: a session
/// is never parsed in the supervisor), and the `set-aside` requests waiting for summaries. The
/// entries' names are `SetAsideShelf`'s; the moves (`adopt`, `discard`) are the supervisor's,
/// which tells the service what became of an entry.
final class SetAsideService {
    typealias ClientID = ControlServer.ClientID

    /// One entry as the supervisor knows it.
    struct ShelvedEntry {
        let entry: SetAsideEntry
        /// `entry.at` in ISO 8601, formatted once: `status` is built every 100 ms with `--http`.
        let at: String?
        /// What this supervisor saw when it set the entry aside; nil for one found on disk.
        var detail: String?
        var summary: SummaryState
        /// The window it is being adopted as, while `adopt` runs.
        var adoptingAs: UUID?

        init(entry: SetAsideEntry, detail: String?, summary: SummaryState) {
            (self.entry, self.detail, self.summary) = (entry, detail, summary)
            at = entry.at.map { ISO8601DateFormatter().string(from: $0) }
        }

        /// Waiting for its summary: not read yet, and not being adopted (which waits for the end).
        var summaryPending: Bool { summary == .pending && adoptingAs == nil }
    }

    enum SummaryState: Equatable {
        /// Not read yet: a child will (`run`).
        case pending
        case read(SetAsideSummary)
        /// Nothing a window could restore: a symlink, a file, `handed-out`.
        case notASession
        case unreadable(String)
        /// The reader could not be started (the supervisor short of descriptors or processes):
        /// tried again at the next `set-aside`.
        case notStarted(String)
    }

    /// The most entries listed: a `set-aside/` holding more (planted by hand) costs the loop a
    /// bounded listing, and the rest are named in the log.
    static let maxListedEntries = 1024

    /// How long `set-aside` waits for summaries still being read before it answers with them
    /// pending.
    static let listWaitNanoseconds: UInt64 = 5_000_000_000

    private let root: FilePath
    private let executable: String
    private let logger: Logger
    /// Every entry listed, by id.
    private(set) var entries: [String: ShelvedEntry] = [:]
    /// The count of entries last said to be past `maxListedEntries`: said once per count.
    private var overflowLogged = 0
    /// The one child reading an entry's summary now, if any.
    private var reader: SummaryReader?
    /// `set-aside` requests waiting for summaries being read, and until when.
    private var listWaiters: [(client: ClientID, deadline: UInt64)] = []

    init(root: FilePath, executable: String, logger: Logger) {
        (self.root, self.executable, self.logger) = (root, executable, logger)
    }

    /// The summary reader's pid while one runs: the supervisor's own child, no stray.
    var readerPID: pid_t? { reader?.pid }

    /// Every entry on disk now, with what this supervisor knew of each kept.
    func load(details: [String: String] = [:]) {
        let found: (entries: [SetAsideEntry], total: Int)
        do {
            found = try SetAsideShelf.entries(root: root, limit: Self.maxListedEntries)
        } catch {
            logger.error(
                "cannot list \(root.appending(DiskLayout.setAside)): the list shown is the one before",
                metadata: ["error": "\(error)"])
            return
        }
        if found.total > found.entries.count, found.total != overflowLogged {
            overflowLogged = found.total
            logger.warning(
                "\(root.appending(DiskLayout.setAside)) holds \(found.total) entries: the first \(found.entries.count) by name are listed"
            )
        }
        var next: [String: ShelvedEntry] = [:]
        for entry in found.entries {
            // An entry replaced under its id (a kind or time of its own) is read again.
            var shelved =
                entries[entry.id].flatMap { $0.entry == entry ? $0 : nil }
                ?? ShelvedEntry(
                    entry: entry, detail: details[entry.id] ?? entries[entry.id]?.detail, summary: .pending)
            if !entry.holdsWindowSession { shelved.summary = .notASession }
            next[entry.id] = shelved
        }
        // An entry being adopted is in `windows/` meanwhile, not under `set-aside/`.
        for (id, shelved) in entries where shelved.adoptingAs != nil { next[id] = shelved }
        entries = next
    }

    /// `path` was just set aside: listed, its summary to be read.
    func shelve(_ path: FilePath, detail: String) {
        guard let id = path.lastComponent?.string else { return }
        load(details: [id: detail])
    }

    /// The list `status` and `set-aside` show, sorted by id.
    func list() -> [SetAsideStatus] {
        entries.keys.sorted().compactMap { entries[$0].map(\.status) }
    }

    /// Whether a summary is still to be read.
    var summariesPending: Bool { entries.values.contains(where: \.summaryPending) }

    /// `set-aside`: the list now, or nil when `client` waits for summaries being read (it is
    /// among what `run` returns later). Readers that could not start are tried again.
    func list(for client: ClientID, now: UInt64) -> [SetAsideStatus]? {
        load()
        for (id, shelved) in entries {
            if case .notStarted = shelved.summary { entries[id]?.summary = .pending }
        }
        guard summariesPending else { return list() }
        listWaiters.append((client, now + Self.listWaitNanoseconds))
        return nil
    }

    /// The entry `id` names, or the refusal: 65 for none, 75 while it is adopted.
    func entry(_ id: String) -> Result<ShelvedEntry, ControlFailure> {
        load()
        guard let shelved = entries[id] else {
            return .failure(
                ControlFailure(code: .badData, message: "no set-aside entry '\(id)' (ctl set-aside lists them)"))
        }
        if let target = shelved.adoptingAs {
            return .failure(
                ControlFailure(
                    code: .temporary, message: "entry \(id) is being adopted as window \(target); retry once that ends")
            )
        }
        return .success(shelved)
    }

    /// Entry `id` left `set-aside/` for good (discarded, or adopted): what is read of it now
    /// is of no entry.
    func forget(_ id: String) {
        entries[id] = nil
        if reader?.id == id { reader?.stale = true }
        assert(reader.map { $0.id != id || $0.stale } ?? true, "no summary is read of an entry gone")
    }

    /// Entry `id` is being adopted as `target`: listed as adopting, its summary no more read.
    func beginAdoption(_ id: String, as target: UUID) {
        assert(entries[id]?.adoptingAs == nil, "an entry is adopted once at a time")
        entries[id]?.adoptingAs = target
        if reader?.id == id { reader?.stale = true }
    }

    /// The adoption of `id` was undone: the entry is set aside again, its summary read anew.
    func adoptionUndone(_ id: String) {
        entries[id]?.adoptingAs = nil
        entries[id]?.summary = .pending
        load()
    }

    /// Each turn: the summary child read and, when it is done, the next one started (none while
    /// `stopping`). Returns the `set-aside` requests to answer now with `list()`.
    func run(now: UInt64, stopping: Bool) -> [ClientID] {
        if var running = reader {
            let outcome = running.poll(now: now)
            reader = outcome == nil ? running : nil
            if let outcome, !running.stale, entries[running.id]?.summary == .pending {
                entries[running.id]?.summary = outcome
            }
        }
        if reader == nil, !stopping, let next = entries.filter({ $0.value.summaryPending }).keys.min() {
            switch SummaryReader.start(entry: next, executable: executable, root: root, now: now) {
            case .success(let started): reader = started
            case .failure(let errno): entries[next]?.summary = .notStarted("\(errno)")
            }
        }
        let pending = summariesPending
        let due = listWaiters.filter { !pending || $0.deadline <= now }
        listWaiters.removeAll { !pending || $0.deadline <= now }
        assert(pending || listWaiters.isEmpty, "no list waits once every summary is read")
        return due.map(\.client)
    }
}

extension SetAsideService.ShelvedEntry {
    /// The entry as `status` and `set-aside` show it.
    var status: SetAsideStatus {
        var status = SetAsideStatus(
            id: entry.id, uuid: entry.window?.uuidString, reason: entry.reason.rawValue,
            at: at, detail: detail, path: entry.path.string,
            kind: "\(entry.kind)", state: adoptingAs == nil ? "set_aside" : "adopting",
            adoptingAs: adoptingAs?.uuidString,
            summary: "pending")
        switch summary {
        case .pending: break
        case .notASession:
            status.summary = "not_a_session"
            (status.browsers, status.tabs, status.regularTabs, status.incognitoTabs) = ([], 0, 0, 0)
        case .unreadable(let why):
            status.summary = "unreadable: \(why)"
        case .notStarted(let why):
            status.summary =
                "unreadable: its reader could not be started (\(why)); tried again at the next ctl set-aside"
        case .read(let summary):
            status.summary = "read"
            status.browsers = summary.browsers
            // Checked (`isPlausible`): each count at most `Limits.maxTabsPerBrowser`.
            (status.regularTabs, status.incognitoTabs) = (UInt64(summary.regularTabs), UInt64(summary.incognitoTabs))
            status.tabs = UInt64(summary.regularTabs + summary.incognitoTabs)
            status.durableSeq = summary.durableSeq
            status.damaged = summary.damaged
        }
        return status
    }
}
