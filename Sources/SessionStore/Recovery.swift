import BrowserModel
import Glibc
import HostLimits
import IOUring
import SessionFormat
import SystemPackage

/// One journal of the chain recovery applies: what its scan found and how much of it is used.
struct LoadedJournal {
    let generation: UInt64
    let path: FilePath
    let scan: JournalFile.Scan
    /// Commits applied; the records before the last of them are replayed.
    var commitsUsed: Int
    /// One past the last byte that is neither a used commit's nor a zero: what a repair zeroes.
    let garbageEnd: Int
    /// Committed saves recovery left out of this journal (`LoadedSession.savesToLeaveOut`).
    var savesLeftOut = 0

    /// Where appends continue: the end of the last used commit.
    var tail: Int { commitsUsed == 0 ? scan.headerEnd : scan.commits[commitsUsed - 1].end }
    var lastCommit: JournalCommit? { commitsUsed == 0 ? nil : scan.commits[commitsUsed - 1].commit }
    var usedRecords: ArraySlice<JournalRecord> {
        scan.records[..<(commitsUsed == 0 ? 0 : scan.commits[commitsUsed - 1].recordCount)]
    }
}

/// What a store's directory holds, checked but not yet applied: the window looks at every
/// Browser's last save before deciding what each restores.
struct LoadedSession {
    var reader: SnapshotReader?
    var generation: UInt64 = 0
    var highestGeneration: UInt64 = 0
    var journals: [LoadedJournal] = []
    var damaged: [DamagedFile] = []
    /// Damage found in the fallback only (`checkFallback`): set aside, reported, and no reason to
    /// doubt the newest chain, which restores as it is.
    var fallbackDamaged: [DamagedFile] = []
    /// The fallback is left for after the restore (`load(checkingFallback: false)`): the
    /// store reads it before its first save (`BrowserStore.checkPendingFallback`).
    var fallbackUnchecked = false
    var tornTailAt: Int?
    var needsRebase = false

    /// The last save that follows the snapshot, if any.
    var lastCommit: JournalCommit? { journals.last(where: { $0.commitsUsed > 0 })?.lastCommit }

    /// How many of the last saves the window cannot keep beside `other` as it is on disk, so
    /// the window comes back as it was after one command: every trailing save made while the
    /// other Browser lagged (`JournalCommit.laggingBit`) past the seq the other's files reach,
    /// then, among the last `Limits.maxSavesInFlight` saves left (the most a kill can leave
    /// unfinished), the earliest that names the other (`otherBit`) past `otherSeq` (where the
    /// other's session ends, its own left-out saves left out), with every save after it, and
    /// the lagging saves that are then trailing. Lagging saves were never durable for the
    /// window, so nothing acknowledged is left out; when the other Browser fell back from
    /// damage, each keeps its own.
    ///
    /// Only a session the other's files hold counts (a snapshot that reads), not any file:
    /// a save naming the other was made after the other's session was created durably, and
    /// that session goes only once a later save is durable in both (the incognito session
    /// deleted when its last tab closed). What a kill leaves of a session being created again
    /// after that (a journal whose snapshot was never renamed) ends before every save and
    /// holds nothing: taken for a session, it made recovery drop the acknowledged save that
    /// closed the incognito tabs.
    func savesToLeaveOut(other: LoadedSession, otherSeq: UInt64, otherBit: UInt8) -> Int {
        let commits = usedCommits
        var count = 0
        func leaveOutTrailingLagging() {
            guard other.damaged.isEmpty else { return }
            let reached = other.holdsSession ? otherSeq : 0
            while count < commits.count, commits[commits.count - 1 - count].browsers & JournalCommit.laggingBit != 0,
                commits[commits.count - 1 - count].seq > reached
            {
                count += 1
            }
        }
        leaveOutTrailingLagging()
        // Saves are pipelined, at most `Limits.maxSavesInFlight` in flight: of the last that
        // many before the lagging ones, the earliest that names the other Browser past its
        // seq is missing there, and it goes with every save after it (they follow it).
        // Only from files read to their end: where the other's were set aside (damage, or a key
        // that does not open them), its seq says nothing of the saves it lacks.
        let end = commits.count - count
        if other.holdsSession, other.damaged.isEmpty,
            let first = commits.indices[max(0, end - Limits.maxSavesInFlight)..<end].first(where: {
                commits[$0].browsers & otherBit != 0 && commits[$0].seq > otherSeq
            })
        {
            count = commits.count - first
            // A lagging save that the save left out followed is trailing now (hostile round:
            // a lagging incognito save, then one naming both that only incognito made).
            leaveOutTrailingLagging()
        }
        assert(count >= 0 && count <= commits.count, "only saves there are are left out")
        return count
    }

    /// The saves the journals hold past the snapshot, in order.
    private var usedCommits: [JournalCommit] { journals.flatMap { $0.scan.commits[..<$0.commitsUsed].map(\.commit) } }

    /// The last command sequence number this session covers with its last `dropped` saves left out.
    func seq(leavingOut dropped: Int) -> UInt64 {
        let commits = usedCommits
        let kept = commits.count - min(max(dropped, 0), commits.count)
        return max(reader?.lastCommandSeq ?? 0, kept > 0 ? commits[kept - 1].seq : 0)
    }

