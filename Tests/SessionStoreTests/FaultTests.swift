import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

private let regularDirectory = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
    BrowserKind.regular.rawValue)
private let incognitoDirectory = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
    "incognito")

/// A window browsed for `commands` commands with every save waited for.
private func savedWindow(_ engine: FaultEngine, seed: UInt64, commands: UInt64, options: StoreOptions = StoreOptions())
    throws -> (WindowStore, [WindowContents])
{
    let (store, _) = try simulatedWindow(engine, options: options)
    var browsing = WindowBrowsing(seed: seed, maxTabs: 8)
    var states = [try WindowContents(store)]
    for seq in 1...commands {
        try browsing.step(store, seq: seq)
        try store.waitUntilDurable(seq)
        states.append(try WindowContents(store))
    }
    return (store, states)
}

@Suite struct StorageErrorTests {
    /// ENOSPC or EIO on a save's write: the error surfaces, what was saved before stays, and
    /// the save goes through once the disk works again.
    @Test(arguments: [Errno.noSpace, Errno.ioError])
    func aFailedAppendSurfacesKeepsTheOldStateAndWorksAgainLater(errno: Errno) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, states) = try savedWindow(engine, seed: 21, commands: 10)
        var browsing = WindowBrowsing(seed: 99, maxTabs: 8)
        engine.failures[engine.operationCount + 1] = errno
        var seq: UInt64 = 10
        while !store.hasUnsavedChanges {
            seq += 1
            try browsing.step(store, seq: seq)
        }
        do {
            try store.waitUntilDurable(seq)
            Issue.record("the injected \(errno) did not surface")
        } catch {
            #expect(error.errno == errno)
        }
        #expect(store.durableSeq == 10)
        #expect(
            try WindowContents(try simulatedWindow(engine).0) == states[10], "the disk still holds the state before")

        try store.waitUntilDurable(seq)
        #expect(store.durableSeq == seq)
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(engine) == live)
    }

    /// A full disk: the compaction that needs room fails and says so, the save riding on it is
    /// durable in the journal's preallocated room, saves go on, and compaction succeeds once
    /// room returns.
    @Test func aFullDiskFailsCompactionButNotTheSaves() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let options = StoreOptions(compactAfterRecords: 6, compactAfterBytes: 1 << 20, journalPreallocation: 16 << 10)
        let (store, _) = try savedWindow(engine, seed: 22, commands: 3, options: options)
        var browsing = WindowBrowsing(seed: 23, maxTabs: 8)
        let generation = store.stores[0].generation
        var seq: UInt64 = 3
        var compactionFailures: [SaveEvent] = []
        while compactionFailures.isEmpty, seq < 60 {
            // Kept full: the room a deletion frees (the incognito session's, at its last tab)
            // is taken at once, so no compaction's new snapshot fits.
            engine.capacity = totalBytes(engine)
            seq += 1
            try browsing.step(store, seq: seq)
            while store.durableSeq < store.appliedSeq {
                for event in try store.poll(waiting: true) {
                    if case .failed(let error) = event { Issue.record("a save failed: \(error)") }
                    if case .compactionFailed = event { compactionFailures.append(event) }
                }
            }
        }
        #expect(compactionFailures.count == 1)
        if case .compactionFailed(let error)? = compactionFailures.first { #expect(error.errno == .noSpace) }
        #expect(store.stores[0].generation == generation)
        let saved = try WindowContents(store)
        #expect(try WindowContents(try simulatedWindow(engine, options: options).0) == saved, "every save is on disk")

        engine.capacity = nil
        for next in seq + 1...seq + 30 {
            try browsing.step(store, seq: next)
            try store.waitUntilDurable(next)
        }
        #expect(store.stores[0].generation > generation, "compaction works again once there is room")
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(engine, options: options) == live)
    }
}

@Suite struct DamageTests {
    /// A regular session of several generations, and the reference state after each command.
    static func prepared() throws -> (engine: FaultEngine, states: [WindowContents], live: WindowContents) {
        let engine = FaultEngine(directories: [simulatedRoot])
        let options = StoreOptions(compactAfterRecords: 12, compactAfterBytes: 1 << 20, journalPreallocation: 4 << 10)
        let (store, states) = try savedWindow(engine, seed: 31, commands: 45, options: options)
        return (engine, states, try WindowContents(store))
    }

    static func newest(_ prefix: String, in engine: FaultEngine) throws -> FilePath {
        let name = try #require(try engine.directoryEntries(regularDirectory)?.last { $0.hasPrefix(prefix) })
        return regularDirectory.appending(name)
    }

