import BrowserModel
import Foundation
import Glibc
import HostLimits
import IOUring
import Platform
import SessionFormat
import SystemPackage

/// When a store rewrites its journal into a new snapshot, and how much room a new journal has.
public struct StoreOptions: Sendable {
    /// Compact once the journal holds this many records…
    public var compactAfterRecords: Int
    /// …or this many bytes.
    public var compactAfterBytes: Int
    /// A new journal is written full of zeros up front, so an append never grows the file and a
    /// durable write flushes data only: the first to this size, later ones to the room their
    /// generation is expected to fill, at most this (`BrowserStore.nextJournalSize`). By
    /// default: room for the records before compaction (about 256 bytes each), plus 64 KiB.
    public var journalPreallocation: Int
    /// How many saves may be in flight at once (pipelined: the next is submitted before the one
    /// before completes), 1 through `Limits.maxSavesInFlight`; acknowledged in seq order.
    public var savesInFlight: Int
    /// When the next save starts while saves are in flight (`GroupCommit`); nil: at every
    /// turn that finds room, whatever it carries (what tests that build depth by hand use).
    public var groupCommit: GroupCommit?

    public init(
        compactAfterRecords: Int = 4096, compactAfterBytes: Int = 1 << 20, journalPreallocation: Int? = nil,
        savesInFlight: Int = Limits.maxSavesInFlight, groupCommit: GroupCommit? = GroupCommit()
    ) {
        self.groupCommit = groupCommit
        self.compactAfterRecords = compactAfterRecords
        self.compactAfterBytes = compactAfterBytes
        self.journalPreallocation =
            journalPreallocation ?? min(compactAfterBytes, compactAfterRecords * 256) + (64 << 10)
        self.savesInFlight = min(max(savesInFlight, 1), Limits.maxSavesInFlight)
    }
}

/// What a finished write meant for a store's saves.
enum SaveProgress: Equatable {
    /// Every record up to `seq` is durable.
    case durable(UInt64)
    case failed(StoreError)
}

/// One Browser's session on disk: restore, then append each save's records to the journal
/// with one durable write, and compact into a new snapshot past a threshold. It reads, writes
/// and deletes only under its own directory. The window (`WindowStore`) decides when to save
/// and runs the engine's loop; this type decides what to write.
public final class BrowserStore {
    public let kind: BrowserKind
    public let directory: FilePath
    public let list: WebStateList
    let profile: Profile
    let engine: any IOEngine
    let options: StoreOptions
    var recorder: JournalRecorder?

    /// The generation appends go to, 0 before the first save.
    var generation: UInt64 = 0
    /// The newest generation whose snapshot is proven (written, in place, read back): where
    /// the chain to `generation` starts. Below `generation` while a compaction's snapshot is
    /// written in the background, or after one failed (that generation has a journal only).
    var snapshotGeneration: UInt64 = 0
    /// A compaction's snapshot being written, put in place and read back while saves append to
    /// its generation's journal (`BackgroundSnapshot.swift`).
    var backgroundSnapshot: BackgroundSnapshot?
    /// The highest generation any file of this directory carries: the next one is above it.
    var highestGeneration: UInt64 = 0
    var journal: EngineFile?
    var journalEnd = 0
    /// The journal's framing block: every save starts and ends on a multiple of it
    /// (`JournalFile.save`). Its direct-I/O block, at least `minimumBlock`, or `minimumBlock`
    /// when its writes are buffered.
    var journalBlock = BrowserStore.minimumBlock
    /// Whether the journals' writes go direct (`O_DIRECT`), and if not why: what the last
    /// journal opened for writing answered (`writeDirect`); nil before one was.
    private(set) var directWrites: Result<DirectIO.Alignment, DirectIO.Refusal>?
    var journalRecords = 0
    /// The most bytes one save appended to the journal: the room a save crossing a threshold
    /// may take past it (`nextJournalSize`).
    var largestSave = 0
    /// The next journal, written ahead of need in the background (`SpareJournal.swift`).
    var spare = SpareJournal.none
    /// The window's other Browser's store, whose ready spare this one gives up when the disk
    /// has no room for a write a save needs (`makeRoom`); set by the window.
    weak var otherBrowser: BrowserStore?
    /// How this Browser's files are sealed: the incognito Browser's, once its window's key is
    /// held (`WindowStore`); nil, in the clear.
    var sealing: RecordSeal.Key?
    /// The window this store's files belong to: part of every seal.
    let window: UUID
    /// Keys a restore may also open files with, each with the window its records are bound to:
    /// those of the session directory's record (a set-aside session being adopted). Never
    /// written with: a file one of them opens makes the restore write the session again under
    /// `sealing` (`load`).
    var alternateSeals: [SealIdentity] = []

    /// A key and the window whose records it seals.
    struct SealIdentity {
        let window: UUID
        let key: RecordSeal.Key
    }
    /// The session on disk is sealed and its key held: a file in the clear among its files is
    /// none the host wrote (it never writes one beside a sealed session), and is refused as
    /// damage at restore, never read as real.
    var refusesClearFiles = false
    /// Whether what `restore` read was (in part) in the clear: a session written before
    /// sealing, which the window seals at once (`WindowStore.recover`).
    var restoredInTheClear = false
    /// Whether the generation appends go to is sealed. A store with a key never appends to one
    /// in the clear (a session written before sealing): its next save writes a sealed
    /// generation from memory, and the files in the clear go with the compaction.
    var generationSealed = false
    /// Where an unrealized tab's history frame is stored: what a new snapshot copies.
    var historySources = HistorySources()
    /// The moves between windows this Browser received last: restored from its files, noted by
    /// the window as it imports a tab, written in every snapshot.
    var movesReceived = ReceivedMoves()
    /// Records made since the last write was submitted, encoded once when collected, framed
    /// when a write takes them: a sealed record is bound to the offset it lands on.
    var staged: [[UInt8]] = []
    /// Records in the write now in flight.
    private var writing: [[UInt8]] = []
    /// The last append that landed, until the window knows whether every Browser its commit
    /// names made the save durable too (`confirmSave` / `retractSave`).
    private var unconfirmed: (records: [[UInt8]], bytes: Int)?
    /// Bytes of every write submitted by saves (appends, snapshots, preallocated journals), and
    /// of spare journals (`SpareJournal`).
    var bytesSubmitted: UInt64 = 0
    private var state = WriteState.idle
    /// Set when the files must be rewritten from memory before appending again: after a
    /// fallback, a damaged journal, or a compaction whose directory sync failed.
    var needsRebase = false
    /// How far past the thresholds compaction waits after one failed (a full disk): saves go
    /// on appending into the preallocated journal meanwhile.
    private var compactionDeferral = (records: 0, bytes: 0)
    /// The disk had no room for a write a save needed, and no spare to give up (`makeRoom`):
    /// new journals are created with their header only and grow with each append (whose flush
    /// then carries the size change too), for the store's life. Else on a disk smaller than two
    /// preallocations (a 2 MiB tmpfs), one Browser could never create its session, and its saves
    /// failed forever.
    var journalsGrowByAppend = false
    /// Whether new journals (and spares) are written full of zeros: not once this store's or
    /// the other Browser's journals grow by append. They share the disk, and zeros written for
    /// one Browser's later saves would take the room the other's growing journal needs for
    /// saves it makes now (a tiny disk: the incognito Browser's appends failed so).
    var preallocatesJournals: Bool { !journalsGrowByAppend && otherBrowser?.journalsGrowByAppend != true }
    /// A compaction that failed while the save riding on it succeeded: reported, not retried
    /// until the deferral passes.
    var unreportedCompactionFailure: StoreError?

    /// The last compaction failure not yet reported, once.
    func takeCompactionFailure() -> StoreError? {
        defer { unreportedCompactionFailure = nil }
        return unreportedCompactionFailure
    }

    private enum WriteState {
        case idle
        /// Pipelined appends, oldest first, each starting where the one before ends: in flight,
        /// or finished and waiting for the window to confirm or take them back in seq order.
        case appending([Append])
        case compacting(Compaction)
    }

    /// One save's append to the journal. `journalEnd` moves past it only once the window
    /// confirms it (every save before it whole, in every Browser).
    private struct Append {
        var ticket: IOTicket
        let seq: UInt64
        let offset: Int
        /// What it writes, kept until it is settled: a write the full disk refused goes again
        /// into the room the spares give up (`retryAfterNoSpace`).
        let written: [UInt8]
        let records: [[UInt8]]
        /// Nil while in flight. A write that landed in a journal no longer at its path failed.
        var result: Result<Void, StoreError>?
        var bytes: Int { written.count }
        var failed: Bool { if case .failure? = result { true } else { false } }
        /// It landed in a journal no longer at its path: the journal is given up once every
        /// append in flight has finished (`retractSave`).
        var landedMisplaced: Bool { if case .failure(.io(let error))? = result { error.isNotInPlace } else { false } }
    }

