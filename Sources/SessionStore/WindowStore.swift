import BrowserModel
import Foundation
import Histogram
import IOUring
import SessionFormat
import SystemPackage

/// Something a turn of the save loop did that the caller may report.
public enum SaveEvent: Equatable, Sendable {
    /// Every command up to `seq` is durable.
    case durable(UInt64)
    /// A save failed; nothing acknowledged is lost and the save stays pending until the next
    /// request (a change, the timer, background, teardown or an explicit save).
    case failed(StoreError)
    /// Writing a new snapshot failed (a full disk, say); the save riding on it is durable in
    /// the journal, and compaction is tried again later.
    case compactionFailed(StoreError)
    /// The incognito session's last tab closed and its directory was deleted durably.
    case deletedIncognito
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
/// pending then rides on it. The durable sequence number moves only when all of the group's
/// writes have completed. Each write ends with a commit naming the group's Browsers, so
/// recovery keeps a group only if every Browser in it has it.
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
    /// Every command up to this one is durable.
    public private(set) var durableSeq: UInt64 = 0
    /// Request → durable, in microseconds.
    public private(set) var saveLatency = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    public private(set) var savesCompleted: UInt64 = 0
    /// Bytes the saves have written so far, in both Browsers: journal appends, snapshots and
    /// new preallocated journals.
    public var bytesWritten: UInt64 { stores.reduce(0) { $0 + $1.bytesSubmitted } }
    /// Told each save's latency as it becomes durable (µs): what a worker copies to shared memory.
    public var onSaveLatency: ((UInt64) -> Void)?
    /// The command seq the save in flight covers, if one is in flight.
    public var savingSeq: UInt64? { groupSeq }
    /// Whether the save in flight writes a new snapshot.
    var compactionInFlight: Bool { stores.contains(where: \.isCompacting) }
    private var groupSeq: UInt64?
    private var groupFailure: StoreError?
    /// Save requests not yet durable: their sequence numbers and when they were made.
    private var waiting: [(seq: UInt64, at: UInt64)] = []
    /// After a failure, no new attempt until something asks for a save again.
    private var retryBlocked = false
    private var recovered = false
    private let clock: () -> UInt64

    public init(
        root: FilePath, windowID: UUID, engine: any IOEngine, options: StoreOptions = StoreOptions(),
        saveDelayMilliseconds: UInt64 = SavePolicy.defaultDelayMilliseconds,
        clock: @escaping () -> UInt64 = monotonicNanoseconds
    ) {
        self.windowID = windowID
        self.engine = engine
        self.clock = clock
        policy = SavePolicy(delayMilliseconds: saveDelayMilliseconds)
        profile = Profile(stateDirectory: root)
        regular = profile.browserList.browser(for: windowID)
        incognito = profile.offTheRecordProfile.browserList.browser(for: windowID)
        stores = [regular, incognito].map { browser in
            BrowserStore(
                kind: browser.kind, directory: browser.sessionDirectory, list: browser.webStateList,
                profile: browser.profile, engine: engine, options: options)
        }
    }

    public func browser(_ kind: BrowserKind) -> Browser { kind == .regular ? regular : incognito }

    // MARK: restore

