import BrowserModel
import Foundation
import Glibc
import IOUring
import Platform
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Entries the host never wrote, planted in real session directories: symlinks leading out of
/// the root to a canary, FIFOs, directories under a file's name. Each is removed or set aside
/// as itself; the canary outside the root survives untouched; everything else restores.
@Suite struct HostileFilesTests {
    /// Issue 11, item 4: closing the last incognito tab deletes the incognito session through
    /// planted symlinks and a FIFO without following or opening them, and completes.
    @Test func incognitoDeletionRemovesPlantedEntriesAsThemselvesAndCompletes() throws {
        try withRootAndCanary { root, canary in
            let store = try savedWindow(root, regular: "https://kept.example/", incognito: "https://secret.example/")
            let incognito = store.incognito.sessionDirectory
            try plant(.symlink(to: canary.string), at: incognito.appending("link"))
            try plant(.symlink(to: canary.appending("keep").string), at: incognito.appending("file-link"))
            try plant(.fifo, at: incognito.appending("pipe"))
            try plant(.directory, at: incognito.appending("sub"))
            try plant(.symlink(to: canary.string), at: incognito.appending("sub").appending("deeper"))

            var events: [SaveEvent] = []
            store.apply(seq: 3) { store.incognito.webStateList.closeAll() }
            for _ in 0..<20 where !events.contains(.deletedIncognito) { events += try store.poll(waiting: true) }
            #expect(events.contains(.deletedIncognito), "\(events)")
            #expect(lstatKind(incognito) == nil, "the incognito directory is gone")
            try expectCanaryIntact(canary)
            #expect(
                !bytesOfEveryFile(under: root).contains("secret.example"), "the closed tab's URL is nowhere on disk")

            let restored = try realWindow(root)
            #expect(restored.incognito.webStateList.isEmpty)
            #expect(restored.regular.webStateList.webStates.map(\.url) == ["https://kept.example/"])
        }
    }

    /// A directory tree planted in the incognito directory (or under a temporary's name) is
    /// none of the host's: it is moved whole, as itself, into `damaged/` in one rename, never
    /// removed entry by entry. Removing a tree 100,000 levels deep took minutes inside the
    /// worker's loop or its restore, and the window was set aside (a hostile tester's find).
    @Test func plantedDirectoriesAreMovedAsideWholeNotRemovedEntryByEntry() throws {
        try withRootAndCanary { root, canary in
            let store = try savedWindow(root, regular: "https://kept.example/", incognito: "https://secret.example/")
            let incognito = store.incognito.sessionDirectory
            var deep = incognito.appending("tree")
            for _ in 0..<50 {
                try plant(.directory, at: deep)
                deep = deep.appending("d")
            }
            try plant(.symlink(to: canary.string), at: deep)
            let temporary = store.regular.sessionDirectory.appending(
                DiskLayout.snapshotName(9) + DiskLayout.temporarySuffix)
            try plant(.directory, at: temporary)
            try plant(.directory, at: temporary.appending("inside"))

            var events: [SaveEvent] = []
            store.apply(seq: 3) { store.incognito.webStateList.closeAll() }
            for _ in 0..<20 where !events.contains(.deletedIncognito) { events += try store.poll(waiting: true) }
            #expect(events.contains(.deletedIncognito), "\(events)")
            #expect(lstatKind(incognito) == nil, "the incognito directory is gone")
            let windowDamaged = incognito.removingLastComponent().appending(DiskLayout.damagedDirectory)
            let windowDamagedNames = (try? FileManager.default.contentsOfDirectory(atPath: windowDamaged.string)) ?? []
            let movedTree = try #require(windowDamagedNames.first { $0.hasPrefix("tree-") }, "\(windowDamagedNames)")
            #expect(
                lstatKind(windowDamaged.appending(movedTree).appending("d")) == "directory", "moved whole, as itself")

            let restored = try realWindow(root)
            #expect(restored.regular.webStateList.webStates.map(\.url) == ["https://kept.example/"])
            #expect(lstatKind(temporary) == nil, "the temporary's name is free again")
            let storeDamaged = store.regular.sessionDirectory.appending(DiskLayout.damagedDirectory)
            let storeDamagedNames = (try? FileManager.default.contentsOfDirectory(atPath: storeDamaged.string)) ?? []
            #expect(
                storeDamagedNames.contains { $0.hasPrefix(DiskLayout.snapshotName(9) + DiskLayout.temporarySuffix) },
                "\(storeDamagedNames)")
            try expectCanaryIntact(canary)
        }
    }

    /// Issue 11, item 7: a directory under a snapshot's name and a FIFO under another's are
    /// each set aside alone (moved as themselves, never opened); both Browsers restore whole.
    @Test func aDirectoryOrFIFONamedLikeASnapshotIsSetAsideAloneAndTheRestRestores() throws {
        try withRootAndCanary { root, _ in
            let store = try savedWindow(
                root, regular: "https://regular.example/", incognito: "https://incognito.example/")
            let before = try WindowContents(store)
            let regular = store.regular.sessionDirectory
            let incognito = store.incognito.sessionDirectory
            let directoryEntry = regular.appending(DiskLayout.snapshotName(7))
            let fifoEntry = incognito.appending(DiskLayout.snapshotName(9))
            try plant(.directory, at: directoryEntry)
            try plant(.directory, at: directoryEntry.appending("inside"))
            try plant(.fifo, at: fifoEntry)

            let restored = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            let recovery = try restored.recover()
            #expect(try WindowContents(restored) == before, "every tab of both Browsers restores")
            #expect(recovery.regular.damaged.map(\.path) == [directoryEntry.string])
            #expect(recovery.incognito.damaged.map(\.path) == [fifoEntry.string])
            let movedDirectory = try #require(recovery.regular.damaged.first?.setAsideAt)
            let movedFIFO = try #require(recovery.incognito.damaged.first?.setAsideAt)
            #expect(movedDirectory.hasPrefix(regular.appending(DiskLayout.damagedDirectory).string + "/"))
            #expect(lstatKind(FilePath(movedDirectory)) == "directory")
            #expect(
                lstatKind(FilePath(movedDirectory).appending("inside")) == "directory", "set aside whole, not deleted")
            #expect(lstatKind(FilePath(movedFIFO)) == "other", "the FIFO moved as itself")

            try open(restored, restored.regular, seq: 3, url: "https://after.example/")
            try restored.waitUntilDurable(3)
            let again = WindowStore(root: root, windowID: windowID, engine: SyncEngine())
            let second = try again.recover()
            #expect(second.regular.damaged.isEmpty && second.incognito.damaged.isEmpty)
            #expect(
                again.regular.webStateList.webStates.map(\.url) == [
                    "https://regular.example/", "https://after.example/",
                ])
        }
    }

    /// A FIFO planted under the incognito Browser's next snapshot name is set aside by the save
    /// that compacts it, a save the regular Browser shares: moving the FIFO aside syncs a
    /// directory with a blocking call, which reaped the regular Browser's queued write and
    /// dropped its completion, so the save never finished and a durable wait spun for ever
    /// (a worker at 100 % CPU in a hostile stress campaign, seed 4242). Every command here is
    /// durable within a bounded number of turns.
    @Test(arguments: ["uring", "sync"])
    func aBlockingCallInsideASharedSaveLosesNoCompletion(engineName: String) throws {
        try withRootAndCanary { root, _ in
            let engine = try #require(IOEngineChoice(rawValue: engineName)).makeEngine().engine
            let store = WindowStore(
                root: root, windowID: windowID, engine: engine, options: StoreOptions(compactAfterRecords: 4),
                saveDelayMilliseconds: 0)
            _ = try store.recover()
            let incognito = store.incognito.sessionDirectory
            var urls: [[String]] = [[], []]
            for seq in 1...(8 as UInt64) {
                if seq == 2 {
                    // Every free snapshot name ahead holds a FIFO: the incognito session's
                    // directory exists once its first save has made it.
                    for generation in 1...(24 as UInt64)
                    where lstatKind(incognito.appending(DiskLayout.snapshotName(generation))) == nil {
                        try plant(.fifo, at: incognito.appending(DiskLayout.snapshotName(generation)))
                    }
                }
                urls[0].append("https://regular-\(seq).example/")
                urls[1].append("https://incognito-\(seq).example/")
                try openInBoth(store, seq: seq, regular: urls[0].last!, incognito: urls[1].last!)
                try store.save()
                var turns = 0
                while store.durableSeq < seq, turns < 200 {
                    try store.turn(waiting: true)
                    turns += 1
                }
                try #require(store.durableSeq == seq, "seq \(seq) durable within 200 turns (\(turns))")
            }
            let damaged =
                (try? FileManager.default.contentsOfDirectory(
                    atPath: incognito.appending(DiskLayout.damagedDirectory).string)) ?? []
            #expect(!damaged.isEmpty, "a FIFO was set aside by a compaction")
            let restored = try realWindow(root)
            #expect(restored.regular.webStateList.webStates.map(\.url) == urls[0])
            #expect(restored.incognito.webStateList.webStates.map(\.url) == urls[1])
        }
    }

    /// Issue 11, item 5: a Browser's session directory that is a symlink out of the root is set
    /// aside as itself; the Browser starts empty and its saves land inside the root.
    @Test func aSymlinkedSessionDirectoryIsSetAsideAndNothingIsWrittenThroughIt() throws {
        try withRootAndCanary { root, canary in
            let seed = try realWindow(root)
            try open(seed, seed.incognito, seq: 1, url: "https://incognito.example/")
            try seed.waitUntilDurable(1)
            let regular = seed.regular.sessionDirectory
            // The regular session was made at start, empty: a symlink takes its place.
            try FileManager.default.removeItem(atPath: regular.string)
            try plant(.symlink(to: canary.string), at: regular)

            let store = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            let recovery = try store.recover()
            let setAside = try #require(recovery.regular.damaged.first?.setAsideAt)
            #expect(
                setAside.hasPrefix(
                    regular.removingLastComponent().appending(DiskLayout.damagedDirectory).string + "/regular-"))
            #expect(lstatKind(FilePath(setAside)) == "symlink", "moved as itself")
            #expect(store.regular.webStateList.isEmpty)
            #expect(store.incognito.webStateList.webStates.map(\.url) == ["https://incognito.example/"])
            try open(store, store.regular, seq: 2, url: "https://inside.example/")
            try store.waitUntilDurable(2)
            #expect(lstatKind(regular) == "directory", "a real directory now, inside the root")
            try expectCanaryIntact(canary)
        }
    }

    /// Issue 11, items 4 and 5: whatever a stale temporary's name holds (a symlink to a file
    /// outside the root, a directory with a symlink in it) is removed as itself before the new
    /// temporary is created `O_EXCL`: compaction goes on, and nothing outside is touched.
    @Test func whateverHoldsATemporarysNameIsRemovedAsItselfAndCompactionGoesOn() throws {
        try withRootAndCanary { root, canary in
            let store = try savedWindow(
                root, options: StoreOptions(compactAfterRecords: 2), regular: "https://one.example/")
            let regular = store.regular.sessionDirectory
            for generation in 1...(8 as UInt64) {
                let temporary = regular.appending(DiskLayout.snapshotName(generation) + DiskLayout.temporarySuffix)
                if generation.isMultiple(of: 2) {
                    try plant(.symlink(to: canary.appending("keep").string), at: temporary)
                } else {
                    try plant(.directory, at: temporary)
                    try plant(.symlink(to: canary.string), at: temporary.appending("inside"))
                }
            }
            try openRegularTabsDurably(store, seqs: 2...6)
            let snapshots = try FileManager.default.contentsOfDirectory(atPath: regular.string).filter {
                DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix) ?? 0 >= 3
            }
            #expect(!snapshots.isEmpty, "compaction wrote new generations past the planted temporaries")
            try expectCanaryIntact(canary)
            let restored = try realWindow(root)
            #expect(restored.regular.webStateList.count == 6)
        }
    }

    /// `NoFollow` itself: a symlink anywhere in a path is refused, never followed; a FIFO is
    /// never opened (the call returns at once, it does not block).
    @Test func noFollowRefusesSymlinksOnTheWayAndNeverOpensAFIFO() throws {
        try withRootAndCanary { root, canary in
            try plant(.symlink(to: canary.string), at: root.appending("link"))
            try plant(.fifo, at: root.appending("pipe"))
            #expect(throws: Errno.notDirectory) {
                _ = try NoFollow.open(root.appending("link").appending("keep"), .read)
            }
            #expect(throws: Errno.tooManySymbolicLinkLevels) { _ = try NoFollow.open(root.appending("link"), .read) }
            #expect(throws: Errno.noSuchAddressOrDevice) { _ = try NoFollow.open(root.appending("pipe"), .read) }
            #expect(throws: Errno.fileExists) { _ = try NoFollow.open(root.appending("link"), .create) }
            #expect(throws: Errno.notDirectory) { try NoFollow.makeDirectory(root.appending("link").appending("new")) }
            #expect(try NoFollow.entries(root.appending("link")) == nil)
            #expect(try NoFollow.kind(root.appending("link")) == .symlink)
            try NoFollow.remove(root.appending("link"))
            try expectCanaryIntact(canary)
        }
    }
}

