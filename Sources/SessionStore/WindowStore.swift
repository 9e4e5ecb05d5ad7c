import BrowserModel
import Foundation
import Histogram
import IOUring
import Platform
import SessionFormat
import SystemPackage

/// Something a turn of the save loop did that the caller may report.
public enum SaveEvent: Equatable, Sendable {
    /// Every command up to `seq` is durable.
    case durable(UInt64)
    /// A Browser's save failed. Nothing acknowledged is lost: its records stay staged, and it is
    /// tried again by itself after the backoff (`SavePolicy`). One event per failed attempt.
    case failed(SaveFailure)
    /// A Browser that had failed saved again: the end of its failure episode.
    case recovered(BrowserKind, failedAttempts: Int)
    /// Writing a new snapshot failed (a full disk, say); the save riding on it is durable in
    /// the journal, and compaction is tried again later.
    case compactionFailed(StoreError)
    /// A Browser whose compaction had failed wrote a new snapshot again.
    case compactionRecovered(BrowserKind)
    /// The incognito session's last tab closed and its directory was deleted durably (and its
    /// key revoked).
    case deletedIncognito
    /// The incognito session on disk was sealed with a key that is gone (a reboot, a
    /// revocation): it can never be read, and was deleted durably at restore.
    case discardedIncognito(String)
    /// No incognito key can be had (`IncognitoKeyError.unavailable`): the incognito session is
    /// kept in memory only, as if each of its saves were skipped. Said once per worker.
    case incognitoInMemoryOnly(String)
    /// The deleted incognito session's key could not be revoked: a copy of its files stays
    /// readable while the key lives. It is revoked again before the next incognito session
    /// takes a key (that save fails until it is).
    case incognitoKeyNotRevoked(String)
    /// A tab realized after recovery whose history read nowhere (its snapshot's copy and the
    /// generation before both damaged): it keeps the page its metadata names, and the next
    /// snapshot holds that one page. `reason`: why its own copy did not read.
    case degradedTab(BrowserKind, WebStateID, reason: SessionFormatError)
    /// The generation the restored one would fall back to, read after the window got ready
    /// (`BrowserStore.checkPendingFallback`), held this damaged file: set aside as a restore
    /// sets one aside, and the Browser's files are written again from memory.
    case damagedFallback(BrowserKind, DamagedFile)
}

extension SaveEvent {
    var isDurable: Bool { if case .durable = self { true } else { false } }
}

/// One failed save attempt of one Browser.
public struct SaveFailure: Equatable, Sendable, CustomStringConvertible {
    public let browser: BrowserKind
    public let error: StoreError
    /// Failures in a row, this one included: 1 starts an episode (what to log).
    public let attempt: Int
    /// When it is tried again by itself.
    public let retryAfterMilliseconds: UInt64

    public var description: String {
        "\(browser.rawValue) save failed (attempt \(attempt), retried in \(retryAfterMilliseconds) ms): \(error)"
    }
}

/// What recovering a window found: one report per Browser.
public struct WindowRecovery: Sendable, Equatable {
    public let regular: RecoveryReport
    public let incognito: RecoveryReport
    /// The last command sequence number the restored window covers.
    public var seq: UInt64 { max(regular.seq, incognito.seq) }
}