    /// The last command sequence number this session covers.
    var seq: UInt64 { max(reader?.lastCommandSeq ?? 0, lastCommit?.seq ?? 0) }
    var isOnDisk: Bool { highestGeneration > 0 }
    /// Whether a snapshot read (or generation 1's, which is empty, stands in for its damaged
    /// file): the files hold a session, not only what a kill left of one.
    var holdsSession: Bool { reader != nil || emptyFirstGeneration }
    /// Generation 1's snapshot did not read, and its journal is there: the base is the empty list
    /// that snapshot always holds (`BrowserStore.createIfNeeded` writes it; compactions start
    /// at 2), so the journal's saves are not lost with it.
    var emptyFirstGeneration = false
}

extension BrowserStore {
    /// Reads the directory: the newest snapshot that passes its checks (newer ones are set
    /// aside), then the journals that follow it, each cut at its last commit. Removes what a
    /// crashed compaction left. Changes nothing else. `below`: the chain stops before that
    /// generation (a fallback's check needs it only as far as the newest snapshot).
    /// `checkingFallback`: whether the generation a damaged newest snapshot would fall back to
    /// is read now (`checkFallback`), or left to the store's first save (a window restoring).
    func load(excluding excluded: Set<UInt64> = [], below: UInt64 = .max, checkingFallback: Bool = true)
        throws(StoreError) -> LoadedSession
    {
        var loaded = LoadedSession()
        switch try io({ try engine.kind(directory) }) {
        case nil:
            return loaded
        case .directory?:
            break
        case let kind?:
            // A symlink (or anything else) where the session directory belongs: moved aside as
            // itself, never followed; the Browser starts empty.
            let reason = SessionFormatError.readFailed(offset: 0, reason: "\(kind) where a session directory belongs")
            loaded.damaged.append(contentsOf: setAside(directory, reason, under: directory.removingLastComponent()))
            return loaded
        }
        guard let entries = try io({ try engine.directoryEntries(directory) }) else { return loaded }
        if entries.contains(DiskLayout.deletionMarker) {
            // A deletion a crash interrupted: finished now, and nothing of it restored.
            if !readOnly { try removeDeletedSession() }
            return loaded
        }
        let listing = StoreListing(entries: entries)
        if !readOnly {
            for name in listing.temporaries { try? clear(directory.appending(name), into: directory) }
        }
        loaded.highestGeneration = max(listing.snapshots.first ?? 0, listing.journals.max() ?? 0)
        try openNewestSnapshot(listing, excluding: excluded, into: &loaded)
        guard let chain = try chain(listing, entries: entries, below: below, into: &loaded) else { return loaded }
        for (position, generation) in chain.enumerated() {
            guard listing.journals.contains(generation) else { break }
            let followed = position + 1 < chain.count && listing.journals.contains(chain[position + 1])
            guard try loadJournal(generation, followed: followed, into: &loaded) else { break }
        }
        // Only the newest snapshot's own journal is continued: a chain through newer journals
        // (past a damaged snapshot, or one a kill left in the background) is written again.
        if loaded.journals.first?.generation != loaded.generation || loaded.journals.count > 1 {
            loaded.needsRebase = true
        }
        if excluded.isEmpty, !loaded.needsRebase, listing.snapshots.contains(where: { $0 < loaded.generation }) {
            if checkingFallback { try checkFallback(&loaded) } else { loaded.fallbackUnchecked = true }
        }
        return loaded
    }

    /// The newest snapshot not `excluded` that opens and passes its checks; each newer one that
    /// does not is set aside.
    private func openNewestSnapshot(
        _ listing: StoreListing, excluding excluded: Set<UInt64>, into loaded: inout LoadedSession
    ) throws(StoreError) {
        for generation in listing.snapshots where !excluded.contains(generation) {
            let path = directory.appending(DiskLayout.snapshotName(generation))
            guard let source = try openListed(path, into: &loaded) else { continue }
            do throws(SessionFormatError) {
                let reader = try openSnapshot(source, generation, into: &loaded)
                guard reader.isSealed || !refusesClearFiles else { throw .clearAmongSealed }
                loaded.reader = reader
                loaded.generation = generation
                break
            } catch {
                loaded.damaged.append(contentsOf: setAside(path, error))
                loaded.needsRebase = true
            }
        }
    }