// MARK: helpers

private enum Planted {
    case symlink(to: String)
    case fifo
    case directory
}

private func plant(_ entry: Planted, at path: FilePath) throws {
    let result: Int32
    switch entry {
    case .symlink(let target): result = symlink(target, path.string)
    case .fifo: result = mkfifo(path.string, 0o600)
    case .directory: result = mkdir(path.string, 0o700)
    }
    guard result == 0 else { throw Errno(rawValue: errno) }
}

/// A root and, beside it, a canary directory holding one file: what a planted symlink points at.
private func withRootAndCanary(_ body: (_ root: FilePath, _ canary: FilePath) throws -> Void) throws {
    try withTemporaryDirectory { base in
        let root = base.appending("root")
        let canary = base.appending("canary")
        try #require(mkdir(root.string, 0o700) == 0 && mkdir(canary.string, 0o700) == 0)
        try Data(canaryText.utf8).write(to: URL(fileURLWithPath: canary.appending("keep").string))
        try body(root, canary)
    }
}

private let canaryText = "outside the root\n"

private func expectCanaryIntact(_ canary: FilePath, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let entries = try FileManager.default.contentsOfDirectory(atPath: canary.string)
    #expect(entries == ["keep"], "nothing created or removed outside the root", sourceLocation: sourceLocation)
    let text = try? String(contentsOfFile: canary.appending("keep").string, encoding: .utf8)
    #expect(text == canaryText, "the file outside the root is untouched", sourceLocation: sourceLocation)
}