/// One window's sessions: its regular and incognito Browsers, each with a store under
/// `<root>/windows/<UUID>/<regular|incognito>/`, the save policy, and the save loop that
/// group-commits them. Single-threaded: it belongs to the worker's event loop.
///
/// Saves are grouped: a group covers every command applied when it starts, writes one
/// durable append per Browser that has records (both in one submit), and every save request
/// pending then rides on it. Each write ends with a commit naming the group's Browsers, so
/// recovery keeps a group only if every Browser in it has it.
///
/// Groups are pipelined: while up to `StoreOptions.savesInFlight` are in flight, commands go
/// on being applied, and the next group is submitted when `GroupCommit` says waiting for the
/// one in flight costs more than another write (a batch waiting, or a flush's time waited),
/// each append on the blocks after the one before. They are acknowledged in seq order: a group is durable once it and every
/// group before it landed whole. When one fails, every group after it (they follow it in the
/// journals) is taken back with it once none is running. A group that makes files (a first
/// save, a compaction) blocks on the engine, so it waits until none is in flight and runs alone.
///
/// Browsers fail independently. When one Browser's part of a group fails, the parts that
/// landed are retracted (`BrowserStore.retractSave`: recovery would drop them anyway) and go
/// again at once in a group of their own, with a commit naming only them; the Browser that
/// failed stays out of groups until its backoff passes, then is tried alone. Each Browser so
/// has its own durable seq, and the window's is the lower of the two: every command up to it
/// is durable in both.
public final class WindowStore {
    public let windowID: UUID
    public let profile: Profile
    public let regular: Browser
    public let incognito: Browser
    public let engine: any IOEngine
    let stores: [BrowserStore]
    public private(set) var policy: SavePolicy
    /// The last command applied to the Browsers.
    public private(set) var appliedSeq: UInt64 = 0
    /// Every command up to this one is durable, in both Browsers.
    public private(set) var durableSeq: UInt64 = 0
    /// Request → durable, in microseconds.
    public private(set) var saveLatency = Histogram<UInt64>(
        highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    public private(set) var savesCompleted: UInt64 = 0
    /// Bytes the saves have written so far, in both Browsers: journal appends, snapshots and
    /// new preallocated journals.
    public var bytesWritten: UInt64 { stores.reduce(0) { $0 + $1.bytesSubmitted } }
    /// Told each save's latency as it becomes durable (µs): what a worker copies to shared memory.
    public var onSaveLatency: ((UInt64) -> Void)?
    /// Whether journal writes go direct (`O_DIRECT`): nil until a journal was opened for
    /// writing; else a Browser's refusal if its writes are buffered (tmpfs), or the alignment.
    public var journalWrites: Result<DirectIO.Alignment, DirectIO.Refusal>? {
        let answers = stores.compactMap(\.directWrites)
        return answers.first { if case .failure = $0 { true } else { false } } ?? answers.first
    }
    /// The command seq the newest save in flight covers, if one is in flight.
    public var savingSeq: UInt64? { groups.last?.seq }
    /// Whether the save in flight writes a new snapshot.
    var compactionInFlight: Bool { stores.contains(where: \.isCompacting) }
    /// Whether a write is in flight: a save's, or a snapshot's in the background. The loop
    /// waits on the engine's completions while one is.
    public var writesInFlight: Bool { !groups.isEmpty || stores.contains(where: \.hasBackgroundWork) }

    /// A Browser's run of failed saves, from its first failure to its next durable save.
    private struct FailureEpisode {
        var error: StoreError
        var attempts: Int
        /// When it is tried again by itself (monotonic ns).
        var retryAt: UInt64
    }

    /// Per Browser (indexed as `stores`): every command up to it that changed the Browser is
    /// written, a save made while the other Browser lagged included.
    private var browserDurableSeqs: [UInt64] = [0, 0]
    /// Per Browser: the saves it made while the other lagged (the group's seq, and the
    /// Browser's durable seq before it), since the last save that left no Browser out. Recovery
    /// keeps such a save only if the other Browser's files reach its seq (`savesToLeaveOut`),
    /// so the window counts it only then (`keptDurableSeq`). At most `maxLaggingSaves` each:
    /// past that the two oldest merge, which only ever counts less.
    private var laggingSaves: [[(seq: UInt64, durableBefore: UInt64)]] = [[], []]
    private static let maxLaggingSaves = 64
    /// When `startGroup` last chose which Browsers save: a retry due by then was taken or waits.
    private var candidatesChosenAt: UInt64 = 0
    /// Per Browser: its failure episode, if its last save failed.
    private var episodes: [FailureEpisode?] = [nil, nil]
    /// Per Browser: the generation it had when its compaction began to fail.
    private var compactionEpisodes: [UInt64?] = [nil, nil]
    /// Failed attempts so far: a durable wait fails when it grows.
    private var failureCount = 0
    private var lastFailure: StoreError?

    /// A save in flight.
    private struct SaveGroup {
        /// The last command it covers: above every group's before it.
        let seq: UInt64
        /// The Browsers (indices of `stores`) writing in it.
        let participants: [Int]
        /// Browsers with changes no save carries, left out of it: failing, not yet due.
        let excluded: [Int]
        /// Whether a participant writes a new snapshot: such a group is the only one in flight.
        let compacts: Bool
        var failures: [Int: StoreError]
        /// When it started (monotonic ns), and whether no other save was in flight then: such
        /// a save's time to durable is what a flush takes (`GroupCommit.observe`).
        let startedAt: UInt64
        let alone: Bool
    }
    /// The saves in flight, oldest first; at most `savesInFlightBound`.
    private var groups: [SaveGroup] = []
    private let savesInFlightBound: Int
    /// When the next save starts while saves are in flight; nil: at once (`StoreOptions.groupCommit`).
    public private(set) var groupCommit: GroupCommit?
    /// When the oldest command no save carries yet asked for its save (monotonic ns).
    private var unsavedSince: UInt64?
    /// An explicit request (`save`, a durable wait, background, teardown) starts its save at
    /// the next turn with room, whatever group commit would wait for.
    private var startNow = false
    /// Save requests not yet durable: their sequence numbers and when they were made.
    private var waiting = SaveRequests()
    /// The outbox: every event, whatever path made it (a turn of the loop, or a save, wait or
    /// teardown inside a command), until `takeEvents` hands it out. One consumer drains it (the
    /// worker loop, after each command and each turn), so nothing is dropped or rebuilt from
    /// the store's state; bounded for callers that never drain (`report`).
    private var outbox: [SaveEvent] = []
    private var recovered = false
    private let clock: () -> UInt64
    private let keys: any IncognitoKeyStore
    /// The key the incognito store seals with, as the keyring gave it.
    private var incognitoKey: [UInt8]?
    /// The keyring is refused (`IncognitoKeyError.unavailable`): the incognito session lives
    /// in memory only, for the worker's life.
    public private(set) var incognitoInMemoryOnly = false
    /// The deleted session's key could not be revoked: it is revoked before the next session
    /// takes a key, so no copy of the old files opens under the new session's key.
    private var revocationPending = false
    /// The first command whose effect is only in the memory-only incognito Browser: a durable
    /// answer covering it must say so (`wait-durable`'s memory-only outcome). For the worker's life.
    public private(set) var memoryOnlySince: UInt64?
    /// The newest such command not yet covered by a regular commit.
    private var memoryOnlyUncommitted: UInt64?

    /// `keys`: where the incognito key is kept (by default the kernel's user keyring).
    public init(
        root: FilePath, windowID: UUID, engine: any IOEngine, options: StoreOptions = StoreOptions(),
        saveDelayMilliseconds: UInt64 = SavePolicy.defaultDelayMilliseconds, keys: (any IncognitoKeyStore)? = nil,
        clock: @escaping () -> UInt64 = monotonicNanoseconds
    ) {
        self.windowID = windowID
        self.keys = keys ?? KernelIncognitoKeys(root: root, window: windowID)
        self.engine = engine
        self.clock = clock
        policy = SavePolicy(delayMilliseconds: saveDelayMilliseconds)
        profile = Profile(stateDirectory: root)
        regular = profile.browserList.browser(for: windowID)
        incognito = profile.offTheRecordProfile.browserList.browser(for: windowID)
        stores = [regular, incognito].map { browser in
            BrowserStore(
                kind: browser.kind, window: windowID, directory: browser.sessionDirectory, list: browser.webStateList,
                profile: browser.profile, engine: engine, options: options)
        }
        stores[0].otherBrowser = stores[1]
        stores[1].otherBrowser = stores[0]
        savesInFlightBound = options.savesInFlight
        groupCommit = options.groupCommit
    }

    public func browser(_ kind: BrowserKind) -> Browser { kind == .regular ? regular : incognito }

    // MARK: restore

    /// Restores both Browsers, their tabs unrealized. A last save that only one Browser made
    /// durable is left out of both, so the window comes back as it was after one command.
    /// Nothing is saved while restoring.
    public func recover() throws(StoreError) -> WindowRecovery {
        precondition(!recovered, "recover once, before any command")
        try takeIncognitoKey(creating: false)
        // The fallback generations are read after the window is ready, before its first save
        // (`checkFallbacks`): a restore waits only for what it restores.
        let loaded = try stores.map { store throws(StoreError) in try store.load(checkingFallback: false) }
        // Each Browser's left-out saves lower the seq its session reaches, which may leave out
        // more of the other's: until neither changes (each count only grows, bounded by the
        // saves there are).
        var leftOut = [0, 0]
        while true {
            let next = stores.indices.map { index in
                max(
                    leftOut[index],
                    loaded[index].savesToLeaveOut(
                        other: loaded[1 - index], otherSeq: loaded[1 - index].seq(leavingOut: leftOut[1 - index]),
                        otherBit: stores[1 - index].kind.commitBit))
            }
            if next == leftOut { break }
            assert(zip(next, leftOut).allSatisfy { $0 >= $1 }, "each count only grows, so the loop ends")
            leftOut = next
        }
        var reports: [RecoveryReport] = []
        for (index, store) in stores.enumerated() {
            reports.append(try store.restore(loaded[index], leavingOut: leftOut[index]))
        }
        recovered = true
        appliedSeq = reports.map(\.seq).max() ?? 0
        assert(
            reports.allSatisfy { $0.seq <= appliedSeq } && groups.isEmpty,
            "the window comes back at its newest Browser's seq, nothing in flight")
        // An incognito session in the clear (written before sealing) is sealed now, by the
        // repair's write from memory, not left readable until its next change.
        if stores[1].isOnDisk, stores[1].restoredInTheClear { try? takeIncognitoKey(creating: true) }
        let resealing = stores[1].needsRebase && !stores[1].alternateSeals.isEmpty
        for index in stores.indices { reports[index].repairError = stores[index].repair(windowSeq: appliedSeq) }
        // A session that opened with keys that went with it (an adoption) is written again
        // under this window's key before the window takes a command: until that is durable
        // it still needs those keys, and the adoption must not end.
        if resealing, let failure = reports[1].repairError { throw failure }
        stores[1].alternateSeals = []
        durableSeq = appliedSeq
        browserDurableSeqs = [appliedSeq, appliedSeq]
        laggingSaves = [[], []]
        // The regular Browser's first generation (an empty snapshot, a journal written to its
        // preallocated size) is made now, before the window takes commands: its first save is
        // then an append like every other, not one that pays for the files (issue 13). Failing
        // here (a full disk) costs nothing: the first save makes it, and reports its failure.
        // The incognito session is made at its first save (its directory goes with its last tab).
        try? stores[0].createIfNeeded(emptyThrough: appliedSeq)
        // Kept in memory only: a session in the clear from before sealing was restored, and
        // its files go, so none stays readable on disk.
        if incognitoInMemoryOnly, stores[1].isOnDisk { try stores[1].destroy() }
        return WindowRecovery(regular: reports[0], incognito: reports[1])
    }

    // MARK: commands

    /// Applies command `seq` (greater than every one before) through `body`, journals what it
    /// changed, and schedules a save after the policy (cases 3 and 4). A command that changes
    /// nothing (or is refused) leaves `appliedSeq` where it was: the window's seq names the last
    /// change, so the seq a restore comes back at is never below one already reported.
    @discardableResult
    public func apply<T>(seq: UInt64, _ body: () throws -> T) rethrows -> T {
        precondition(seq > appliedSeq, "command sequence numbers only grow")
        for store in stores { store.setCommandSeq(seq) }
        defer {
            var changed = false
            var changedInMemoryOnly = false
            for store in stores where store.collect() {
                changed = true
                changedInMemoryOnly = changedInMemoryOnly || store.inMemoryOnly
            }
            if changed {
                appliedSeq = seq
                if changedInMemoryOnly { noteMemoryOnlyChange(through: seq) }
                if policy.changed(at: clock()) { requestSave(retryingNow: false) }
            }
        }
        return try body()
    }

    /// Whether a command applied is not yet durable.
    public var hasUnsavedChanges: Bool { stores.contains(where: \.hasUnsavedRecords) || memoryOnlyUncommitted != nil }

    /// Commands up to `seq` changed the incognito Browser kept in memory only (or their staged
    /// records were dropped when it became so): never durable, whatever the window's durable
    /// seq says. The regular journal still takes a commit through `seq`, so the window's seq
    /// outlives a restart and no later command reuses it.
    private func noteMemoryOnlyChange(through seq: UInt64) {
        assert(incognitoInMemoryOnly && seq <= appliedSeq)
        memoryOnlySince = min(memoryOnlySince ?? seq, seq)
        memoryOnlyUncommitted = max(memoryOnlyUncommitted ?? seq, seq)
    }

    /// Case 1: the scene went to the background. Saves now; the delayed save is cancelled.
    public func background() throws(StoreError) {
        policy.cancel()
        try save()
    }

    /// Case 2: the scene is torn down. Saves now if anything is unsaved and waits until durable.
    public func teardown() throws(StoreError) {
        policy.cancel()
        if appliedSeq == 0, groups.isEmpty, !hasUnsavedChanges, !stores[1].isOnDisk {
            try forgetUnusedSession()
            return
        }
        if hasUnsavedChanges || !groups.isEmpty { try waitUntilDurable(appliedSeq) }
        // A snapshot left in the background would make the next start rewrite the session.
        while stores.contains(where: \.hasBackgroundWork) { try turn(waiting: true) }
    }

    /// A window that never took a command (seq 0) leaves nothing behind: the session `recover`
    /// made ahead is deleted, and the window's directory too when nothing else is in it (a
    /// `damaged/` stays), so a scene opened and closed unused is forgotten (it leaves
    /// `windows.order`), as it was before sessions were made ahead.
    private func forgetUnusedSession() throws(StoreError) {
        let store = stores[0]
        guard store.isOnDisk else { return }
        assert(store.list.isEmpty && store.isIdle, "an unused window holds no tabs and no write")
        try store.destroy()
        let windowDirectory = store.directory.removingLastComponent()
        do {
            try engine.removeDirectory(windowDirectory)
        } catch  where error.errno == .directoryNotEmpty {
            return
        } catch {
            throw .io(error)
        }
        try io { try engine.syncDirectory(windowDirectory.removingLastComponent()) }
    }

    /// An explicit save (`ctl save`): now, whatever the timer or a backoff says. A failure is
    /// not thrown here (with a ring the writes finish later): the loop's `poll` reports it.
    public func save() throws(StoreError) {
        requestSave(retryingNow: true)
        try turn(waiting: false)
    }

    /// Saves if needed and returns once every command up to `seq` is durable; throws the
    /// storage error as soon as a save fails meanwhile (the store goes on retrying by itself).
    public func waitUntilDurable(_ seq: UInt64) throws(StoreError) {
        let failuresBefore = failureCount
        while durableSeq < min(seq, appliedSeq) {
            // Ask once: a request already pending keeps its own start time for the latency.
            if waiting.last.map({ $0.seq < appliedSeq }) ?? true {
                requestSave(retryingNow: true)
            } else if groups.isEmpty {
                retryNow()
            }
            // Someone waits for it: the next save goes now, not when group commit would send it.
            if appliedSeq > groups.last?.seq ?? durableSeq { startNow = true }
            try turn(waiting: true)
            if failureCount > failuresBefore, let lastFailure { throw lastFailure }
        }
        assert(durableSeq >= min(seq, appliedSeq), "a durable wait returns once its commands are durable")
    }

    /// Makes a save request covering every command applied; `retryingNow` also ends the
    /// backoff of a Browser whose save failed (an explicit request, not a timer).
    private func requestSave(retryingNow: Bool) {
        if retryingNow { retryNow() }
        // Nothing unsaved: no request, or it would wait for (and time) a later change's save.
        guard appliedSeq > durableSeq else { return }
        let now = clock()
        waiting.append(seq: appliedSeq, at: now)
        guard appliedSeq > groups.last?.seq ?? durableSeq else { return }
        if unsavedSince == nil { unsavedSince = now }
        if retryingNow { startNow = true }
    }

    /// Whether a save starts in this turn for the commands no save carries: at once with
    /// nothing in flight or no group commit, else when `GroupCommit` says waiting costs more.
    private var groupCommitStarts: Bool {
        guard let groupCommit, !groups.isEmpty, !startNow else { return true }
        let newest = groups.last?.seq ?? durableSeq
        let since = unsavedSince ?? clock()
        let now = clock()
        return groupCommit.shouldStart(
            inFlight: groups.count, waitingCommands: Int(clamping: appliedSeq > newest ? appliedSeq - newest : 0),
            oldestWaitNanoseconds: now > since ? now - since : 0)
    }

    private func retryNow() {
        let now = clock()
        for index in episodes.indices where episodes[index] != nil { episodes[index]?.retryAt = now }
    }

    /// Save requests made and not yet durable.
    public var pendingSaveRequests: Int { waiting.count }

    /// When the loop must wake: for the delayed save, or for a failed Browser's retry while no
    /// save is in flight (monotonic ns). A retry that the last group's choice saw due is not
    /// one: that Browser went, or it waits for the other (`startGroup`), whose retry or save
    /// wakes the loop. Waking for it polled with no timeout, at 100 % CPU, for as long as the
    /// other Browser kept failing.
    public var nextDeadline: UInt64? {
        var retry: UInt64?
        if groups.isEmpty, !waiting.isEmpty {
            for (index, episode) in episodes.enumerated() where stores[index].hasRecordsToSubmit {
                if let episode, episode.retryAt > candidatesChosenAt {
                    retry = min(retry ?? episode.retryAt, episode.retryAt)
                }
            }
        }
        switch (policy.deadline, retry) {
        case (let timer?, let retry?): return min(timer, retry)
        case (let timer, let retry): return timer ?? retry
        }
    }

    /// The storage error of the latest failure while some Browser's saves are failing; nil
    /// once every Browser saves again.
    public var failure: StoreError? { episodes.contains(where: { $0 != nil }) ? lastFailure : nil }

    /// The Browsers whose last save failed: each is retried by itself after its backoff.
    public var failingBrowsers: [BrowserKind] { stores.indices.filter { episodes[$0] != nil }.map { stores[$0].kind } }

    /// `failingBrowsers` as commit bits (`BrowserKind.commitBit`): what shared memory shows.
    public var failingBrowserBits: UInt8 { failingBrowsers.reduce(0) { $0 | $1.commitBit } }

    /// Every command up to this one that changed `kind`'s Browser is written. A save made while
    /// the other Browser lagged counts here at once, and in the window's `durableSeq` only once
    /// recovery would keep it.
    public func durableSeq(of kind: BrowserKind) -> UInt64 { browserDurableSeqs[kind == .regular ? 0 : 1] }

    /// The window's durable seq, as recovery would bring it back: each Browser's, counting only
    /// the saves it made while the other lagged that recovery keeps. Recovery leaves out such a
    /// save past the seq the other's files reach, and those files reach only as far as the other's
    /// own such saves kept: a fixed point. A Browser with none reaches below every one of the
    /// other's (it has saved nothing since the last save that left no Browser out). Counting
    /// them all acknowledged a seq that a cut then lost (hostile round: the regular Browser
    /// saved 3 and 4 alone while the incognito one failed, then the incognito one saved 5 alone
    /// while the regular one failed; the window said 4, recovery brought back 2).
    private var keptDurableSeq: UInt64 {
        var kept = laggingSaves.map(\.count)
        func reach(_ index: Int) -> UInt64 { kept[index] > 0 ? laggingSaves[index][kept[index] - 1].seq : 0 }
        var changed = true
        while changed {
            changed = false
            for index in stores.indices {
                let other = stores.count - 1 - index
                while kept[index] > 0, laggingSaves[index][kept[index] - 1].seq > reach(other) {
                    kept[index] -= 1
                    changed = true
                }
            }
        }
        return stores.indices.map { index in
            kept[index] == laggingSaves[index].count
                ? browserDurableSeqs[index] : laggingSaves[index][kept[index]].durableBefore
        }.min() ?? 0
    }

    // MARK: the loop

    /// A turn of the loop (`turn`), then the outbox (`takeEvents`): what happened since the
    /// last drain. A turn that throws leaves its events in the outbox.
    public func poll(waiting block: Bool = false) throws(StoreError) -> [SaveEvent] {
        try turn(waiting: block)
        return takeEvents()
    }

    /// Hands out the outbox and empties it, without turning the loop: what a command's save,
    /// wait or teardown did is there as soon as the command returns, in the order it happened
    /// (tabs degraded since the last drain last).
    public func takeEvents() -> [SaveEvent] {
        // Collected here, not in a turn: a command that realizes a tab (a navigation) may
        // degrade it, and its event belongs to that command.
        for store in stores {
            for tab in store.takeDegradedTabs() { report(.degradedTab(store.kind, tab.id, reason: tab.reason)) }
        }
        defer { outbox.removeAll() }
        return outbox
    }

    /// One turn of the save loop: the timer, a due retry, finished writes, and a new group if
    /// one is due and the pipeline has room, all flushed in one submit; what it did goes to the
    /// outbox. Blocks only with `waiting` and a write in flight.
    public func turn(waiting block: Bool = false) throws(StoreError) {
        if policy.takeDue(at: clock()) { requestSave(retryingNow: false) }
        checkFallbacks()
        let completions = try io { try engine.reap(waiting: block && writesInFlight) }
        for completion in completions {
            guard let index = stores.firstIndex(where: { $0.owns(completion.ticket) }) else { continue }
            let seq = stores[index].saveSeq(of: completion.ticket)
            if case .failed(let error) = try stores[index].complete(completion),
                let group = groups.firstIndex(where: { $0.seq == seq })
            {
                groups[group].failures[index] = groups[group].failures[index] ?? error
            }
            if let failure = stores[index].takeCompactionFailure() { noteCompactionFailure(index, failure) }
        }
        if let group = groups.first, group.compacts, stores.contains(where: \.awaitsPartners),
            group.participants.allSatisfy({ stores[$0].hasFinished(group.seq) || stores[$0].awaitsPartners })
        {
            try releaseCompactions()
        }
        try finishLandedGroups()
        // Else a durable wait would turn for ever: nothing left would ever complete it.
        assert(!writesInFlight || engine.inFlight > 0, "a write in flight is in the engine")
        let newest = groups.last?.seq ?? durableSeq
        if (waiting.last.map({ $0.seq > newest }) ?? false) && groupCommitStarts
            || stores.contains(where: \.hasChangesOnlyASnapshotHolds)
        {
            try startGroup()
        }
        // Between saves only: a spare journal never shares a save's flush.
        if groups.isEmpty { for store in stores { store.startSpareIfIdle() } }
        // Whatever the turn queued goes to the kernel now, in one submit: a write queued and
        // not submitted (a compaction's directory sync, queued as its files land) completes
        // nothing, and the worker slept on a silent ring until its heartbeat. A waiting turn
        // that found nothing in flight and started a save waits here, in the submit's own
        // system call, instead of in the next turn's reap.
        assert(
            groups.count <= savesInFlightBound && zip(groups, groups.dropFirst()).allSatisfy { $0.seq < $1.seq },
            "groups in flight stay within the bound, in seq order")
        if block, completions.isEmpty, !groups.isEmpty {
            try io { try engine.flushAndWait() }
        } else {
            try io { try engine.flush() }
        }
    }

    /// Reads the fallback generation of each Browser that restored without reading it, at the
    /// window's first turn: after `recover` said the window is ready, before any save of that
    /// Browser starts (`startGroup` leaves it out until then). A check that fails is retried
    /// after a backoff, as a failed save is.
    private func checkFallbacks() {
        // Every turn passes here: past the first, no store has a check left, and no clock is read.
        guard stores.contains(where: { $0.uncheckedFallback != nil }) else { return }
        let now = clock()
        for (index, store) in stores.enumerated()
        where store.uncheckedFallback != nil && (episodes[index].map { $0.retryAt <= now } ?? true) {
            do {
                for damaged in try store.checkPendingFallback() { report(.damagedFallback(store.kind, damaged)) }
                assert(store.uncheckedFallback == nil, "a check that returns is done")
            } catch {
                noteFailure(index, error, now: now)
            }
        }
    }

    /// Every write of the compaction's group has landed, and a compaction sharing the save with
    /// the other Browser waits: its snapshot goes into place if the whole save is durable, else
    /// it is dropped with the save.
    private func releaseCompactions() throws(StoreError) {
        for (index, store) in stores.enumerated() where store.awaitsPartners {
            if !groups[0].failures.isEmpty {
                store.abandonAfterPartnerFailure()
            } else if case .failed(let error) = store.renameAfterPartners() {
                groups[0].failures[index] = groups[0].failures[index] ?? error
            }
        }
        try io { try engine.flush() }
    }

    private func hasLanded(_ group: SaveGroup) -> Bool {
        group.participants.allSatisfy { stores[$0].hasFinished(group.seq) }
    }

    /// Finishes the oldest groups whose writes have all landed, in seq order. A group that
    /// failed waits for every group after it: they are taken back together.
    private func finishLandedGroups() throws(StoreError) {
        while let group = groups.first, hasLanded(group) {
            guard group.failures.isEmpty else {
                guard groups.allSatisfy(hasLanded) else { return }
                let failed = groups
                groups.removeAll()
                finishFailedGroups(failed)
                return
            }
            groups.removeFirst()
            if group.alone, groupCommit != nil {
                let now = clock()
                groupCommit?.observe(saveNanoseconds: now > group.startedAt ? now - group.startedAt : UInt64(0))
            }
            try finishGroup(group)
        }
    }

    /// Every write of the group, and of every group before it, landed: durable.
    private func finishGroup(_ group: SaveGroup) throws(StoreError) {
        assert(group.failures.isEmpty && !group.participants.isEmpty, "a group finishes whole, with a Browser in it")
        assert(groups.allSatisfy { $0.seq > group.seq }, "groups finish in seq order")
        for index in group.participants { stores[index].confirmSave(group.seq) }
        // A Browser that did not save is checked too: its own directory swapped since its last
        // save (moved out of the root, a symlink in its place) is noticed by nothing else, and
        // its acknowledged tabs would be lost at the next start. It is written again where it
        // belongs at once (`turn`). (One with a later save in flight is checked by that save.)
        for index in stores.indices where !group.participants.contains(index) { stores[index].verifyInPlace() }
        closeCompactionEpisodes()
        if let uncommitted = memoryOnlyUncommitted, group.participants.contains(0), group.seq >= uncommitted {
            memoryOnlyUncommitted = nil
        }
        if group.excluded.isEmpty {
            // Every Browser's files reach this seq: every earlier lagging save is kept.
            for index in stores.indices { laggingSaves[index].removeAll() }
        } else {
            for index in group.participants {
                laggingSaves[index].append((group.seq, browserDurableSeqs[index]))
                if laggingSaves[index].count > Self.maxLaggingSaves {
                    // The later seq with the earlier durable seq: where the one would be kept and the
                    // other not, the merged one is left out, and counts what the earlier did.
                    let first = laggingSaves[index].removeFirst()
                    laggingSaves[index][0].durableBefore = first.durableBefore
                }
            }
        }
        for index in stores.indices where !group.excluded.contains(index) {
            // A Browser left out with nothing unsaved had everything durable already: its
            // saves before are whole, since groups finish in seq order.
            browserDurableSeqs[index] = max(browserDurableSeqs[index], group.seq)
            assert(browserDurableSeqs[index] <= appliedSeq, "a Browser is durable only through commands applied")
            if group.participants.contains(index), let episode = episodes[index] {
                episodes[index] = nil
                report(.recovered(stores[index].kind, failedAttempts: episode.attempts))
            }
        }
        markDurable(keptDurableSeq)
        try deleteIncognitoIfEmpty()
    }

    /// A group failed, and `failed` is it and every group after it, all landed: every append
    /// of theirs is taken back (recovery would drop them: their commits name a Browser that
    /// lacks the save, or follow one that does) and goes again in the next group; a Browser
    /// whose part failed waits for its backoff (one failure each, its first).
    private func finishFailedGroups(_ failed: [SaveGroup]) {
        for index in Set(failed.flatMap(\.participants)).sorted() { stores[index].retractSave() }
        var failures: [Int: StoreError] = [:]
        for group in failed {
            for (index, error) in group.failures where failures[index] == nil { failures[index] = error }
        }
        let now = clock()
        for (index, error) in failures.sorted(by: { $0.key < $1.key }) { noteFailure(index, error, now: now) }
        // A Browser's files found out of place (ESTALE: its directory or the window's was
        // swapped): the other Browser's may have moved with them, though it saved nothing.
        if failures.values.contains(where: { if case .io(let error) = $0 { error.isNotInPlace } else { false } }) {
            for store in stores { store.verifyInPlace() }
        }
        closeCompactionEpisodes()
    }

    /// A Browser whose compaction had failed and that wrote a new snapshot since (or whose
    /// session was deleted) ends its compaction episode.
    private func closeCompactionEpisodes() {
        for index in compactionEpisodes.indices {
            guard let generation = compactionEpisodes[index] else { continue }
            if !stores[index].isOnDisk || stores[index].snapshotGeneration > generation,
                !stores[index].compactionDeferred
            {
                compactionEpisodes[index] = nil
                if stores[index].isOnDisk { report(.compactionRecovered(stores[index].kind)) }
            }
        }
    }

    private func noteFailure(_ index: Int, _ error: StoreError, now: UInt64) {
        let attempts = (episodes[index]?.attempts ?? 0) + 1
        let delay = SavePolicy.retryDelayMilliseconds(afterFailures: attempts)
        episodes[index] = FailureEpisode(
            error: error, attempts: attempts, retryAt: now.saturatingAdd(delay * 1_000_000))
        failureCount += 1
        lastFailure = error
        report(
            .failed(
                SaveFailure(browser: stores[index].kind, error: error, attempt: attempts, retryAfterMilliseconds: delay)
            ))
    }

    private func noteCompactionFailure(_ index: Int, _ error: StoreError) {
        if compactionEpisodes[index] == nil { compactionEpisodes[index] = stores[index].snapshotGeneration }
        report(.compactionFailed(error))
    }

    /// Polls until no write is in flight: pending saves and compactions done (tools, tests).
    public func settle() throws(StoreError) {
        let failuresBefore = failureCount
        repeat {
            try turn(waiting: true)
            if failureCount > failuresBefore, let lastFailure { throw lastFailure }
        } while writesInFlight
    }

    /// Starts a group if there is room: at most `savesInFlightBound` in flight, none of them
    /// failed or compacting, and its seq above the newest's.
    private func startGroup() throws(StoreError) {
        guard groups.count < savesInFlightBound, groups.allSatisfy({ $0.failures.isEmpty && !$0.compacts }),
            groups.last.map({ appliedSeq > $0.seq }) ?? true
        else { return }
        let now = clock()
        candidatesChosenAt = now
        guard let chosen = saveCandidates(now: now) else { return }
        let (candidates, closesIncognito) = chosen
        var participants: [Int] = []
        // A Browser whose fallback is unread saves nothing yet: it is lagging, as a failing one is.
        for index in candidates where stores[index].uncheckedFallback == nil {
            do {
                try stores[index].createIfNeeded(emptyThrough: durableSeq)
                // Before any write is queued: making a directory syncs its parent with a blocking
                // `perform`, which would reap (and drop) the other Browser's queued writes.
                if stores[index].mustCompact || stores[index].shouldCompact { try stores[index].placeDirectory() }
                participants.append(index)
            } catch {
                noteFailure(index, error, now: now)
            }
        }
        // The regular commit that outlives the incognito directory needs the incognito save.
        if closesIncognito, !participants.contains(1) {
            participants.removeAll { $0 == 0 && !stores[0].hasRecordsToSubmit }
        }
        // A Browser left out with changes of its own (its saves failing) makes this save one
        // the window is not durable through: marked, so recovery keeps it only if that
        // Browser's files catch up, and no snapshot (which cannot be taken back) holds it. A
        // Browser that can only save by a snapshot (`mustCompact`) therefore waits, its records
        // staged, until the other saves again: the loop wakes for that one's retry, not before.
        let lagging = stores.indices.contains { !participants.contains($0) && stores[$0].hasRecordsToSubmit }
        if lagging { participants.removeAll { stores[$0].mustCompact } }
        guard !participants.isEmpty else { return }
        // A Browser with a save in flight must take part: otherwise nothing in this group's
        // commits says it follows that save, and a cut landing this one and not that one
        // would bring the window back torn (hostile round: incognito save 3, regular save 4).
        if !groups.isEmpty,
            stores.indices.contains(where: { !participants.contains($0) && stores[$0].appendsInFlight > 0 })
        {
            return
        }
        let browsers = participants.reduce(lagging ? JournalCommit.laggingBit : 0) { $0 | stores[$1].kind.commitBit }
        var failures: [Int: StoreError] = [:]
        for index in participants {
            let store = stores[index]
            do {
                assert(!(lagging && store.mustCompact), "no snapshot holds a lagging save")
                try store.startSave(
                    seq: appliedSeq, browsers: browsers, compact: store.mustCompact || (store.shouldCompact && !lagging)
                )
            } catch {
                failures[index] = error
            }
        }
        let compacts = participants.contains { stores[$0].isCompacting }
        assert(!compacts || groups.isEmpty, "a compacting group runs alone")
        // A save beside a snapshot written in the background shares its flushes: not a flush alone.
        let alone = groups.isEmpty && !compacts && !stores.contains(where: \.hasBackgroundWork)
        assert(groups.last.map { $0.seq < appliedSeq } ?? true, "each group covers commands the one before did not")
        groups.append(
            SaveGroup(
                seq: appliedSeq, participants: participants,
                excluded: stores.indices.filter { !participants.contains($0) && stores[$0].hasRecordsToSubmit },
                compacts: compacts, failures: failures, startedAt: now, alone: alone))
        unsavedSince = nil
        startNow = false
        assert(groups.count <= savesInFlightBound)
    }

    /// The Browsers the next save may take, and whether it closes the incognito session; nil
    /// when it must wait for the saves in flight (it makes files).
    private func saveCandidates(now: UInt64) -> (candidates: [Int], closesIncognito: Bool)? {
        // A failing Browser waits for its backoff; the others do not wait for it.
        var candidates = stores.indices.filter { index in
            stores[index].hasRecordsToSubmit && (episodes[index].map { $0.retryAt <= now } ?? true)
        }
        // A save that empties the incognito Browser is followed by deleting its session: the
        // regular journal then takes a commit too (records or not), so the window's seq
        // outlives the incognito directory.
        let closesIncognito = candidates.contains(1) && stores[1].list.isEmpty
        if closesIncognito, !candidates.contains(0) { candidates.insert(0, at: 0) }
        // Making files (a first save, a compaction, deleting a closed incognito session) blocks
        // on the engine, whose `perform` would reap and drop the completions of the saves in
        // flight: such a group waits until none is, and then runs alone.
        if !groups.isEmpty, stores[1].awaitsDeletion || candidates.contains(where: { stores[$0].makesFiles }) {
            return nil
        }
        if candidates.contains(1) {
            do {
                try takeIncognitoKey(creating: true)
            } catch {
                candidates.removeAll { $0 == 1 }
                noteFailure(1, error, now: now)
            }
            if incognitoInMemoryOnly { candidates.removeAll { $0 == 1 } }
        }
        // Memory-only changes take a seq: the regular journal commits through it, records or not.
        if memoryOnlyUncommitted != nil, !candidates.contains(0), episodes[0].map({ $0.retryAt <= now }) ?? true {
            candidates.insert(0, at: 0)
        }
        return (candidates, closesIncognito)
    }

    /// Puts an event in the outbox. A caller that never drains it (a save loop, a benchmark, a
    /// `settle`) must not make it grow: a durable event replaces the durable one before it (only
    /// the latest seq matters), and past `maxQueuedEvents` the oldest other events go. The
    /// durable event never does: a burst of others (a restore that degrades hundreds of tabs)
    /// would otherwise leave the window's durable seq unpublished until its next save.
    func report(_ event: SaveEvent) {
        if case .durable = event { outbox.removeAll(where: \.isDurable) }
        if outbox.count >= Self.maxQueuedEvents, let oldest = outbox.firstIndex(where: { !$0.isDurable }) {
            outbox.remove(at: oldest)
        }
        outbox.append(event)
        assert(outbox.count <= Self.maxQueuedEvents && outbox.filter(\.isDurable).count <= 1)
    }

    static let maxQueuedEvents = 256

    private func markDurable(_ seq: UInt64) {
        guard seq > durableSeq else { return }
        precondition(seq <= appliedSeq, "nothing is durable past what was applied")
        durableSeq = seq
        savesCompleted += 1
        let now = clock()
        waiting.removeThrough(seq) { at in
            let microseconds = (now > at ? now - at : 0) / 1000
            saveLatency.record(microseconds)
            onSaveLatency?(microseconds)
        }
        report(.durable(seq))
    }

    /// The seed's rule for incognito: when its last tab has closed and that is durable, its
    /// session is deleted, files then directory then the parent's entry.
    private func deleteIncognitoIfEmpty() throws(StoreError) {
        let store = stores[1]
        guard store.awaitsDeletion, groups.isEmpty else { return }
        assert(store.list.isEmpty && !store.hasUnsavedRecords, "only a durable, empty incognito session is deleted")
        try store.destroy()
        assert(
            !store.isOnDisk && store.uncheckedFallback == nil, "a deleted session leaves nothing to append to or check")
        // Crypto-shredding: a copy of the files (a backup) is unreadable from now on. The next
        // incognito session gets a new key.
        store.sealing = nil
        incognitoKey = nil
        report(.deletedIncognito)
        do throws(IncognitoKeyError) {
            try keys.revoke()
        } catch {
            revocationPending = true
            report(.incognitoKeyNotRevoked("\(error)"))
        }
    }

    /// Takes the window's incognito key for the incognito store's files, at restore (`creating`
    /// false) or before a sealed save (true).
    ///
    /// - At restore, a key held while no sealed file is on disk belongs to no session (a kill
    ///   between a deletion and its revocation, or a session set aside): it is revoked, so no
    ///   old record ever opens in the next session. Sealed files without a key can never be
    ///   read: the session is deleted durably, and said so. With sealed files and a key, files
    ///   in the clear among them are refused as forged (`refusesClearFiles`). Sealed files in a
    ///   directory with a key record (a set-aside session being adopted) open with the
    ///   record's keys too (`useRecordedKeys`).
    /// - Before a save, the key the store holds is checked against the keyring: one revoked or
    ///   replaced meanwhile is replaced, and the save writes the whole session again under the
    ///   new key (`needsRebase`), so nothing acknowledged rests on a key that is gone.
    /// - Only a keyring refused outright (`IncognitoKeyError.unavailable`: a sandbox, a kernel
    ///   without it) keeps incognito in memory only, said once. Any other failure (a spent
    ///   quota, a dead key holding the name, the root's stat failing while it is moved) is
    ///   thrown as `.keyring`: at restore the restore fails, before a save that Browser's save
    ///   fails and is retried with the backoff, its records staged. A transient failure never
    ///   changes how incognito is kept.
    private func takeIncognitoKey(creating: Bool) throws(StoreError) {
        let store = stores[1]
        guard !incognitoInMemoryOnly else { return }
        let sealedFiles = creating ? false : try store.holdsSealedFiles()
        var keyGone = false
        do throws(IncognitoKeyError) {
            var held: [UInt8]?
            do throws(IncognitoKeyError) {
                held = try keys.existingKey()
            } catch .failed where !creating && !sealedFiles {
                // No session rests on a key: one that cannot be looked up now (a root not made
                // yet has no name) is revoked before the next session's key, never used by it.
                revocationPending = true
                return
            }
            if creating {
                // The last session's key, left by a revocation that failed: never the next one's.
                if revocationPending, incognitoKey == nil, held != nil {
                    try keys.revoke()
                    held = nil
                }
                revocationPending = false
                guard held == nil || held != incognitoKey else { return }
                let first = incognitoKey == nil
                let bytes: [UInt8]
                if let held { bytes = held } else { bytes = try keys.key() }
                try useIncognitoKey(bytes)
                // Sealed under a key that is gone (or in the clear, from before sealing): the
                // session is written again under this one.
                if store.isOnDisk, !first || store.restoredInTheClear { store.needsRebase = true }
            } else if sealedFiles, case let recorded = try keys.recordedKeys(), !recorded.isEmpty {
                try useRecordedKeys(recorded, held: held)
            } else if let held, sealedFiles {
                try useIncognitoKey(held)
                store.refusesClearFiles = true
            } else if held != nil {
                // No session rests on it: a failure is retried before the next session's key.
                do throws(IncognitoKeyError) { try keys.revoke() } catch .failed { revocationPending = true }
            } else {
                keyGone = sealedFiles
            }
        } catch .unavailable(let reason) {
            incognitoInMemoryOnly = true
            incognitoKey = nil
            store.sealing = nil
            // Changes staged and never written are dropped with the mode: memory only from them.
            if store.hasRecordsToSubmit {
                noteMemoryOnlyChange(through: appliedSeq)
                memoryOnlySince = min(memoryOnlySince ?? appliedSeq, browserDurableSeqs[1] + 1)
            }
            store.keepInMemoryOnly()
            report(.incognitoInMemoryOnly("\(IncognitoKeyError.unavailable(reason))"))
            return
        } catch {
            throw .keyring(error)
        }
        guard keyGone else { return }
        try store.destroy()
        report(.discardedIncognito("its key is gone (the machine restarted, or the key was revoked)"))
    }

    /// A session set aside, being adopted: its files open with the keys that went with it
    /// (`recorded`) or the window's own (`held`, made now if there is none), which it is written
    /// again under (`recover`). Each recorded key is 32 bytes (`SessionKeyRecord` decodes no other).
    private func useRecordedKeys(_ recorded: [(window: UUID, key: [UInt8])], held: [UInt8]?) throws(IncognitoKeyError) {
        let own: [UInt8]
        if let held { own = held } else { own = try keys.key() }
        try useIncognitoKey(own)
        stores[1].alternateSeals = recorded.filter { $0.window != windowID || $0.key != own }.compactMap { recorded in
            (try? RecordSeal.Key(recorded.key)).map { BrowserStore.SealIdentity(window: recorded.window, key: $0) }
        }
        stores[1].refusesClearFiles = true
    }

    /// The store seals with `bytes` from now on.
    private func useIncognitoKey(_ bytes: [UInt8]) throws(IncognitoKeyError) {
        do {
            stores[1].sealing = try RecordSeal.Key(bytes)
        } catch {
            throw .failed("the window's key is \(bytes.count) bytes, not 32")
        }
        incognitoKey = bytes
    }
}
