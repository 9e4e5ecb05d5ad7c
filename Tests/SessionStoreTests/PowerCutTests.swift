import BrowserModel
import IOUring
import TestSupport
import Testing

@testable import SessionStore

/// Power cuts on the simulated disk: for seeded browsing sequences, a cut after every single
/// storage operation (each write, sync, create, rename), with unsynced writes dropped or a
/// seeded prefix of them kept and torn. After recovery the window must equal the reference
/// state at some command between the last acknowledged one and the last one applied. Some seeds
/// complete the chains of a save one at a time, newest first or in a seeded order, as a ring
/// may: one Browser's write then lands while the other's is still in flight.
@Suite struct PowerCutTests {
    static let commands: UInt64 = 30
    /// Small thresholds, so a sequence this short compacts several times.
    static let options = StoreOptions(
        compactAfterRecords: 12, compactAfterBytes: 4 << 10, journalPreallocation: 8 << 10)

    struct Run {
        var states: [WindowContents] = []
        var acknowledged: UInt64 = 0
        var applied: UInt64 = 0
        var operations = 0
    }

    static func disk(seed: UInt64) -> FaultEngine {
        let engine = FaultEngine(directories: [simulatedRoot])
        switch seed % 3 {
        case 1:
            engine.completionOrder = { queued in queued - 1 }
        case 2:
            var random = SeededGenerator(seed: seed ^ 0x5CA7_7E12)
            engine.completionOrder = { Int.random(in: 0..<$0, using: &random) }
        default:
            break
        }
        return engine
    }

    /// Browses `commands` commands on `engine`, saving at once and waiting now and then, the
    /// disk halted after `haltAfter` operations. The reference states are the live window's.
    static func run(seed: UInt64, engine: FaultEngine, haltAfter: Int?) throws -> Run {
        engine.haltAfter = haltAfter
        let (store, _) = try simulatedWindow(engine, options: options)
        var browsing = WindowBrowsing(seed: seed, maxTabs: 8, incognitoOneIn: seed % 3 == 0 ? 4 : 2)
        var run = Run()
        run.states.append(try WindowContents(store))
        for seq in 1...commands {
            try browsing.step(store, seq: seq)
            run.states.append(try WindowContents(store))
            if browsing.coin(2) { _ = try? store.poll() }
            if browsing.coin(4) { try? store.waitUntilDurable(seq) }
        }
        try? store.waitUntilDurable(commands)
        run.acknowledged = store.durableSeq
        run.applied = store.appliedSeq
        run.operations = engine.operationCount
        return run
    }

    /// How a run ends at its cut.
    enum End: CaseIterable {
        case powerCut
        case tornPowerCut
        case kill
    }