private func realWindow(_ root: FilePath, options: StoreOptions = StoreOptions()) throws -> WindowStore {
    let store = WindowStore(
        root: root, windowID: windowID, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
    _ = try store.recover()
    return store
}

/// A real window with `regular` open (seq 1) and, when given, `incognito` (seq 2), durable.
private func savedWindow(
    _ root: FilePath, options: StoreOptions = StoreOptions(), regular: String, incognito: String? = nil
) throws -> WindowStore {
    let store = try realWindow(root, options: options)
    try open(store, store.regular, seq: 1, url: regular)
    if let incognito { try open(store, store.incognito, seq: 2, url: incognito) }
    try store.waitUntilDurable(incognito == nil ? 1 : 2)
    return store
}

/// A regular tab for each of `seqs`, each save durable before the next command.
private func openRegularTabsDurably(_ store: WindowStore, seqs: ClosedRange<UInt64>) throws {
    for seq in seqs {
        try open(store, store.regular, seq: seq, url: "https://\(seq).example/")
        try store.waitUntilDurable(seq)
    }
}

private func open(_ store: WindowStore, _ browser: Browser, seq: UInt64, url: String) throws {
    try store.apply(seq: seq) { try insertTab(browser, url: url) }
}

private func insertTab(_ browser: Browser, url: String) throws {
    var history = NavigationHistory()
    history.commit(NavigationItem(url: url, title: url, timestamp: Timestamp(microsecondsSinceEpoch: 1)))
    try browser.webStateList.insert(
        WebState(
            id: browser.profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 1), history: history))
}

