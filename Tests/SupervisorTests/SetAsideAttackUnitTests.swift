import BrowserModel
import Foundation
import Glibc
import IOUring
import Platform
import SessionStore
import SystemPackage
import TestSupport
import Testing

@testable import Supervisor

/// Planted bookkeeping under `set-aside/` as the supervisor's start meets it
/// (`SupervisorFiles.recoverAdoptions`), on a real disk: no planted name may stop every start,
/// or move a window no adoption was made of.
@Suite struct SetAsideAttackUnitTests {
    /// A root with one closed window's session (`windows/<window>/regular/journal-1`).
    struct Root {
        let base: FilePath
        let files: SupervisorFiles
        let window: UUID

        init() throws {
            var template = Array("/tmp/windowhost-attack17-XXXXXX".utf8CString)
            try #require(mkdtemp(&template) != nil)
            base = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
            files = SupervisorFiles(root: base.appending("root"))
            window = UUID()
            try SupervisorFiles.makeDirectory(files.windowDirectory(window).appending(BrowserKind.regular.rawValue))
            try SupervisorFiles.makeDirectory(files.setAside)
            try Data("tabs\n".utf8).write(
                to: URL(fileURLWithPath: files.windowDirectory(window).appending("regular/journal-1").string))
        }

        func names(_ directory: FilePath) -> [String] {
            (try? FileManager.default.contentsOfDirectory(atPath: directory.string).sorted()) ?? []
        }
        var journal: Data? {
            FileManager.default.contents(atPath: files.windowDirectory(window).appending("regular/journal-1").string)
        }
        func remove() { removeTestRoot(base.string) }
    }

    /// A directory named like a marker of no window: unlinking it failed (EISDIR), and before the fix the
    /// start throws, at every start from then on.
    @Test func aMarkerThatIsADirectoryDoesNotStopTheStart() throws {
        let root = try Root()
        defer { root.remove() }
        try NoFollow.makeDirectory(root.files.setAside.appending(".adopting-\(UUID().uuidString)-planted"))
        #expect(throws: Never.self) { _ = try root.files.recoverAdoptions() }
        #expect(root.names(root.files.windows) == [root.window.uuidString])
        #expect(root.journal == Data("tabs\n".utf8))
    }

    /// The same directory naming the closed window: the window must not be moved, and the start
    /// must not fail. Before the fix it was moved to `set-aside/planted` and then the start failed.
    @Test func aMarkerDirectoryNamingAWindowNeitherMovesItNorStopsTheStart() throws {
        let root = try Root()
        defer { root.remove() }
        try NoFollow.makeDirectory(root.files.setAside.appending(".adopting-\(root.window.uuidString)-planted"))
        #expect(throws: Never.self) { _ = try root.files.recoverAdoptions() }
        #expect(root.names(root.files.windows) == [root.window.uuidString], "\(root.names(root.files.setAside))")
    }

    /// A marker file naming a closed window no adoption was made of: the start takes the window
    /// out of `windows/` (to `set-aside/planted`). Its bytes are kept, but the window leaves the
    /// session because of a file anyone with the user's rights could make.
    @Test func aPlantedMarkerFileDoesNotMoveAnOrdinaryWindow() throws {
        let root = try Root()
        defer { root.remove() }
        try NoFollow.open(root.files.setAside.appending(".adopting-\(root.window.uuidString)-planted"), .create).close()
        _ = try root.files.recoverAdoptions()
        #expect(root.names(root.files.windows) == [root.window.uuidString], "\(root.names(root.files.setAside))")
        #expect(root.journal == Data("tabs\n".utf8))
    }

    /// Markers whose id is no id the host makes (a dot first, too long) and a symlink marker to a
    /// canary: never acted on through, the window and the canary untouched.
    @Test func markersThatNameNoEntryMoveNothing() throws {
        let root = try Root()
        defer { root.remove() }
        let canary = root.base.appending("canary")
        try SupervisorFiles.makeDirectory(canary)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: canary.appending("file").string))
        let target = root.window.uuidString
        for name in [
            ".adopting-\(target)-.hidden", ".adopting-\(target)-" + String(repeating: "a", count: 161),
            ".adopting-\(target)",
        ] {
            try NoFollow.open(root.files.setAside.appending(name), .create).close()
        }
        #expect(
            symlink(canary.string, root.files.setAside.appending(".adopting-\(UUID().uuidString)-link").string) == 0)
        _ = try? root.files.recoverAdoptions()
        #expect(root.names(root.files.windows) == [target])
        #expect(root.journal == Data("tabs\n".utf8))
        #expect(root.names(canary) == ["file"])
        #expect(FileManager.default.contents(atPath: canary.appending("file").string) == Data("keep".utf8))
    }
}
