import Foundation
import Glibc
import SystemPackage
import TestSupport
import Testing

@testable import Supervisor

/// `windows.order` and `handed-out` are replaced through a temporary file renamed over them. On
/// a full disk (a real tmpfs, filled) the write fails, the file before stays, and no temporary
/// is left in the root (an empty `windows.order.tmp` was, after each refused write).
@Suite struct RootFileTemporaryTests {
    @Test func aWriteTheFullDiskRefusesLeavesNoTemporary() throws {
        var template = Array("/tmp/windowhost-rootfiles-full-XXXXXX".utf8CString)
        try #require(mkdtemp(&template) != nil)
        let root = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        defer { removeTestRoot(root.string) }
        try #require(
            mount("tmpfs", root.string, "tmpfs", 0, "size=1m,mode=0700") == 0,
            "mounting a 1 MiB tmpfs at \(root) was refused (this test needs root): it fails rather than skips")
        defer { _ = umount2(root.string, Int32(MNT_DETACH)) }
        let files = SupervisorFiles(root: root)
        let order = (0..<4).map { _ in UUID() }
        try files.saveOrder(order)
        try files.makeHandedOut([:]).close()
        let handedOutBefore = try Data(contentsOf: URL(fileURLWithPath: files.handedOut.string))
        let filler = try FileDescriptor.open(
            root.appending("filler").string, .writeOnly, options: [.create], permissions: .ownerReadWrite)
        let chunk = [UInt8](repeating: 1, count: 64 << 10)
        while (try? filler.writeAll(chunk)) != nil {}
        try filler.close()

        // Pages of UUIDs: no room for any of them.
        #expect(throws: Errno.noSpace) { try files.saveOrder((0..<400).map { _ in UUID() }) }
        #expect(lstatKind(files.orderTemporary) == nil, "windows.order.tmp is left in the root")
        let saved = try String(contentsOf: URL(fileURLWithPath: files.order.string), encoding: .utf8)
        #expect(saved == order.map { $0.uuidString + "\n" }.joined(), "the order before stays")

        #expect(throws: Errno.noSpace) { try files.makeHandedOut([:]) }
        #expect(lstatKind(files.handedOutTemporary) == nil, "handed-out.tmp is left in the root")
        #expect(try Data(contentsOf: URL(fileURLWithPath: files.handedOut.string)) == handedOutBefore)
    }

    /// What `path` is, by lstat, or nil when nothing is there.
    private func lstatKind(_ path: FilePath) -> mode_t? {
        var status = stat()
        guard lstat(path.string, &status) == 0 else { return nil }
        return status.st_mode & S_IFMT
    }
}
