import CLinuxShims
import Glibc
import SystemPackage

/// The processes holding a descriptor to one file, found through `/proc/<pid>/fd`: who holds
/// `supervisor.lock` when no supervisor does (`Supervisor.takeLockFromLeftovers`). Nothing here
/// walks a path under the root: a descriptor's file is reached only through its /proc link.
struct LockHolders {
    /// The file, as `fstat` of the descriptor it is open on here names it.
    let device: UInt64
    let inode: UInt64

    init(of descriptor: Int32) throws(Errno) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw Errno(rawValue: errno) }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }

    /// Every process but this one with a descriptor to the file. A process that exits or
    /// cannot be read during the scan is passed over: the caller scans again.
    func pids() -> [Int32] {
        let me = getpid()
        return Self.numberedEntries("/proc").filter { $0 != me && holds($0) }
    }

    /// SIGKILLs `pid` if it still holds the file, through a pidfd taken before that check, so
    /// a pid reused meanwhile is never signalled. Its command line (read before it dies), or
    /// nil when it is gone or holds the file no more.
    func kill(_ pid: Int32) throws(Errno) -> String? {
        let pidfd = wh_pidfd_open(pid)
        guard pidfd >= 0 else {
            if errno == ESRCH { return nil }
            throw Errno(rawValue: errno)
        }
        defer { close(pidfd) }
        guard holds(pid) else { return nil }
        let command = Self.commandLine(of: pid)
        guard wh_pidfd_send_signal(pidfd, SIGKILL) == 0 else {
            if errno == ESRCH { return nil }
            throw Errno(rawValue: errno)
        }
        return command
    }

    /// Whether `pid` has a descriptor to the file. A descriptor's inode number is read from its
    /// fdinfo first, which asks no file system; only one with the file's number is `stat`ed
    /// (through its /proc link) for the device. A `stat` of every descriptor would wait on any
    /// hung network or FUSE file some process holds.
    private func holds(_ pid: Int32) -> Bool {
        Self.numberedEntries("/proc/\(pid)/fd").contains { fd in
            // A kernel before 5.14 shows no inode in fdinfo: the stat alone decides.
            guard (Self.fdinfoInode("/proc/\(pid)/fdinfo/\(fd)") ?? inode) == inode else { return false }
            var status = stat()
            return stat("/proc/\(pid)/fd/\(fd)", &status) == 0 && UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
        }
    }

    /// The entries of a /proc directory whose names are numbers (pids, descriptors); none when
    /// it cannot be listed (the process is gone, or not ours to read).
    private static func numberedEntries(_ path: String) -> [Int32] {
        guard let stream = opendir(path) else { return [] }
        defer { closedir(stream) }
        var numbers: [Int32] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let number = Int32(name) { numbers.append(number) }
        }
        return numbers
    }

    /// The `ino:` line of a descriptor's fdinfo.
    private static func fdinfoInode(_ path: String) -> UInt64? {
        guard let text = readBounded(path, limit: 4096) else { return nil }
        let line = text.split(separator: "\n").first { $0.hasPrefix("ino:") }
        return line.flatMap { UInt64($0.dropFirst(4).drop { $0 == "\t" || $0 == " " }) }
    }

    /// `/proc/<pid>/cmdline`, its arguments joined by spaces, at most `commandLineLimit` bytes
    /// of it: for the log line saying what was killed.
    static func commandLine(of pid: Int32) -> String {
        readBounded("/proc/\(pid)/cmdline", limit: commandLineLimit)?.split(separator: "\0").joined(separator: " ") ?? "?"
    }

    /// Enough of a command line to recognize it; a process picks its own arguments, so the log
    /// line stays short whatever it chose.
    static let commandLineLimit = 512

    /// The first `limit` bytes of a /proc file (no UTF-8 is assumed), nil when it does not open.
    private static func readBounded(_ path: String, limit: Int) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < limit {
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, limit - count) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { break }
            count += got
        }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }
}
