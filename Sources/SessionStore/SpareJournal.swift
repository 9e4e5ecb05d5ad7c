import BrowserModel
import Glibc
import IOUring
import SessionFormat

/// A store's next journal, written ahead of need (issue 13): `journal.spare`, zeros to the
/// room the next generation is expected to fill (`BrowserStore.nextJournalSize`), synced, out
/// of the page cache. A compaction renames it to its new generation's journal and writes only
/// the header block, instead of the whole zero-filled file in the save. Its write is no part
/// of a save: no save waits for it or reports its failure, and recovery deletes a spare it
/// finds, so none is ever read or trusted unwritten.
enum SpareJournal {
    /// None: one is written when the store is next idle with its journal past half a threshold.
    case none
    /// Its zeros and sync are in flight. `buffered`: its writes go through the page cache (no
    /// direct I/O on a disk), which is told to drop them once they are durable.
    case writing(IOTicket, EngineFile, buffered: Bool)
    /// Written and durable: the next compaction takes it.
    case ready(EngineFile)
    /// Given up while in flight (the session was deleted): closed when its write completes.
    case dropped(IOTicket, EngineFile)
    /// Its write failed (a full disk, say), or it was given up for a file a session needs
    /// (`makeRoom`): none is written until a compaction moves the store past this
    /// generation.
    case failed(generation: UInt64)

    /// The chain in flight, if any.
    var ticket: IOTicket? {
        switch self {
        case .writing(let ticket, _, _), .dropped(let ticket, _): ticket
        case .none, .ready, .failed: nil
        }
    }

    /// The file it holds open, if any.
    var file: EngineFile? {
        switch self {
        case .writing(_, let file, _), .ready(let file), .dropped(_, let file): file
        case .none, .failed: nil
        }
    }
}

extension BrowserStore {
    /// Starts writing a spare journal when the store takes one and is idle: its journal is past
    /// half a compaction threshold (a compaction is coming; a window that saves little never
    /// writes one), no spare exists, and none failed in this generation. A store that does not
    /// preallocate journals (its or the other Browser's grow by append: a full disk) keeps none:
    /// a ready one is deleted, its room worth more to the next snapshot and the other's appends.
    /// A chain it queues goes with the caller's next flush.
    func startSpareIfIdle() {
        // A blocking `perform` hands back the completions it meets (`IOEngine.returnToReap`).
        assert(spare.ticket == nil || engine.inFlight > 0, "a spare being written has its write in the engine")
        if case .failed(let failedIn) = spare, generation > failedIn { spare = .none }
        if !preallocatesJournals, case .ready(let file) = spare {
            discardSpare(file)
            spare = .none
        }
        guard case .none = spare, !readOnly, preallocatesJournals, isIdle, journal != nil,
            journalRecords * 2 >= options.compactAfterRecords || journalEnd * 2 >= options.compactAfterBytes
        else { return }
        let file: EngineFile
        do {
            file = try createFresh(DiskLayout.spareJournal)
        } catch {
            spare = .failed(generation: generation)
            return
        }
        let block = writeDirect(file)
        // Direct writes leave nothing in the page cache, and a file in memory has nothing to drop.
        let buffered = if case .failure(let refusal) = directWrites, refusal != .inMemory { true } else { false }
        let size = nextJournalSize(blockSize: block)
        guard size > JournalFile.header(blockSize: block).count else {
            // A preallocation of one block or less: a new journal is its header alone.
            discardSpare(file)
            spare = .failed(generation: generation)
            return
        }
        let zeros = [UInt8](repeating: 0, count: size)
        spare = .writing(
            engine.submit([.write(file, zeros, offset: 0, durable: false), .sync(file)]), file, buffered: buffered)
        bytesSubmitted += UInt64(zeros.count)
    }

    /// Takes the spare's finished chain (`owns` routes it here); never a save's progress.
    func completeSpare(_ result: Result<Void, IOEngineError>) -> SaveProgress? {
        switch spare {
        case .writing(_, let file, let buffered):
            switch result {
            case .success:
                if buffered { _ = posix_fadvise(file.rawValue, 0, 0, POSIX_FADV_DONTNEED) }
                spare = .ready(file)
            case .failure:
                // Not reported: saves go on as before, each compaction writing its own journal.
                discardSpare(file)
                spare = .failed(generation: generation)
            }
        case .dropped(_, let file):
            engine.close(file)
            spare = .none
        case .none, .ready, .failed:
            assertionFailure("a spare's completion with none in flight")
        }
        return nil
    }

    /// The ready spare, renamed to `name` (a new generation's journal) for a compaction to
    /// write its header into; nil when none is ready or the rename failed (the spare is then
    /// given up, and the compaction creates its journal as before). The rename goes durable
    /// with the compaction's directory sync; until then recovery finds at most an orphan
    /// journal, removed as before. A spare swapped for something else meanwhile is caught as
    /// any misplaced journal is (`finishCompaction`).
    func takeSpare(as name: String) -> EngineFile? {
        guard case .ready(let file) = spare else { return nil }
        spare = .none
        do {
            try engine.rename(directory.appending(DiskLayout.spareJournal), to: directory.appending(name))
        } catch {
            discardSpare(file)
            return nil
        }
        return file
    }

    /// The session is being deleted (`destroy`): a ready spare is closed, one in flight once it
    /// completes; the name goes with the directory's other entries.
    func dropSpare() {
        switch spare {
        case .ready(let file):
            engine.close(file)
            spare = .none
        case .writing(let ticket, let file, _):
            spare = .dropped(ticket, file)
        case .failed:
            spare = .none
        case .none, .dropped:
            break
        }
    }

    /// A write a save needs failed with `error`. When the disk is full (`ENOSPC`, or a spent
    /// quota, `EDQUOT`), whatever the write was (a new session's files, a compaction's, its
    /// snapshot in the background, an append past the journal's written room), a spare, written
    /// ahead of need, must never keep the room: the window's ready spares (this Browser's and
    /// the other's) are given up, their files removed, and none is written again in their
    /// generations. True when one was: the step that failed is worth trying again. None left,
    /// this store's journals grow by append from now on. Any other error: false, nothing given up.
    func makeRoom(after error: StoreError) -> Bool {
        guard error.errno == .noSpace || error.errno == .diskQuotaExceeded else { return false }
        // Both are given up: neither Browser's spare may take the room.
        let ownGaveUp = giveUpReadySpare()
        let otherGaveUp = otherBrowser?.giveUpReadySpare() == true
        let gaveUp = ownGaveUp || otherGaveUp
        if !gaveUp { journalsGrowByAppend = true }
        return gaveUp
    }

    /// Gives up the ready spare, if any: true when there was one.
    private func giveUpReadySpare() -> Bool {
        guard case .ready(let file) = spare else { return false }
        discardSpare(file)
        spare = .failed(generation: generation)
        return true
    }

    /// Closes a spare given up and removes its name.
    private func discardSpare(_ file: EngineFile) {
        engine.close(file)
        try? clear(directory.appending(DiskLayout.spareJournal), into: directory)
    }
}