/// A tab opened in each Browser by one command.
private func openInBoth(_ store: WindowStore, seq: UInt64, regular: String, incognito: String) throws {
    try store.apply(seq: seq) {
        try insertTab(store.regular, url: regular)
        try insertTab(store.incognito, url: incognito)
    }
}

/// Every regular file's bytes under `root` (symlinks not followed), as one string.
private func bytesOfEveryFile(under root: FilePath) -> String {
    var text = ""
    guard let walker = FileManager.default.enumerator(atPath: root.string) else { return text }
    while let name = walker.nextObject() as? String {
        let path = root.appending(name)
        if lstatKind(path) == "file", let data = FileManager.default.contents(atPath: path.string) {
            text += String(decoding: data, as: UTF8.self)
        }
    }
    return text
}

/// Where recovery sets damaged files aside (`damaged/`) is not always what it should be: a
/// symlink planted there, or a directory nothing can be moved into.
extension HostileFilesTests {
    /// A symlink in place of `damaged/` (to a directory outside the root) is moved out of the
    /// way as itself and reported; the damaged entry goes into a real 0700 `damaged/`; the
    /// symlink's target is untouched. Before, the set-aside failed silently and the entry
    /// stayed under its layout name.
    @Test func aSymlinkInPlaceOfDamagedIsMovedAsItselfAndTheDamagedEntryGoesIntoARealDirectory() throws {
        try withRootAndCanary { root, canary in
            let store = try savedWindow(root, regular: "https://kept.example/")
            let regular = store.regular.sessionDirectory
            let damaged = regular.appending(DiskLayout.damagedDirectory)
            let planted = regular.appending(DiskLayout.snapshotName(7))
            try plant(.symlink(to: canary.string), at: damaged)
            try plant(.fifo, at: planted)

            let restored = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            let recovery = try restored.recover()
            #expect(restored.regular.webStateList.webStates.map(\.url) == ["https://kept.example/"])
            #expect(
                recovery.regular.damaged.map(\.path) == [damaged.string, planted.string], "\(recovery.regular.damaged)")
            let movedLink = try #require(recovery.regular.damaged.first?.setAsideAt)
            #expect(movedLink.hasPrefix(regular.appending("damaged.not-a-directory-").string))
            #expect(lstatKind(FilePath(movedLink)) == "symlink", "the symlink kept, as itself")
            var status = stat()
            #expect(
                lstat(damaged.string, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR
                    && status.st_mode & 0o777 == 0o700)
            let movedFIFO = try #require(recovery.regular.damaged.last?.setAsideAt)
            #expect(movedFIFO.hasPrefix(damaged.string + "/") && lstatKind(FilePath(movedFIFO)) == "other")
            #expect(lstatKind(planted) == nil)
            try expectCanaryIntact(canary)
        }
    }

    /// A damaged snapshot that cannot be moved into `damaged/` (made immutable, as a read-only
    /// mount would refuse it) is renamed in place to a name no listing takes for a generation,
    /// said in the report, and survives every later compaction and a restart. Before, it stayed
    /// under its layout name and the second compaction after recovery deleted it.
    @Test func aDamagedSnapshotThatCannotBeSetAsideIsNeverDeletedByLaterCompactions() throws {
        try withRootAndCanary { root, _ in
            let options = StoreOptions(compactAfterRecords: 2)
            let store = try savedWindow(root, options: options, regular: "https://kept.example/")
            let regular = store.regular.sessionDirectory
            let damaged = regular.appending(DiskLayout.damagedDirectory)
            let planted = regular.appending(DiskLayout.snapshotName(7))
            let garbage = Data("not a snapshot, but the host promised never to delete it\n".utf8)
            try garbage.write(to: URL(fileURLWithPath: planted.string))
            try #require(mkdir(damaged.string, 0o700) == 0)
            try #require(chattr("+i", damaged) == 0, "an immutable damaged/: nothing can be moved into it")
            defer { _ = chattr("-i", damaged) }

            let restored = WindowStore(
                root: root, windowID: windowID, engine: SyncEngine(), options: options, saveDelayMilliseconds: 0)
            let recovery = try restored.recover()
            let report = try #require(recovery.regular.damaged.first)
            #expect(report.path == planted.string)
            let kept = try #require(report.setAsideAt, "renamed in place")
            #expect(report.setAsideFailure != nil)
            #expect(kept.hasPrefix(planted.string + ".damaged-"))
            #expect("\(report)".contains("never deleted"))
            for seq in 2...12 as ClosedRange<UInt64> {
                try open(restored, restored.regular, seq: seq, url: "https://page\(seq).example/")
                try restored.waitUntilDurable(seq)
            }
            let again = try realWindow(root, options: options)
            for seq in 13...20 as ClosedRange<UInt64> {
                try open(again, again.regular, seq: seq, url: "https://page\(seq).example/")
                try again.waitUntilDurable(seq)
            }
            let generations = try FileManager.default.contentsOfDirectory(atPath: regular.string)
                .compactMap { DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix) }
            #expect((generations.max() ?? 0) > 10, "several compactions ran: \(generations)")
            #expect(FileManager.default.contents(atPath: kept) == garbage, "the damaged file is still there, whole")
            #expect(again.regular.webStateList.webStates.count == 20)
        }
    }
}

