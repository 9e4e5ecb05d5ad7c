import Glibc

/// All of a /proc file, any bytes that are not UTF-8 replaced; nil when it cannot be opened or
/// read. Not Foundation's `String(contentsOfFile:)`, `Data(contentsOf:)` or
/// `FileManager.contents(atPath:)`: for a file whose size shows as 0, as /proc files do, they
/// stop after the first read that returns less than 4 KiB, and a read of maps or mounts returns
/// whole lines only, so they see the first 4 KiB less a line (a test process's libc mapping
/// moves past it as it maps more). And a file name in maps, or a process name in stat, may hold
/// any bytes: strict UTF-8 would fail the whole file over one line.
public func procText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 << 10)
    while true {
        let got = read(fd, &chunk, chunk.count)
        if got < 0, errno == EINTR { continue }
        guard got >= 0 else { return nil }
        if got == 0 { return String(decoding: bytes, as: UTF8.self) }
        bytes += chunk[..<got]
    }
}