    /// The appends in flight or unconfirmed, oldest first.
    private var appends: [Append] { if case .appending(let appends) = state { appends } else { [] } }

    /// Where the next append goes: past every append in flight.
    private var nextAppendOffset: Int { appends.last.map { $0.offset + $0.bytes } ?? journalEnd }

    /// The end of the furthest append taken back. One that landed (a later save whose earlier
    /// one failed) is a whole, CRC-valid save past the journal's end: the next append starting
    /// before this end is padded to reach it, so no taken-back save ever follows an
    /// acknowledged one in the journal, where a reader would replay it.
    private var retractedEnd = 0

    /// A compaction's progress: the old journal gets the records not yet durable (so the
    /// generation before keeps the whole history), the new snapshot and journal are written and
    /// synced, then the snapshot is renamed into place and the directory synced. In the
    /// background (`inBackground`), appends move to the new journal as soon as it and the old
    /// journal's last save are durable, its directory entry included; the snapshot goes on
    /// alone (`BackgroundSnapshot`).
    private struct Compaction {
        let generation: UInt64
        let seq: UInt64
        let snapshotFile: EngineFile
        let journalFile: EngineFile
        /// The new journal's framing block (`writeDirect`).
        let journalBlock: Int
        /// A snapshot written from memory holds what no generation before it reaches (the
        /// journal could not be continued, or the save's records did not fit it), and recovery
        /// falls back past a damaged newest snapshot to the generation before. So that one fault
        /// cannot bring the window back short of a save acknowledged through such a snapshot,
        /// it goes down twice in the same save: as this generation, with an empty journal, and
        /// as `generation`, which this one plus its journal reaches. Both are in place and read
        /// back before the save is acknowledged. (Written once and followed by a compaction only
        /// at the next save, the save between was acknowledged with one copy: hostile round
        /// B1, `FromMemorySaveTests`.)
        let twin: NewGeneration?
        var append: (ticket: IOTicket, bytes: Int)?
        /// The newest snapshot's write and sync, while in flight.
        var snapshotWrite: IOTicket?
        var files: Set<IOTicket>
        /// The directory synced after the new journal in a background compaction, open until
        /// that chain completes: the journal's name is durable before any save in it is.
        var journalDirectory: EngineFile?
        var directorySync: (ticket: IOTicket, directory: EngineFile)?
        var renamed = false
        var failure: StoreError?
        /// The records are in the snapshot only: durable once the directory sync completes.
        let acknowledgeAtEnd: Bool
        /// The store's `unframedChanges` when the snapshot was encoded: what it holds of them.
        let unframedChanges: Int
        /// The save names the other Browser too: the snapshot, which cannot be taken back, is
        /// renamed into place only once the partner's write is durable (`renameAfterPartners`).
        let awaitsPartners: Bool
        /// The save's records ride on the old journal and no twin is written: the snapshot
        /// holds nothing the generation before lacks, so saves need not wait for it.
        let inBackground: Bool
        /// Every write the save waits for is done: all of them, or in the background all but
        /// the snapshot's.
        var written: Bool {
            append == nil && files.isEmpty && directorySync == nil && (snapshotWrite == nil || inBackground)
        }
        /// The generations written, oldest first: the twin, then the newest.
        var newGenerations: [NewGeneration] {
            (twin.map { [$0] } ?? []) + [
                NewGeneration(generation: generation, snapshotFile: snapshotFile, journalFile: journalFile)
            ]
        }
    }

    /// A generation a compaction writes: its number, and its files until they are in place.
    private struct NewGeneration {
        let generation: UInt64
        let snapshotFile: EngineFile
        let journalFile: EngineFile
    }

    /// Reads only: removes, moves and repairs nothing (`windowhost inspect`).
    let readOnly: Bool
    /// Generations a scratch store looking for an older copy of a history must not use.
    var fallbackExclusions: Set<UInt64> = []
    /// Why the last attempt to rebuild a tab's history from an older generation could not read
    /// it (no damage: a shortage of the process's own, a failing directory): replay throws it.
    var historyReadFailure: StoreError?
    /// Tabs degraded to one page after recovery, not yet reported (`takeDegradedTabs`).
    var degradedSinceRecovery: [DegradedHistories.Tab] = []
    /// Damaged files recovery could not move to `damaged/`: compaction leaves them in place.
    var keptInPlace: Set<String> = []
    /// Saves recovery left out (never acknowledged) that are still committed in a journal it
    /// did not continue, as byte ranges of that journal. A new snapshot, which does not hold
    /// them, is written only once they are zeroed durably (`eraseLeftOutSaves`): otherwise a
    /// recovery falling back past that snapshot (damaged) would replay them through the older
    /// generation's journals, under seqs that name other, acknowledged commands by then, and
    /// the window would come back torn or below what was acknowledged.
    var leftOutSaves: [(path: FilePath, range: Range<Int>)] = []
    /// What `restore` read, until `repair(windowSeq:)` repairs its directory.
    var restoredSession: (loaded: LoadedSession, seq: UInt64)?
    /// The generation restored from, while the one a damage to it would fall back to is still
    /// unread (`checkPendingFallback`): no save starts before it is read.
    var uncheckedFallback: (generation: UInt64, newestSeq: UInt64)?

    init(
        kind: BrowserKind, window: UUID, directory: FilePath, list: WebStateList, profile: Profile,
        engine: any IOEngine,
        options: StoreOptions, readOnly: Bool = false
    ) {
        self.readOnly = readOnly
        self.kind = kind
        self.window = window
        self.directory = directory
        self.list = list
        self.profile = profile
        self.engine = engine
        self.options = options
    }

    deinit {
        if let journal { engine.close(journal) }
        if let file = spare.file { engine.close(file) }
    }

    // MARK: recording

    /// The command about to be applied: what its records will carry.
    func setCommandSeq(_ seq: UInt64) { recorder?.commandSeq = seq }

    /// Takes the records the last command made; true when there were any. In memory only
    /// (`keepInMemoryOnly`) they are dropped: the command still changed the window, and the
    /// window counts it as a change no save holds (`WindowStore.memoryOnlySince`).
    func collect() -> Bool {
        guard let recorder else { return false }
        let payloads = recorder.takePayloads()
        guard !inMemoryOnly else { return !payloads.isEmpty }
        for payload in payloads {
            guard payload.count + RecordSeal.overhead <= Limits.maxRecordPayloadBytes else {
                // Unexpected: the bounds on what a tab holds keep every record within a frame,
                // sealed or not. Never written as a record: the next save writes a snapshot of
                // the list instead, which refuses (and reports) what does not fit.
                assertionFailure("a record of \(payload.count) bytes does not fit a frame")
                rewriteFromMemoryUnasked()
                continue
            }
            staged.append(payload)
        }
        return !payloads.isEmpty
    }

    /// The session is kept in memory only (no key for its files): nothing of it is saved.
    private(set) var inMemoryOnly = false

    /// From now on nothing of this Browser is saved: what is staged goes, and what commands
    /// change is dropped as it is collected.
    func keepInMemoryOnly() {
        inMemoryOnly = true
        staged.removeAll()
        unframedChanges = 0
    }

    /// Whether any snapshot or journal in the directory says its records are sealed: a session
    /// that needs a key to be read. Headers that do not read are no answer here (recovery sets
    /// such files aside).
    func holdsSealedFiles() throws(StoreError) -> Bool {
        guard try io({ try engine.kind(directory) }) == .directory,
            let entries = try io({ try engine.directoryEntries(directory) })
        else { return false }
        let listing = StoreListing(entries: entries)
        let names = listing.snapshots.map(DiskLayout.snapshotName) + listing.journals.map(DiskLayout.journalName)
        for name in names {
            guard let bytes = try? EngineBytes(engine, path: directory.appending(name)) else { continue }
            let kind: SessionFileKind = name.hasPrefix(DiskLayout.snapshotPrefix) ? .snapshot : .journal
            if let header = try? Framing.checkFileHeader(bytes, kind: kind), header.sealed { return true }
        }
        return false
    }

    /// Changes only a new snapshot can hold: records that could not be framed, or a whole
    /// session whose files were found out of place (`verifyInPlace`). Until a snapshot taken
    /// after them is durable the store has unsaved changes (it joins the next save, which then
    /// compacts, or fails and is reported), and the other Browser's save is never taken for
    /// theirs.
    private var unframedChanges = 0