    /// The generations whose journals follow the snapshot `loaded` opened, in order, below
    /// `below`; nil when there is no chain (no snapshot, and no first generation to stand in).
    /// Removes the orphan journals a stopped compaction left.
    private func chain(_ listing: StoreListing, entries: [String], below: UInt64, into loaded: inout LoadedSession)
        throws(StoreError) -> [UInt64]?
    {
        // A journal whose snapshot was set aside as damaged stays: its saves follow the journal
        // before it, and without it an older snapshot would restore without them. So does one
        // whose snapshot never existed and that holds saves: appends move to a compaction's new
        // journal before its snapshot is in place (`BackgroundSnapshot`). One holding none was
        // made by a compaction that stopped before that: it goes.
        let listedSnapshots = Set(listing.snapshots)
        // A listing that fails is thrown, not taken for an empty `damaged/`: the journal of a
        // snapshot set aside there would go as an orphan.
        let damagedEntries = try io { try engine.directoryEntries(directory.appending(DiskLayout.damagedDirectory)) }
        let renamedInPlace = entries.filter { $0.contains(DiskLayout.damagedInPlaceInfix) }
        let setAsideSnapshots = Set(
            ((damagedEntries ?? []) + renamedInPlace).compactMap { name in
                DiskLayout.generation(
                    of: String(name.prefix(DiskLayout.snapshotPrefix.count + DiskLayout.generationDigits)),
                    prefix: DiskLayout.snapshotPrefix)
            })
        let snapshotExisted = { (generation: UInt64) in
            listedSnapshots.contains(generation) || setAsideSnapshots.contains(generation)
        }
        var unused: Set<UInt64> = []
        for orphan in listing.journals where orphan > loaded.generation && orphan < below && !snapshotExisted(orphan) {
            let path = directory.appending(DiskLayout.journalName(orphan))
            guard try holdsNoSave(path, orphan) else { continue }
            unused.insert(orphan)
            if !readOnly { try? engine.removeFile(path) }
        }
        if loaded.reader == nil, snapshotExisted(1), listing.journals.contains(1) {
            // The only snapshot damaged: a young window, or an incognito session created again.
            loaded.generation = 1
            loaded.emptyFirstGeneration = true
            loaded.needsRebase = true
        }
        guard loaded.generation > 0 else { return nil }
        // The chain goes through every newer generation whose snapshot was ever there (set aside
        // as damaged since). A number no snapshot ever took is passed over: a compaction that
        // stopped before its rename left only a journal, which went as an orphan, and the next
        // compaction took the number above. (Walked one number at a time, the chain stopped
        // at that gap, and a fallback past a damaged newest snapshot dropped its journal's
        // acknowledged saves: windowhost stress, seed 1 with --io uring.)
        return [loaded.generation]
            + listedSnapshots.union(setAsideSnapshots).union(listing.journals).subtracting(unused).filter {
                $0 > loaded.generation && $0 < below
            }.sorted()
    }

    /// Reads the journal of `generation` into `loaded`, cut at its last commit; whether the
    /// chain goes on past it. `followed`: a newer journal is next in the chain.
    private func loadJournal(_ generation: UInt64, followed: Bool, into loaded: inout LoadedSession) throws(StoreError)
        -> Bool
    {
        let path = directory.appending(DiskLayout.journalName(generation))
        guard let source = try openListed(path, into: &loaded) else { return false }
        let scan: JournalFile.Scan
        do throws(SessionFormatError) {
            scan = try scanJournal(source, generation, into: &loaded)
            guard scan.sealed || !refusesClearFiles else { throw .clearAmongSealed }
        } catch {
            loaded.damaged.append(contentsOf: setAside(path, error))
            loaded.needsRebase = true
            return false
        }
        // Every number is checked before anything is applied: a seq out of range or going
        // back is damage in the middle, the saves before it kept.
        let seqs = scan.checkSeqs(
            snapshotSeq: loaded.reader?.lastCommandSeq ?? 0, previousCommit: loaded.lastCommit?.seq)
        if let error = seqs.error {
            loaded.journals.append(
                LoadedJournal(
                    generation: generation, path: path, scan: scan, commitsUsed: seqs.validCommits,
                    garbageEnd: scan.commits.last?.end ?? scan.headerEnd))
            loaded.damaged.append(contentsOf: setAside(path, error))
            loaded.needsRebase = true
            return false
        }
        let tail = scan.commits.last?.end ?? scan.headerEnd
        let journal = LoadedJournal(
            generation: generation, path: path, scan: scan, commitsUsed: scan.commits.count,
            garbageEnd: try readingTail(source) { () throws(SessionFormatError) in
                try JournalFile.lastNonZeroEnd(source, from: tail)
            })
        loaded.journals.append(journal)
        if journal.garbageEnd > tail {
            if let error = scan.stoppedBy,
                try readingTail(
                    source,
                    { () throws(SessionFormatError) in
                        try JournalFile.hasValidCommit(in: source, after: scan.validLength + 1)
                    }),
                try !isPipelinedHole(in: source, from: scan.validLength, to: journal.garbageEnd)
            {
                // Valid records after a bad one: damage in the middle, not a torn last write.
                loaded.damaged.append(contentsOf: setAside(path, error))
                loaded.needsRebase = true
                return false
            }
            loaded.tornTailAt = tail
            // A torn journal with a newer one after it: the newer one cannot follow it.
            if followed {
                loaded.needsRebase = true
                return false
            }
        }
        return true
    }

    /// Whether the journal at `path` holds no save: nothing past its header (zeros, or an empty
    /// file; its header too may not have landed). A file that does not open is no answer: the
    /// chain's walk sets it aside.
    private func holdsNoSave(_ path: FilePath, _ generation: UInt64) throws(StoreError) -> Bool {
        guard let source = try? EngineBytes(engine, path: path) else { return false }
        return try readingTail(source) { () throws(SessionFormatError) in
            if try JournalFile.lastNonZeroEnd(source, from: 0) == 0 { return true }
            for seal in openingSeals(.journal, generation) {
                guard let scan = try? JournalFile.scan(source, seal: seal) else { continue }
                guard scan.commits.isEmpty else { return false }
                return try JournalFile.lastNonZeroEnd(source, from: scan.headerEnd) <= scan.headerEnd
            }
            return false
        }
    }

