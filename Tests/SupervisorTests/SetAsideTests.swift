import Foundation
import Glibc
import SessionStore
import SystemPackage
import TestSupport
import Testing

@testable import Supervisor

/// `ROOT/set-aside/` is only where whole windows go: something else under its name makes way.
@Suite struct SetAsideTests {
    /// A symlink in place of `set-aside/` (to a directory outside the root) is moved out of the
    /// way as itself; the window goes into a real directory; the symlink's target is untouched.
    /// Before, the set-aside failed (`ENOTDIR`) and the window stayed where it was.
    @Test func aSymlinkInPlaceOfSetAsideMakesWayAndTheWindowIsSetAsideIntoARealDirectory() throws {
        var template = Array("/tmp/windowhost-setaside-XXXXXX".utf8CString)
        try #require(mkdtemp(&template) != nil)
        let base = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        defer { removeTestRoot(base.string) }
        let root = base.appending("root")
        let canary = base.appending("canary")
        let files = SupervisorFiles(root: root)
        let window = UUID()
        try #require(mkdir(root.string, 0o700) == 0 && mkdir(canary.string, 0o700) == 0)
        try SupervisorFiles.makeDirectory(files.windowDirectory(window))
        try Data("tabs\n".utf8).write(to: URL(fileURLWithPath: files.windowDirectory(window).appending("keep").string))
        try #require(symlink(canary.string, files.setAside.string) == 0)

        let moved = try #require(try files.setAside(window, reason: .crashLoop, at: Date()))
        #expect(moved.removingLastComponent() == files.setAside)
        var status = stat()
        #expect(
            lstat(files.setAside.string, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR
                && status.st_mode & 0o777 == 0o700)
        #expect(FileManager.default.contents(atPath: moved.appending("keep").string) == Data("tabs\n".utf8))
        let beside = try FileManager.default.contentsOfDirectory(atPath: root.string).filter {
            $0.hasPrefix("set-aside.not-a-directory-")
        }
        #expect(beside.count == 1)
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: root.appending(beside[0]).string) == canary.string
        )
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: canary.string).isEmpty,
            "nothing went through the symlink")
    }
}
