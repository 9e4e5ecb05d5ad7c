import CLinuxShims
import Glibc
import SystemPackage

/// The processes holding one file open, found through /proc: who holds `supervisor.lock` when
/// no supervisor does (`RootLocks.takeLockFromLeftovers`). A process holds it through a
/// descriptor in any thread's table (`/proc/<pid>/task/<tid>/fd`: a leader thread that exited
/// leaves `/proc/<pid>/fd` unreadable while another thread keeps the descriptor, and a thread may
/// have a table of its own), or through a mapping (`/proc/<pid>/task/<tid>/maps`: a mapping keeps
/// the open file description, and so the flock, after its descriptor is closed). Nothing here
/// walks a path under the root: the file is reached only through /proc.
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

    /// A holder found and stopped, kept by a pidfd taken before it was checked, so a pid reused
    /// meanwhile is never signalled; its command line read while it was stopped, for the log.
    struct Stopped {
        let pid: Int32
        let pidfd: Int32
        let command: String
    }

    /// Every process but this one that holds the file. A process that exits or
    /// cannot be read during the scan is passed over: the caller scans again.
    func pids() -> [Int32] {
        let me = getpid()
        return Self.numberedEntries("/proc").filter { $0 != me && holds($0) }
    }

    /// Stops (SIGSTOP) every process but this one that holds the file, the moment each is found;
    /// `kill` ends them once the scan is done. A stopped process cannot fork, so a holder that
    /// forks a child and exits (a chain, each link gone before a pid scan could kill it) is held
    /// at the link the scan reaches, and its later links are found by the next scan. `failed`
    /// hears of a holder that could not be stopped (not ours to signal, or no pidfd left).
    func stopAll(failed: (Int32, Errno) -> Void) -> [Stopped] {
        let me = getpid()
        var stopped: [Stopped] = []
        // Newest first: a holder that forks and exits is gone from the listing within a
        // millisecond or so, and its child's pid is (until pids wrap) above every listed one.
        for pid in Self.numberedEntries("/proc").sorted(by: >) where pid != me {
            let pidfd = wh_pidfd_open(pid)
            guard pidfd >= 0 else {
                // The pidfd comes first, so the process checked is the one signalled; without one
                // (no descriptor left) only a holder is worth a word.
                let error = errno
                if error != ESRCH, holds(pid) { failed(pid, Errno(rawValue: error)) }
                continue
            }
            guard holds(pid) else {
                close(pidfd)
                continue
            }
            guard wh_pidfd_send_signal(pidfd, SIGSTOP) == 0 else {
                // ESRCH: gone meanwhile; a child it forked is for the next scan.
                if errno != ESRCH { failed(pid, Errno(rawValue: errno)) }
                close(pidfd)
                continue
            }
            stopped.append(Stopped(pid: pid, pidfd: pidfd, command: Self.commandLine(of: pid)))
        }
        return stopped
    }

    /// SIGKILLs each stopped holder (SIGKILL ends a stopped process too) and closes its pidfd.
    func kill(_ stopped: [Stopped], failed: (Int32, Errno) -> Void) {
        for holder in stopped {
            if wh_pidfd_send_signal(holder.pidfd, SIGKILL) != 0, errno != ESRCH {
                failed(holder.pid, Errno(rawValue: errno))
            }
            close(holder.pidfd)
        }
    }

    /// Whether `pid` holds the file: a descriptor in any of its threads' tables, or a mapping.
    private func holds(_ pid: Int32) -> Bool {
        let tasks = Self.numberedEntries("/proc/\(pid)/task")
        if tasks.contains(where: { holdsDescriptor("/proc/\(pid)/task/\($0)") }) { return true }
        // The threads share one memory map: the first thread that still has one shows it all
        // (a leader that exited shows none).
        for task in tasks {
            if let mapped = maps("/proc/\(pid)/task/\(task)/maps") { return mapped }
        }
        return false
    }

    /// Whether the task at `task` (a /proc directory) has a descriptor to the file. A
    /// descriptor's inode number is read from its fdinfo first, which asks no file system; only
    /// one with the file's number is `stat`ed (through its /proc link) for the device. A `stat`
    /// of every descriptor would wait on any hung network or FUSE file some process holds.
    private func holdsDescriptor(_ task: String) -> Bool {
        Self.numberedEntries("\(task)/fd").contains { fd in
            // A kernel before 5.14 shows no inode in fdinfo: the stat alone decides.
            guard (Self.fdinfoInode("\(task)/fdinfo/\(fd)") ?? inode) == inode else { return false }
            var status = stat()
            return stat("\(task)/fd/\(fd)", &status) == 0 && UInt64(status.st_dev) == device
                && UInt64(status.st_ino) == inode
        }
    }

    /// Whether a maps file names the file in a mapping; nil when it is empty (no memory map) or
    /// cannot be read. Read in chunks, a line at a time: a process picks how many mappings it has.
    private func maps(_ path: String) -> Bool? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var empty = true
        while true {
            let got = read(fd, &chunk, chunk.count)
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { break }
            empty = false
            pending += chunk[..<got]
            var start = pending.startIndex
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                if mapsLineNamesFile(pending[start..<newline]) { return true }
                start = newline + 1
            }
            pending.removeSubrange(..<start)
            // No line is this long (a path is at most PATH_MAX): not a maps file to trust.
            if pending.count > chunk.count { return false }
        }
        return empty ? nil : mapsLineNamesFile(pending[...])
    }

    /// Whether a `/proc/<pid>/maps` line (`start-end perms offset major:minor inode path`, the
    /// device numbers in hex) maps the file.
    private func mapsLineNamesFile(_ line: ArraySlice<UInt8>) -> Bool {
        let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 5, omittingEmptySubsequences: true)
        guard fields.count >= 5, UInt64(String(decoding: fields[4], as: UTF8.self)) == inode else { return false }
        let numbers = fields[3].split(separator: UInt8(ascii: ":")).map {
            UInt64(String(decoding: $0, as: UTF8.self), radix: 16)
        }
        guard numbers.count == 2, let major = numbers[0], let minor = numbers[1] else { return false }
        // glibc's dev_t: the major's low 12 bits at 8, the rest at 32; the minor's low 8 at 0, the rest at 12.
        let encoded = ((major & 0xfff) << 8) | ((major & ~0xfff) << 32) | (minor & 0xff) | ((minor & ~0xff) << 12)
        return encoded == device
    }

    /// The entries of a /proc directory whose names are numbers (pids, descriptors); none when
    /// it cannot be listed (the process is gone, or not ours to read).
    private static func numberedEntries(_ path: String) -> [Int32] {
        guard let stream = opendir(path) else { return [] }
        defer { closedir(stream) }
        var numbers: [Int32] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
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
        // A process whose main thread exited shows it only through a thread still running.
        let places = ["/proc/\(pid)"] + numberedEntries("/proc/\(pid)/task").map { "/proc/\(pid)/task/\($0)" }
        for place in places {
            if let text = readBounded("\(place)/cmdline", limit: commandLineLimit), !text.isEmpty {
                return text.split(separator: "\0").joined(separator: " ")
            }
        }
        return "?"
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