/// `chattr FLAGS path`: its exit status.
private func chattr(_ flags: String, _ path: FilePath) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
    process.arguments = [flags, path.string]
    guard (try? process.run()) != nil else { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
}

/// Names a listing must hand on byte for byte, and names a new generation takes that
/// something else holds.
extension HostileFilesTests {
    /// Entries whose names are not UTF-8 (a file, and a directory holding another) in the
    /// incognito directory: closing the last incognito tab deletes them all and completes.
    /// Before, the listing's names came back with U+FFFD in them, named nothing, and the
    /// deletion failed with ENOTEMPTY on every save.
    @Test func anIncognitoDirectoryHoldingNamesThatAreNotUTF8IsDeletedWhenItsLastTabCloses() throws {
        try withRootAndCanary { root, canary in
            let store = try savedWindow(root, regular: "https://kept.example/", incognito: "https://secret.example/")
            let incognito = store.incognito.sessionDirectory
            try plantFile(named: [0xFF], in: incognito)
            try plantFile(named: Array("a".utf8) + [0xC3, 0x28], in: incognito)
            let directory = try plantDirectory(named: [0xFE, 0xFD], in: incognito)
            try plantFile(named: [0x80], in: directory)
            let link = FilePath(platformString: rawPath(directory, Array("link".utf8)))
            try #require(link.withPlatformString { symlink(canary.string, $0) } == 0)

            var events: [SaveEvent] = []
            store.apply(seq: 3) { store.incognito.webStateList.closeAll() }
            for _ in 0..<20 where !events.contains(.deletedIncognito) { events += try store.poll(waiting: true) }
            #expect(events.contains(.deletedIncognito), "\(events)")
            #expect(lstatKind(incognito) == nil, "the incognito directory is gone")
            try expectCanaryIntact(canary)
            let restored = try realWindow(root)
            #expect(restored.incognito.webStateList.isEmpty)
            #expect(restored.regular.webStateList.webStates.map(\.url) == ["https://kept.example/"])
        }
    }