    /// The newest snapshot damaged: every byte of its header and list metadata flipped, every
    /// truncation, and bytes across its history section flipped.
    /// - Header, metadata or length damage: recovery sets the file aside and falls back to the
    ///   generation before plus both journals, losing nothing.
    /// - A damaged history: the list restores (histories are read lazily, on realization), and
    ///   the tab whose history it is, when realized, takes its history from the generation
    ///   before (its snapshot plus both journals): every tab is whole.
    @Test func aDamagedNewestSnapshotFallsBackWithoutLosingAHistory() throws {
        let (engine, _, live) = try Self.prepared()
        let path = try Self.newest(DiskLayout.snapshotPrefix, in: engine)
        let bytes = try #require(engine.contents(of: path))
        #expect(
            try engine.directoryEntries(regularDirectory)?.filter { $0.hasPrefix(DiskLayout.snapshotPrefix) }.count
                == 2)
        let metadataEnd =
            Framing.fileHeaderSize + Framing.recordHeaderSize
            + (0..<4).reduce(0) { $0 | Int(bytes[Framing.fileHeaderSize + 4 + $1]) << (8 * $1) }
        var variants: [(name: String, bytes: [UInt8], inMetadata: Bool)] = []
        for offset in 0..<bytes.count where offset < metadataEnd || offset % 5 == 0 {
            var copy = bytes
            copy[offset] ^= 0x20
            variants.append(("flip \(offset)", copy, offset < metadataEnd))
        }
        for length in 0..<bytes.count where length % 3 == 0 {
            variants.append(("cut \(length)", Array(bytes.prefix(length)), true))
        }
        for variant in variants {
            let disk = engine.copy()
            disk.overwrite(path, with: variant.bytes)
            let (restored, recovery) = try simulatedWindow(disk)
            if variant.inMetadata {
                #expect(try WindowContents(restored) == live, "\(variant.name)")
                #expect(
                    recovery.regular.fellBack && recovery.regular.damaged.first?.setAsideAt != nil, "\(variant.name)")
                #expect(recovery.regular.repairError == nil)
                continue
            }
            let tabs = restored.regular.webStateList.webStates
            #expect(tabs.map(\.id) == live.regular.tabs.map(\.id), "\(variant.name)")
            var unreadable = 0
            for (index, tab) in tabs.enumerated() {
                do {
                    #expect(try tab.navigationHistory() == live.regular.tabs[index].history, "\(variant.name)")
                } catch {
                    unreadable += 1
                    #expect(!tab.isRealized)
                }
            }
            #expect(unreadable == 0, "\(variant.name): \(unreadable) unreadable tabs")
        }
    }

    /// Where a snapshot's list metadata ends and its history section begins.
    static func metadataEnd(_ bytes: [UInt8]) -> Int {
        Framing.fileHeaderSize + Framing.recordHeaderSize
            + (0..<4).reduce(0) { $0 | Int(bytes[Framing.fileHeaderSize + 4 + $1]) << (8 * $1) }
    }

    /// A damaged snapshot is set aside and the window rebuilt into a new one from the
    /// generation before plus both journals. The journal of the set-aside snapshot stays part
    /// of that chain: when a history in the rebuilt snapshot is damaged in turn, the tab gets
    /// its history as it was, never the older one the chain would give without that journal
    /// (found by `stress --seed 12`: a window that came back torn).
    @Test func aHistoryDamagedAfterAFallbackReadsThroughTheSetAsideGenerationsJournal() throws {
        let (engine, _, live) = try Self.prepared()
        let newest = try Self.newest(DiskLayout.snapshotPrefix, in: engine)
        var bytes = try #require(engine.contents(of: newest))
        bytes[Framing.fileHeaderSize + Framing.recordHeaderSize + 3] ^= 0x10
        engine.overwrite(newest, with: bytes)
        let (rebuilt, recovery) = try simulatedWindow(engine)
        #expect(recovery.regular.fellBack && recovery.regular.repairError == nil)
        #expect(try WindowContents(rebuilt) == live)
        try rebuilt.settle()

        let snapshot = try Self.newest(DiskLayout.snapshotPrefix, in: engine)
        #expect(snapshot != newest, "the fallback was written into a new generation")
        let rebuiltBytes = try #require(engine.contents(of: snapshot))
        var checked = 0
        for offset in Self.metadataEnd(rebuiltBytes)..<rebuiltBytes.count where offset % 3 == 0 {
            let disk = engine.copy()
            var copy = rebuiltBytes
            copy[offset] ^= 0x20
            disk.overwrite(snapshot, with: copy)
            let (restored, _) = try simulatedWindow(disk)
            let tabs = restored.regular.webStateList.webStates
            #expect(tabs.map(\.id) == live.regular.tabs.map(\.id), "flip \(offset)")
            for (index, tab) in tabs.enumerated() {
                #expect(
                    try tab.navigationHistory() == live.regular.tabs[index].history, "flip \(offset), tab \(tab.id)")
            }
            checked += 1
        }
        #expect(checked > 20)
    }

    /// After a history in the newest snapshot is found damaged, the window goes on: new
    /// snapshots are written (the damaged tab's history comes from the generation before) and
    /// a later recovery gives the same window.
    @Test func compactionGoesOnAfterADamagedHistory() throws {
        let (engine, _, _) = try Self.prepared()
        let path = try Self.newest(DiskLayout.snapshotPrefix, in: engine)
        var bytes = try #require(engine.contents(of: path))
        bytes[bytes.count - 20] ^= 0x08
        engine.overwrite(path, with: bytes)
        let options = StoreOptions(compactAfterRecords: 4, compactAfterBytes: 1 << 20, journalPreallocation: 4 << 10)
        let (store, _) = try simulatedWindow(engine, options: options)
        let generation = store.stores[0].generation
        var browsing = WindowBrowsing(seed: 77, maxTabs: 8)
        for seq in store.appliedSeq + 1...store.appliedSeq + 40 {
            try browsing.step(store, seq: seq)
            try store.waitUntilDurable(seq)
        }
        try store.settle()
        #expect(store.stores[0].generation > generation + 2, "compaction kept going")
        let live = try WindowContents(store)
        #expect(try contentsAfterPowerCut(engine, options: options) == live)
    }

    /// Damage in the middle of a journal, valid saves after it: damage, never a torn last
    /// write. For every byte of a save that has saves before and after it: recovery names the
    /// journal and a place in that save, sets the file aside under `damaged/`
    /// byte for byte as it was, keeps the saves before the damage, and claims no torn tail.
    /// (Taken for a torn tail, the saves after the damage would be zeroed without a word.)
    @Test func damageWithValidSavesAfterItIsReportedAndTheJournalSetAsideWhole() throws {
        let (engine, states, live) = try Self.prepared()
        let path = try Self.newest(DiskLayout.journalPrefix, in: engine)
        let name = try #require(path.lastComponent?.string)
        let bytes = try #require(engine.contents(of: path))
        let commits = try JournalFile.scan(InMemoryBytes(bytes)).commits
        try #require(commits.count >= 3, "a save before the damage, the damaged one, one after it")
        let damagedSave = commits[0].end..<commits[1].end
        let keptSeq = commits[0].commit.seq
        for offset in damagedSave {
            var copy = bytes
            copy[offset] ^= 0x01
            let disk = engine.copy()
            disk.overwrite(path, with: copy)
            let (restored, recovery) = try simulatedWindow(disk)
            let report = recovery.regular
            #expect(report.tornTailAt == nil, "flip \(offset): damage taken for a torn tail")
            let entry = report.damaged.first { $0.path == path.string }
            #expect(entry != nil, "flip \(offset): the damaged journal is not reported: \(report)")
            if let entry {
                #expect(
                    entry.error.offset.map(damagedSave.contains) == true,
                    "flip \(offset): the report points into the damaged save: \(entry)")
                let aside = entry.setAsideAt.map { FilePath($0) }
                #expect(
                    aside?.removingLastComponent() == regularDirectory.appending(DiskLayout.damagedDirectory),
                    "flip \(offset): \(entry)")
                #expect(
                    aside.flatMap { disk.contents(of: $0) } == copy,
                    "flip \(offset): the set-aside file is the journal as it was")
            }
            #expect(
                try disk.directoryEntries(regularDirectory)?.contains(name) == false,
                "flip \(offset): the journal left its place")
            // What the damage cost: the saves from it on, never those before, and never the other Browser's.
            let got = try WindowContents(restored)
            #expect(got.regular == states[Int(keptSeq)].regular && report.seq == keptSeq, "flip \(offset): \(report)")
            #expect(got.incognito == live.incognito, "flip \(offset)")
            // Rebuilt into files the next recovery reads cleanly, to the same window.
            let (again, secondRecovery) = try simulatedWindow(disk)
            #expect(
                try WindowContents(again) == got && secondRecovery.regular.damaged.isEmpty,
                "flip \(offset): \(secondRecovery.regular)")
        }
    }

    /// Every byte of the newest regular journal flipped and every truncation: a typed report,
    /// a regular list the window really had (damage loses what follows it in that journal, the
    /// other Browser keeps its own), and never a crash. Damage in the unused, zeroed room past
    /// the last save loses nothing.
    @Test func aDamagedJournalGivesAStateTheWindowHad() throws {
        let (engine, states, live) = try Self.prepared()
        let path = try Self.newest(DiskLayout.journalPrefix, in: engine)
        let bytes = try #require(engine.contents(of: path))
        let used = (bytes.lastIndex { $0 != 0 } ?? 0) + 1
        var variants: [(String, [UInt8])] = []
        for offset in 0..<bytes.count where (offset < used + 64 && offset % 3 == 0) || offset % 97 == 0 {
            var copy = bytes
            copy[offset] ^= 0x01
            variants.append(("flip \(offset)", copy))
        }
        for length in 0...used where length % 4 == 0 { variants.append(("cut \(length)", Array(bytes.prefix(length)))) }
        for (name, variant) in variants {
            let disk = engine.copy()
            disk.overwrite(path, with: variant)
            let (restored, recovery) = try simulatedWindow(disk)
            let got = try WindowContents(restored)
            let hadIt = states.contains { $0.regular == got.regular }
            #expect(hadIt, "\(name): \(recovery.regular)")
            #expect(got.incognito == live.incognito, "\(name)")
            if name.hasPrefix("flip"), let offset = Int(name.dropFirst(5)), offset >= used {
                #expect(got == live, "\(name) lies past the last save")
            }
            // Recovery left files the next recovery reads the same way.
            let (again, _) = try simulatedWindow(disk)
            #expect(try WindowContents(again) == got, "\(name): a second recovery agrees")
        }
    }
}

