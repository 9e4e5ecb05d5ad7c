import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Issue 13 item 2: the next journal is written ahead of need (`journal.spare`), so a compaction
/// renames it into place and writes its header only, not a whole zero-filled journal in the
/// save; a spare a kill, a power cut or a full disk interrupts costs no acknowledged save.
@Suite struct SpareJournalTests {
    static let options = StoreOptions(
        compactAfterRecords: 8, compactAfterBytes: 1 << 20, journalPreallocation: 16 << 10)
    static let regularDirectory = LeftOutSaveTests.regularDirectory
    static let incognitoDirectory = regularDirectory.removingLastComponent().appending(BrowserKind.incognito.rawValue)
    static let regularSpare = regularDirectory.appending(DiskLayout.spareJournal)

    /// A window on `disk` and the commands it takes: each opens a tab and waits until durable.
    final class Browsing {
        let disk: FaultEngine
        var store: WindowStore
        var seq: UInt64 = 0

        init(_ disk: FaultEngine) throws {
            self.disk = disk
            store = try simulatedWindow(disk, options: SpareJournalTests.options).0
        }

        func command(incognito: Bool = false) throws {
            seq += 1
            let browser = incognito ? store.incognito : store.regular
            try store.apply(seq: seq) { try LeftOutSaveTests.open("https://spare.example/\(seq)", in: browser) }
            try store.waitUntilDurable(seq)
        }

        /// Commands (each reap running the oldest chain) until the regular spare's write is
        /// queued; records an issue and returns false when it never is.
        func untilSpareInFlight() throws -> Bool {
            disk.completionOrder = { _ in 0 }
            for _ in 0..<40 where disk.contents(of: SpareJournalTests.regularSpare) == nil { try command() }
            guard case .writing = store.stores[0].spare else {
                Issue.record("the spare is not in flight: \(store.stores[0].spare)")
                return false
            }
            return true
        }

        /// Commands until the Browser's spare is written and its completion taken.
        func untilSpareReady(incognito: Bool = false) throws {
            let browser = store.stores[incognito ? 1 : 0]
            for _ in 0..<40 {
                if case .ready = browser.spare { return }
                try command(incognito: incognito)
            }
            Issue.record("no spare became ready: \(browser.spare)")
        }

        var regularGeneration: UInt64 { store.stores[0].generation }
    }

