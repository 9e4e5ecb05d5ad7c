import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Issue 29 item 3: a compaction's snapshot is written, put in place and read back in the
/// background while saves append to the new generation's journal; nothing acknowledged is lost
/// at any step, and the generation before stays until the new snapshot is proven.
@Suite struct BackgroundCompactionTests {
    typealias Browsing = SpareJournalTests.Browsing
    static let options = SpareJournalTests.options
    static let regularDirectory = SpareJournalTests.regularDirectory

    /// Chains run oldest first, one a reap, except a new snapshot's (its temporary's) while
    /// `holding`: a ring whose large write takes longer than the saves behind it.
    final class SnapshotGate {
        var holding = true

        func install(on disk: FaultEngine) {
            disk.completionOrder = { [unowned disk, unowned self] _ in
                disk.queuedPaths.firstIndex { path in
                    !(self.holding && (path?.hasSuffix(DiskLayout.temporarySuffix) ?? false))
                }
            }
        }
    }

    /// The held snapshot's write fails (a full disk) as a command saves: the compaction's failure
    /// is reported, no save fails, and the chain runs from `base` through the journal of
    /// `generation`, where appends stay.
    static func failHeldSnapshotOnAFullDisk(
        _ disk: FaultEngine, _ browsing: Browsing, _ gate: SnapshotGate, base: UInt64, generation: UInt64
    ) throws {
        let regular = browsing.store.stores[0]
        _ = browsing.store.takeEvents()
        // The held chain is the oldest: the next reap runs it, its write first.
        disk.failures[disk.operationCount + 1] = .noSpace
        gate.holding = false
        try Self.boundedCommand(browsing)
        let events = browsing.store.takeEvents()
        #expect(events.contains { if case .compactionFailed = $0 { true } else { false } }, "\(events)")
        #expect(!events.contains { if case .failed = $0 { true } else { false } }, "\(events)")
        #expect(!regular.hasBackgroundWork && regular.snapshotGeneration == base && regular.generation == generation)
    }

    /// A command whose save becomes durable within a bounded number of turns, or an issue.
    static func boundedCommand(_ browsing: Browsing) throws {
        browsing.seq += 1
        let seq = browsing.seq
        try browsing.store.apply(seq: seq) {
            try LeftOutSaveTests.open("https://background.example/\(seq)", in: browsing.store.regular)
        }
        for _ in 0..<64 where browsing.store.durableSeq < seq { try browsing.store.turn(waiting: true) }
        #expect(browsing.store.durableSeq == seq, "save \(seq) waited for the snapshot")
    }

    /// Commands until the regular Browser's appends move to a new generation; its number.
    static func untilAppendsMove(_ browsing: Browsing) throws -> UInt64 {
        let regular = browsing.store.stores[0]
        let before = regular.generation
        for _ in 0..<32 where regular.generation == before { try Self.boundedCommand(browsing) }
        try #require(regular.generation > before, "a compaction moved the appends")
        return regular.generation
    }

    /// A window whose regular appends moved to a new generation, its snapshot held; the
    /// generation the chain started at, and the new one. `first`: what the window does before.
    static func heldCompaction(first: (Browsing) throws -> Void = { _ in }) throws -> (
        FaultEngine, Browsing, SnapshotGate, base: UInt64, generation: UInt64
    ) {
        let disk = FaultEngine(directories: [simulatedRoot])
        let browsing = try Browsing(disk)
        try first(browsing)
        let gate = SnapshotGate()
        gate.install(on: disk)
        let base = browsing.store.stores[0].snapshotGeneration
        return (disk, browsing, gate, base, try untilAppendsMove(browsing))
    }