    /// After the other Browser found its files out of place (the window directory swapped while
    /// the window ran): when this Browser's journal is no longer the file at its path either,
    /// everything it holds is unsaved. The journal is given up, and the next save writes a new
    /// generation from memory where the directory belongs, though this Browser changed nothing.
    func verifyInPlace() {
        guard isIdle, let journal,
            misplacement(of: journal, at: directory.appending(DiskLayout.journalName(generation))) != nil
        else {
            return
        }
        engine.close(journal)
        self.journal = nil
        rewriteFromMemoryUnasked()
    }

    /// The files must be written again from memory, and the window does it at its next turn
    /// though no command asked for a save.
    func rewriteFromMemoryUnasked() {
        needsRebase = true
        unframedChanges += 1
    }

    var hasUnsavedRecords: Bool { hasRecordsToSubmit || !writing.isEmpty || !appends.isEmpty }
    /// Whether there are changes no save in flight carries: what the next save takes.
    var hasRecordsToSubmit: Bool { !staged.isEmpty || unframedChanges > 0 }
    /// Saves in flight (or unconfirmed) in this store: what the window's bound counts.
    var appendsInFlight: Int { isCompacting ? 1 : appends.count }
    /// Changes no command asked to save (`unframedChanges`): the window saves them unasked.
    var hasChangesOnlyASnapshotHolds: Bool { unframedChanges > 0 }
    var isIdle: Bool { if case .idle = state { true } else { false } }
    var isCompacting: Bool { if case .compacting = state { true } else { false } }
    /// Whether the directory holds a session.
    var isOnDisk: Bool { generation > 0 }
    /// Whether its next save makes files (its first generation, or a new snapshot) with
    /// blocking engine calls.
    var makesFiles: Bool { !isOnDisk || mustCompact || shouldCompact }
    /// A session whose list is empty and durable: what the window deletes (incognito).
    var awaitsDeletion: Bool { isOnDisk && list.isEmpty && !hasUnsavedRecords }
    /// Whether a compaction failed and the next one waits for its deferral to pass.
    var compactionDeferred: Bool { compactionDeferral.records > 0 }

    /// Whether saves can go on appending to the journal: it is open, nothing asks for a rebase,
    /// and it ends on its block boundary. A journal from before block framing (or moved to a
    /// disk with bigger blocks) ends anywhere: an append would rewrite the block holding its
    /// last acknowledged save, so it is continued by a new generation instead, never by
    /// leaving zeros a reader would take for its end.
    var canAppend: Bool {
        journal != nil && !needsRebase && journalEnd % journalBlock == 0 && (sealing == nil || generationSealed)
    }

    /// The seal of this store's file of `kind` in `generation`, when its files are sealed.
    func seal(_ kind: SessionFileKind, _ generation: UInt64) -> RecordSeal? {
        sealing.map {
            RecordSeal(
                key: $0, file: RecordSeal.File(window: window, browser: self.kind, kind: kind, generation: generation))
        }
    }

    /// The seals a restore tries on a file of `kind` in `generation`, its own first
    /// (`alternateSeals`); nil stands for none (the file must then be in the clear).
    func openingSeals(_ kind: SessionFileKind, _ generation: UInt64) -> [RecordSeal?] {
        [seal(kind, generation)]
            + alternateSeals.map {
                RecordSeal(
                    key: $0.key,
                    file: RecordSeal.File(window: $0.window, browser: self.kind, kind: kind, generation: generation))
            }
    }

    /// One save of the staged records at `offset` of the journal (`JournalFile.save`).
    private func journalSave(from offset: Int, seq: UInt64, browsers: UInt8) throws(StoreError) -> [UInt8] {
        do {
            return try JournalFile.save(
                staged, seal: seal(.journal, generation), from: offset,
                commit: JournalCommit(seq: seq, browsers: browsers), blockSize: journalBlock,
                reaching: retractedEnd - offset)
        } catch {
            throw .sealing(directory.string, error)
        }
    }

    /// An empty list's snapshot for `generation`: the start of every session made. It remembers
    /// no move received: an empty list holds no tab one made, and a move noted in memory whose
    /// insert is still to be appended would otherwise be claimed by a session that lost it.
    private func emptySnapshot(through seq: UInt64, generation: UInt64) throws(StoreError) -> [UInt8] {
        do {
            return try SnapshotEncoder.encode(
                WebStateList(), lastCommandSeq: seq, seal: seal(.snapshot, generation), movesReceived: ReceivedMoves()
            ) {
                _ throws(SessionFormatError) in []
            }
        } catch {
            throw .sealing(directory.string, error)
        }
    }

    /// Whether the next save must write a new snapshot: the journal cannot be continued, or
    /// there is none (recovery could not open or repair it).
    var mustCompact: Bool { needsRebase || (generation > 0 && !canAppend) }

    /// The smallest framing block: a sector, and a multiple of every smaller direct-I/O block.
    static let minimumBlock = 512

    /// Turns direct writes on for a journal opened for writing (`IOEngine.enableDirectWrites`)
    /// and says what that answered (`directWrites`); returns the journal's framing block.
    func writeDirect(_ file: EngineFile) -> Int {
        let answer = engine.enableDirectWrites(file)
        directWrites = answer
        if case .success(let alignment) = answer { return max(alignment.block, Self.minimumBlock) }
        return Self.minimumBlock
    }

    /// Whether the journal has passed a threshold and the next save should compact.
    var shouldCompact: Bool {
        // One snapshot at a time: the next compaction waits for the one in the background.
        guard backgroundSnapshot == nil else { return false }
        return journalRecords + appends.reduce(staged.count) { $0 + $1.records.count } >= options.compactAfterRecords
            + compactionDeferral.records
            || nextAppendOffset + staged.reduce(0) { $0 + Framing.recordHeaderSize + $1.count } >= options
                .compactAfterBytes + compactionDeferral.bytes
    }

    /// Every entry on the way to the session directory is made durable, not only those
    /// `placeDirectory` made now: a parent's sync that failed, or a kill between a mkdir and
    /// that sync, left an entry a power cut undoes under every save acknowledged since (hostile
    /// round: the whole window lost). Once per session made.
    private func syncEveryParentUpToTheRoot() throws(StoreError) {
        var parent = directory.removingLastComponent()
        while parent.starts(with: profile.stateDirectory) {
            try io { try engine.syncDirectory(parent) }
            if parent == profile.stateDirectory { break }
            parent = parent.removingLastComponent()
        }
    }

    /// Before the first save: a generation holding an empty snapshot and an empty journal,
    /// durable, so every save after it, the first included, is an append that commits with the
    /// window's other Browser. The snapshot says the list was empty through `seq` (the window's
    /// durable seq): true of a new session and of one deleted when its last tab closed, and
    /// what keeps recovery from taking the other Browser's saves since for unfinished ones.
    func createIfNeeded(emptyThrough seq: UInt64) throws(StoreError) {
        guard generation == 0, journal == nil else { return }
        do {
            try createSession(emptyThrough: seq)
        } catch {
            // A full disk: tried again with the window's spares' room, then with a journal of
            // its header alone (`makeRoom`).
            let growing = journalsGrowByAppend
            if makeRoom(after: error) || journalsGrowByAppend != growing {
                return try createIfNeeded(emptyThrough: seq)
            }
            throw error
        }
    }

    /// `createIfNeeded`'s one attempt.
    private func createSession(emptyThrough seq: UInt64) throws(StoreError) {
        // A deletion that stopped part-way (its marker durable) is finished first: a session
        // made inside that directory would go with it at the next start.
        if try io({ try engine.kind(directory) }) == .directory,
            try io({ try engine.kind(directory.appending(DiskLayout.deletionMarker)) }) != nil
        {
            try removeDeletedSession()
        }
        try placeDirectory()
        // A session created again (an incognito session after its last tab closed) starts above
        // generation 1, where recovery cannot take a damaged only snapshot for an empty list:
        // written twice, like every snapshot no older generation reaches (`Compaction.twin`), so
        // a damaged copy does not take the saves of the journal after it along (hostile round 5
        // lost an acknowledged incognito tab so). Generation 1, a window's first session, is
        // taken for empty when damaged (`LoadedSession.emptyFirstGeneration`).
        var twinGeneration: UInt64?
        if highestGeneration > 0 {
            twinGeneration = try nextGeneration()
            highestGeneration = twinGeneration ?? highestGeneration
        }
        let newGeneration = try nextGeneration()
        let newJournal = try writeEmptyGenerations(
            (twinGeneration.map { [$0] } ?? []) + [newGeneration], emptyThrough: seq)
        precondition(newGeneration > (twinGeneration ?? 0), "a session is made above its twin")
        journal = newJournal.file
        journalBlock = newJournal.block
        journalEnd = JournalFile.header(blockSize: journalBlock).count
        journalRecords = 0
        largestSave = 0
        generation = newGeneration
        snapshotGeneration = newGeneration
        generationSealed = sealing != nil
        highestGeneration = newGeneration
        assert(
            journalEnd % journalBlock == 0 && isIdle, "a new journal's first save starts on a block, nothing in flight")
    }

