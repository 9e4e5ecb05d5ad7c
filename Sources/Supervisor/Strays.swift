import Glibc
import SystemPackage

/// The supervisor's children as /proc shows them. It is a child subreaper, so whatever a worker
/// leaves behind (a forked child, a daemon) becomes its child when the worker dies: a stray,
/// which `Supervisor.killStrays` kills and reaps.
enum Strays {
    /// The pids whose parent is `parent` now.
    static func children(of parent: pid_t) throws(Errno) -> [pid_t] {
        guard let directory = opendir("/proc") else { throw Errno(rawValue: errno) }
        defer { closedir(directory) }
        var found: [pid_t] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            // A process gone since the listing has no stat to read: it is no child any more.
            guard let pid = pid_t(name), pid > 0, parentPID(of: pid) == parent else { continue }
            found.append(pid)
        }
        return found
    }

    /// The parent in `/proc/<pid>/stat`; nil when it cannot be read.
    static func parentPID(of pid: pid_t) -> pid_t? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // pid, comm (at most 16 bytes in parentheses), state, ppid: well within the buffer.
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return parentPID(inStat: buffer[..<count])
    }

    /// The ppid of a `/proc/<pid>/stat` line: the second field after the LAST `)`, as the comm
    /// field may itself hold `)` and spaces.
    static func parentPID(inStat stat: ArraySlice<UInt8>) -> pid_t? {
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " "), maxSplits: 2)
        guard fields.count >= 2 else { return nil }
        return pid_t(String(decoding: fields[1], as: UTF8.self))
    }
}