    @Test func savesGoOnInTheNewJournalWhileItsSnapshotIsStillBeingWritten() throws {
        let (disk, browsing, gate, base, generation) = try Self.heldCompaction()
        let regular = browsing.store.stores[0]
        for _ in 0..<4 { try Self.boundedCommand(browsing) }
        #expect(
            regular.hasBackgroundWork && regular.snapshotGeneration == base,
            "the snapshot is held, the chain starts where it did")
        #expect(
            disk.contents(
                of: Self.regularDirectory.appending(DiskLayout.snapshotName(generation) + DiskLayout.temporarySuffix))
                != nil)
        let live = try WindowContents(browsing.store)
        // A kill or a power cut now: the old snapshot, its journal and the new journal hold it all.
        try expectKillAndPowerCutKeep(live, on: disk, options: Self.options)
        // Released, it is proven and the chain starts there; the generation before stays as the fallback.
        gate.holding = false
        try browsing.store.settle()
        #expect(!regular.hasBackgroundWork && regular.snapshotGeneration == generation)
        #expect(try LeftOutSaveTests.snapshots(disk) == [base, generation])
        try LeftOutSaveTests.damageNewestSnapshot(disk)
        #expect(try contentsAfterPowerCut(disk, options: Self.options) == live, "the fallback reaches every save")
    }

    /// A power cut at every operation from the compaction's save on, the snapshot held while
    /// saves go on and then released: the window comes back as acknowledged, or with saves
    /// applied after, never less and never damaged.
    @Test(arguments: [false, true]) func aPowerCutAtEveryStepOfABackgroundCompactionLosesNothing(tornWrites: Bool)
        throws
    {
        for halt in 0..<32 {
            let disk = FaultEngine(directories: [simulatedRoot])
            let browsing = try Browsing(disk)
            let gate = SnapshotGate()
            gate.install(on: disk)
            // Up to the save before the one that compacts.
            let regular = browsing.store.stores[0]
            var acknowledged = try WindowContents(browsing.store)
            while browsing.seq < 32 {
                browsing.seq += 1
                let seq = browsing.seq
                try browsing.store.apply(seq: seq) {
                    try LeftOutSaveTests.open("https://cut.example/\(seq)", in: browsing.store.regular)
                }
                if regular.shouldCompact { break }
                for _ in 0..<64 where browsing.store.durableSeq < seq { try browsing.store.turn(waiting: true) }
                acknowledged = try WindowContents(browsing.store)
            }
            try #require(regular.shouldCompact, "the next save compacts")
            disk.haltAfter = disk.operationCount + halt
            var possible = [acknowledged, try WindowContents(browsing.store)]
            for step in 0..<6 {
                if step == 3 { gate.holding = false }
                if step > 0 {
                    browsing.seq += 1
                    let seq = browsing.seq
                    try browsing.store.apply(seq: seq) {
                        try LeftOutSaveTests.open("https://cut.example/\(seq)", in: browsing.store.regular)
                    }
                    possible.append(try WindowContents(browsing.store))
                }
                for _ in 0..<64 where browsing.store.durableSeq < browsing.seq {
                    _ = try? browsing.store.turn(waiting: true)
                }
                if browsing.store.durableSeq == browsing.seq {
                    acknowledged = try WindowContents(browsing.store)
                    possible = [acknowledged]
                }
            }
            if tornWrites {
                var random = SeededGenerator(seed: UInt64(halt))
                disk.powerCut(keepingUnsyncedWith: &random)
            } else {
                disk.powerCut()
            }
            let (restored, recovery) = try simulatedWindow(disk, options: Self.options)
            let contents = try WindowContents(restored)
            #expect(recovery.regular.damaged.isEmpty, "halt \(halt): \(recovery.regular.damaged)")
            #expect(possible.contains(contents), "halt \(halt): \(contents) is not \(acknowledged) or a later state")
        }
    }

    /// The snapshot's write fails (a full disk): reported, no save fails, the new journal stays
    /// the chain's end after the old snapshot, and the next compaction goes past it; a fallback
    /// from that one's damaged snapshot goes through the generation that has a journal only.
    @Test func aSnapshotThatFailsInTheBackgroundLosesNothingAndTheNextCompactionGoesOn() throws {
        let (disk, browsing, gate, base, generation) = try Self.heldCompaction()
        let regular = browsing.store.stores[0]
        try Self.failHeldSnapshotOnAFullDisk(disk, browsing, gate, base: base, generation: generation)
        #expect(
            disk.contents(
                of: Self.regularDirectory.appending(DiskLayout.snapshotName(generation) + DiskLayout.temporarySuffix))
                == nil)
        let live = try WindowContents(browsing.store)
        let killed = disk.copy()
        killed.processKilled()
        #expect(try WindowContents(try simulatedWindow(killed, options: Self.options).0) == live)
        // The next compaction (past the deferral) is proven; its fallback runs through `generation`'s journal.
        for _ in 0..<48 where regular.snapshotGeneration <= generation {
            try Self.boundedCommand(browsing)
            try browsing.store.settle()
        }
        #expect(regular.snapshotGeneration > generation)
        #expect(try LeftOutSaveTests.snapshots(disk) == [base, regular.snapshotGeneration])
        let final = try WindowContents(browsing.store)
        try LeftOutSaveTests.damageNewestSnapshot(disk)
        let (restored, recovery) = try simulatedWindow(disk, options: Self.options)
        #expect(try WindowContents(restored) == final)
        #expect(recovery.regular.damaged.count == 1, "the damaged snapshot only: \(recovery.regular.damaged)")
    }

    /// The snapshot's write finds the disk full while the other Browser's spare is ready: the
    /// spare gives up its room (removed, none written again in its generation) and the
    /// compaction is not deferred, so the next one comes at the threshold and finds that room
    /// (`BrowserStore.makeRoom`). Without that, the next waits past a deferral, on a disk the
    /// spare keeps full.
    @Test func aSnapshotThatFindsTheDiskFullTakesTheOtherBrowsersReadySpare() throws {
        let (disk, browsing, gate, base, generation) = try Self.heldCompaction {
            try $0.untilSpareReady(incognito: true)
        }
        let regular = browsing.store.stores[0]
        let incognito = browsing.store.stores[1]
        try #require(regular.hasBackgroundWork, "the new snapshot is held")
        guard case .ready = incognito.spare else {
            Issue.record("the incognito spare is not ready: \(incognito.spare)")
            return
        }
        let incognitoSpare = SpareJournalTests.incognitoDirectory.appending(DiskLayout.spareJournal)
        try #require(disk.contents(of: incognitoSpare) != nil)
        try Self.failHeldSnapshotOnAFullDisk(disk, browsing, gate, base: base, generation: generation)
        #expect(disk.contents(of: incognitoSpare) == nil, "the incognito spare gave up its room")
        guard case .failed = incognito.spare else {
            Issue.record("the incognito spare is kept: \(incognito.spare)")
            return
        }
        #expect(!regular.compactionDeferred, "the next compaction waits past a deferral")
        #expect(regular.preallocatesJournals, "a spare gave its room: journals are still preallocated")
        // The next compaction comes at the threshold, and is proven.
        let records = regular.journalRecords
        for _ in 0..<max(0, Self.options.compactAfterRecords - records) where regular.generation == generation {
            try Self.boundedCommand(browsing)
            try browsing.store.settle()
        }
        #expect(regular.snapshotGeneration > generation, "no compaction at the threshold")
        try expectKillAndPowerCutKeep(try WindowContents(browsing.store), on: disk, options: Self.options)
    }
}
