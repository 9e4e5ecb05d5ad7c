import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import HostControl
import HostCoordination
import HostLimits
import IOUring
import Logging
import Platform
import SessionStore
import SystemPackage

/// `ROOT/set-aside/` as the supervisor serves it: the list (`status`, `set-aside`), each entry's
/// summary read by a child process, `adopt` and `discard`. The entries' names are
/// `SetAsideShelf`'s; the moves are `SupervisorFiles`'.
extension Supervisor {
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
    }

    enum SummaryState: Equatable {
        /// Not read yet: a child will (`runSetAsideWork`).
        case pending
        case read(SetAsideSummary)
        /// Nothing a window could restore: a symlink, a file, `handed-out`.
        case notASession
        case unreadable(String)
        /// The reader could not be started (the supervisor short of descriptors or processes):
        /// tried again at the next `set-aside`.
        case notStarted(String)
    }

    /// A `windowhost inspect --set-aside ID --summary` child and what it printed so far.
    struct SummaryJob {
        let id: String
        let pid: pid_t
        let output: Int32
        var bytes: [UInt8] = []
        /// Its output ended (closed, or past `maxSummaryBytes`): only its exit is awaited.
        var ended = false
        /// Its entry was discarded or adopted meanwhile: what it says is of no entry now.
        var stale = false
        let deadline: UInt64
    }

    /// The most entries listed: a `set-aside/` holding more (planted by hand) costs the loop a
    /// bounded listing, and the rest are named in the log.
    static let maxListedEntries = 1024

    /// How long a summary child may take before it is killed and the entry shown unreadable.
    static let summaryTimeoutNanoseconds: UInt64 = 20_000_000_000
    /// The most a summary child may print: a summary is a few numbers.
    static let maxSummaryBytes = 64 * 1024
    /// How long `set-aside` waits for summaries still being read before it answers with them
    /// pending.
    static let listWaitNanoseconds: UInt64 = 5_000_000_000

    /// Every entry on disk now, with what this supervisor knew of each kept.
    func loadShelf(details: [String: String]) {
        let found: (entries: [SetAsideEntry], total: Int)
        do {
            found = try SetAsideShelf.entries(root: configuration.root, limit: Self.maxListedEntries)
        } catch {
            logger.error(
                "cannot list \(files.setAside): the list shown is the one before", metadata: ["error": "\(error)"])
            return
        }
        if found.total > found.entries.count, found.total != shelfOverflowLogged {
            shelfOverflowLogged = found.total
            logger.warning(
                "\(files.setAside) holds \(found.total) entries: the first \(found.entries.count) by name are listed")
        }
        var next: [String: ShelvedEntry] = [:]
        for entry in found.entries {
            // An entry replaced under its id (a kind or time of its own) is read again.
            var shelved =
                shelf[entry.id].flatMap { $0.entry == entry ? $0 : nil }
                ?? ShelvedEntry(entry: entry, detail: details[entry.id] ?? shelf[entry.id]?.detail, summary: .pending)
            if !entry.holdsWindowSession { shelved.summary = .notASession }
            next[entry.id] = shelved
        }
        // An entry being adopted is in `windows/` meanwhile, not under `set-aside/`.
        for (id, shelved) in shelf where shelved.adoptingAs != nil { next[id] = shelved }
        shelf = next
    }

    /// `path` was just set aside: listed, its summary to be read.
    func shelve(_ path: FilePath, detail: String) {
        guard let id = path.lastComponent?.string else { return }
        loadShelf(details: [id: detail])
    }

    /// The list `status` and `set-aside` show, sorted by id.
    func setAsideList() -> [SetAsideStatus] {
        shelf.keys.sorted().compactMap { shelf[$0].map(status) }
    }

    func status(_ shelved: ShelvedEntry) -> SetAsideStatus {
        let entry = shelved.entry
        var status = SetAsideStatus(
            id: entry.id, uuid: entry.window?.uuidString, reason: entry.reason.rawValue,
            at: shelved.at, detail: shelved.detail, path: entry.path.string,
            kind: "\(entry.kind)", state: shelved.adoptingAs == nil ? "set_aside" : "adopting",
            adoptingAs: shelved.adoptingAs?.uuidString,
            summary: "pending")
        switch shelved.summary {
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

    // MARK: requests

    /// Whether a summary is still to be read (an entry being adopted waits for its end).
    var summariesPending: Bool { shelf.values.contains { $0.summary == .pending && $0.adoptingAs == nil } }

    func listSetAside(for client: ClientID) {
        loadShelf(details: [:])
        for (id, shelved) in shelf {
            if case .notStarted = shelved.summary { shelf[id]?.summary = .pending }
        }
        if summariesPending {
            setAsideWaiters.append((client, monotonicNanoseconds() + Self.listWaitNanoseconds))
        } else {
            answer(client, .ok(SetAsideReply(setAside: setAsideList())))
        }
    }

    /// The entry `id` names, or the refusal: 65 for none, 75 while it is adopted.
    func shelvedEntry(_ id: String) -> Result<ShelvedEntry, ControlFailure> {
        loadShelf(details: [:])
        guard let shelved = shelf[id] else {
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

    func discard(_ id: String, for client: ClientID) {
        let shelved: ShelvedEntry
        switch shelvedEntry(id) {
        case .failure(let refusal): return answer(client, .failure(refusal.code, refusal.message))
        case .success(let found): shelved = found
        }
        let away: FilePath
        do {
            away = try files.discard(shelved.entry)
        } catch {
            answer(client, .failure(.ioError, "cannot discard \(id): \(error); it stays set aside"))
            return
        }
        shelf[id] = nil
        if summaryJob?.id == id { summaryJob?.stale = true }
        assert(summaryJob.map { $0.id != id || $0.stale } ?? true, "no summary is read of an entry discarded")
        files.removeDiscarded([away])
        logger.warning(
            "set-aside entry discarded",
            metadata: ["entry": "\(id)", "window": "\(shelved.entry.window?.uuidString ?? "-")"])
        answer(client, .ok(DiscardReply(discarded: status(shelved))))
    }

    func adopt(_ id: String, asNewWindow: Bool, for client: ClientID) {
        let shelved: ShelvedEntry
        switch shelvedEntry(id) {
        case .failure(let refusal): return answer(client, .failure(refusal.code, refusal.message))
        case .success(let found): shelved = found
        }
        guard shutdownDeadline == nil else { return answer(client, .failure(.temporary, "shutting down")) }
        guard let own = shelved.entry.window, shelved.entry.holdsWindowSession else {
            return answer(
                client,
                .failure(
                    .badData,
                    "entry \(id) holds no window session (a \(shelved.entry.kind), \(shelved.entry.reason.rawValue)): nothing to adopt"
                ))
        }
        guard let slot = (0..<configuration.capacity).first(where: { windows[$0] == nil }) else {
            return answer(client, .failure(.temporary, "all \(configuration.capacity) window slots are in use"))
        }
        // An adoption undone sends the adopting window's key back with the session: begun only
        // when its record has room for it, or the undo could not send the session back.
        do {
            guard try SessionKeyRecords.hasRoom(root: files.root, directory: shelved.entry.path) else {
                return answer(
                    client,
                    .failure(
                        .badData,
                        "entry \(id) was adopted and undone until its key record is full (\(Limits.maxKeysPerSessionRecord) keys): "
                            + "it cannot be adopted again; `windowhost inspect` reads it"))
            }
        } catch {
            return answer(
                client, .failure(.temporary, "cannot read the key record of entry \(id): \(error); it stays set aside"))
        }
        // Its own UUID only when nothing else has it: an open or reserved window, or a session
        // on disk (a closed window), which adopting over would lose.
        let returning = asNewWindow || files.hasSession(own) ? nil : registry.reserve(returning: own)
        let target = returning ?? registry.reserveNew()
        do {
            try files.beginAdoption(shelved.entry, as: target)
        } catch {
            registry.release(target)
            answer(
                client,
                .failure(
                    .ioError, "cannot move \(id) to \(files.windowDirectory(target)): \(error); it stays set aside"))
            return
        }
        shelf[id]?.adoptingAs = target
        if summaryJob?.id == id { summaryJob?.stale = true }
        assert(registry.reserved.contains(target), "the adopted session's window is reserved")
        logger.warning("adopting a set-aside entry", metadata: ["entry": "\(id)", "window": "\(target)"])
        openWindow(target, slot: slot, adoption: Adoption(entry: id, client: client, asNewWindow: target != own))
    }

    // MARK: the adoption's course

    /// Each turn: an adoption whose save is durable ends, the entry leaving `set-aside/`.
    func completeAdoptions() {
        for slot in windows.keys.sorted() {
            guard let window = windows[slot], let adoption = window.adoption, let seq = adoption.savedSeq,
                window.lastStats.durableSeq >= seq, window.isReady
            else { continue }
            completeAdoption(window)
        }
    }

    /// The adopted window restored and saved durably: the entry leaves `set-aside/` for good.
    func completeAdoption(_ window: Window) {
        guard let adoption = window.endAdoption() else { return }
        assert(shelf[adoption.entry]?.adoptingAs.map { $0 == window.id } ?? true, "an entry is adopted as one window")
        window.dispatch(.adoptionEnded, in: self)
        assert(!window.lifecycle.adopting, "the adoption ended with its data")
        do {
            try files.endAdoption(adoption.entry, as: window.id, returning: false)
            // Decided: the window's restore wrote the session again under its own key, so the
            // keys that came with the entry go (a kill first leaves them to the next start).
            try SessionKeyRecords.revoke(root: configuration.root, directory: files.windowDirectory(window.id))
        } catch {
            // The window is restored and saved; only the marker (or the record) stays: the next
            // start sends the session back to its entry (or revokes the record), losing nothing.
            logger.error("cannot end the adoption", metadata: ["entry": "\(adoption.entry)", "error": "\(error)"])
        }
        shelf[adoption.entry] = nil
        logger.warning("set-aside entry adopted", metadata: ["entry": "\(adoption.entry)", "window": "\(window.id)"])
        if let client = adoption.client {
            answer(
                client,
                .ok(
                    AdoptReply(
                        entry: adoption.entry, window: window.id.uuidString, pid: window.pid,
                        asNewWindow: adoption.asNewWindow,
                        regularTabs: exactInJSON(window.lastStats.regularTabs),
                        incognitoTabs: exactInJSON(window.lastStats.incognitoTabs),
                        durableSeq: window.lastStats.durableSeq)))
        }
    }

    /// The adopted window could not restore or went before it saved: its session goes back to
    /// its entry, as it is now (a restore's repairs included), and the window goes. `why` is
    /// said to the one who asked.
    func abandonAdoption(_ window: Window, why: String) {
        guard let adoption = window.endAdoption() else { return }
        window.dispatch(.adoptionEnded, in: self)
        assert(!window.lifecycle.adopting, "the adoption ended with its data")
        var said = "entry \(adoption.entry) was not adopted: \(why); it is set aside again, as it was"
        do {
            try files.endAdoption(adoption.entry, as: window.id, returning: true)
        } catch {
            said =
                "entry \(adoption.entry) was not adopted: \(why); its session stays as window \(window.id) (cannot move it back: \(error))"
        }
        shelf[adoption.entry]?.adoptingAs = nil
        shelf[adoption.entry]?.summary = .pending
        loadShelf(details: [:])
        logger.error(
            "adoption abandoned", metadata: ["entry": "\(adoption.entry)", "window": "\(window.id)", "why": "\(why)"])
        if let client = adoption.client { answer(client, .failure(.badData, said)) }
    }

    // MARK: summaries

    /// Each turn: the summary child read and, when it is done, the next one started; the
    /// `set-aside` requests waiting for summaries answered.
    func runSetAsideWork(_ now: UInt64) {
        if var job = summaryJob {
            if !job.ended { job.ended = readSummaryOutput(&job) }
            // Reaped without blocking: a child that closed its output may still be running.
            var status: Int32 = 0
            let reaped = job.ended ? waitpid(job.pid, &status, WNOHANG) : 0
            if reaped == job.pid || reaped < 0 {
                finishSummary(job, status: reaped == job.pid ? status : nil)
                summaryJob = nil
            } else if now >= job.deadline {
                // Killed whatever it is doing, then reaped: SIGKILL ends it within the turn.
                Glibc.kill(job.pid, SIGKILL)
                while waitpid(job.pid, nil, 0) < 0, errno == EINTR {}
                finishSummary(job, status: nil, timedOut: true)
                summaryJob = nil
            } else {
                summaryJob = job
            }
        }
        if summaryJob == nil, shutdownDeadline == nil,
            let next = shelf.filter({ $0.value.summary == .pending && $0.value.adoptingAs == nil }).keys.min()
        {
            startSummary(next, now: now)
        }
        let pending = summariesPending
        var waiting: [(ClientID, UInt64)] = []
        for (client, deadline) in setAsideWaiters {
            if pending, deadline > now {
                waiting.append((client, deadline))
            } else {
                answer(client, .ok(SetAsideReply(setAside: setAsideList())))
            }
        }
        setAsideWaiters = waiting
        assert(pending || setAsideWaiters.isEmpty, "no list waits once every summary is read")
    }

    private func startSummary(_ id: String, now: UInt64) {
        assert(summaryJob == nil, "one summary child at a time")
        var pipe: [Int32] = [-1, -1]
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { if devNull >= 0 { close(devNull) } }
        // Every child is spawned closing all but its three descriptors, so the moment before
        // the flags are set leaks none.
        guard devNull >= 0, Glibc.pipe(&pipe) == 0,
            fcntl(pipe[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(pipe[1], F_SETFD, FD_CLOEXEC) == 0,
            fcntl(pipe[0], F_SETFL, O_NONBLOCK) == 0
        else {
            shelf[id]?.summary = .notStarted("\(Errno(rawValue: errno))")
            for fd in pipe where fd >= 0 { close(fd) }
            return
        }
        let arguments = [
            configuration.executable, "inspect", configuration.root.string, "--set-aside", id, "--summary",
        ]
        var pid: pid_t = 0
        let pointers = arguments.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        let result = pointers.withUnsafeBufferPointer { argv in
            wh_spawn_dying_with_parent(arguments[0], argv.baseAddress!, environ, pipe[1], devNull, &pid)
        }
        close(pipe[1])
        guard result == 0 else {
            close(pipe[0])
            shelf[id]?.summary = .notStarted("\(Errno(rawValue: result))")
            return
        }
        summaryJob = SummaryJob(id: id, pid: pid, output: pipe[0], deadline: now + Self.summaryTimeoutNanoseconds)
    }

    /// Reads what the child printed; true at its end (or past the bound).
    private func readSummaryOutput(_ job: inout SummaryJob) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while job.bytes.count <= Self.maxSummaryBytes {
            let count = read(job.output, &chunk, chunk.count)
            if count > 0 {
                job.bytes += chunk[..<count]
            } else if count == 0 {
                return true
            } else {
                return errno != EAGAIN && errno != EINTR
            }
        }
        return true
    }

    /// `status`: the child's wait status, nil when it could not be had.
    private func finishSummary(_ job: SummaryJob, status: Int32?, timedOut: Bool = false) {
        close(job.output)
        guard !job.stale, shelf[job.id]?.summary == .pending else { return }
        let status = status ?? -1
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
        let decoded = try? JSONDecoder().decode(SetAsideSummary.self, from: Data(job.bytes))
        if timedOut {
            shelf[job.id]?.summary = .unreadable(
                "its reader took longer than \(Self.summaryTimeoutNanoseconds / 1_000_000_000) s")
        } else if let summary = decoded, summary.isPlausible, exit == 0 || exit == ControlCode.badData.rawValue {
            shelf[job.id]?.summary = .read(summary)
        } else {
            let how = exit >= 0 ? "exited \(exit)" : "killed by signal \(status & 0x7f)"
            shelf[job.id]?.summary = .unreadable(
                "its reader \(how) without a summary that checks (`windowhost inspect --set-aside \(job.id)` says more)"
            )
        }
    }
}

/// A set-aside entry being adopted as the window that has it (`Supervisor.adopt`).
struct Adoption {
    let entry: String
    /// Who asked: answered at the end, either way.
    var client: ControlServer.ClientID?
    /// Under a UUID of its own (asked, or the entry's was taken).
    let asNewWindow: Bool
    /// The seq of the save asked once the window restored: durable, the adoption ends.
    var savedSeq: UInt64?
}
