import Foundation
import Glibc
import SystemPackage
import TestSupport
import Testing

@testable import Stress

/// The pieces of `stress --hostile` that judge and act, shown able to see what they must see.
@Suite(.serialized) struct HostileTests {
    /// The canary sees a write through a symlink, a deletion through one, and an entry made in
    /// it, each the way a host that follows a planted symlink would change it.
    @Test func theCanarySeesEveryWayASymlinkCanBeFollowed() throws {
        let base = FilePath(FileManager.default.temporaryDirectory.path).appending(
            "windowhost-canary-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: base.string, withIntermediateDirectories: true)
        defer { removeTestRoot(base.string) }
        // Each through a symlink to the canary, as a host that follows one would do it.
        let changes: [(String, (FilePath) throws -> Void)] = [
            (
                "truncated",
                { link in _ = FileManager.default.createFile(atPath: link.appending("canary").string, contents: Data())
                }
            ),
            (
                "nested file deleted",
                { link in
                    try FileManager.default.removeItem(atPath: link.appending("nested").appending("canary").string)
                }
            ),
            (
                "entry created",
                { link in
                    _ = FileManager.default.createFile(atPath: link.appending("journal-1").string, contents: Data())
                }
            ),
        ]
        for (index, (name, change)) in changes.enumerated() {
            let canary = try Canary(directory: base.appending("canary\(index)"), seed: 1)
            #expect(canary.damage() == nil, "a new canary is whole")
            let link = base.appending("link\(index)")
            #expect(symlink(canary.directory.string, link.string) == 0)
            try change(link)
            #expect(canary.damage() != nil, "\(name) went unseen")
        }
    }

    /// The filler takes every free block of a real (small) tmpfs, so a write there fails with
    /// ENOSPC, and gives them all back.
    @Test func theFillerFillsASmallTmpfsToENOSPCAndFreesIt() throws {
        try #require(geteuid() == 0, "mounting a tmpfs needs root: run the tests as root")
        let mountPoint = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-fill-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        defer { removeTestRoot(mountPoint) }
        let mounted = mount("tmpfs", mountPoint, "tmpfs", 0, "size=2m,mode=0700")
        try #require(mounted == 0, "mount tmpfs on \(mountPoint): \(Errno(rawValue: errno))")
        defer { umount2(mountPoint, Int32(MNT_DETACH)) }
        func freeBytes() -> UInt64 {
            var stats = statvfs()
            _ = statvfs(mountPoint, &stats)
            return UInt64(stats.f_bavail) * UInt64(stats.f_frsize)
        }
        let before = freeBytes()
        var filler = DiskFiller(path: FilePath(mountPoint).appending("hostile-fill"))
        let written = try filler.fill()
        #expect(filler.isFull && written >= 2 << 20 - 64 << 10, "\(written) bytes")
        #expect(freeBytes() == 0)
        let probe = open(mountPoint + "/probe", O_WRONLY | O_CREAT, 0o600)
        defer { if probe >= 0 { close(probe) } }
        let byte: [UInt8] = [1]
        #expect(probe < 0 || write(probe, byte, 1) < 0 && errno == ENOSPC, "a full disk refuses a write")
        try filler.free()
        #expect(!filler.isFull && freeBytes() >= before - 4096)
    }
}