@Suite struct IncognitoTests {
    /// Incognito tabs survive a crash while open; when the last one closes, the session is
    /// deleted durably: files, directory, and the parent's entry, so a power cut keeps it gone.
    @Test func incognitoComesBackAfterACrashAndIsDeletedWhenItsLastTabCloses() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(engine)
        let list = store.incognito.webStateList
        for seq in 1...3 as ClosedRange<UInt64> {
            var history = NavigationHistory()
            history.commit(
                NavigationItem(
                    url: "https://private\(seq).example/", title: "P\(seq)",
                    timestamp: Timestamp(microsecondsSinceEpoch: 1)))
            try store.apply(seq: seq) {
                _ = try list.insert(
                    WebState(
                        id: store.incognito.profile.makeWebStateID(),
                        creationTime: Timestamp(microsecondsSinceEpoch: 1), history: history))
            }
        }
        try store.waitUntilDurable(3)
        let open = try WindowContents(store)
        engine.powerCut()
        let (restored, _) = try simulatedWindow(engine)
        #expect(try WindowContents(restored) == open)
        #expect(try engine.directoryEntries(incognitoDirectory) != nil)

        let incognito = restored.incognito.webStateList
        var events: [SaveEvent] = []
        restored.apply(seq: 4) { incognito.closeAll() }
        for _ in 0..<20 where !events.contains(.deletedIncognito) { events += try restored.poll(waiting: true) }
        #expect(events.contains(.deletedIncognito))
        #expect(try engine.directoryEntries(incognitoDirectory) == nil)
        engine.powerCut()
        #expect(try engine.directoryEntries(incognitoDirectory) == nil, "the deletion is durable")
        let (after, recovery) = try simulatedWindow(engine)
        #expect(recovery.seq == 4, "the regular journal keeps the window's seq once the incognito session is gone")
        #expect(after.incognito.webStateList.isEmpty)
        #expect(try TabListContents(after.regular.webStateList, realizing: true) == open.regular)
    }
}