    /// The snapshot of `generation`, opened with the first of `openingSeals` that opens it. One
    /// opened with an alternate key (`alternateSeals`) is written again under the store's own
    /// (`needsRebase`). Throws what the store's own seal met when none opens it.
    private func openSnapshot(_ source: EngineBytes, _ generation: UInt64, into loaded: inout LoadedSession)
        throws(SessionFormatError) -> SnapshotReader
    {
        let seals = openingSeals(.snapshot, generation)
        var first: SessionFormatError?
        for (index, seal) in seals.enumerated() {
            do throws(SessionFormatError) {
                let reader = try SnapshotReader(source, seal: seal)
                if index > 0 { loaded.needsRebase = true }
                return reader
            } catch {
                first = first ?? error
            }
        }
        throw first ?? .sealedWithoutKey
    }

    /// The journal of `generation` scanned with each of `openingSeals`: the scan that reads
    /// furthest (its own seal's on a tie). A wrong key stops a scan at its first sealed record.
    private func scanJournal(_ source: EngineBytes, _ generation: UInt64, into loaded: inout LoadedSession)
        throws(SessionFormatError) -> JournalFile.Scan
    {
        let seals = openingSeals(.journal, generation)
        var best: (scan: JournalFile.Scan, index: Int)?
        var first: SessionFormatError?
        for (index, seal) in seals.enumerated() {
            do throws(SessionFormatError) {
                let scan = try JournalFile.scan(source, seal: seal)
                if best.map({ scan.validLength > $0.scan.validLength }) ?? true { best = (scan, index) }
                if scan.stoppedBy == nil { break }
            } catch {
                first = first ?? error
            }
        }
        guard let best else { throw first ?? .sealedWithoutKey }
        if best.index > 0 { loaded.needsRebase = true }
        return best.scan
    }

    /// The generation a damaged newest snapshot would fall back to is read too, as a fallback
    /// would read it: damage there (a save in the middle of its journal no longer reading, its
    /// snapshot no longer reading) was found before only when the newest snapshot was damaged
    /// in turn, too late, and acknowledged saves went with both. Damage found is set aside and
    /// reported, and the directory is written again from memory (`needsRebase`: a new snapshot
    /// and one that continues it), so the newest snapshot has a fallback that reaches it again.
    /// A fallback that reads whole but does not reach the newest snapshot (one written from
    /// memory, its follow-up cut short by a kill) is written again the same way.
    private func checkFallback(_ loaded: inout LoadedSession) throws(StoreError) {
        guard let newest = loaded.reader,
            let damage = try fallbackDamage(below: loaded.generation, newestSeq: newest.lastCommandSeq)
        else { return }
        loaded.fallbackDamaged = damage
        loaded.needsRebase = true
    }

    /// Nil when the generations below `newest` read whole (every history frame of their
    /// snapshot too) and reach `newestSeq`; else the damage found there (set aside), empty when
    /// they only stop short.
    private func fallbackDamage(below newest: UInt64, newestSeq: UInt64) throws(StoreError) -> [DamagedFile]? {
        // Snapshot N+1 is snapshot N plus journal N: the newest journal, read already, is not read again.
        let fallback = try load(excluding: [newest], below: newest)
        var damage = fallback.damaged
        if damage.isEmpty, let reader = fallback.reader {
            // Every history frame, as a realized tab or a compaction would read it.
            do throws(SessionFormatError) {
                try reader.verifyEveryFrame()
            } catch {
                damage += setAside(directory.appending(DiskLayout.snapshotName(fallback.generation)), error)
            }
        }
        // A torn tail ends the chain here; the real fallback goes on into the newest journal,
        // which cannot follow a torn one, and would stop short of it.
        let reaches =
            fallback.reader != nil && damage.isEmpty && fallback.tornTailAt == nil && fallback.seq >= newestSeq
        return reaches ? nil : damage
    }

    /// `checkFallback` for a store that restored without it (`LoadedSession.fallbackUnchecked`),
    /// run by the window once it serves and before this store's first save starts: no save is
    /// acknowledged resting on a fallback not known to reach the newest snapshot. One that does
    /// not is written again from memory at the next turn, unasked, as the restore's repair
    /// would have written it. Returns the damage it set aside. A read that fails (the process
    /// short of descriptors) leaves the check pending.
    func checkPendingFallback() throws(StoreError) -> [DamagedFile] {
        guard let unchecked = uncheckedFallback else { return [] }
        precondition(
            isIdle && snapshotGeneration == unchecked.generation,
            "the fallback is read before the restored generation's first save")
        let damage = try fallbackDamage(below: unchecked.generation, newestSeq: unchecked.newestSeq)
        uncheckedFallback = nil
        guard let damage else { return [] }
        rewriteFromMemoryUnasked()
        return damage
    }

