import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// Issue 13 items 2 and 4: the first save of a window costs what a steady save costs (its files
/// are made before the window takes commands), and a save larger than a snapshot of the list is
/// written as that snapshot.
@Suite struct WritePathCostTests {
    /// The regular session exists once the window is recovered: the first save is one durable
    /// write, like the second. (It created the directory, a snapshot, a preallocated journal,
    /// renamed and synced, inside the save.)
    @Test func aNewWindowsFirstSaveIsOneWrite() throws {
        let disk = FaultEngine(directories: [simulatedRoot])
        let (store, _) = try simulatedWindow(disk)
        #expect(store.stores[0].isOnDisk, "the regular session is made at start")
        var costs: [Int] = []
        for seq in 1...2 as ClosedRange<UInt64> {
            let before = disk.operationCount
            try store.apply(seq: seq) { try LeftOutSaveTests.open("https://first.example/\(seq)", in: store.regular) }
            try store.waitUntilDurable(seq)
            costs.append(disk.operationCount - before)
        }
        #expect(costs == [1, 1], "operations per save: \(costs)")
    }

    /// A kill at any step of making the regular session at start leaves what the next start
    /// restores as an empty window (a journal whose snapshot was never renamed goes as an
    /// orphan), without damage, and that start makes the session again.
    @Test func aKillWhileTheFirstSessionIsMadeLeavesNoDamage() throws {
        for halt in 0..<16 {
            let disk = FaultEngine(directories: [simulatedRoot])
            disk.haltAfter = halt
            _ = try? simulatedWindow(disk)
            disk.processKilled()
            let (store, recovery) = try simulatedWindow(disk)
            #expect(recovery.regular.damaged.isEmpty && recovery.seq == 0, "halt after \(halt): \(recovery.regular)")
            #expect(store.stores[0].isOnDisk, "halt after \(halt)")
            try store.apply(seq: 1) { try LeftOutSaveTests.open("https://after.example/", in: store.regular) }
            try store.waitUntilDurable(1)
            let expected = try WindowContents(store)
            disk.processKilled()
            let (again, _) = try simulatedWindow(disk)
            #expect(try WindowContents(again) == expected, "halt after \(halt)")
        }
    }

    private static func fill(_ store: WindowStore, tabs: Int, round: Int) throws {
        let browser = store.regular
        browser.webStateList.closeAll()
        for index in 0..<tabs {
            try LeftOutSaveTests.open("https://site\(index).example/articles/\(round)", in: browser)
        }
    }

    /// Every tab of a 500-tab window replaced in one command, and a kill at every step of
    /// that save: the window comes back as it was before it or after it, never less than
    /// acknowledged.
    @Test func aKillInTheMiddleOfAFullReplacementLosesNothingAcknowledged() throws {
        let prepared = FaultEngine(directories: [simulatedRoot])
        let before: WindowContents
        let after: WindowContents
        let operations: Int
        do {
            let (store, _) = try simulatedWindow(prepared)
            try store.apply(seq: 1) { try Self.fill(store, tabs: 500, round: 0) }
            try store.waitUntilDurable(1)
            try store.settle()
            before = try WindowContents(store)
            prepared.processKilled()
        }
        do {
            let probe = prepared.copy()
            let (store, _) = try simulatedWindow(probe)
            let start = probe.operationCount
            try store.apply(seq: 2) { try Self.fill(store, tabs: 500, round: 1) }
            try store.waitUntilDurable(2)
            try store.settle()
            operations = probe.operationCount - start
            after = try WindowContents(store)
        }
        for halt in stride(from: 0, through: operations, by: max(1, operations / 12)) {
            let disk = prepared.copy()
            let (store, _) = try simulatedWindow(disk)
            disk.haltAfter = disk.operationCount + halt
            try store.apply(seq: 2) { try Self.fill(store, tabs: 500, round: 1) }
            let acknowledged = (try? store.waitUntilDurable(2)) != nil
            disk.processKilled()
            let (restored, recovery) = try simulatedWindow(disk)
            let contents = try WindowContents(restored)
            #expect(
                contents == after || (!acknowledged && contents == before), "halt after \(halt): \(recovery.regular)")
        }
    }
}
