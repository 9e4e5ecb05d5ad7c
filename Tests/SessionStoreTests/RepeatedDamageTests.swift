import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// One fault at a time, with a recovery between each: every round opens tabs (each save
/// acknowledged), flips one byte of the newest regular snapshot (its metadata or one of its
/// stored histories, never read until needed), and kills the worker. No acknowledged tab may
/// go. Found by the hostile round 4 (`repro-dd.py`, seed 3): a history frame damaged in one
/// generation made every compaction fail after it, the repair after the next fault wrote no
/// snapshot, and a save whose records went only into a snapshot written from memory was
/// acknowledged before any fallback reached it; the next fault lost it. A compaction now
/// encodes such a tab as realized (its history rebuilt, or degraded to its page) instead of
/// failing: seeds 1, 3 and 5 lost a tab before.
@Suite struct RepeatedDamageTests {
    static let options = StoreOptions(compactAfterRecords: 2, compactAfterBytes: 1 << 20, journalPreallocation: 8 << 10)

    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func oneByteOfTheNewestSnapshotAtATimeLosesNothingAcknowledged(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let engine = FaultEngine(directories: [simulatedRoot])
        var acknowledged: [String] = []
        var opened = 0
        for round in 0..<40 {
            let (store, recovery) = try simulatedWindow(engine, options: Self.options)
            let urls = store.regular.webStateList.webStates.map(\.url)
            let missing = acknowledged.filter { !urls.contains($0) }
            #expect(
                missing.isEmpty,
                "seed \(seed) round \(round): acknowledged tabs lost \(missing), came back at seq \(recovery.seq)")
            guard missing.isEmpty else { return }
            var seq = recovery.seq
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                opened += 1
                seq += 1
                let url = "https://r.example/\(opened)"
                try store.apply(seq: seq) { try LeftOutSaveTests.open(url, in: store.regular) }
                if (try? store.waitUntilDurable(seq)) != nil, store.durableSeq >= seq { acknowledged.append(url) }
            }
            let snapshots = try LeftOutSaveTests.snapshots(engine)
            if snapshots.count >= 2, let newest = snapshots.last {
                let path = LeftOutSaveTests.regularDirectory.appending(DiskLayout.snapshotName(newest))
                var bytes = try #require(engine.contents(of: path))
                bytes[Int.random(in: Framing.fileHeaderSize..<bytes.count, using: &random)] ^= 0xFF
                engine.overwrite(path, with: bytes)
            }
            engine.processKilled()
        }
    }
}