@Suite struct LazyRestoreTests {
    /// 10,000 tabs restore without reading one history; realizing the active tab reads its own.
    @Test func tenThousandTabsRestoreReadingNoHistory() throws {
        // The session is written as the store would leave it after a compaction: a snapshot of
        // 10,000 tabs (built with the list's bulk restore: 10,000 journaled inserts would only
        // slow the test) and an empty preallocated journal.
        let profile = Profile(stateDirectory: simulatedRoot)
        let list = WebStateList()
        var tabs: [RestoredTab] = []
        for index in 0..<10_000 {
            var history = NavigationHistory()
            for step in 0..<3 {
                history.commit(
                    NavigationItem(
                        url: "https://site\(index).example/\(step)", title: "Tab \(index)",
                        timestamp: Timestamp(microsecondsSinceEpoch: Int64(step + 1))))
            }
            tabs.append(
                RestoredTab(
                    webState: WebState(
                        id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 1),
                        history: history), opener: nil))
        }
        try list.restore(tabs, activeIndex: 5_000, pinnedCount: 0)
        let snapshot = try SnapshotEncoder.encode(list, lastCommandSeq: 1) { _ throws(SessionFormatError) in [] }
        let engine = FaultEngine(directories: [regularDirectory])
        for (name, bytes) in [
            (DiskLayout.snapshotName(1), snapshot),
            (DiskLayout.journalName(1), JournalFile.header + [UInt8](repeating: 0, count: 4096)),
        ] {
            let file = try engine.open(regularDirectory.appending(name), .create)
            try engine.perform([.write(file, bytes, offset: 0, durable: true)])
            engine.close(file)
        }