    /// A stale temporary directory holding names that are not UTF-8, under every name the
    /// next compactions take: each is removed whole and compaction goes on. Before, the names
    /// inside could not be removed, `createFresh` failed, and no compaction ever succeeded.
    @Test func aTemporaryHoldingNamesThatAreNotUTF8IsRemovedAndTheNextCompactionSucceeds() throws {
        try withRootAndCanary { root, canary in
            let store = try savedWindow(
                root, options: StoreOptions(compactAfterRecords: 2), regular: "https://one.example/")
            let regular = store.regular.sessionDirectory
            for generation in 2...(8 as UInt64) {
                let temporary = regular.appending(DiskLayout.snapshotName(generation) + DiskLayout.temporarySuffix)
                try plant(.directory, at: temporary)
                try plantFile(named: [0xFF, 0xFE], in: temporary)
                try plant(.symlink(to: canary.string), at: temporary.appending("inside"))
            }
            try openRegularTabsDurably(store, seqs: 2...6)
            let names = try FileManager.default.contentsOfDirectory(atPath: regular.string)
            let generations = names.compactMap { DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix) }
            #expect(generations.contains { $0 >= 3 }, "compaction wrote new generations: \(names)")
            #expect(lstatKind(regular.appending(DiskLayout.snapshotName(2) + DiskLayout.temporarySuffix)) == nil)
            try expectCanaryIntact(canary)
            #expect(try realWindow(root).regular.webStateList.count == 6)
        }
    }

    /// A directory, a FIFO and a symlink planted under the names the next generations'
    /// snapshots take: each is set aside into `damaged/` as itself (not followed, not deleted),
    /// every save stays durable and compaction goes on past them. Before, the rename failed on
    /// the directory with EISDIR and every later compaction chose the same name and failed
    /// again; a FIFO or symlink would have been replaced, that is deleted.
    @Test func entriesUnderTheNextSnapshotsNamesAreSetAsideAndCompactionGoesOn() throws {
        try withRootAndCanary { root, canary in
            let options = StoreOptions(compactAfterRecords: 2)
            let store = try savedWindow(root, options: options, regular: "https://one.example/")
            let regular = store.regular.sessionDirectory
            try plant(.directory, at: regular.appending(DiskLayout.snapshotName(2)))
            try plant(
                .symlink(to: canary.string), at: regular.appending(DiskLayout.snapshotName(2)).appending("inside"))
            try plant(.fifo, at: regular.appending(DiskLayout.snapshotName(3)))
            try plant(.symlink(to: canary.appending("keep").string), at: regular.appending(DiskLayout.snapshotName(4)))

            try openRegularTabsDurably(store, seqs: 2...12)
            let names = try FileManager.default.contentsOfDirectory(atPath: regular.string)
            let generations = names.compactMap { DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix) }
            #expect(generations.contains { $0 >= 5 }, "compaction went past the planted names: \(names)")
            let damaged = regular.appending(DiskLayout.damagedDirectory)
            let setAside = try FileManager.default.contentsOfDirectory(atPath: damaged.string)
            let kinds = Dictionary(
                uniqueKeysWithValues: setAside.map {
                    (String($0.prefix(DiskLayout.snapshotPrefix.count + 16)), lstatKind(damaged.appending($0)))
                })
            #expect(kinds[DiskLayout.snapshotName(2)] == "directory", "\(setAside)")
            #expect(kinds[DiskLayout.snapshotName(3)] == "other", "\(setAside)")
            #expect(kinds[DiskLayout.snapshotName(4)] == "symlink", "\(setAside)")
            if let directory = setAside.first(where: { $0.hasPrefix(DiskLayout.snapshotName(2)) }) {
                #expect(lstatKind(damaged.appending(directory).appending("inside")) == "symlink", "set aside whole")
            }
            try expectCanaryIntact(canary)
            let restored = try realWindow(root, options: options)
            #expect(restored.regular.webStateList.count == 12)
        }
    }
}

/// Creates an empty file whose name is `name`'s bytes exactly (UTF-8 or not) in `directory`.
private func plantFile(named name: [UInt8], in directory: FilePath) throws {
    let fd = FilePath(platformString: rawPath(directory, name)).withPlatformString {
        Glibc.open($0, O_CREAT | O_EXCL | O_WRONLY, 0o600)
    }
    guard fd >= 0 else { throw Errno(rawValue: errno) }
    close(fd)
}

/// Creates a directory whose name is `name`'s bytes exactly in `directory`; its path.
private func plantDirectory(named name: [UInt8], in directory: FilePath) throws -> FilePath {
    let path = FilePath(platformString: rawPath(directory, name))
    guard path.withPlatformString({ mkdir($0, 0o700) }) == 0 else { throw Errno(rawValue: errno) }
    return path
}

/// `directory/name` as its bytes, NUL-terminated: `directory`'s own bytes too (UTF-8 or not).
private func rawPath(_ directory: FilePath, _ name: [UInt8]) -> [CChar] {
    let base = directory.withPlatformString { start in Array(UnsafeBufferPointer(start: start, count: strlen(start))) }
    return base + [0x2F] + name.map { CChar(bitPattern: $0) } + [0]
}