    @Test func aCompactionTakesTheReadySpareAndWritesOnlyItsHeader() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let browsing = try Browsing(disk)
        try browsing.untilSpareReady()
        let spare = try #require(disk.contents(of: Self.regularSpare))
        // Zeros to the room this generation's records say the next one fills, at most the
        // configured preallocation (`JournalSizingTests`).
        #expect(
            (BrowserStore.minimumBlock...Self.options.journalPreallocation).contains(spare.count)
                && spare.count % BrowserStore.minimumBlock == 0 && spare.allSatisfy { $0 == 0 },
            "zeros to the next journal's room: \(spare.count) B")
        let regular = browsing.store.stores[0]
        let generation = browsing.regularGeneration
        var compactingSave: UInt64?
        for _ in 0..<16 where browsing.regularGeneration == generation {
            let before = regular.bytesSubmitted
            try browsing.command()
            compactingSave = regular.bytesSubmitted - before
        }
        let newGeneration = browsing.regularGeneration
        #expect(newGeneration > generation, "a compaction ran")
        // Without the spare the save wrote the whole 16 KiB journal besides its snapshot.
        #expect(
            try #require(compactingSave) < UInt64(Self.options.journalPreallocation), "bytes the compacting save wrote")
        #expect(disk.contents(of: Self.regularSpare) == nil, "the spare became the new journal")
        let journal = try #require(
            disk.contents(of: Self.regularDirectory.appending(DiskLayout.journalName(newGeneration))))
        #expect(journal.count == spare.count)
        #expect(
            Array(journal.prefix(BrowserStore.minimumBlock)) == JournalFile.header(blockSize: BrowserStore.minimumBlock)
        )

        // Appends go to it, and every acknowledged save comes back, after a kill and a power cut.
        for _ in 0..<3 { try browsing.command() }
        let live = try WindowContents(browsing.store)
        let killed = disk.copy()
        killed.processKilled()
        let (afterKill, recovery) = try simulatedWindow(killed, options: Self.options)
        #expect(recovery.regular.damaged.isEmpty)
        #expect(try WindowContents(afterKill) == live)
        #expect(try contentsAfterPowerCut(disk, options: Self.options) == live)
    }

    /// The spare's write queued when the process dies or the power goes: the next start loses
    /// nothing, reports no damage, and deletes the spare; it writes one again and compacts on.
    @Test(arguments: [false, true]) func aSpareInterruptedLosesNothingAndIsDeleted(powerCut: Bool) throws {
        for seed in 0..<(powerCut ? 8 : 1) as Range<UInt64> {
            let disk = FaultEngine(directories: [simulatedRoot])
            let browsing = try Browsing(disk)
            // Each reap runs one chain, the oldest: the spare's stays queued until the next one.
            guard try browsing.untilSpareInFlight() else { return }
            let live = try WindowContents(browsing.store)
            if powerCut {
                var random = SeededGenerator(seed: seed)
                disk.powerCut(keepingUnsyncedWith: &random)
            } else {
                disk.processKilled()
            }
            let restored = try Browsing(disk)
            #expect(try WindowContents(restored.store) == live, "seed \(seed)")
            #expect(
                disk.contents(of: Self.regularSpare) == nil, "seed \(seed): the leftover spare is deleted at recovery")
            restored.seq = restored.store.appliedSeq
            let generation = restored.regularGeneration
            try restored.untilSpareReady()
            for _ in 0..<16 where restored.regularGeneration == generation { try restored.command() }
            #expect(restored.regularGeneration > generation, "seed \(seed)")
            #expect(
                try contentsAfterPowerCut(disk, options: Self.options) == WindowContents(restored.store), "seed \(seed)"
            )
        }
    }

    /// A power cut at each step of a compaction that takes the spare (the rename, the header's
    /// write and sync, the snapshot, the directory sync, the old generation's removal): the
    /// window comes back as acknowledged, or with the save in flight, never less, never damaged.
    @Test func aPowerCutAtEachStepOfACompactionWithTheSpareLosesNothing() throws {
        for halt in 0..<14 {
            let disk = FaultEngine(directories: [simulatedRoot])
            let browsing = try Browsing(disk)
            try browsing.untilSpareReady()
            // Commands saved until the next one compacts: that one's save is cut.
            var before = try WindowContents(browsing.store)
            while true {
                browsing.seq += 1
                try browsing.store.apply(seq: browsing.seq) {
                    try LeftOutSaveTests.open("https://cut.example/\(browsing.seq)", in: browsing.store.regular)
                }
                if browsing.store.stores[0].shouldCompact { break }
                try browsing.store.waitUntilDurable(browsing.seq)
                before = try WindowContents(browsing.store)
            }
            let seq = browsing.seq
            let after = try WindowContents(browsing.store)
            disk.haltAfter = disk.operationCount + halt
            try? browsing.store.waitUntilDurable(seq)
            let acknowledged = browsing.store.durableSeq == seq
            disk.powerCut()
            let (restored, recovery) = try simulatedWindow(disk, options: Self.options)
            let contents = try WindowContents(restored)
            #expect(recovery.regular.damaged.isEmpty, "halt \(halt): \(recovery.regular.damaged)")
            #expect(
                contents == after || (!acknowledged && contents == before), "halt \(halt), acknowledged \(acknowledged)"
            )
            #expect(disk.contents(of: Self.regularSpare) == nil, "halt \(halt)")
        }
    }

    /// A full disk while the spare is written: it is deleted, no save fails or reports it, and
    /// a spare is written again after the next compaction.
    @Test func aFullDiskWhileWritingTheSpareFailsNoSave() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let browsing = try Browsing(disk)
        guard try browsing.untilSpareInFlight() else { return }
        _ = browsing.store.takeEvents()
        // The next mutating operation is the spare's zeros: the oldest chain runs first.
        disk.failures[disk.operationCount + 1] = .noSpace
        try browsing.command()
        let events = browsing.store.takeEvents()
        #expect(
            !events.contains {
                if case .failed = $0 { true } else if case .compactionFailed = $0 { true } else { false }
            }, "\(events)")
        #expect(browsing.store.durableSeq == browsing.seq)
        #expect(disk.contents(of: Self.regularSpare) == nil, "the failed spare is deleted")
        guard case .failed = browsing.store.stores[0].spare else {
            Issue.record("not held back: \(browsing.store.stores[0].spare)")
            return
        }
        // None again in this generation; after the compaction, one is written again.
        let generation = browsing.regularGeneration
        for _ in 0..<16 where browsing.regularGeneration == generation {
            #expect(disk.contents(of: Self.regularSpare) == nil)
            try browsing.command()
        }
        try browsing.untilSpareReady()
        #expect(
            (disk.contents(of: Self.regularSpare)?.count ?? 0) > BrowserStore.minimumBlock, "a spare written again")
        let live = try WindowContents(browsing.store)
        disk.processKilled()
        #expect(try WindowContents(try simulatedWindow(disk, options: Self.options).0) == live)
    }

    /// A disk with no room for a new session's files: the window's ready spare (here the other
    /// Browser's), written ahead of need, gives its room to them, and the session is made again
    /// with its journal preallocated, not one that grows by append.
    @Test func aReadySpareGivesItsRoomToANewSessionsFiles() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let browsing = try Browsing(disk)
        try browsing.untilSpareReady()
        let spare = try #require(disk.contents(of: Self.regularSpare))
        // Room for the incognito session's preallocated journal, not for its snapshot too; for
        // both once the spare goes.
        disk.capacity = totalBytes(disk) + Self.options.journalPreallocation
        try browsing.command(incognito: true)
        #expect(browsing.store.durableSeq == browsing.seq)
        #expect(disk.contents(of: Self.regularSpare) == nil, "the spare of \(spare.count) B gave its room")
        guard case .failed = browsing.store.stores[0].spare else {
            Issue.record("written again in this generation: \(browsing.store.stores[0].spare)")
            return
        }
        let incognito = browsing.store.stores[1]
        #expect(incognito.preallocatesJournals, "no Browser fell back to journals that grow by append")
        #expect(
            disk.contents(of: Self.incognitoDirectory.appending(DiskLayout.journalName(incognito.generation)))?.count
                == Self.options.journalPreallocation)
        try expectKillAndPowerCutKeep(try WindowContents(browsing.store), on: disk, options: Self.options)
    }

    /// A disk full while one Browser's journal has outgrown its preallocated room (appends past
    /// its end need new blocks): the other Browser's ready spare, zeros written ahead of need,
    /// holds more room than the save needs, and must give it up rather than fail the save.
    @Test func aReadySpareGivesItsRoomToTheOtherBrowsersAppends() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let browsing = try Browsing(disk)
        try browsing.untilSpareReady()
        let spare = try #require(disk.contents(of: Self.regularSpare))
        // The incognito journal grows past its preallocation (six records, short of a compaction):
        // every later append needs new room.
        let page = String(repeating: "p", count: 3000)
        for _ in 0..<6 {
            browsing.seq += 1
            try browsing.store.apply(seq: browsing.seq) {
                try LeftOutSaveTests.open("https://spare.example/\(page)", in: browsing.store.incognito)
            }
            try browsing.store.waitUntilDurable(browsing.seq)
        }
        disk.capacity = totalBytes(disk)
        browsing.seq += 1
        try browsing.store.apply(seq: browsing.seq) {
            try LeftOutSaveTests.open("https://spare.example/\(page)", in: browsing.store.incognito)
        }
        // The append refused goes again at once, into the spare's room: the save does not fail.
        #expect(throws: Never.self, "the regular spare of \(spare.count) B kept its room") {
            try browsing.store.waitUntilDurable(browsing.seq)
        }
        #expect(browsing.store.durableSeq == browsing.seq)
        #expect(disk.contents(of: Self.regularSpare) == nil, "the spare is deleted")
    }

    /// A compaction's file that the disk has no room to create (found full before any write is
    /// queued): the window's ready spares give up their room and the compaction is not
    /// deferred, while the save lands in the old journal; the next save compacts.
    @Test func aReadySpareGivesItsRoomToACompactionsFileCreation() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let browsing = try Browsing(disk)
        try browsing.untilSpareReady(incognito: true)
        let regular = browsing.store.stores[0]
        let incognito = browsing.store.stores[1]
        let incognitoSpare = Self.incognitoDirectory.appending(DiskLayout.spareJournal)
        // Commands saved until the next one compacts.
        while true {
            browsing.seq += 1
            try browsing.store.apply(seq: browsing.seq) {
                try LeftOutSaveTests.open("https://spare.example/\(browsing.seq)", in: browsing.store.regular)
            }
            if regular.shouldCompact { break }
            try browsing.store.waitUntilDurable(browsing.seq)
        }
        guard case .ready = incognito.spare else {
            Issue.record("the incognito spare is not ready: \(incognito.spare)")
            return
        }
        let generation = regular.generation
        let temporary = Self.regularDirectory.appending(
            DiskLayout.snapshotName(regular.highestGeneration + 1) + DiskLayout.temporarySuffix)
        disk.failingOpens[temporary.string] = .noSpace
        _ = browsing.store.takeEvents()
        try browsing.store.waitUntilDurable(browsing.seq)
        disk.failingOpens = [:]
        let events = browsing.store.takeEvents()
        #expect(events.contains { if case .compactionFailed = $0 { true } else { false } }, "\(events)")
        #expect(regular.generation == generation, "the save went to the old journal")
        #expect(disk.contents(of: incognitoSpare) == nil, "the incognito spare gave up its room")
        guard case .failed = incognito.spare else {
            Issue.record("the incognito spare is kept: \(incognito.spare)")
            return
        }
        #expect(!regular.compactionDeferred, "the compaction waits past a deferral")
        try browsing.command()
        #expect(regular.generation > generation, "the next save compacts")
        try expectKillAndPowerCutKeep(try WindowContents(browsing.store), on: disk, options: Self.options)
    }

    /// Closing the last incognito tab deletes its session, the spare too: nothing of it is left,
    /// whether the spare was ready or still being written.
    @Test(arguments: [false, true]) func incognitoCloseLeavesNoSpare(inFlight: Bool) throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let browsing = try Browsing(disk)
        let incognitoSpare = Self.incognitoDirectory.appending(DiskLayout.spareJournal)
        if inFlight {
            // Each reap runs one chain, the oldest: the spare's stays queued until the next one.
            disk.completionOrder = { _ in 0 }
            for _ in 0..<40 where disk.contents(of: incognitoSpare) == nil { try browsing.command(incognito: true) }
            guard case .writing = browsing.store.stores[1].spare else {
                Issue.record("the spare is not in flight: \(browsing.store.stores[1].spare)")
                return
            }
            // What the window does once the close is durable, here while the spare's write is
            // still in flight (on a ring, 1 MiB of zeros outlasts a one-block save).
            browsing.seq += 1
            browsing.store.apply(seq: browsing.seq) { browsing.store.incognito.webStateList.closeAll() }
            try browsing.store.stores[1].destroy()
            #expect(try disk.directoryEntries(Self.incognitoDirectory) == nil, "the incognito session is deleted")
            // The spare's own completion closes it.
            while browsing.store.stores[1].spare.ticket != nil { try browsing.store.turn(waiting: false) }
        } else {
            try browsing.untilSpareReady(incognito: true)
            #expect(disk.contents(of: incognitoSpare) != nil)
            browsing.seq += 1
            browsing.store.apply(seq: browsing.seq) { browsing.store.incognito.webStateList.closeAll() }
            try browsing.store.waitUntilDurable(browsing.seq)
            #expect(try disk.directoryEntries(Self.incognitoDirectory) == nil, "the incognito session is deleted")
        }
        #expect(browsing.store.stores[1].spare.file == nil, "nothing of the spare is held")
        disk.powerCut()
        #expect(try disk.directoryEntries(Self.incognitoDirectory) == nil, "the deletion is durable")
    }
}