    /// Restores `loaded` into the (empty) list, leaving out its last `dropped` saves
    /// (`LoadedSession.savesToLeaveOut`). Attaches the recorder: nothing restored is journaled
    /// again. The directory is repaired after, by `repair(windowSeq:)`, once the window's seq
    /// is known. Throws, with the files as they were, when a read fails for a reason that is
    /// no damage (the process short of memory or descriptors, an I/O error): a later attempt
    /// restores the whole window.
    func restore(_ loaded: LoadedSession, leavingOut dropped: Int) throws(StoreError) -> RecoveryReport {
        var loaded = loaded
        var damaged = loaded.damaged + loaded.fallbackDamaged
        var outcome = try replay(&loaded, leavingOut: dropped)
        if let failure = outcome.failure, loaded.generation > 0 {
            try replayFallback(after: failure, &loaded, &outcome, &damaged, leavingOut: dropped)
        }
        if let failure = outcome.failure {
            damaged.append(contentsOf: setAside(failure.path, failure.error))
            loaded.needsRebase = true
            // Whole saves only: the save whose record did not fit goes with everything after
            // it, and the chain is applied again up to the commit before it, so the list and
            // the seq it comes back at are the same save's (the list held that save's first
            // records, and the seq was the snapshot's: the other Browser's saves above it were
            // then taken for unfinished ones at the next start, and dropped).
            if let journal = failure.journal {
                loaded.journals[journal].commitsUsed = failure.commitsApplied
                loaded.journals.removeSubrange((journal + 1)...)
            }
            list.closeAll()
            historySources.removeAll()
            // `loaded` left its saves out already: leaving them out again would drop one more.
            let droppedSeq = outcome.dropped
            outcome = try replay(&loaded, leavingOut: 0)
            outcome.dropped = droppedSeq
            assert(
                failure.journal == nil || outcome.failure == nil,
                "the saves before a record that did not fit replay cleanly")
            outcome.failure = failure
        }
        let degradedTabs = outcome.degraded?.tabs.values.sorted { $0.id < $1.id } ?? []
        if !degradedTabs.isEmpty {
            // Both generations' copies are damaged; the files stay where they are (a lazy tab
            // may still read its own frame from them) and the new snapshot written below
            // holds the degraded histories.
            loaded.needsRebase = true
            let snapshot = directory.appending(DiskLayout.snapshotName(loaded.generation))
            damaged += degradedTabs.map { DamagedFile(path: snapshot.string, setAsideAt: nil, error: $0.reason) }
        }
        precondition(
            loaded.generation <= loaded.highestGeneration && isIdle,
            "a restore takes a generation the directory holds, nothing in flight")
        generation = loaded.generation
        snapshotGeneration = loaded.generation
        highestGeneration = loaded.highestGeneration
        needsRebase = loaded.needsRebase
        // A restore written again from memory (`repair`) has a fallback that reaches it.
        uncheckedFallback =
            loaded.fallbackUnchecked && !loaded.needsRebase
            ? loaded.reader.map { (loaded.generation, $0.lastCommandSeq) } : nil
        restoredInTheClear = loaded.reader.map { !$0.isSealed } == true || loaded.journals.contains { !$0.scan.sealed }
        // Continuing the journal zeroes its left-out saves (`repair`); a new snapshot must
        // erase them first, wherever they are.
        leftOutSaves =
            needsRebase
            ? loaded.journals.filter {
                $0.savesLeftOut > 0 && !keptInPlace.contains($0.path.lastComponent?.string ?? "")
            }
            .map { ($0.path, $0.tail..<$0.garbageEnd) } : []
        recorder = JournalRecorder(list: list)
        movesReceived = outcome.moves
        restoredSession = (loaded, outcome.seq)
        return RecoveryReport(
            kind: kind.rawValue, generation: loaded.generation, damaged: damaged, tornTailAt: loaded.tornTailAt,
            replayedRecords: outcome.replayed, droppedIncompleteSave: outcome.dropped, seq: outcome.seq,
            degradedTabs: degradedTabs.map(\.id))
    }

    /// A journal that does not fit its snapshot: the snapshot may be the damaged one (a history
    /// that no longer reads). If the generation before replays cleanly and reaches as far, it
    /// was: the list, `loaded`, `outcome` and `damaged` become the fallback's, and the newest
    /// snapshot is set aside. Else the list is left empty for the caller's own replay.
    private func replayFallback(
        after failure: ReplayFailure, _ loaded: inout LoadedSession, _ outcome: inout ReplayOutcome,
        _ damaged: inout [DamagedFile],
        leavingOut dropped: Int
    ) throws(StoreError) {
        list.closeAll()
        historySources.removeAll()
        var fallback = try load(excluding: [loaded.generation])
        guard fallback.reader != nil else { return }
        let retry = try replay(&fallback, leavingOut: dropped)
        // Only a fallback that reaches as far: one whose chain stops short would drop
        // acknowledged saves without a word.
        guard retry.failure == nil, fallback.seq >= loaded.seq else {
            list.closeAll()
            historySources.removeAll()
            return
        }
        damaged = fallback.damaged
        damaged.append(
            contentsOf: setAside(directory.appending(DiskLayout.snapshotName(loaded.generation)), failure.error))
        fallback.needsRebase = true
        loaded = fallback
        outcome = retry
    }

