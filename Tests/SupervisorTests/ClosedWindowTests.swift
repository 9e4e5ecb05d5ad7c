import BrowserModel
import Foundation
import Glibc
import SystemPackage
import TestSupport
import Testing

@testable import Supervisor

/// Windows closed for good: the registry retires them for ever, and the files take a window
/// away in one rename a start recognises.
@Suite struct ClosedWindowTests {
    let a = UUID(uuidString: "AAAAAAAA-0000-4000-8000-000000000001")!
    let b = UUID(uuidString: "BBBBBBBB-0000-4000-8000-000000000002")!
    let c = UUID(uuidString: "CCCCCCCC-0000-4000-8000-000000000003")!

    @Test func aRetiredWindowLeavesTheOrderAndItsUUIDIsNeverHandedOutAgain() {
        var registry = WindowRegistry(onDisk: [a, b], savedOrder: [a, b])
        #expect(registry.closed == [a, b] && registry.isClosed(a))
        registry.retire(a)
        #expect(registry.order == [b] && registry.closed == [b] && !registry.isClosed(a))
        #expect(registry.isKnown(a), "retired: known for ever")
        #expect(registry.reserve(returning: a) == nil, "an adoption cannot bring it back under its UUID")
        var proposals = [a, a, c]
        #expect(registry.reserve() == b)
        #expect(registry.reserve { proposals.removeFirst() } == c, "the generator proposed the retired UUID")
    }

    @Test func closedWindowsAreListedMostRecentlyClosedFirstAndOpenOnesAreNeverClosed() {
        var registry = WindowRegistry(onDisk: [a, b, c], savedOrder: [a, b, c])
        for _ in 0..<3 { registry.configured(registry.reserve()) }
        #expect(registry.closed.isEmpty && !registry.isClosed(a), "open windows are not closed ones")
        registry.close(a, hasSession: true)
        registry.close(c, hasSession: true)
        #expect(registry.closed == [c, a], "the least recently closed last: evicted first")
        let reserved = registry.reserve()
        #expect(reserved == c && !registry.isClosed(c) && registry.closed == [a], "a reserved window is not closed")
    }

    @Test func discardWindowTakesTheDirectoryAwayInOneRenameAStartRecognises() throws {
        try withTemporaryDirectory { base in
            let root = base.appending("root")
            try #require(mkdir(root.string, 0o700) == 0)
            let files = SupervisorFiles(root: root)
            try SupervisorFiles.makeDirectory(files.windowDirectory(a).appending(BrowserKind.regular.rawValue))
            try Data("tabs\n".utf8).write(
                to: URL(fileURLWithPath: files.windowDirectory(a).appending("regular/keep").string))
            try SupervisorFiles.makeDirectory(files.windowDirectory(b))

            let (away, unsynced) = try files.discardWindow(a)
            #expect(unsynced == nil)
            #expect(!files.hasSession(a) && files.hasSession(b))
            #expect(away == files.setAside.appending(".discarding-\(a.uuidString)"))
            #expect(
                FileManager.default.contents(atPath: away.appending("regular/keep").string) == Data("tabs\n".utf8),
                "whole until removed")
            #expect(files.windowsBeingDiscarded() == [a])
            #expect(throws: (any Error).self, "no directory: nothing to take") { try files.discardWindow(c) }
            files.removeDiscarded([away])
            #expect(waitUntil { files.discardedLeftovers().isEmpty })
        }
    }

    /// A set-aside entry being discarded is no window: its key is never revoked as one.
    @Test func aSetAsideEntryBeingDiscardedIsNoWindowBeingClosed() throws {
        try withTemporaryDirectory { base in
            let root = base.appending("root")
            try #require(mkdir(root.string, 0o700) == 0)
            let files = SupervisorFiles(root: root)
            try SupervisorFiles.makeDirectory(
                files.setAside.appending(".discarding-\(a.uuidString)-20261127T203500Z-crash-loop"))
            #expect(files.windowsBeingDiscarded().isEmpty)
            #expect(files.discardedLeftovers().count == 1)
        }
    }

    private func withTemporaryDirectory(_ body: (FilePath) throws -> Void) throws {
        var template = Array("/tmp/windowhost-closed-XXXXXX".utf8CString)
        try #require(mkdtemp(&template) != nil)
        let base = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        defer { removeTestRoot(base.string) }
        try body(base)
    }

    /// Polls a condition the background removal makes true (no timing asserted).
    private func waitUntil(_ condition: () -> Bool) -> Bool {
        for _ in 0..<500 where !condition() { usleep(10_000) }
        return condition()
    }
}
