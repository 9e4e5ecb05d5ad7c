import CLinuxShims
import Foundation
import Glibc
import IOUring
import SystemPackage
import TestSupport
import Testing

@Suite struct DirectIOTests {
    /// The project's disk (ext4 here) reports its alignment, takes `O_DIRECT`, and an aligned
    /// durable write from aligned memory lands.
    @Test func aDiskReportsItsAlignmentAndTakesAlignedDirectWrites() throws {
        let directory = FilePath(NSTemporaryDirectory()).appending(
            "directio-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try #require(mkdir(directory.string, 0o700) == 0)
        defer { removeTestRoot(directory.string) }
        let path = directory.appending("file")
        let fd = try FileDescriptor.open(path, .readWrite, options: [.create], permissions: [.ownerReadWrite])
        defer { try? fd.close() }
        #expect(DirectIO.isInMemory(directory) == false, "this test needs a disk-backed temporary directory")
        let alignment = try DirectIO.alignment(of: fd).get()
        #expect(alignment.block >= 512 && alignment.block <= 4096, "\(alignment)")
        try DirectIO.enable(fd)
        let buffer = try AlignedBytes(padding: Array("saved".utf8), to: alignment)
        #expect(buffer.count == alignment.block)
        #expect(Int(bitPattern: buffer.base) % max(alignment.memory, alignment.block) == 0)
        #expect(buffer.bytes.prefix(5).elementsEqual("saved".utf8) && buffer.bytes.dropFirst(5).allSatisfy { $0 == 0 })
        #expect(wh_pwrite_dsync(fd.rawValue, buffer.base, buffer.count, 0) == buffer.count)
        #expect(fcntl(fd.rawValue, F_GETFL) & wh_open_flag_direct() != 0, "O_DIRECT is on")
    }

    /// tmpfs accepts `O_DIRECT` on this kernel yet reports no alignment: it is named for what it
    /// is, memory, so a store can say its writes are buffered.
    @Test func tmpfsIsRefusedAsInMemory() throws {
        let mountPoint = FilePath(NSTemporaryDirectory()).appending("directio-tmpfs-\(getpid())")
        try #require(mkdir(mountPoint.string, 0o700) == 0)
        defer { rmdir(mountPoint.string) }
        try #require(
            Glibc.mount("tmpfs", mountPoint.string, "tmpfs", 0, "size=1m") == 0,
            "mounting a tmpfs needs root: \(Errno(rawValue: errno))")
        defer { umount2(mountPoint.string, Int32(MNT_DETACH)) }
        let fd = try FileDescriptor.open(
            mountPoint.appending("file"), .readWrite, options: [.create], permissions: [.ownerReadWrite])
        defer { try? fd.close() }
        #expect(DirectIO.alignment(of: fd) == .failure(.inMemory))
    }

    /// Sizes from the kernel or sysfs are checked before anything is sized by them, and padding
    /// arithmetic cannot trap.
    @Test func implausibleAlignmentsAreRefusedAndPaddingNeverTraps() throws {
        #expect(DirectIO.Alignment(memory: 0, block: 512) == nil)
        #expect(DirectIO.Alignment(memory: 512, block: 768) == nil)
        #expect(DirectIO.Alignment(memory: 512, block: 1 << 20) == nil)
        let alignment = try #require(DirectIO.Alignment(memory: 4, block: 512))
        #expect(alignment.paddedEnd(of: 0, from: 512) == 512)
        #expect(alignment.paddedEnd(of: 1, from: 512) == 1024)
        #expect(alignment.paddedEnd(of: 512, from: 0) == 512)
        #expect(alignment.paddedEnd(of: Int.max, from: 512) == nil)
        #expect(alignment.paddedEnd(of: Int.max - 10, from: 0) == nil)
    }
}
