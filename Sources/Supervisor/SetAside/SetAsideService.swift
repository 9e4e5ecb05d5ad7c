import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import HostControl
import HostCoordination
import HostLimits
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

    private let files: SupervisorFiles
    private var root: FilePath { files.root }
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

    init(files: SupervisorFiles, executable: String, logger: Logger) {
        (self.files, self.executable, self.logger) = (files, executable, logger)
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

    /// Moves window `id`'s session to `set-aside/` (a crash loop) and lists it. Nil when done
    /// (or nothing was on disk); else why it could not be, naming any fixed entry of the root
    /// that is not what it should be.
    func setAside(_ id: UUID, reason: String) -> String? {
        do {
            if let path = try files.setAside(id, reason: .crashLoop, at: Date()) {
                shelve(path, detail: reason)
                logger.error(
                    "window set aside; it restarts empty",
                    metadata: ["window": "\(id)", "path": "\(path)", "reason": "\(reason)"])
            }
            return nil
        } catch {
            let misplaced = RootLayout.misplacedEntries(root: root).map { "\($0)" }
            let failure =
                "cannot set it aside: \(error)" + (misplaced.isEmpty ? "" : " (\(misplaced.joined(separator: "; ")))")
            logger.error("\(failure)", metadata: ["window": "\(id)"])
            return failure
        }
    }

    /// `path` was just set aside: listed, its summary to be read.
    private func shelve(_ path: FilePath, detail: String) {
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

    /// `discard`: entry `id` renamed away (one rename decides) and its bytes removed off the
    /// loop's thread; what it was, or the refusal.
    func discard(_ id: String) -> Result<SetAsideStatus, ControlFailure> {
        let shelved: ShelvedEntry
        switch entry(id) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let found): shelved = found
        }
        let away: FilePath
        do {
            away = try files.discard(shelved.entry)
        } catch {
            return .failure(
                ControlFailure(code: .ioError, message: "cannot discard \(id): \(error); it stays set aside"))
        }
        forget(id)
        files.removeDiscarded([away])
        logger.warning(
            "set-aside entry discarded",
            metadata: ["entry": "\(id)", "window": "\(shelved.entry.window?.uuidString ?? "-")"])
        return .success(shelved.status)
    }

    /// Why `shelved` cannot be adopted for its key record, if it cannot: an adoption undone
    /// sends the adopting window's key back with the session, so one begins only when the
    /// record has room for it (65 when full, 75 when it cannot be read).
    func keyRecordRefusal(_ shelved: ShelvedEntry) -> ControlFailure? {
        let id = shelved.entry.id
        do {
            guard try SessionKeyRecords.hasRoom(root: files.root, directory: shelved.entry.path) else {
                return ControlFailure(
                    code: .badData,
                    message:
                        "entry \(id) was adopted and undone until its key record is full (\(Limits.maxKeysPerSessionRecord) keys): "
                        + "it cannot be adopted again; `windowhost inspect` reads it")
            }
        } catch {
            return ControlFailure(
                code: .temporary, message: "cannot read the key record of entry \(id): \(error); it stays set aside")
        }
        return nil
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

    /// Entry `id`, adopted as `window`, restored and saved durably: it leaves `set-aside/` for
    /// good, and the keys that came with it are revoked.
    func adopted(_ id: String, as window: UUID) {
        assert(entries[id]?.adoptingAs.map { $0 == window } ?? true, "an entry is adopted as one window")
        do {
            try files.endAdoption(id, as: window, returning: false)
            // Decided: the window's restore wrote the session again under its own key, so the
            // keys that came with the entry go (a kill first leaves them to the next start).
            try SessionKeyRecords.revoke(root: root, directory: files.windowDirectory(window))
        } catch {
            // The window is restored and saved; only the marker (or the record) stays: the next
            // start sends the session back to its entry (or revokes the record), losing nothing.
            logger.error("cannot end the adoption", metadata: ["entry": "\(id)", "error": "\(error)"])
        }
        forget(id)
        logger.warning("set-aside entry adopted", metadata: ["entry": "\(id)", "window": "\(window)"])
    }

    /// The adoption of `id` as `window` is undone: its session goes back to the entry, set
    /// aside again and its summary read anew. What to tell the one who asked.
    func undoAdoption(_ id: String, as window: UUID, why: String) -> String {
        var said = "entry \(id) was not adopted: \(why); it is set aside again, as it was"
        do {
            try files.endAdoption(id, as: window, returning: true)
        } catch {
            said =
                "entry \(id) was not adopted: \(why); its session stays as window \(window) (cannot move it back: \(error))"
        }
        entries[id]?.adoptingAs = nil
        entries[id]?.summary = .pending
        load()
        logger.error("adoption abandoned", metadata: ["entry": "\(id)", "window": "\(window)", "why": "\(why)"])
        return said
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