    /// Writes each of `generations` (oldest first) an empty snapshot and a journal, synced, then
    /// renames the snapshots into place and syncs the directory and every parent up to the
    /// root. Only the last, the newest, gets a preallocated journal: nothing is ever appended to
    /// the twin's. Returns that journal, open, and its framing block; every other file is closed
    /// (every one, when this throws, and the files of each generation not renamed into place
    /// are removed: a full disk's partly written journal holds room the next attempt needs).
    private func writeEmptyGenerations(_ generations: [UInt64], emptyThrough seq: UInt64) throws(StoreError) -> (
        file: EngineFile, block: Int
    ) {
        guard let newest = generations.last else { preconditionFailure("a session is made of a generation") }
        var opened: [EngineFile] = []
        var unplaced: [UInt64: [FilePath]] = [:]
        var newJournal: (file: EngineFile, block: Int)?
        do {
            for generation in generations {
                let temporary = DiskLayout.snapshotName(generation) + DiskLayout.temporarySuffix
                let snapshotFile = try createFresh(temporary)
                opened.append(snapshotFile)
                unplaced[generation, default: []].append(directory.appending(temporary))
                let journalFile = try createFresh(DiskLayout.journalName(generation))
                opened.append(journalFile)
                unplaced[generation, default: []].append(directory.appending(DiskLayout.journalName(generation)))
                let block = writeDirect(journalFile)
                let journalBytes =
                    generation == newest
                    ? preallocatedJournal(blockSize: block, size: preallocatedSize(blockSize: block))
                    : JournalFile.header(blockSize: block, sealed: sealing != nil)
                let empty = try emptySnapshot(through: seq, generation: generation)
                try io {
                    try engine.perform([.write(snapshotFile, empty, offset: 0, durable: false), .sync(snapshotFile)])
                }
                try io {
                    try engine.perform([
                        .write(journalFile, journalBytes, offset: 0, durable: false), .sync(journalFile),
                    ])
                }
                if generation == newest { newJournal = (journalFile, block) }
            }
            for generation in generations {
                let name = DiskLayout.snapshotName(generation)
                try io {
                    try engine.rename(
                        directory.appending(name + DiskLayout.temporarySuffix), to: directory.appending(name))
                }
                unplaced[generation] = nil
            }
            try io { try engine.syncDirectory(directory) }
            try syncEveryParentUpToTheRoot()
        } catch {
            for file in opened { engine.close(file) }
            for path in unplaced.values.joined() { try? engine.removeFile(path) }
            throw error
        }
        guard let newJournal else { preconditionFailure("the newest generation's journal was written") }
        for file in opened where file != newJournal.file { engine.close(file) }
        return newJournal
    }

    /// A new journal's bytes: its header block, then zeros to `size` (a whole number of
    /// blocks), written so appends land in space already written.
    private func preallocatedJournal(blockSize: Int, size: Int) -> [UInt8] {
        let header = JournalFile.header(blockSize: blockSize, sealed: sealing != nil)
        if !preallocatesJournals { return header }
        return header + [UInt8](repeating: 0, count: max(0, size - header.count))
    }

    /// A preallocated journal's size in bytes: the preallocation, in whole blocks.
    func preallocatedSize(blockSize: Int) -> Int {
        min(options.journalPreallocation, Limits.maxJournalBytes) / blockSize * blockSize
    }

    /// The size, in whole blocks, to preallocate the next generation's journal to: the bytes
    /// its saves take before a threshold compacts it, at this journal's bytes per record
    /// (framing and padding included), plus the save that crosses the threshold (it lands in
    /// the journal too) and an eighth for records that grow; at most the configured
    /// preallocation, which is all a journal holding no record yet gets. The configured one
    /// assumes ~256 B a record; a save replacing a 500-tab window's tabs frames ~90 B a record,
    /// and its generations filled less than half of it, every zero past that written for
    /// nothing (two thirds of a large save's bytes). A journal that outgrows its room grows by
    /// its appends, each flush then carrying the size change, until the next compaction.
    func nextJournalSize(blockSize: Int) -> Int {
        let configured = preallocatedSize(blockSize: blockSize)
        let filled = journalEnd - JournalFile.header(blockSize: journalBlock).count
        guard journalRecords > 0, filled > 0 else { return configured }
        let (scaled, overflow) = filled.multipliedReportingOverflow(by: max(options.compactAfterRecords, 1))
        let atThreshold = max(0, min(overflow ? Int.max : scaled / journalRecords, options.compactAfterBytes))
        let room = atThreshold.addingReportingOverflow(largestSave)
        guard !room.overflow, room.partialValue < configured else { return configured }
        let size = JournalFile.header(blockSize: blockSize).count + room.partialValue + room.partialValue / 8
        return min(configured, (size + blockSize - 1) / blockSize * blockSize)
    }

    // MARK: saving

    /// Submits a save of everything staged, covering `seq`, as part of a save in which the
    /// Browsers `browsers` (commit bits) take part. Nothing reaches storage before the engine's
    /// flush.
    func startSave(seq: UInt64, browsers: UInt8, compact: Bool) throws(StoreError) {
        precondition(!isCompacting && appends.count < options.savesInFlight, "saves in flight stay within the bound")
        precondition(
            appends.allSatisfy { $0.result.map { if case .success = $0 { true } else { false } } ?? true },
            "nothing follows a failed append")
        // The save before is settled by now: the window confirmed or retracted it (a repair at
        // restore is a save of this Browser alone).
        if isIdle { unconfirmed = nil }
        if compact || !canAppend {
            precondition(isIdle, "a compaction waits for the appends in flight")
            do {
                try startCompaction(seq: seq, browsers: browsers)
                return
            } catch {
                // A full disk: the next save tries again at once with the window's spares' room.
                let retrying = makeRoom(after: error)
                guard canAppend else { throw error }
                // No new snapshot now (no room for its files, or a stored history that no longer
                // reads), but the journal still takes saves. Reported once; tried again a
                // quarter-threshold later.
                unreportedCompactionFailure = error
                if !retrying { deferCompaction() }
            }
        }
        guard let journal else { preconditionFailure("startCompaction handles a missing journal") }
        let offset = nextAppendOffset
        assert(
            offset >= journalEnd && offset % journalBlock == 0,
            "an append starts on a block at or past the journal's end")
        let bytes = try journalSave(from: offset, seq: seq, browsers: browsers)
        guard offset + bytes.count <= Limits.maxJournalBytes else {
            // The reader refuses a larger journal: this save waits for a compaction instead.
            throw .io(
                IOEngineError(
                    "append", path: directory.appending(DiskLayout.journalName(generation)).string,
                    errno: .fileTooLarge))
        }
        let ticket = engine.submit([.write(journal, bytes, offset: offset, durable: true)])
        bytesSubmitted += UInt64(bytes.count)
        state = .appending(
            appends + [Append(ticket: ticket, seq: seq, offset: offset, written: bytes, records: staged)])
        staged.removeAll()
    }