    /// Repairs the directory `restore` read: a torn tail is zeroed, and after a fallback or
    /// damage (or over what a kill left of a session being created) a new snapshot is written
    /// from the restored state. That snapshot says the list is as of `windowSeq`, the seq the
    /// window came back at, never only this Browser's own: a snapshot below it would make the
    /// next recovery take the other Browser's saves above it for ones this Browser never made
    /// durable, and drop acknowledged saves (a kill while the incognito session was created
    /// again left a journal, the repair wrote snapshots saying seq 0, and the next start left
    /// out and erased the regular commit of the save that had closed the incognito tabs).
    func repair(windowSeq: UInt64) -> StoreError? {
        guard let restored = restoredSession else { return nil }
        restoredSession = nil
        // A spare journal a kill or power cut left is never trusted (its zeros may not all have
        // landed): deleted here, not by `load` (a restore that throws touches no file), and
        // written again once the store is idle. None is ever read.
        try? clear(directory.appending(DiskLayout.spareJournal), into: directory)
        assert(windowSeq >= restored.seq, "the window comes back at the newest of its Browsers' seqs")
        return repair(restored.loaded, seq: windowSeq)
    }

    /// A tab whose history read nowhere now holds one page: the next save writes a snapshot
    /// from memory. One that degrades after recovery (realized later, by a command or for a
    /// snapshot) is kept for the window to report; recovery's own are in its report.
    private func noteDegraded(_ tab: DegradedHistories.Tab) {
        needsRebase = true
        if recorder != nil { degradedSinceRecovery.append(tab) }
    }

    /// The tabs that degraded since recovery and were not yet reported; emptied.
    func takeDegradedTabs() -> [DegradedHistories.Tab] {
        defer { degradedSinceRecovery.removeAll() }
        return degradedSinceRecovery
    }

    /// Applies `loaded` to the (scratch) list without repairing anything: what `inspect` shows.
    func replayForInspection(_ loaded: LoadedSession) throws(StoreError) -> (
        seq: UInt64, damaged: [DamagedFile], moves: ReceivedMoves
    ) {
        var loaded = loaded
        let outcome = try replay(&loaded, leavingOut: 0)
        var damaged = loaded.damaged + loaded.fallbackDamaged
        if let failure = outcome.failure {
            damaged.append(DamagedFile(path: failure.path.string, setAsideAt: nil, error: failure.error))
        }
        return (outcome.seq, damaged, outcome.moves)
    }

    /// What applying a loaded session did: records replayed, the seq reached, the save left
    /// out, and the journal record that did not fit, if one did not.
    private struct ReplayOutcome {
        var replayed = 0
        var seq: UInt64 = 0
        var dropped: UInt64?
        var failure: ReplayFailure?
        /// Tabs whose history read nowhere, kept as the page their metadata names.
        var degraded: DegradedHistories?
        /// The moves received: the snapshot's, then the journals' inserts that carry one.
        var moves = ReceivedMoves()
    }

    /// Restores the snapshot into the empty list and applies the journals' committed saves,
    /// stopping at the first record that does not fit. A record that did not fit only because
    /// a tab's history could not be rebuilt for a reason that is no damage throws that error.
    private func replay(_ loaded: inout LoadedSession, leavingOut dropped: Int) throws(StoreError) -> ReplayOutcome {
        var outcome = ReplayOutcome()
        historyReadFailure = nil
        // A store that only reads (inspect, a scratch store rebuilding one history) reports a
        // lost history as the damage it is; a store that goes on keeps the tab and replays on.
        let degraded = readOnly ? nil : DegradedHistories { [weak self] tab in self?.noteDegraded(tab) }
        outcome.degraded = degraded
        // Before anything can fail, so a retry of the same `loaded` leaves out nothing more.
        for _ in 0..<dropped {
            guard let last = loaded.journals.lastIndex(where: { $0.commitsUsed > 0 }) else { break }
            outcome.dropped = outcome.dropped ?? loaded.journals[last].lastCommit?.seq
            loaded.journals[last].commitsUsed -= 1
            loaded.journals[last].savesLeftOut += 1
            if last != loaded.journals.count - 1 { loaded.needsRebase = true }
        }
        if let reader = loaded.reader {
            do {
                let excluded = fallbackExclusions.union([loaded.generation])
                try reader.restore(
                    into: list, profile: profile,
                    historyFallback: { [weak self] id throws(StoreError) in
                        try self?.history(of: id, excluding: excluded, asIn: reader)
                    },
                    degraded: degraded)
                historySources.restored = reader
            } catch {
                outcome.failure = ReplayFailure(
                    path: directory.appending(DiskLayout.snapshotName(loaded.generation)), error: error)
                return outcome
            }
        }
        outcome.seq = loaded.reader?.lastCommandSeq ?? 0
        outcome.moves = loaded.reader?.movesReceived ?? ReceivedMoves()
        let journalTabs = JournalTabs()
        // The histories the records navigated were changed in memory; the window keeps bytes.
        defer { journalTabs.storeReplayed() }
        for (index, journal) in loaded.journals.enumerated() {
            var next = 0
            for (applied, found) in journal.scan.commits[..<journal.commitsUsed].enumerated() {
                for record in next..<found.recordCount {
                    do {
                        try JournalReplayer.apply(
                            journal.scan.records[record], to: list, profile: profile, keepingIn: journalTabs,
                            degraded: degraded)
                    } catch {
                        if let historyReadFailure { throw historyReadFailure }
                        outcome.failure = ReplayFailure(
                            path: journal.path,
                            error: .invalidState(offset: journal.scan.recordOffsets[record], reason: error),
                            journal: index, commitsApplied: applied)
                        return outcome
                    }
                    if let moved = journal.scan.records[record].movedIn { outcome.moves.note(moved) }
                    outcome.replayed += 1
                }
                next = found.recordCount
                outcome.seq = max(outcome.seq, found.commit.seq)
            }
        }
        return outcome
    }