    @Test(arguments: 0..<32 as Range<UInt64>)
    func everyCutRecoversAStateBetweenAcknowledgedAndApplied(seedIndex: UInt64) throws {
        let seed = 1000 + seedIndex
        let reference = try Self.run(seed: seed, engine: Self.disk(seed: seed), haltAfter: nil)
        #expect(reference.acknowledged == reference.applied, "without a cut every command is acknowledged")
        var recoveries = 0
        // A quarter of the seeds also kill the process at each cut, the power on: what was
        // never synced stays (`KillTests` has the incognito session's deletion and re-creation).
        let ends: [End] = seedIndex % 4 == 0 ? End.allCases : [.powerCut, .tornPowerCut]
        for cut in 0...reference.operations {
            for end in ends {
                let engine = Self.disk(seed: seed)
                let run = try Self.run(seed: seed, engine: engine, haltAfter: cut)
                switch end {
                case .tornPowerCut:
                    var random = SeededGenerator(seed: seed &* 7919 &+ UInt64(cut))
                    engine.powerCut(keepingUnsyncedWith: &random)
                case .powerCut:
                    engine.powerCut()
                case .kill:
                    engine.processKilled()
                }
                let (restored, recovery) = try simulatedWindow(engine, options: Self.options)
                let got = try WindowContents(restored)
                let matches = (run.acknowledged...run.applied).filter { reference.states[Int($0)] == got }
                #expect(
                    !matches.isEmpty,
                    "seed \(seed) cut \(cut) \(end): acknowledged \(run.acknowledged), applied \(run.applied), recovered \(got) \(recovery)"
                )
                // The seq it comes back at names that state and is never below one acknowledged:
                // a restart that went back would hand the same seq to a different command.
                #expect(
                    recovery.seq >= run.acknowledged && reference.states[Int(recovery.seq)] == got,
                    "seed \(seed) cut \(cut) \(end): came back at seq \(recovery.seq), acknowledged \(run.acknowledged)"
                )
                #expect(recovery.regular.repairError == nil && recovery.incognito.repairError == nil)
                recoveries += 1

                // What recovery repaired takes new saves: they survive the next cut.
                if cut % 7 == 0 {
                    var more = WindowBrowsing(seed: seed ^ 0xFEED, maxTabs: 8)
                    for seq in restored.appliedSeq + 1...restored.appliedSeq + 3 { try more.step(restored, seq: seq) }
                    try restored.waitUntilDurable(restored.appliedSeq)
                    let saved = try WindowContents(restored)
                    engine.powerCut()
                    let (again, _) = try simulatedWindow(engine, options: Self.options)
                    #expect(try WindowContents(again) == saved, "seed \(seed) cut \(cut): saves after recovery")
                }
            }
        }
        #expect(recoveries == ends.count * (reference.operations + 1))
    }

    /// A compaction in one Browser that shares its save with the other: the chains complete
    /// newest first, so the compaction's files land before the other Browser's append, and a
    /// power cut after each completion must give the window as it was after one of the
    /// commands, never the incognito command without the regular one before it (a snapshot
    /// cannot be taken back).
    @Test func aCompactionSharingASaveWaitsForTheOtherBrowsersWrite() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        engine.completionOrder = { queued in queued - 1 }
        let (store, _) = try simulatedWindow(engine, options: Self.options)
        let incognitoDirectory = store.incognito.sessionDirectory
        var browsing = WindowBrowsing(seed: 11, maxTabs: 8)
        var seq: UInt64 = 0
        var sharedCompactions = 0
        for _ in 0..<40 {
            let before = try WindowContents(store)
            let snapshotsBefore = StoreListing(entries: try engine.directoryEntries(incognitoDirectory) ?? []).snapshots
            seq += 1
            try browsing.step(store, seq: seq, incognito: false)
            let middle = try WindowContents(store)
            seq += 1
            try browsing.step(store, seq: seq, incognito: true)
            let after = try WindowContents(store)
            while store.durableSeq < store.appliedSeq {
                _ = try store.poll()
                let disk = engine.copy()
                disk.powerCut()
                let (restored, _) = try simulatedWindow(disk, options: Self.options)
                let got = try WindowContents(restored)
                #expect([before, middle, after].contains(got), "command \(seq): \(got)")
            }
            let snapshotsAfter = StoreListing(entries: try engine.directoryEntries(incognitoDirectory) ?? []).snapshots
            if snapshotsAfter.first != snapshotsBefore.first, snapshotsBefore.first != nil { sharedCompactions += 1 }
        }
        #expect(sharedCompactions >= 2, "the incognito Browser compacted while the regular one saved too")
    }
}