    private func startCompaction(seq: UInt64, browsers: UInt8) throws(StoreError) {
        // A rebase while a snapshot is in the background: the new generations supersede it.
        dropBackgroundSnapshot()
        try eraseLeftOutSaves()
        // The records ride on the old journal, so the generation before reaches the snapshot,
        // unless that journal cannot be continued or they do not fit it (`Compaction.twin`).
        var appendBytes: [UInt8]?
        if canAppend, !staged.isEmpty {
            let bytes = try journalSave(from: journalEnd, seq: seq, browsers: browsers)
            if journalEnd + bytes.count <= Limits.maxJournalBytes { appendBytes = bytes }
        }
        let fromMemory = appendBytes == nil && (!staged.isEmpty || !canAppend)
        try placeDirectory()
        let made = try createCompactionFiles(fromMemory: fromMemory)
        let (twin, newGeneration, snapshotFile, journalFile) = (
            made.twin, made.generation, made.snapshotFile, made.journalFile
        )
        let snapshots = try encodeSnapshots(through: seq, of: made)
        let snapshot = snapshots[newGeneration] ?? []
        writing = staged
        staged.removeAll()
        var append: (IOTicket, Int)?
        if let appendBytes, let journal {
            append = (
                engine.submit([.write(journal, appendBytes, offset: journalEnd, durable: true)]), appendBytes.count
            )
            bytesSubmitted += UInt64(appendBytes.count)
        }
        let newJournalBlock = writeDirect(journalFile)
        let journalBytes =
            made.usesSpare
            ? JournalFile.header(blockSize: newJournalBlock, sealed: sealing != nil)
            : preallocatedJournal(blockSize: newJournalBlock, size: nextJournalSize(blockSize: newJournalBlock))
        // Saves move to the new journal before its snapshot is in place: its name is made
        // durable with it. A directory that does not open leaves the compaction in the save.
        let journalDirectory = append != nil && twin == nil ? try? engine.openDirectory(directory) : nil
        let snapshotWrite = engine.submit([
            .write(snapshotFile, snapshot, offset: 0, durable: false), .sync(snapshotFile),
        ])
        let journalChain: [IOOperation] =
            [.write(journalFile, journalBytes, offset: 0, durable: false), .sync(journalFile)]
            + (journalDirectory.map { [.sync($0)] } ?? [])
        var files: Set<IOTicket> = [engine.submit(journalChain)]
        bytesSubmitted += UInt64(snapshot.count + journalBytes.count)
        if let twin {
            // Its journal stays empty: nothing is ever appended to a generation below the newest.
            let twinSnapshot = snapshots[twin.generation] ?? snapshot
            files.insert(
                engine.submit([
                    .write(twin.snapshotFile, twinSnapshot, offset: 0, durable: false), .sync(twin.snapshotFile),
                ]))
            let twinJournal = JournalFile.header(blockSize: writeDirect(twin.journalFile), sealed: sealing != nil)
            files.insert(
                engine.submit([
                    .write(twin.journalFile, twinJournal, offset: 0, durable: false), .sync(twin.journalFile),
                ]))
            bytesSubmitted += UInt64(twinSnapshot.count + twinJournal.count)
        }
        state = .compacting(
            Compaction(
                generation: newGeneration, seq: seq, snapshotFile: snapshotFile, journalFile: journalFile,
                journalBlock: newJournalBlock, twin: twin,
                append: append, snapshotWrite: snapshotWrite, files: files, journalDirectory: journalDirectory,
                acknowledgeAtEnd: append == nil,
                unframedChanges: unframedChanges, awaitsPartners: browsers != kind.commitBit,
                inBackground: journalDirectory != nil))
    }

    /// What a compaction writes into: its new generation's files, and its twin's when it
    /// writes from memory.
    private struct CompactionFiles {
        let twin: NewGeneration?
        let generation: UInt64
        let snapshotFile: EngineFile
        let journalFile: EngineFile
        /// The journal is the spare written ahead: zeros to the preallocation already.
        let usesSpare: Bool
        /// Every file opened, to close if the compaction stops before its writes.
        let created: [EngineFile]
    }

    /// Creates a compaction's files fresh (the journal from the spare when one waits), the twin
    /// generation's first when `fromMemory`; closes and removes what it made if one fails.
    private func createCompactionFiles(fromMemory: Bool) throws(StoreError) -> CompactionFiles {
        var created: [EngineFile] = []
        var names: [String] = []
        func create(_ name: String) throws(StoreError) -> EngineFile {
            let file = try createFresh(name)
            created.append(file)
            names.append(name)
            return file
        }
        do throws(StoreError) {
            var twin: NewGeneration?
            if fromMemory {
                let generation = try nextGeneration()
                // Marked taken, so the newest is numbered above it (a failed attempt's
                // numbers are skipped, not reused).
                highestGeneration = generation
                twin = NewGeneration(
                    generation: generation,
                    snapshotFile: try create(DiskLayout.snapshotName(generation) + DiskLayout.temporarySuffix),
                    journalFile: try create(DiskLayout.journalName(generation)))
            }
            let newGeneration = try nextGeneration()
            let snapshotFile = try create(DiskLayout.snapshotName(newGeneration) + DiskLayout.temporarySuffix)
            let spare = takeSpare(as: DiskLayout.journalName(newGeneration))
            let journalFile: EngineFile
            if let spare {
                created.append(spare)
                journalFile = spare
            } else {
                journalFile = try create(DiskLayout.journalName(newGeneration))
            }
            return CompactionFiles(
                twin: twin, generation: newGeneration, snapshotFile: snapshotFile, journalFile: journalFile,
                usesSpare: spare != nil, created: created)
        } catch {
            for file in created { engine.close(file) }
            for name in names { try? engine.removeFile(directory.appending(name)) }
            throw error
        }
    }

    /// The snapshot of each generation `made` writes, encoded once per generation (a sealed
    /// snapshot is bound to its generation); on failure the files are closed and removed.
    private func encodeSnapshots(through seq: UInt64, of made: CompactionFiles) throws(StoreError) -> [UInt64: [UInt8]]
    {
        var snapshots: [UInt64: [UInt8]] = [:]
        let generations = [made.twin?.generation, made.generation].compactMap { $0 }
        do throws(StoreError) {
            for written in generations {
                snapshots[written] = try snapshot(through: seq, generation: written, shared: snapshots.values.first)
            }
        } catch {
            for file in made.created { engine.close(file) }
            for written in generations {
                try? engine.removeFile(
                    directory.appending(DiskLayout.snapshotName(written) + DiskLayout.temporarySuffix))
                try? engine.removeFile(directory.appending(DiskLayout.journalName(written)))
            }
            throw error
        }
        return snapshots
    }

    /// The list as a snapshot of `generation`. In the clear, one encoding serves every
    /// generation (`shared`, when there is one); sealed, each generation has its own.
    private func snapshot(through seq: UInt64, generation: UInt64, shared: [UInt8]?) throws(StoreError) -> [UInt8] {
        if sealing == nil, let shared { return shared }
        do {
            return try SnapshotEncoder.encode(
                list, lastCommandSeq: seq, seal: seal(.snapshot, generation), movesReceived: movesReceived,
                storedHistory: storedHistory)
        } catch {
            throw .unreadableHistory(directory.string, error)
        }
    }

    /// Zeroes, durably, the saves recovery left out (`leftOutSaves`), in bounded pieces. A
    /// journal no longer at its path (set aside as damaged) is out of every chain already.
    private func eraseLeftOutSaves() throws(StoreError) {
        while let save = leftOutSaves.first {
            let file: EngineFile
            do {
                file = try engine.open(save.path, .write)
            } catch  where error.errno == .noSuchFileOrDirectory {
                leftOutSaves.removeFirst()
                continue
            } catch {
                throw .io(error)
            }
            defer { engine.close(file) }
            try zeroDurably(file, save.range)
            leftOutSaves.removeFirst()
        }
    }

    /// Writes zeros over `range` of `file`, durably, in bounded pieces: a journal's garbage
    /// can run to its limit (1 GiB).
    func zeroDurably(_ file: EngineFile, _ range: Range<Int>) throws(StoreError) {
        var offset = range.lowerBound
        while offset < range.upperBound {
            let zeros = [UInt8](repeating: 0, count: min(JournalFile.chunkSize, range.upperBound - offset))
            try io { try engine.perform([.write(file, zeros, offset: offset, durable: true)]) }
            offset += zeros.count
        }
    }

    /// Makes the session directory a real directory at its path before a new generation goes
    /// in: a window or session directory that is not one (a symlink swapped in while the
    /// window ran, say) is moved aside as itself into its parent's `damaged/` — never
    /// followed, never deleted — and missing ones are created 0700, each with a sync of its
    /// parent (which also makes the move durable). The session directory found a directory
    /// is enough: it is reached from `/` with `O_DIRECTORY|O_NOFOLLOW` at every step, so the
    /// window directory and every one above are directories too, and nothing is to be moved
    /// or made. (One walk where the slow path takes three: this runs before every new
    /// generation, twice when a save compacts.)
    func placeDirectory() throws(StoreError) {
        if (try? engine.kind(directory)) == .directory { return }
        for path in [directory.removingLastComponent(), directory] {
            guard let kind = try io({ try engine.kind(path) }), kind != .directory else { continue }
            let reason = SessionFormatError.readFailed(
                offset: 0, reason: "\(Self.describe(kind)) where a directory belongs")
            guard setAside(path, reason, under: path.removingLastComponent()).last?.setAsideAt != nil else {
                throw .io(.notInPlace(path.string, found: Self.describe(kind)))
            }
        }
        try io { try engine.makeDirectories(directory) }
    }

