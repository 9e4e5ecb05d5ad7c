import Foundation
import Glibc
import SystemPackage
import TestSupport
import Testing

@testable import Bench

/// The cold restore's premise: after `dropPageCache` the session files' pages are out of the
/// page cache (mincore says none is resident), so the restore after it reads from the disk.
@Suite struct ColdRestoreTests {
    /// Pages of `path` resident in the page cache, by mincore(2) over a mapping of it.
    private func residentPages(_ path: String) throws -> Int {
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0, "open \(path): errno \(errno)")
        defer { close(fd) }
        var status = stat()
        try #require(fstat(fd, &status) == 0)
        let length = Int(status.st_size)
        let mapping = try #require(mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0))
        try #require(mapping != MAP_FAILED, "mmap: errno \(errno)")
        defer { munmap(mapping, length) }
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        var vector = [UInt8](repeating: 0, count: (length + pageSize - 1) / pageSize)
        try #require(mincore(mapping, length, &vector) == 0, "mincore: errno \(errno)")
        return vector.filter { $0 & 1 != 0 }.count
    }

    @Test func droppingThePageCacheLeavesNoPageOfTheSessionResident() throws {
        let directory = FilePath(
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "windowhost-cold-\(UUID().uuidString.prefix(8))"
            ).path)
        defer { removeTestRoot(directory.string) }
        let nested = directory.appending("windows/one")
        try FileManager.default.createDirectory(atPath: nested.string, withIntermediateDirectories: true)
        var paths: [String] = []
        for name in ["snapshot", "journal"] {
            let path = nested.appending(name).string
            let bytes = [UInt8](repeating: 0x5A, count: 1 << 20)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            // Synced: DONTNEED drops only clean pages, as the store's files are.
            let fd = open(path, O_RDONLY)
            #expect(fsync(fd) == 0)
            close(fd)
            _ = try Data(contentsOf: URL(fileURLWithPath: path))
            paths.append(path)
        }
        // A symlink under the directory is not followed: the file it names keeps its pages.
        let outside = directory.appending("outside").string
        try Data([UInt8](repeating: 1, count: 1 << 16)).write(to: URL(fileURLWithPath: outside))
        let outsideFD = open(outside, O_RDONLY)
        #expect(fsync(outsideFD) == 0)
        close(outsideFD)
        try FileManager.default.createSymbolicLink(
            atPath: nested.appending("link").string, withDestinationPath: outside)
        for path in paths { #expect(try residentPages(path) > 0, "\(path) read just now") }
        try RestoreBench.dropPageCache(under: nested)
        for path in paths { #expect(try residentPages(path) == 0, "\(path) after DONTNEED") }
        #expect(try residentPages(outside) > 0, "the symlink's target was not touched")
    }
}