    /// What did not fit when applying a loaded session: the snapshot (`journal` nil), or a
    /// journal record, in `loaded.journals[journal]`, after its first `commitsApplied` saves.
    private struct ReplayFailure {
        let path: FilePath
        let error: SessionFormatError
        var journal: Int?
        var commitsApplied = 0
    }

    /// Opens the journal for appends (its unused tail zeroed) or, when the files cannot simply
    /// be continued, writes a new generation from memory.
    private func repair(_ loaded: LoadedSession, seq: UInt64) -> StoreError? {
        do {
            if !needsRebase, let current = loaded.journals.first {
                // A killed process's last rename (a compaction's snapshot, a new session's
                // generation) may be visible and not yet durable: the saves about to be
                // acknowledged in this journal must not rest on an entry a power cut undoes.
                try io { try engine.syncDirectory(directory) }
                let file = try io { try engine.open(current.path, .write) }
                journal = file
                journalEnd = current.tail
                journalRecords = current.usedRecords.count
                // One in the clear is never appended to by a store with a key (`canAppend`).
                generationSealed = current.scan.sealed
                try zeroDurably(file, current.tail..<current.garbageEnd)
                // Direct from here on (the zeros above went buffered, from wherever the tail
                // is). A journal that does not end on this disk's block boundary (one from
                // before block framing, or from a disk with smaller blocks) is continued by a
                // new generation at the next save (`canAppend`), never by an append into the
                // block that holds its last save.
                journalBlock = writeDirect(file)
                return nil
            }
            guard loaded.isOnDisk else { return nil }
            // Written from memory, twice (`Compaction.twin`): the window takes commands only once one fault
            // more cannot bring it back short of what it restored.
            try startSave(seq: seq, browsers: kind.commitBit, compact: true)
            try io { try engine.flush() }
            var failure: StoreError?
            // Another chain's completion goes back to the engine, never dropped (`perform`).
            var others: [IOCompletion] = []
            defer { engine.returnToReap(others) }
            while !isIdle {
                for completion in try io({ try engine.reap(waiting: true) }) {
                    guard owns(completion.ticket) else {
                        others.append(completion)
                        continue
                    }
                    if case .failed(let error) = try complete(completion) { failure = error }
                }
            }
            return failure ?? takeCompactionFailure()
        } catch {
            return error
        }
    }

    /// A tab's history as `snapshot` stored it, rebuilt from an older generation (its snapshot
    /// and the journals since, up to `snapshot`'s last command), for a tab whose stored history
    /// no longer reads. Read only, through a scratch store. Nil unless the rebuilt history
    /// agrees with what `snapshot`'s metadata says of the tab (item count, current page): an
    /// older generation whose chain stops short must not pass for the tab's history. Each
    /// level excludes one more generation, so a damaged chain cannot loop. Only damage makes
    /// nil: a read that fails for another reason (a shortage of descriptors or memory, an
    /// unreadable directory) is thrown, and noted in `historyReadFailure`, so the tab stays
    /// unrealized instead of degrading for good. The journal replay that realized it throws too.
    private func history(of id: WebStateID, excluding excluded: Set<UInt64>, asIn snapshot: SnapshotReader)
        throws(StoreError) -> NavigationHistory?
    {
        do {
            return try rebuiltHistory(of: id, excluding: excluded, asIn: snapshot)
        } catch {
            historyReadFailure = error
            throw error
        }
    }

    private func rebuiltHistory(of id: WebStateID, excluding excluded: Set<UInt64>, asIn snapshot: SnapshotReader)
        throws(StoreError) -> NavigationHistory?
    {
        guard let stored = snapshot.index(of: id).map(snapshot.metadata(at:)) else { return nil }
        let scratch = BrowserStore(
            kind: kind, window: window, directory: directory, list: WebStateList(),
            profile: Profile(stateDirectory: directory),
            engine: engine, options: options, readOnly: true)
        scratch.sealing = sealing
        scratch.alternateSeals = alternateSeals
        scratch.refusesClearFiles = refusesClearFiles
        scratch.fallbackExclusions = excluded
        var loaded = try scratch.load(excluding: excluded)
        guard loaded.reader != nil else { return nil }
        for index in loaded.journals.indices {
            let journal = loaded.journals[index]
            loaded.journals[index].commitsUsed =
                journal.scan.commits[..<journal.commitsUsed]
                .prefix { $0.commit.seq <= snapshot.lastCommandSeq }.count
        }
        _ = try scratch.replayForInspection(loaded)
        guard let index = scratch.list.index(of: id) else { return nil }
        let realized = try? scratch.list.webState(at: index).navigationHistory()
        if let failure = scratch.historyReadFailure { throw failure }
        guard let history = realized,
            history.items.count == stored.navigationItemCount, history.currentItem?.url == stored.activePageURL,
            history.currentItem?.title == stored.activePageTitle
        else { return nil }
        return history
    }