    /// The generation a new snapshot takes: the one above every generation known, its snapshot
    /// name free. Whatever holds that name was never written by this store (generations only
    /// count up past `highestGeneration`), and the rename would replace it (a symlink, a FIFO,
    /// a file) or fail on it forever (a directory, `EISDIR`): it is set aside as itself into
    /// `damaged/` — never followed, never deleted. If it cannot be moved, the generation is
    /// skipped, so a save never waits on it. (The temporary's and new journal's names hold
    /// only what a failed attempt left, or a planted entry: `createFresh` removes either as
    /// itself.)
    private func nextGeneration() throws(StoreError) -> UInt64 {
        assert(
            highestGeneration >= generation && generation >= snapshotGeneration,
            "generations are numbered up from the chain's start")
        while true {
            let (candidate, overflow) = highestGeneration.addingReportingOverflow(1)
            guard !overflow else {
                throw .io(IOEngineError("new generation", path: directory.string, errno: .overflow))
            }
            let path = directory.appending(DiskLayout.snapshotName(candidate))
            guard let kind = try io({ try engine.kind(path) }) else { return candidate }
            let reason = SessionFormatError.readFailed(
                offset: 0, reason: "\(Self.describe(kind)) under a new snapshot's name")
            if setAside(path, reason).last?.setAsideAt != nil { return candidate }
            highestGeneration = candidate
        }
    }

    /// Nil when `file` is the entry at `path` (walked from `/`, no symlink followed); else the
    /// failure a save reports: the first of the window directory, the session directory and
    /// the file that is not what it should be, and what is there.
    func misplacement(of file: EngineFile, at path: FilePath) -> IOEngineError? {
        if (try? engine.isAt(file, path)) == true { return nil }
        let expected: [(FilePath, EntryKind)] = [
            (directory.removingLastComponent(), .directory), (directory, .directory), (path, .file),
        ]
        for (place, kind) in expected {
            let found: EntryKind?
            do {
                found = try engine.kind(place)
            } catch {
                return .notInPlace(place.string, found: "what cannot be looked at (\(error.errno))")
            }
            if found != kind { return .notInPlace(place.string, found: found.map(Self.describe) ?? "nothing") }
        }
        return .notInPlace(path.string, found: "another file")
    }

    private static func describe(_ kind: EntryKind) -> String {
        switch kind {
        case .file: "a file"
        case .directory: "a directory"
        case .symlink: "a symlink"
        case .other: "a FIFO, socket or device"
        }
    }

    /// Opens `name` in the directory as a new, empty file (`O_EXCL`, never through a symlink),
    /// first clearing whatever a failed attempt or anyone else left under the name (`clear`).
    func createFresh(_ name: String) throws(StoreError) -> EngineFile {
        let path = directory.appending(name)
        try clear(path, into: directory)
        return try io { try engine.open(path, .create) }
    }

    /// Frees a name where the host keeps only files, in a bounded number of calls: a file,
    /// symlink, FIFO or socket is unlinked as itself; a directory, which the host never makes
    /// there, is moved whole, as itself, into `parent`'s `damaged/`. Removing a planted tree
    /// could take minutes inside a restore or a save, and the worker would be killed for it.
    func clear(_ path: FilePath, into parent: FilePath) throws(StoreError) {
        switch try io({ try engine.kind(path) }) {
        case nil:
            return
        case .directory?:
            let reason = SessionFormatError.readFailed(offset: 0, reason: "a directory where the host keeps only files")
            guard setAside(path, reason, under: parent).last?.setAsideAt != nil else {
                throw .io(IOEngineError("set aside", path: path.string, errno: .directoryNotEmpty))
            }
        case .some:
            try io { try engine.removeFile(path) }
        }
    }

    /// The history payload an unrealized tab was restored (or moved in) with, checked.
    func storedHistory(_ webState: WebState) throws(SessionFormatError) -> [UInt8] {
        // A tab the journal replay brought in or navigated keeps its history as bytes there.
        if let (tabs, index) = webState.storedContent, let journalTabs = tabs as? JournalTabs {
            return journalTabs.historyPayload(at: index)
        }
        guard let source = historySources.source(of: webState) else {
            throw .readFailed(offset: 0, reason: "no stored history for unrealized tab \(webState.id)")
        }
        do {
            return try source.reader.historyPayload(at: source.index)
        } catch {
            // Realizing goes to an older generation's copy: the next snapshot then encodes the
            // tab from memory, and this one is retried after the deferral.
            try? webState.forceRealized()
            throw error
        }
    }

    /// Whether `ticket` names a chain of this store's write in flight, or of its spare journal's.
    func owns(_ ticket: IOTicket) -> Bool {
        if spare.ticket == ticket || backgroundSnapshot?.ticket == ticket { return true }
        return switch state {
        case .idle: false
        case .appending(let appends): appends.contains { $0.ticket == ticket }
        case .compacting(let compaction):
            compaction.append?.ticket == ticket || compaction.snapshotWrite == ticket
                || compaction.files.contains(ticket)
                || compaction.directorySync?.ticket == ticket
        }
    }

    /// Takes a finished chain of this store's (see `owns`); says what it meant for the saves.
    func complete(_ completion: IOCompletion) throws(StoreError) -> SaveProgress? {
        if spare.ticket == completion.ticket { return completeSpare(completion.result) }
        if backgroundSnapshot?.ticket == completion.ticket {
            completeBackgroundSnapshot(completion.result)
            return nil
        }
        switch state {
        case .idle:
            return nil
        case .appending(var appends):
            guard let index = appends.firstIndex(where: { $0.ticket == completion.ticket }) else { return nil }
            let result = landed(completion.result)
            if case .failure(let error) = result, retryAfterNoSpace(&appends, at: index, error) {
                state = .appending(appends)
                return nil
            }
            appends[index].result = result
            state = .appending(appends)
            if case .failure(let error) = result { return .failed(error) }
            return .durable(appends[index].seq)
        case .compacting(var compaction):
            let progress = take(completion, into: &compaction)
            guard compaction.written else {
                state = .compacting(compaction)
                return progress
            }
            return advance(compaction, progress: progress)
        }
    }

    /// An append failed with `error`. On a full disk the window's ready spares give up their
    /// room (`makeRoom`) and, when one did, the same write goes again at once, at the same
    /// offset, in place of failing the save: a spare never takes the room of an append, and a
    /// spare written after a restart on a full disk (the store no longer knows its journals
    /// grow by append) costs no save. Once: a second refusal finds no spare. Not after another
    /// append in flight failed: the save fails anyway, and its retry gets the room.
    private func retryAfterNoSpace(_ appends: inout [Append], at index: Int, _ error: StoreError) -> Bool {
        guard !appends.contains(where: \.failed), makeRoom(after: error), let journal else { return false }
        let append = appends[index]
        appends[index].ticket = engine.submit([
            .write(journal, append.written, offset: append.offset, durable: true)
        ])
        bytesSubmitted += UInt64(append.bytes)
        return true
    }

    /// Notes one of a compaction's writes finished; the save's progress when it was the append
    /// riding on it.
    private func take(_ completion: IOCompletion, into compaction: inout Compaction) -> SaveProgress? {
        if let append = compaction.append, append.ticket == completion.ticket {
            compaction.append = nil
            let progress = finishAppend(completion.result, seq: compaction.seq, bytes: append.bytes)
            if case .failed(let error) = progress { compaction.failure = error }
            return progress
        }
        if compaction.snapshotWrite == completion.ticket {
            compaction.snapshotWrite = nil
        } else {
            compaction.files.remove(completion.ticket)
            if compaction.files.isEmpty, let directory = compaction.journalDirectory {
                engine.close(directory)
                compaction.journalDirectory = nil
            }
            if let sync = compaction.directorySync, sync.ticket == completion.ticket {
                engine.close(sync.directory)
                compaction.directorySync = nil
            }
        }
        if case .failure(let error) = completion.result { compaction.failure = compaction.failure ?? .io(error) }
        return nil
    }

    /// The next step of a compaction whose writes the save waits for are done: give it up, rename
    /// its snapshot, wait for the partner, move appends on, or finish it. `progress` is what its
    /// last completion meant for the save.
    private func advance(_ compaction: Compaction, progress: SaveProgress?) -> SaveProgress? {
        if let failure = compaction.failure {
            // A full disk: the next save tries again at once with the window's spares' room,
            // or, none left, after the deferral without the journal's preallocated room.
            let retrying = makeRoom(after: failure)
            abandon(compaction, renamed: compaction.renamed, deferring: !retrying)
            if compaction.acknowledgeAtEnd { return .failed(failure) }
            unreportedCompactionFailure = failure
            return progress
        }
        if compaction.renamed {
            if let failure = finishCompaction(compaction) {
                // The new snapshot does not read back, or is not where it belongs: nothing
                // was removed, and the next save writes another.
                if compaction.acknowledgeAtEnd { return .failed(failure) }
                unreportedCompactionFailure = failure
                return progress
            }
            return compaction.acknowledgeAtEnd ? .durable(compaction.seq) : progress
        }
        if compaction.awaitsPartners {
            state = .compacting(compaction)
            return progress
        }
        if compaction.inBackground {
            moveAppends(to: compaction)
            return progress
        }
        return rename(compaction) ?? progress
    }

