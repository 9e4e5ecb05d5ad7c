import BrowserModel
import IOUring
import SessionFormat
import SystemPackage

/// A compaction's new snapshot after its save: written and synced, renamed into place, the
/// directory synced, then read back whole, while saves append to its generation's journal.
/// No save waits for it. Until it is proven the chain is the older snapshot
/// (`BrowserStore.snapshotGeneration`) through the old journal into the new one, which
/// recovery reads as it reads a chain past a damaged snapshot; nothing older goes before.
struct BackgroundSnapshot {
    enum Step {
        /// Its write and `fdatasync`.
        case writing(IOTicket)
        /// In place; the directory's `fsync`, with the directory open for it.
        case syncingDirectory(IOTicket, EngineFile)
    }

    let generation: UInt64
    let seq: UInt64
    let file: EngineFile
    var step: Step

    var ticket: IOTicket {
        switch step {
        case .writing(let ticket), .syncingDirectory(let ticket, _): ticket
        }
    }
}

extension BrowserStore {
    /// Whether a snapshot is still being written or proven (`settle` and a teardown wait for it).
    var hasBackgroundWork: Bool { backgroundSnapshot != nil }

    /// Takes over the snapshot of the compaction whose save moved appends to `generation`:
    /// `writing` is its write still in flight, nil once it completed.
    func startBackgroundSnapshot(generation: UInt64, seq: UInt64, file: EngineFile, writing: IOTicket?) {
        assert(
            backgroundSnapshot == nil && generation == self.generation && generation > snapshotGeneration,
            "one snapshot in the background, of the generation appends go to")
        guard let writing else {
            putInPlace(generation: generation, seq: seq, file: file)
            return
        }
        backgroundSnapshot = BackgroundSnapshot(generation: generation, seq: seq, file: file, step: .writing(writing))
    }

    /// A chain of the background snapshot's finished.
    func completeBackgroundSnapshot(_ result: Result<Void, IOEngineError>) {
        guard let snapshot = backgroundSnapshot else { return }
        backgroundSnapshot = nil
        switch (snapshot.step, result) {
        case (.writing, .success):
            putInPlace(generation: snapshot.generation, seq: snapshot.seq, file: snapshot.file)
        case (.writing, .failure(let error)):
            engine.close(snapshot.file)
            giveUp(generation: snapshot.generation, .io(error), renamed: false)
        case (.syncingDirectory(_, let directory), .success):
            engine.close(directory)
            prove(snapshot)
        case (.syncingDirectory(_, let directory), .failure(let error)):
            engine.close(directory)
            engine.close(snapshot.file)
            giveUp(generation: snapshot.generation, .io(error), renamed: true)
        }
    }

    /// Gives the background snapshot up without a word (a rebase supersedes it, or the session
    /// is deleted): its files closed, its temporary removed. A write of it still in flight
    /// completes into a file no name reaches, and its completion is no one's.
    func dropBackgroundSnapshot() {
        guard let snapshot = backgroundSnapshot else { return }
        backgroundSnapshot = nil
        engine.close(snapshot.file)
        switch snapshot.step {
        case .writing:
            try? engine.removeFile(temporaryPath(snapshot.generation))
        case .syncingDirectory(_, let directory):
            engine.close(directory)
        }
    }

    private func temporaryPath(_ generation: UInt64) -> FilePath {
        directory.appending(DiskLayout.snapshotName(generation) + DiskLayout.temporarySuffix)
    }

    /// Renames the written snapshot into place and starts the directory's sync.
    private func putInPlace(generation: UInt64, seq: UInt64, file: EngineFile) {
        assert(
            backgroundSnapshot == nil && generation <= self.generation,
            "the snapshot in place is of a generation appends reached")
        do throws(IOEngineError) {
            try engine.rename(temporaryPath(generation), to: directory.appending(DiskLayout.snapshotName(generation)))
        } catch {
            engine.close(file)
            giveUp(generation: generation, .io(error), renamed: false)
            return
        }
        let directoryFile: EngineFile
        do throws(IOEngineError) {
            directoryFile = try engine.openDirectory(directory)
        } catch {
            engine.close(file)
            giveUp(generation: generation, .io(error), renamed: true)
            return
        }
        let ticket = engine.submit([.sync(directoryFile)])
        backgroundSnapshot = BackgroundSnapshot(
            generation: generation, seq: seq, file: file, step: .syncingDirectory(ticket, directoryFile))
    }

    /// The snapshot is durably in place: read back whole, and checked to be the file written,
    /// before the chain starts there and the generations before the old start go.
    private func prove(_ snapshot: BackgroundSnapshot) {
        assert(
            backgroundSnapshot == nil && snapshot.generation > snapshotGeneration,
            "a background snapshot proves a newer start of the chain")
        defer { engine.close(snapshot.file) }
        let path = directory.appending(DiskLayout.snapshotName(snapshot.generation))
        let reader: SnapshotReader
        do throws(StoreError) {
            reader = try readBack(path, seq: snapshot.seq, generation: snapshot.generation)
        } catch {
            giveUp(generation: snapshot.generation, error, renamed: true)
            return
        }
        if let misplaced = misplacement(of: snapshot.file, at: path) {
            giveUp(generation: snapshot.generation, .io(misplaced), renamed: true)
            return
        }
        snapshotProven(reader, generation: snapshot.generation, fallback: snapshotGeneration)
    }

    /// The snapshot did not make it: reported, and the chain keeps its old start, which reaches
    /// every save. Not in place, its temporary goes and the next compaction waits for the
    /// deferral; perhaps in place (renamed, its directory sync or read-back failed), which file
    /// a power cut leaves there is unknown, so the next save writes a new generation from memory.
    private func giveUp(generation: UInt64, _ error: StoreError, renamed: Bool) {
        if renamed {
            needsRebase = true
        } else {
            try? engine.removeFile(temporaryPath(generation))
            // A full disk: the next save tries again at once with the window's spares' room.
            if !makeRoom(after: error) { deferCompaction() }
        }
        unreportedCompactionFailure = error
    }
}
