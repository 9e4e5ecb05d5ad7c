import BrowserModel
import Foundation
import IOUring
import SessionFormat
import SessionStore
import SystemPackage
import TestSupport
import Testing

@testable import Bench

private func temporaryDirectory() -> FilePath {
    FilePath(
        FileManager.default.temporaryDirectory.appendingPathComponent("windowhost-bench-\(UUID().uuidString.prefix(8))")
            .path)
}

@Suite struct WorkloadTests {
    /// Each store contender's saves are real: a fresh store restores the last one.
    @Test(arguments: [Contender.uring, .sync], SaveSize.allCases)
    func storeSavesRestoreFromDisk(contender: Contender, size: SaveSize) throws {
        let directory = temporaryDirectory()
        defer { removeTestRoot(directory.string) }
        let workload = try Workloads.make(contender, size: size, directory: directory)
        let before = workload.bytesWritten
        for _ in 0..<3 {
            try workload.prepare()
            try workload.save()
        }
        #expect(workload.bytesWritten > before)
        let window = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory.appending(DiskLayout.windows).string).first)
        let store = WindowStore(root: directory, windowID: try #require(UUID(uuidString: window)), engine: SyncEngine())
        let recovery = try store.recover()
        #expect(recovery.seq == 4)
        let list = size == .incognito ? store.incognito.webStateList : store.regular.webStateList
        #expect(list.count == size.windowTabs)
        let active = try #require(list.activeWebState)
        // Round 4 made the last change: the active tab's page says so.
        #expect(try active.navigationHistory().currentItem?.url.hasSuffix("/articles/4") == true)
    }

    @Test(arguments: SaveSize.allCases)
    func theRewriteLeavesOneWholeSessionFile(size: SaveSize) throws {
        let directory = temporaryDirectory()
        defer { removeTestRoot(directory.string) }
        let workload = try Workloads.make(.rewrite, size: size, directory: directory)
        try workload.prepare()
        try workload.save()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.string) == ["session"])
        let reader = try SnapshotReader(try FileBytes(path: directory.appending("session")))
        #expect(reader.count == size.windowTabs)
        #expect(reader.lastCommandSeq == 2)
    }

    /// The rewrite pays the model work a browser pays: its tabs live in a Browser whose list
    /// attaches tab helpers, and an observer of the list and of every tab hears each change.
    @Test(arguments: [SaveSize.small, .large])
    func theRewriteAppliesEachChangeToABrowserWithHelpersAndObservers(size: SaveSize) throws {
        let directory = temporaryDirectory()
        defer { removeTestRoot(directory.string) }
        let workload = try #require(try Workloads.make(.rewrite, size: size, directory: directory) as? RewriteWorkload)
        let before = workload.browser.webStateList.webStates.map(\.id)
        try workload.prepare()
        try workload.save()
        let list = workload.browser.webStateList
        #expect(list.count == size.windowTabs)
        #expect(
            list.webStates.allSatisfy { $0.helper(FindTabHelper.self) != nil },
            "every tab has its helper, new ones included")
        #expect((list.webStates.map(\.id) == before) == (size == .small), "a large save replaced every tab")
        #expect(try list.activeWebState?.navigationHistory().currentItem?.url.hasSuffix("/articles/2") == true)
    }

    @Test func theSessionObserverHearsTheListAndEveryTabItHolds() throws {
        let profile = Profile(stateDirectory: "/")
        let browser = profile.browserList.browser(for: UUID())
        let list = browser.webStateList
        let observer = SessionChangeObserver(list: list)
        #expect(!observer.takeDirty())
        let tab = WebState(
            id: browser.profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 0),
            history: NavigationHistory())
        _ = try list.insert(tab, InsertionParams(activate: true))
        #expect(observer.takeDirty() && !observer.takeDirty(), "heard once, then clean")
        try tab.commitNavigation(to: page(1, round: 1))
        #expect(observer.takeDirty(), "a tab inserted after the observer came is observed")
        list.closeAll()
        #expect(observer.takeDirty())
        _ = try? tab.commitNavigation(to: page(1, round: 2))
        #expect(!observer.takeDirty(), "a closed tab is no longer the session's")
    }

    @Test func theFloorWritesOneAlignedDirectBlockPerSmallSaveIntoAPreWrittenFile() throws {
        let directory = temporaryDirectory()
        defer { removeTestRoot(directory.string) }
        let workload = try #require(try Workloads.make(.floor, size: .small, directory: directory) as? FloorWorkload)
        let before = try #require(FileManager.default.contents(atPath: directory.appending("floor").string))
        #expect(before.count == 4 << 20 && before.allSatisfy { $0 == 0 }, "written whole before the first timed save")
        for _ in 0..<3 { try workload.save() }
        #expect(workload.isDirect == !DirectIO.isInMemory(directory), "direct I/O wherever the file system is a disk")
        let descriptor = try FileDescriptor.open(directory.appending("floor"), .readOnly)
        defer { try? descriptor.close() }
        let block = workload.isDirect ? try DirectIO.alignment(of: descriptor).get().block : 256
        // A 256-byte save padded to its block, each save on a block of its own.
        #expect(workload.bytesWritten == UInt64(3 * block))
        let bytes = try #require(FileManager.default.contents(atPath: directory.appending("floor").string))
        #expect(bytes.count == 4 << 20)
        for save in 0..<3 {
            #expect(bytes[(save * block)..<(save * block + 256)].allSatisfy { $0 == 0x5A })
            #expect(bytes[(save * block + 256)..<((save + 1) * block)].allSatisfy { $0 == 0 })
        }
        #expect(try Workloads.largeSessionBytes() > 500 * 40, "a large floor write is a 500-tab session's size")
    }

    @Test func theBufferedFloorAppendsItsRecordDurablyIntoAPreallocatedFile() throws {
        let directory = temporaryDirectory()
        defer { removeTestRoot(directory.string) }
        let workload = try Workloads.make(.floorBuffered, size: .small, directory: directory)
        for _ in 0..<3 { try workload.save() }
        #expect(workload.bytesWritten == 768)
        let bytes = try #require(FileManager.default.contents(atPath: directory.appending("floor").string))
        #expect(bytes.count == 4 << 20, "preallocated: an append changes no metadata")
        #expect(bytes.prefix(768).allSatisfy { $0 == 0x5A } && bytes[768] == 0)
    }
}