    /// Whether a compaction has written everything and waits for the other Browser's write.
    var awaitsPartners: Bool {
        if case .compacting(let compaction) = state {
            compaction.written && compaction.awaitsPartners && !compaction.renamed
        } else {
            false
        }
    }

    /// The other Browser's part of the save is durable: the snapshot goes into place. Nil
    /// unless that failed.
    func renameAfterPartners() -> SaveProgress? {
        guard awaitsPartners, case .compacting(let compaction) = state else { return nil }
        if compaction.inBackground {
            moveAppends(to: compaction)
            return nil
        }
        return rename(compaction)
    }

    /// A background compaction's save is whole (its append to the old journal durable in every
    /// Browser it names) and the new journal is durable under its name: appends move to the new
    /// generation now, and its snapshot goes on alone (`BackgroundSnapshot`). Until that is
    /// proven, the chain runs from `snapshotGeneration` through the old journal into the new.
    private func moveAppends(to compaction: Compaction) {
        assert(
            compaction.inBackground && compaction.written && compaction.failure == nil,
            "only a whole save's compaction moves appends")
        assert(
            compaction.generation > generation && backgroundSnapshot == nil && !needsRebase,
            "appends move up one generation at a time")
        assert(compaction.journalDirectory == nil, "the new journal's name is durable")
        appendTo(compaction.journalFile, block: compaction.journalBlock, generation: compaction.generation)
        // Whole: nothing takes it back now.
        unconfirmed = nil
        writing.removeAll()
        state = .idle
        startBackgroundSnapshot(
            generation: compaction.generation, seq: compaction.seq, file: compaction.snapshotFile,
            writing: compaction.snapshotWrite)
    }

    /// The other Browser's part of the save failed: the save is not whole, so the snapshot
    /// holding it is dropped and its records wait for the next save.
    func abandonAfterPartnerFailure() {
        guard awaitsPartners, case .compacting(let compaction) = state else { return }
        abandon(compaction, renamed: false)
    }

    private func rename(_ compaction: Compaction) -> SaveProgress? {
        var compaction = compaction
        for (index, written) in compaction.newGenerations.enumerated() {
            let name = DiskLayout.snapshotName(written.generation)
            do {
                try engine.rename(
                    directory.appending(name + DiskLayout.temporarySuffix), to: directory.appending(name))
            } catch {
                // After the twin went into place, given up as renamed: the next generation goes past it.
                abandon(compaction, renamed: index > 0)
                return compaction.acknowledgeAtEnd ? .failed(.io(error)) : nil
            }
        }
        assert(
            compaction.written && compaction.failure == nil && !compaction.renamed,
            "a compaction renames once, whole and unfailed")
        compaction.renamed = true
        do {
            let directoryFile = try engine.openDirectory(directory)
            compaction.directorySync = (engine.submit([.sync(directoryFile)]), directoryFile)
        } catch {
            // The snapshot is in place but not durably: given up as one whose sync failed, so
            // the next generation goes past it.
            abandon(compaction, renamed: true)
            return compaction.acknowledgeAtEnd ? .failed(.io(error)) : nil
        }
        state = .compacting(compaction)
        return nil
    }

    /// The seq of the save whose write `ticket` names (see `owns`); nil for the spare journal's.
    func saveSeq(of ticket: IOTicket) -> UInt64? {
        if spare.ticket == ticket || backgroundSnapshot?.ticket == ticket { return nil }
        return switch state {
        case .idle: nil
        case .appending(let appends): appends.first { $0.ticket == ticket }?.seq
        case .compacting(let compaction): compaction.seq
        }
    }

    /// Whether the write of save `seq` has finished, or this store has none running for it: a
    /// compaction counts as finished only once idle (see `awaitsPartners`).
    func hasFinished(_ seq: UInt64) -> Bool {
        switch state {
        case .idle: true
        case .appending(let appends): appends.first { $0.seq == seq }.map { $0.result != nil } ?? true
        case .compacting: false
        }
    }

    /// A landed durable write, acknowledged only if the journal is still where it belongs.
    private func landed(_ result: Result<Void, IOEngineError>) -> Result<Void, StoreError> {
        if case .failure(let error) = result { return .failure(.io(error)) }
        if let journal,
            let misplaced = misplacement(of: journal, at: directory.appending(DiskLayout.journalName(generation)))
        {
            // Durable, but outside the root (the journal or a directory above it was moved or
            // swapped for a symlink): not acknowledged. The journal is given up once nothing
            // else is in flight to it, and the next save writes a new generation from memory.
            return .failure(.io(misplaced))
        }
        return .success(())
    }

    /// Every Browser the commit of save `seq` names made it durable, and every save before it
    /// is whole: recovery keeps it, and the journal's end moves past it.
    func confirmSave(_ seq: UInt64) {
        unconfirmed = nil
        guard case .appending(var appends) = state, let first = appends.first, first.seq == seq else { return }
        guard case .success = first.result else { preconditionFailure("only a landed append is confirmed") }
        assert(first.offset == journalEnd, "appends are confirmed in journal order")
        appends.removeFirst()
        journalEnd = first.offset + first.bytes
        journalRecords += first.records.count
        largestSave = max(largestSave, first.bytes)
        assert(
            journalEnd % journalBlock == 0 && journalEnd <= Limits.maxJournalBytes,
            "a confirmed save ends on a block, inside the journal's limit")
        assert(
            appends.first.map { $0.offset == journalEnd && $0.seq > seq } ?? true,
            "the next append follows the one confirmed")
        state = appends.isEmpty ? .idle : .appending(appends)
    }

    /// A save in flight failed, in this Browser or another its commit names, or one before it
    /// did: recovery would drop it and every later one. All of this store's appends (every one
    /// has finished) are taken back: their records staged again in order, the journal's end
    /// where it was, and the next save writes them over the space with a commit naming only the
    /// Browsers that take part then, reaching past every one taken back (`retractedEnd`). A
    /// compaction's append that landed is taken back the same way (`unconfirmed`).
    func retractSave() {
        if case .appending(let appends) = state {
            precondition(appends.allSatisfy { $0.result != nil }, "every append finished before any is taken back")
            staged = appends.flatMap(\.records) + staged
            if let last = appends.last { retractedEnd = max(retractedEnd, last.offset + last.bytes) }
            assert(
                appends.first.map { $0.offset == journalEnd } ?? true, "appends taken back start at the journal's end")
            state = .idle
            if appends.contains(where: \.landedMisplaced), let journal {
                engine.close(journal)
                self.journal = nil
                needsRebase = true
            }
            return
        }
        guard let landed = unconfirmed else { return }
        precondition(isIdle, "no write in flight while retracting")
        unconfirmed = nil
        journalEnd -= landed.bytes
        journalRecords -= landed.records.count
        staged = landed.records + staged
        assert(journalEnd >= Framing.fileHeaderSize && journalRecords >= 0, "a retraction stays inside the journal")
    }

    /// A compaction's append to the old journal finished.
    private func finishAppend(_ result: Result<Void, IOEngineError>, seq: UInt64, bytes: Int) -> SaveProgress {
        switch result {
        case .success:
            if let journal,
                let misplaced = misplacement(of: journal, at: directory.appending(DiskLayout.journalName(generation)))
            {
                // Durable, but outside the root (the journal or a directory above it was moved
                // or swapped for a symlink): not acknowledged. The journal is given up and the
                // next save writes a new generation from memory where the directory belongs.
                staged = writing + staged
                writing.removeAll()
                engine.close(journal)
                self.journal = nil
                needsRebase = true
                return .failed(.io(misplaced))
            }
            assert(unconfirmed == nil, "one save at a time rides on a compaction")
            journalEnd += bytes
            journalRecords += writing.count
            largestSave = max(largestSave, bytes)
            unconfirmed = (writing, bytes)
            writing.removeAll()
            return .durable(seq)
        case .failure(let error):
            // The same records go again at the same offset, over whatever part of them landed.
            staged = writing + staged
            writing.removeAll()
            return .failed(.io(error))
        }
    }

    /// Gives up a compaction that failed: its files are removed (the old generation is intact)
    /// and unsaved records wait for the next save. After a rename whose directory sync failed
    /// it is unknown which snapshot survives a power cut: the next save writes a new one.
    /// Not `deferring`, a compaction not renamed is tried again by the next save.
    private func abandon(_ compaction: Compaction, renamed: Bool, deferring: Bool = true) {
        if let directory = compaction.journalDirectory { engine.close(directory) }
        for written in compaction.newGenerations {
            engine.close(written.snapshotFile)
            engine.close(written.journalFile)
        }
        if renamed {
            needsRebase = true
            highestGeneration = compaction.generation
            assert(highestGeneration > generation, "a renamed generation is numbered past the one appends go to")
        } else {
            for written in compaction.newGenerations {
                try? engine.removeFile(
                    directory.appending(DiskLayout.snapshotName(written.generation) + DiskLayout.temporarySuffix))
                try? engine.removeFile(directory.appending(DiskLayout.journalName(written.generation)))
            }
            if deferring { deferCompaction() }
        }
        staged = writing + staged
        writing.removeAll()
        state = .idle
    }

