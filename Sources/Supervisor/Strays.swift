import Foundation
import Glibc
import Logging
import Platform
import SystemPackage

/// The supervisor's children as /proc shows them. It is a child subreaper, so whatever a worker
/// leaves behind (a forked child, a daemon) becomes its child when the worker dies: a stray,
/// which `StrayReaper` kills and reaps.
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

/// Kills and reaps every child of the supervisor that is not one of its own: a stray, left by a
/// dead worker (the supervisor is its subreaper). Unreaped, strays pile up as zombies until no
/// pid is left to spawn a worker; alive, one holding its window's slot memfd writes into the
/// next worker's slot. A current worker is never waited for here: its pidfd's `waitid` reaps it.
struct StrayReaper {
    /// How often the loop looks for strays: a zombie a worker left lasts at most this long.
    static let scanNanoseconds: UInt64 = 1_000_000_000

    /// How long a worker's death waits for the strays it killed to be gone before the window's
    /// next worker starts: a SIGKILLed process is gone in microseconds unless it sleeps
    /// uninterruptibly (then it is logged, and reaped at a later scan).
    static let exitWaitNanoseconds: UInt64 = 200_000_000

    /// When the loop next looks.
    private var scanAt: UInt64 = 0
    /// Strays sent SIGKILL and not yet reaped: each is logged once.
    private var killed: Set<pid_t> = []

    /// Whether the periodic scan is due at `now`; if so, the next one is set.
    mutating func scanDue(_ now: UInt64) -> Bool {
        guard now >= scanAt else { return false }
        scanAt = now + Self.scanNanoseconds
        return true
    }

    /// Kills and reaps the children not in `ours`. `wait`: how long to wait for them to be gone
    /// (at a worker's death, before its window's next worker starts); the periodic scan waits
    /// for none. `window`: whose worker left them, for the log.
    mutating func reap(sparing ours: Set<pid_t>, cameFrom window: UUID?, waitingUpTo wait: UInt64, logger: Logger) {
        let deadline = monotonicNanoseconds() + wait
        let origin = "\(window ?? WindowRegistry.unavailable)"
        while true {
            let strays: [pid_t]
            do throws(Errno) {
                strays = try Strays.children(of: getpid()).filter { !ours.contains($0) }
            } catch {
                logger.error("cannot look for strays: opendir /proc: \(error)")
                return
            }
            for pid in strays { killAndReap(pid, origin: origin, logger: logger) }
            guard !strays.contains(where: killed.contains) else {
                guard monotonicNanoseconds() < deadline else {
                    if wait > 0 {
                        logger.error(
                            "strays still alive after SIGKILL (in uninterruptible sleep?): the window's next worker starts anyway",
                            metadata: ["pids": "\(strays.filter(killed.contains))", "window": "\(origin)"])
                    }
                    return
                }
                usleep(2_000)
                continue
            }
            // A stray killed may have left strays of its own: they are looked for again.
            guard !strays.isEmpty, monotonicNanoseconds() < deadline else { return }
        }
    }

    /// Sends `pid` SIGKILL (once, logged) and reaps it if it is gone.
    private mutating func killAndReap(_ pid: pid_t, origin: String, logger: Logger) {
        // An unreaped child: its pid names it still, so the kill reaches no one else.
        if killed.insert(pid).inserted {
            let sent = Glibc.kill(pid, SIGKILL)
            logger.error(
                "a stray child of the supervisor (left by a worker): killed",
                metadata: [
                    "pid": "\(pid)", "window": "\(origin)",
                    "kill": "\(sent == 0 ? "sent" : "\(Errno(rawValue: errno))")",
                ])
        }
        let reaped = waitpid(pid, nil, WNOHANG)
        if reaped == pid || (reaped < 0 && errno == ECHILD) { killed.remove(pid) }
    }
}
