import Foundation
import Glibc
import TestSupport
import Testing

/// `procText` reads the whole of a /proc file, whatever its bytes. Foundation's
/// `String(contentsOfFile:)` saw only maps' first 4 KiB, so `HostileWorkerTests` did not find
/// libc in the test process once the full suite had mapped enough below it (failed twice in CI).
@Suite struct ProcTextTests {
    /// 400 mappings below every library, each its own line in maps (alternate pages made
    /// read-only, so none merges with its neighbour): libc's line comes after 400 others.
    @Test func mapsLongerThanAPageIsReadToTheEnd() throws {
        let pages = 400
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        let memory = try #require(
            mmap(nil, pages * pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        try #require(memory != MAP_FAILED)
        defer { munmap(memory, pages * pageSize) }
        for page in stride(from: 0, to: pages, by: 2) {
            try #require(mprotect(memory + page * pageSize, pageSize, PROT_READ) == 0)
        }

        let maps = try #require(procText("/proc/self/maps"))
        let starts = Set(
            maps.split(separator: "\n").compactMap { $0.split(separator: "-").first.flatMap { UInt($0, radix: 16) } })
        let base = UInt(bitPattern: memory)
        let missing = (0..<pages).filter { !starts.contains(base + UInt($0 * pageSize)) }
        #expect(
            missing.isEmpty, "pages without their own line: \(missing.count) of \(pages); \(maps.utf8.count) bytes read"
        )
        #expect(
            maps.split(separator: "\n").contains { $0.hasSuffix("/libc.so.6") },
            "libc is mapped: \(maps.utf8.count) bytes read")
    }

    /// A file whose name is not UTF-8 (0xFF 0xFE), mapped: maps shows the name's bytes as they
    /// are, and every other line is read all the same. Mapped at 4 GiB, below the program (a
    /// 64-bit address space puts it far higher), its line is maps' first: strict UTF-8 fails on it
    /// whatever else is read.
    @Test func aMappedFileNamedInBytesThatAreNotUTF8LeavesMapsReadable() throws {
        let directory = temporaryRoot("proc-text")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { removeTestRoot(directory.path) }
        let name = Array(directory.path.utf8) + Array("/mapped-".utf8) + [0xFF, 0xFE, 0]
        let fd = name.withUnsafeBufferPointer {
            $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        }
        try #require(fd >= 0, "open: \(errno)")
        defer { close(fd) }
        try #require(ftruncate(fd, 4096) == 0)
        let memory = try #require(
            mmap(UnsafeMutableRawPointer(bitPattern: 1 << 32), 4096, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0)
        )
        try #require(memory != MAP_FAILED, "mmap: \(errno)")
        defer { munmap(memory, 4096) }

        let lines = try #require(procText("/proc/self/maps")).split(separator: "\n")
        #expect(lines.first?.hasSuffix("/mapped-\u{FFFD}\u{FFFD}") == true, "\(lines)")
        #expect(lines.contains { $0.hasSuffix("/libc.so.6") }, "\(lines)")
    }
}
