import BrowserModel
import Foundation
import HostLimits
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionFormat
@testable import SessionStore

/// Issue 29 item 1: saves in flight at the full bound (`Limits.maxSavesInFlight`). A cut with
/// every one of them in flight, landed in any order, gives back what was acknowledged; a hole
/// with more saves after it than can be in flight, or a flipped byte, is damage.
@Suite struct DeepPipelineTests {
    private func openTab(_ store: WindowStore, seq: UInt64) throws {
        let browser = store.regular
        try store.apply(seq: seq) {
            try browser.webStateList.insert(
                WebState(id: browser.profile.makeWebStateID(), creationTime: .zero), InsertionParams(activate: true))
        }
    }

    private func journalPath(_ store: WindowStore) -> FilePath {
        simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
            BrowserKind.regular.rawValue
        )
        .appending(DiskLayout.journalName(store.stores[0].generation))
    }

    /// The bound is what the device rewards (fio: 16 and more), not the old 4.
    @Test func theBoundIsSixteen() {
        #expect(Limits.maxSavesInFlight == 16)
        #expect(StoreOptions().savesInFlight == Limits.maxSavesInFlight)
    }

    /// Every save of the bound in flight at once; a random number of them land, in random
    /// order; the power goes. The window comes back exactly as acknowledged (the saves before
    /// the first that never landed), with no damage: the saves past that hole were in flight.
    @Test(arguments: 0..<24 as Range<UInt64>)
    func aCutWithEverySaveInFlightGivesBackTheAcknowledgedPrefix(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let disk = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(disk)
        try openTab(store, seq: 1)
        try store.waitUntilDurable(1)
        var states = [try WindowContents(store), try WindowContents(store)]

        var picks: [Int] = []
        disk.completionOrder = { queued in picks.isEmpty ? nil : min(picks.removeFirst(), queued - 1) }
        let last = UInt64(1 + Limits.maxSavesInFlight)
        for seq in 2...last {
            try openTab(store, seq: seq)
            states.append(try WindowContents(store))
            _ = try store.poll()
        }
        #expect(
            disk.inFlight == Limits.maxSavesInFlight && store.savingSeq == last, "every save of the bound in flight")
        let landing = Int.random(in: 0..<Limits.maxSavesInFlight, using: &random)
        for landed in 0..<landing {
            picks = [Int.random(in: 0..<(Limits.maxSavesInFlight - landed), using: &random)]
            _ = try store.poll()
        }
        _ = try store.poll()
        #expect(disk.inFlight == Limits.maxSavesInFlight - landing)
        let acknowledged = store.durableSeq
        disk.powerCut()
        disk.completionOrder = nil

        let (restored, recovery) = try simulatedWindow(disk)
        #expect(try WindowContents(restored) == states[Int(acknowledged)], "seed \(seed): \(recovery)")
        #expect(recovery.seq == acknowledged, "seed \(seed): nothing unacknowledged kept")
        #expect(
            recovery.regular.damaged.isEmpty, "seed \(seed): saves in flight are no damage: \(recovery.regular.damaged)"
        )
    }

    /// Saves 1 to `count` written one at a time; returns the disk, the window after each
    /// command, and the journal's bytes and commits.
    private func writtenOneByOne(count: Int) throws -> (
        FaultEngine, [WindowContents], FilePath, [UInt8], [JournalFile.FoundCommit]
    ) {
        let disk = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(disk)
        var states = [try WindowContents(store)]
        for seq in 1...UInt64(count) {
            try openTab(store, seq: seq)
            try store.waitUntilDurable(seq)
            states.append(try WindowContents(store))
        }
        let path = journalPath(store)
        let bytes = try #require(disk.contents(of: path))
        let commits = try JournalFile.scan(InMemoryBytes(bytes)).commits
        try #require(commits.count == count, "one commit per save")
        return (disk, states, path, bytes, commits)
    }

    /// A save zeroed (what a save that never landed leaves) with the bound's saves after it:
    /// the saves in flight at a cut, a torn tail. With one more after it, no cut can have left
    /// it: damage, the journal set aside.
    @Test(arguments: [Limits.maxSavesInFlight, Limits.maxSavesInFlight + 1])
    func aHoleIsATornTailOnlyWithinTheBound(savesAfter: Int) throws {
        let count = savesAfter + 3
        let (disk, states, path, bytes, commits) = try writtenOneByOne(count: count)
        let holeIndex = count - 1 - savesAfter
        let hole = commits[holeIndex - 1].end..<commits[holeIndex].end
        var copy = bytes
        for offset in hole { copy[offset] = 0 }
        disk.overwrite(path, with: copy)

        let (restored, recovery) = try simulatedWindow(disk)
        let kept = commits[holeIndex - 1].commit.seq
        #expect(try WindowContents(restored).regular == states[Int(kept)].regular, "\(recovery.regular)")
        if savesAfter <= Limits.maxSavesInFlight {
            #expect(
                recovery.regular.damaged.isEmpty && recovery.regular.tornTailAt != nil,
                "saves in flight: \(recovery.regular)")
        } else {
            #expect(
                recovery.regular.tornTailAt == nil, "more saves after it than can be in flight: \(recovery.regular)")
            #expect(
                recovery.regular.damaged.contains { $0.path == path.string }, "damage, set aside: \(recovery.regular)")
        }
    }

    /// A flipped byte in an acknowledged save, the bound's saves and more after it: damage
    /// whatever follows, since no cut leaves a save without a zero sector.
    @Test func aFlippedByteBeforeMoreThanTheBoundIsDamage() throws {
        let count = Limits.maxSavesInFlight + 4
        let (disk, states, path, bytes, commits) = try writtenOneByOne(count: count)
        let flipped = commits[1].end - 40
        var copy = bytes
        copy[flipped] ^= 0x01
        disk.overwrite(path, with: copy)

        let (restored, recovery) = try simulatedWindow(disk)
        #expect(recovery.regular.tornTailAt == nil, "damage taken for a torn tail: \(recovery.regular)")
        #expect(recovery.regular.damaged.contains { $0.path == path.string }, "\(recovery.regular)")
        #expect(try WindowContents(restored).regular == states[Int(commits[0].commit.seq)].regular)
    }
}