        let readsBefore = engine.readCount
        let (restored, recovery) = try simulatedWindow(engine)
        let restoreReads = engine.readCount - readsBefore
        let restoredTabs = restored.regular.webStateList
        #expect(recovery.regular.generation == 1 && recovery.regular.damaged.isEmpty)
        #expect(restoredTabs.count == 10_000)
        #expect(restoredTabs.webStates.allSatisfy { !$0.isRealized })
        #expect(restoreReads <= 8, "a handful of reads for 10,000 tabs: no history was read (\(restoreReads))")
        let active = try #require(restoredTabs.activeWebState)
        try active.forceRealized()
        #expect(engine.readCount - readsBefore == restoreReads + 1, "the active tab reads its history, once")
        #expect(try active.navigationHistory() == list.webStates[5_000].navigationHistory())
    }
}

@Suite struct CompactionInFlightTests {
    /// A compaction still in flight while commands reorder the list: afterwards, every
    /// unrealized tab must read its own history from the new snapshot (found by a stress
    /// campaign: the sources were mapped by the list's indices, which had moved on).
    @Test func unrealizedTabsReadTheirOwnHistoryAfterACompactionTheListOutran() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let options = StoreOptions(compactAfterRecords: 6, compactAfterBytes: 1 << 20)
        let (first, _) = try simulatedWindow(engine, options: options)
        var browsing = WindowBrowsing(seed: 21, maxTabs: 10, incognitoOneIn: 1_000_000)
        for seq in 1...40 as ClosedRange<UInt64> { try browsing.step(first, seq: seq, incognito: false) }
        try first.waitUntilDurable(40)
        try first.settle()

        // Restored: the tabs are unrealized, their histories in the snapshot.
        let (second, _) = try simulatedWindow(engine, options: options)
        let list = second.regular.webStateList
        try #require(list.count >= 3 && list.webStates.contains { !$0.isRealized })
        // Writes complete one per reap from here, so the compaction below stays in flight.
        engine.completionOrder = { _ in 0 }
        var seq: UInt64 = 40
        while second.savingSeq == nil || !second.compactionInFlight {
            seq += 1
            try second.apply(seq: seq) { _ = try list.move(from: 0, to: list.count - 1) }
            _ = try second.poll()
            try #require(seq < 200, "a compaction starts")
        }
        // The list moves on while the new snapshot is being written.
        seq += 1
        try second.apply(seq: seq) { _ = try list.move(from: list.count - 1, to: 0) }
        try second.settle()
        // The next compaction copies the unrealized tabs' frames from their sources.
        engine.completionOrder = nil
        let generation = second.regular.sessionDirectory
        func snapshots() throws -> [UInt64] {
            StoreListing(entries: try engine.directoryEntries(generation) ?? []).snapshots
        }
        let before = try snapshots().first
        while try snapshots().first == before {
            seq += 1
            try second.apply(seq: seq) { _ = try list.move(from: 0, to: 1) }
            try second.settle()
            try #require(seq < 400, "a second compaction happens")
        }
        // Every history in the new snapshot is its own tab's (a fallback would mask it).
        let newest = try #require(try snapshots().first)
        let reader = try SnapshotReader(
            EngineBytes(engine, path: generation.appending(DiskLayout.snapshotName(newest))))
        for index in 0..<reader.count {
            #expect(throws: Never.self, "item \(index)") { _ = try reader.history(at: index) }
        }
        let live = try WindowContents(second)
        let (third, _) = try simulatedWindow(engine.copy(), options: options)
        #expect(try WindowContents(third) == live)
    }
}