    func deferCompaction() {
        compactionDeferral.records += max(1, options.compactAfterRecords / 4)
        compactionDeferral.bytes += max(1, options.compactAfterBytes / 4)
    }

    /// Reads the new generation (and its twin) back whole before anything older goes: its
    /// metadata (every record), its seq, and every history frame, checksums verified. Then
    /// switches appends to it, points unrealized tabs' histories at it, and removes generations
    /// older than the one before (the fallback: the twin, when there is one). When the
    /// read-back fails, the compaction is given up as one whose directory sync failed: every
    /// older generation stays, and the next save writes a new snapshot. Returns that failure.
    private func finishCompaction(_ compaction: Compaction) -> StoreError? {
        var reader: SnapshotReader?
        for written in compaction.newGenerations {
            let path = directory.appending(DiskLayout.snapshotName(written.generation))
            do throws(StoreError) {
                reader = try readBack(path, seq: compaction.seq, generation: written.generation)
            } catch {
                abandon(compaction, renamed: true)
                return error
            }
        }
        // Read by path: acknowledged only if the files written are the ones there.
        for written in compaction.newGenerations {
            if let misplaced = misplacement(
                of: written.snapshotFile, at: directory.appending(DiskLayout.snapshotName(written.generation)))
                ?? misplacement(
                    of: written.journalFile, at: directory.appending(DiskLayout.journalName(written.generation)))
            {
                abandon(compaction, renamed: true)
                return .io(misplaced)
            }
        }
        guard let reader else { preconditionFailure("a compaction writes at least one generation") }
        let fallback = compaction.twin?.generation ?? snapshotGeneration
        engine.close(compaction.snapshotFile)
        if let twin = compaction.twin {
            engine.close(twin.snapshotFile)
            engine.close(twin.journalFile)
        }
        appendTo(compaction.journalFile, block: compaction.journalBlock, generation: compaction.generation)
        needsRebase = false
        unframedChanges -= compaction.unframedChanges
        // An append riding on it went to the old journal: the save is whole once renamed.
        unconfirmed = nil
        writing.removeAll()
        state = .idle
        snapshotProven(reader, generation: compaction.generation, fallback: fallback)
        return nil
    }

    /// Appends go from now on to `file`, the new and empty journal of `generation`.
    private func appendTo(_ file: EngineFile, block: Int, generation newGeneration: UInt64) {
        assert(
            newGeneration > generation && newGeneration >= highestGeneration, "appends move to the newest generation")
        if let journal { engine.close(journal) }
        journal = file
        journalBlock = block
        journalEnd = JournalFile.header(blockSize: journalBlock).count
        retractedEnd = 0
        journalRecords = 0
        largestSave = 0
        generation = newGeneration
        generationSealed = sealing != nil
        highestGeneration = newGeneration
        assert(journalEnd % journalBlock == 0, "the new journal's first append starts on a block")
    }

    /// The snapshot of `generation` is in place and read back: the chain starts there, its
    /// unrealized tabs' histories are read from it, and every generation older than `fallback`
    /// (the one a damaged newest snapshot falls back to) goes.
    func snapshotProven(_ reader: SnapshotReader, generation proven: UInt64, fallback: UInt64) {
        assert(
            proven > snapshotGeneration && proven <= generation && fallback <= proven,
            "a proven snapshot moves the chain's start up")
        snapshotGeneration = proven
        // The chain starts past the restored generation now, its fallback one read whole: the
        // restore's own repair (a session in the clear sealed, say) got here before any save.
        uncheckedFallback = nil
        compactionDeferral = (0, 0)
        historySources.removeAll(keepingCapacity: true)
        // By the snapshot's own order: the list may have changed while the compaction was in
        // flight, so its indices no longer name the snapshot's frames.
        let unrealized = Set(list.webStates.lazy.filter { !$0.isRealized }.map(\.id))
        for index in 0..<reader.count where unrealized.contains(reader.id(at: index)) {
            historySources.prove(reader.id(at: index), at: index, in: reader)
        }
        guard fallback > 0, let entries = try? engine.directoryEntries(directory) else { return }
        let listing = StoreListing(entries: entries)
        for old in listing.snapshots where old < fallback && !keptInPlace.contains(DiskLayout.snapshotName(old)) {
            try? engine.removeFile(directory.appending(DiskLayout.snapshotName(old)))
        }
        for old in listing.journals where old < fallback && !keptInPlace.contains(DiskLayout.journalName(old)) {
            try? engine.removeFile(directory.appending(DiskLayout.journalName(old)))
        }
    }

    /// A snapshot just written, read back whole: every metadata record, its seq, every history
    /// frame.
    func readBack(_ path: FilePath, seq: UInt64, generation: UInt64) throws(StoreError) -> SnapshotReader {
        let bytes = try io { try EngineBytes(engine, path: path) }
        do throws(SessionFormatError) {
            let reader = try SnapshotReader(bytes, seal: seal(.snapshot, generation))
            assert(
                reader.isSealed == (sealing != nil),
                "a store with a key writes sealed snapshots, one without writes them in the clear")
            guard reader.lastCommandSeq == seq else {
                throw .invalidState(
                    offset: Framing.fileHeaderSize, reason: .seqOutOfOrder(reader.lastCommandSeq, previous: seq))
            }
            try reader.verifyEveryFrame()
            return reader
        } catch {
            throw .readBackFailed(path.string, error)
        }
    }

    // MARK: deleting

    /// Deletes the session durably: files, then the directory, then a sync of its parent. For
    /// an incognito Browser whose last tab closed. Every entry goes as itself: a symlink or a
    /// FIFO planted in the directory is unlinked, never followed or opened, so the deletion
    /// touches nothing outside the directory and nothing in it can stop it.
    func destroy() throws(StoreError) {
        precondition(isIdle, "no write in flight while deleting")
        dropSpare()
        dropBackgroundSnapshot()
        if let journal { engine.close(journal) }
        journal = nil
        if try io({ try engine.kind(directory) }) == .directory {
            // The marker first, durably: a crash part-way through (journals gone, a snapshot
            // left) must not bring back a session that was deleted.
            engine.close(try createFresh(DiskLayout.deletionMarker))
            // Deleted from here on, whatever stops the rest, its own sync included (the marker
            // may be durable even when the sync reports a failure): recovery finishes a marked
            // directory's deletion, so no later save may go into it (`createIfNeeded` finishes
            // it first). Saves acknowledged into it were lost at the next start (hostile rounds).
            forgetSession()
            try io { try engine.syncDirectory(directory) }
            try removeDeletedSession()
        } else {
            // Not a directory (a symlink where the session was): it goes as itself.
            try io { try engine.removeFile(directory) }
            try io { try engine.syncDirectory(directory.removingLastComponent()) }
            forgetSession()
        }
    }

    /// The session is deleted: the store holds none, as before its first save.
    private func forgetSession() {
        generation = 0
        snapshotGeneration = 0
        journalEnd = 0
        retractedEnd = 0
        journalRecords = 0
        largestSave = 0
        needsRebase = false
        unframedChanges = 0
        uncheckedFallback = nil
        historySources.removeAll()
        staged.removeAll()
    }

    /// Removes a session being deleted: everything, then the marker, then the directory and
    /// the parent's entry. A directory in it is none of the host's (it writes only files
    /// there): it is moved whole into the window's `damaged/` (`clear`), so the deletion takes
    /// a bounded number of calls however deep a planted tree goes.
    func removeDeletedSession() throws(StoreError) {
        // Each entry by its exact name: one that is not UTF-8 goes too.
        for entry in try io({ try engine.listDirectory(directory) }) ?? []
        where entry.name.string != DiskLayout.deletionMarker {
            try clear(directory.appending(entry.name), into: directory.removingLastComponent())
        }
        try io { try engine.syncDirectory(directory) }
        try clear(directory.appending(DiskLayout.deletionMarker), into: directory.removingLastComponent())
        try io { try engine.removeDirectory(directory) }
        try io { try engine.syncDirectory(directory.removingLastComponent()) }
    }
}

/// Runs engine calls, their failure as a store error. (Closures do not infer typed throws in
/// Swift 6, so the body's error is checked here.)
func io<T>(_ body: () throws -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch let error as IOEngineError {
        throw .io(error)
    } catch let error as StoreError {
        throw error
    } catch {
        throw .io(IOEngineError("\(error)", path: "", errno: .ioError))
    }
}