/// Case 1 of the save policy (the scene goes to the background: save at once) with a delay
/// pending: `background` alone makes every change durable. The clock never reaches the delay
/// and nothing else asks for a save; the loop only turns, as a worker's does.
@Suite struct BackgroundSaveTests {
    @Test(arguments: 0..<6 as Range<UInt64>)
    func backgroundAloneMakesEveryChangeDurableBeforeTheDelay(seed: UInt64) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        // Half the seeds complete one chain per turn: the second background finds the first's
        // save still in flight.
        if seed % 2 == 1 { engine.completionOrder = { queued in queued - 1 } }
        let clock = ManualClock()
        let delay: UInt64 = 2500
        let (store, _) = try simulatedWindow(engine, delay: delay, clock: clock)
        var browsing = WindowBrowsing(seed: 40 + seed, maxTabs: 8, incognitoOneIn: 3)
        var seq: UInt64 = 0
        for _ in 0..<2 {
            for _ in 0..<8 {
                seq += 1
                try browsing.step(store, seq: seq)
                clock.advance(milliseconds: 50)
            }
            try store.background()
            _ = try store.poll()
        }
        let live = try WindowContents(store)
        var turns = 0
        while store.durableSeq < store.appliedSeq, turns < 50 {
            _ = try store.poll()
            turns += 1
        }
        #expect(
            store.appliedSeq > 0 && store.durableSeq == store.appliedSeq,
            "seed \(seed): durable \(store.durableSeq) of \(store.appliedSeq)")
        #expect(store.nextDeadline == nil, "background cancelled the delayed save")
        #expect(try contentsAfterPowerCut(engine) == live, "seed \(seed): a power cut after the background save")
    }
}

/// The simulated disk's power cut itself: what a write in flight leaves.
@Suite struct FaultEngineCutTests {
    /// A durable write the halt refuses, then a seeded cut: the file keeps a prefix of the
    /// write ending at its start, at a 512-byte boundary of the file, or at its end, and over
    /// the seeds every one of those. A write issued after the halt never lands; one queued
    /// when it struck (a ring has it in flight) may.
    @Test func aWriteInFlightLeavesASectorGranularPrefixAndOneAfterTheHaltNothing() throws {
        let (first, queued, late) = (
            simulatedRoot.appending("first"), simulatedRoot.appending("queued"), simulatedRoot.appending("late")
        )
        var firstEnds: Set<Int> = []
        var queuedEnds: Set<Int> = []
        for seed in 0..<200 as Range<UInt64> {
            let engine = FaultEngine(directories: [simulatedRoot])
            let files = try [first, queued, late].map { try engine.open($0, .create) }
            try engine.perform([.write(files[0], [UInt8](repeating: 1, count: 100), offset: 0, durable: true)])
            try engine.syncDirectory(simulatedRoot)
            // One chain per reap: the second stays queued while the first hits the halt.
            engine.completionOrder = { _ in 0 }
            engine.haltAfter = engine.operationCount
            _ = engine.submit([.write(files[0], [UInt8](repeating: 2, count: 2000), offset: 100, durable: true)])
            _ = engine.submit([
                .write(files[1], [UInt8](repeating: 3, count: 700), offset: 0, durable: false), .sync(files[1]),
            ])
            try engine.flush()
            let refused = try engine.reap(waiting: true)
            #expect(refused.count == 1 && (try? refused.first?.result.get()) == nil, "the halt refused the first write")
            _ = engine.submit([.write(files[2], [UInt8](repeating: 4, count: 600), offset: 0, durable: true)])
            while engine.inFlight > 0 { _ = try engine.reap(waiting: true) }
            var random = SeededGenerator(seed: seed)
            engine.powerCut(keepingUnsyncedWith: &random)

            let firstBytes = try #require(engine.contents(of: first))
            #expect(firstBytes.prefix(100).allSatisfy { $0 == 1 } && firstBytes.dropFirst(100).allSatisfy { $0 == 2 })
            firstEnds.insert(firstBytes.count)
            let queuedBytes = try #require(engine.contents(of: queued))
            #expect(queuedBytes.allSatisfy { $0 == 3 })
            queuedEnds.insert(queuedBytes.count)
            #expect(engine.contents(of: late) == [], "seed \(seed): a write issued after the halt landed")
        }
        #expect(firstEnds == [100, 512, 1024, 1536, 2048, 2100])
        #expect(queuedEnds == [0, 512, 700])
    }
}