    /// Restores both Browsers, their tabs unrealized. A last save that only one Browser made
    /// durable is left out of both, so the window comes back as it was after one command.
    /// Nothing is saved while restoring.
    public func recover() throws(StoreError) -> WindowRecovery {
        precondition(!recovered, "recover once, before any command")
        let loaded = try stores.map { store throws(StoreError) in try store.load() }
        var reports: [RecoveryReport] = []
        for (index, store) in stores.enumerated() {
            let other = loaded[1 - index]
            let incomplete = loaded[index].lastCommit.map { commit in
                commit.browsers & stores[1 - index].kind.commitBit != 0 && other.isOnDisk && other.seq < commit.seq
            } ?? false
            reports.append(store.restore(loaded[index], dropLastSave: incomplete))
        }
        recovered = true
        appliedSeq = reports.map(\.seq).max() ?? 0
        durableSeq = appliedSeq
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
            for store in stores { changed = store.collect() || changed }
            if changed {
                appliedSeq = seq
                if policy.changed(at: clock()) { requestSave() }
            }
        }
        return try body()
    }

    /// Whether a command applied is not yet durable.
    public var hasUnsavedChanges: Bool { stores.contains(where: \.hasUnsavedRecords) }

    /// Case 1: the scene went to the background. Saves now; the delayed save is cancelled.
    public func background() throws(StoreError) {
        policy.cancel()
        try save()
    }

    /// Case 2: the scene is torn down. Saves now if anything is unsaved and waits until durable.
    public func teardown() throws(StoreError) {
        policy.cancel()
        guard hasUnsavedChanges || groupSeq != nil else { return }
        try waitUntilDurable(appliedSeq)
    }

    /// An explicit save (`ctl save`): now, whatever the timer says.
    public func save() throws(StoreError) {
        requestSave()
        _ = try poll()
    }

    /// Saves if needed and returns once every command up to `seq` is durable; throws the
    /// storage error if a save fails meanwhile.
    public func waitUntilDurable(_ seq: UInt64) throws(StoreError) {
        while durableSeq < min(seq, appliedSeq) {
            if groupSeq == nil {
                // Ask once: a request already pending keeps its own start time for the latency.
                if waiting.last.map({ $0.seq < appliedSeq }) ?? true { requestSave() }
                retryBlocked = false
            }
            for case .failed(let error) in try poll(waiting: true) { throw error }
        }
    }

    private func requestSave() {
        retryBlocked = false
        // Nothing unsaved: no request, or it would wait for (and time) a later change's save.
        guard appliedSeq > durableSeq else { return }
        waiting.append((appliedSeq, clock()))
    }

    /// Save requests made and not yet durable.
    public var pendingSaveRequests: Int { waiting.count }

    /// When the loop must wake for the delayed save, if one is pending (monotonic ns).
    public var nextDeadline: UInt64? { policy.deadline }

    // MARK: the loop

    /// One turn of the save loop: the timer, finished writes, and a new group if one is due,
    /// all flushed in one submit. Blocks only with `waiting` and a write in flight.
    public func poll(waiting block: Bool = false) throws(StoreError) -> [SaveEvent] {
        var events: [SaveEvent] = []
        if policy.takeDue(at: clock()) { requestSave() }
        let completions = try io { try engine.reap(waiting: block && groupSeq != nil) }
        for completion in completions {
            guard let store = stores.first(where: { $0.owns(completion.ticket) }) else { continue }
            if case .failed(let error) = try store.complete(completion) { groupFailure = groupFailure ?? .io(error) }
            if let failure = store.takeCompactionFailure() { events.append(.compactionFailed(failure)) }
        }
        if groupSeq != nil, stores.contains(where: \.awaitsPartners), stores.allSatisfy({ $0.isIdle || $0.awaitsPartners }) {
            try releaseCompactions()
        }
        if let seq = groupSeq, stores.allSatisfy(\.isIdle) {
            groupSeq = nil
            if let failure = groupFailure {
                groupFailure = nil
                retryBlocked = true
                events.append(.failed(failure))
            } else {
                markDurable(seq, &events)
                try deleteIncognitoIfEmpty(&events)
            }
        }
        if groupSeq == nil, !retryBlocked, let request = waiting.last, request.seq > durableSeq {
            try startGroup(&events)
        }
        return events
    }

    /// Every write of the group has landed, and a compaction sharing the save with the other
    /// Browser waits: its snapshot goes into place if the whole save is durable, else it is
    /// dropped with the save.
    private func releaseCompactions() throws(StoreError) {
        for store in stores where store.awaitsPartners {
            if groupFailure != nil {
                store.abandonAfterPartnerFailure()
            } else if case .failed(let error) = store.renameAfterPartners() {
                groupFailure = groupFailure ?? .io(error)
            }
        }
        try io { try engine.flush() }
    }

    /// Polls until no write is in flight: pending saves and compactions done (tools, tests).
    public func settle() throws(StoreError) {
        repeat {
            for case .failed(let error) in try poll(waiting: true) { throw error }
        } while groupSeq != nil
    }

    private func startGroup(_ events: inout [SaveEvent]) throws(StoreError) {
        // A save that empties the incognito Browser is followed by deleting its session: the
        // regular journal then takes a commit too (records or not), so the window's seq
        // outlives the incognito directory.
        let closesIncognito = stores[1].hasUnsavedRecords && stores[1].list.isEmpty
        let participants = stores.filter { $0.hasUnsavedRecords || ($0 === stores[0] && closesIncognito) }
        // A save is due only while a change is unsaved: every seq is a change, and a change's
        // records stay staged until a save of them succeeds.
        assert(!participants.isEmpty, "a save is due with nothing unsaved")
        do {
            for store in participants { try store.createIfNeeded(emptyThrough: durableSeq) }
        } catch {
            retryBlocked = true
            events.append(.failed(error))
            return
        }
        let browsers = participants.reduce(UInt8(0)) { $0 | $1.kind.commitBit }
        for store in participants {
            let compact = store.mustCompact || store.shouldCompact
            do {
                try store.startSave(seq: appliedSeq, browsers: browsers, compact: compact)
            } catch {
                groupFailure = groupFailure ?? error
            }
        }
        groupSeq = appliedSeq
        try io { try engine.flush() }
    }

    private func markDurable(_ seq: UInt64, _ events: inout [SaveEvent]) {
        guard seq > durableSeq else { return }
        durableSeq = seq
        savesCompleted += 1
        let now = clock()
        while let first = waiting.first, first.seq <= seq {
            let microseconds = (now - first.at) / 1000
            saveLatency.record(microseconds)
            onSaveLatency?(microseconds)
            waiting.removeFirst()
        }
        events.append(.durable(seq))
    }

    /// The seed's rule for incognito: when its last tab has closed and that is durable, its
    /// session is deleted, files then directory then the parent's entry.
    private func deleteIncognitoIfEmpty(_ events: inout [SaveEvent]) throws(StoreError) {
        let store = stores[1]
        guard store.isOnDisk, store.list.isEmpty, !store.hasUnsavedRecords else { return }
        try store.destroy()
        events.append(.deletedIncognito)
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
public func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