    /// `body`, reading a journal past its last good save, a read that fails thrown as one:
    /// what is there is unknown, so the tail is neither zeroed nor set aside.
    private func readingTail<T>(_ source: EngineBytes, _ body: () throws(SessionFormatError) -> T) throws(StoreError)
        -> T
    {
        do {
            return try body()
        } catch {
            throw .io(IOEngineError("pread", path: source.path.string, errno: .ioError))
        }
    }

    /// Whether the bytes after a bad record are what a cut leaves of pipelined saves landing
    /// out of order: a save that never landed or landed torn (an all-zero sector in it, which
    /// no save holds), with at most `Limits.maxSavesInFlight` commits after the bad record
    /// (the saves in flight). None of those saves was acknowledged (the one in the hole was
    /// not): a torn tail, zeroed. A flipped byte in an acknowledged save leaves no zero sector:
    /// damage in the middle, set aside.
    private func isPipelinedHole(in source: EngineBytes, from start: Int, to end: Int) throws(StoreError) -> Bool {
        try readingTail(source) { () throws(SessionFormatError) in
            guard
                try JournalFile.validCommitCount(in: source, after: start + 1, upTo: Limits.maxSavesInFlight + 1)
                    <= Limits.maxSavesInFlight
            else {
                return false
            }
            return try JournalFile.hasZeroSector(in: source, from: start, to: end)
        }
    }

    /// Opens a file the listing names, for reading. One that does not open or size (a
    /// directory, symlink, FIFO or socket under the name, a file the kernel refuses) is that
    /// entry's fault alone: it is set aside, the rest restores, and nil comes back. A shortage
    /// of the process's own (memory, descriptors) is no fault of the file's: thrown.
    private func openListed(_ path: FilePath, into loaded: inout LoadedSession) throws(StoreError) -> EngineBytes? {
        do {
            return try EngineBytes(engine, path: path)
        } catch  where error.isResourceShortage {
            throw .io(error)
        } catch {
            loaded.damaged.append(contentsOf: setAside(path, .readFailed(offset: 0, reason: "\(error)")))
            loaded.needsRebase = true
            return nil
        }
    }

    /// Moves a damaged entry, as itself, under `damaged/` of `parent` (the store's directory
    /// unless said), never deleting it. Anything but a directory under the name `damaged` (a
    /// symlink, a file, a FIFO) is first moved out of the way as itself, to a name the layout
    /// does not own, and reported too: the set-aside then goes into a real directory, never
    /// through a symlink. When that move fails, the entry is renamed where it is to
    /// `<name>.damaged-<unix seconds>`, a name no listing takes for a generation, so no later
    /// compaction removes it (and it survives restarts). When even that fails (a read-only
    /// disk), it is reported where it stays and its name remembered (`keptInPlace`) for as
    /// long as the store lives.
    func setAside(_ path: FilePath, _ reason: SessionFormatError, under parent: FilePath? = nil) -> [DamagedFile] {
        guard !readOnly else { return [DamagedFile(path: path.string, setAsideAt: nil, error: reason)] }
        let parent = parent ?? self.directory
        let directory = parent.appending(DiskLayout.damagedDirectory)
        let name = path.lastComponent?.string ?? "file"
        var reported: [DamagedFile] = []
        do throws(IOEngineError) {
            if let kind = try engine.kind(directory), kind != .directory {
                let away = try unusedName(under: parent, "\(DiskLayout.damagedDirectory).not-a-directory-\(time(nil))")
                try engine.rename(directory, to: away)
                try engine.syncDirectory(parent)
                reported.append(
                    DamagedFile(
                        path: directory.string, setAsideAt: away.string,
                        error: .readFailed(
                            offset: 0,
                            reason: "a \(kind) where the damaged/ directory belongs (moved as itself, not followed)")))
            }
            try engine.makeDirectories(directory)
            let target = try unusedName(under: directory, "\(name)-\(time(nil))")
            try engine.rename(path, to: target)
            return reported + [DamagedFile(path: path.string, setAsideAt: target.string, error: reason)]
        } catch {
            let inPlace: FilePath
            do throws(IOEngineError) {
                inPlace = try unusedName(
                    under: path.removingLastComponent(), "\(name)\(DiskLayout.damagedInPlaceInfix)\(time(nil))")
                try engine.rename(path, to: inPlace)
            } catch {
                if path.removingLastComponent() == self.directory { keptInPlace.insert(name) }
                return reported + [
                    DamagedFile(path: path.string, setAsideAt: nil, error: reason, setAsideFailure: "\(error)")
                ]
            }
            return reported + [
                DamagedFile(path: path.string, setAsideAt: inPlace.string, error: reason, setAsideFailure: "\(error)")
            ]
        }
    }

    private func unusedName(under directory: FilePath, _ base: String) throws(IOEngineError) -> FilePath {
        try directory.appendingUnusedName(base) { path throws(IOEngineError) in try engine.kind(path) != nil }
    }
}
