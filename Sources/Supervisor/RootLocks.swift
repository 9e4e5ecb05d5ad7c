import Foundation
import Glibc
import Logging
import Platform
import SessionStore
import SystemPackage

/// The two locks that make a root one supervisor's: the root directory's own `flock`, and
/// `supervisor.lock`, which every worker holds until its last write is done.
enum RootLocks {
    /// Takes the root for this supervisor: its directories made, nothing misplaced in them, the
    /// root's own lock (one supervisor per root) and `supervisor.lock`, once no worker of a dead
    /// supervisor can still write. The two locks' descriptors.
    static func take(
        _ root: FilePath, files: SupervisorFiles, logger: Logger
    ) throws -> (rootLock: Int32, lock: Int32) {
        try SupervisorFiles.makeDirectory(root)
        // Before the lock is opened or anything made: a symlink there is never followed.
        let misplaced = RootLayout.misplacedEntries(root: root)
        guard misplaced.isEmpty else { throw SupervisorError.misplacedEntries(misplaced) }
        try SupervisorFiles.makeDirectory(files.windows)
        // The lock is the root directory itself (flock: the kernel drops it when the holder
        // dies, so a killed supervisor leaves none). A file under the root can be swapped under
        // its holder by anyone who can write the root, and a second supervisor would then lock
        // the new file; the directory cannot be swapped without writing its parent.
        let rootLock: Int32
        do {
            rootLock = try NoFollow.openDirectory(root).rawValue
        } catch {
            throw SupervisorError.setup("open \(root)", error)
        }
        guard flock(rootLock, LOCK_EX | LOCK_NB) == 0 else { throw SupervisorError.alreadyRunning(root) }
        // supervisor.lock too: what supervisors of earlier versions lock, and what every worker
        // holds (inherited, read-only) until its last thread is gone. A supervisor killed takes
        // its workers with it (PR_SET_PDEATHSIG), but not at once: a worker's io_uring writes in
        // flight finish in its io-wq threads first. The next supervisor waits for them here, so
        // no write of a dead window's worker lands over what a new worker restored and saved.
        let lock = open(files.lock.string, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw SupervisorError.setup("open \(files.lock)", Errno(rawValue: errno)) }
        do {
            try NoFollow.setPrivateMode(lock, 0o600)
        } catch {
            throw SupervisorError.setup("fchmod \(files.lock)", error)
        }
        try takeLockFromLeftovers(lock, path: files.lock, logger: logger)
        return (rootLock, lock)
    }

    /// Takes `supervisor.lock`. The root's own lock is ours, so no supervisor of this version
    /// runs: whoever holds supervisor.lock is a leftover of one that died, its workers still
    /// finishing their writes or whatever a worker forked or handed the descriptor to. Workers
    /// are waited for; what holds it after `leftoverGraceNanoseconds` is killed, or one
    /// compromised worker's child would keep every later start out. Killing loses nothing: the
    /// kernel drops the lock only once the killed process's io_uring writes are done, and this
    /// waits for that (`workerExitWaitNanoseconds`), scanning again for holders a forking one
    /// makes meanwhile.
    static func takeLockFromLeftovers(_ lock: Int32, path: FilePath, logger: Logger) throws(SupervisorError) {
        if try takeLock(lock, path: path, before: monotonicNanoseconds() + leftoverGraceNanoseconds) { return }
        let holders: LockHolders
        do {
            holders = try LockHolders(of: lock)
        } catch {
            throw .setup("fstat \(path)", error)
        }
        let deadline = monotonicNanoseconds() + workerExitWaitNanoseconds
        var killed: Set<Int32> = []
        func cannotKill(_ pid: Int32, _ error: Errno) {
            logger.error("cannot kill a leftover holding \(path)", metadata: ["pid": "\(pid)", "error": "\(error)"])
        }
        while true {
            // Every holder is stopped before any is killed: none can fork a new holder meanwhile.
            let stopped = holders.stopAll(failed: cannotKill)
            for holder in stopped where killed.insert(holder.pid).inserted {
                logger.error(
                    "killed a leftover of a dead supervisor holding \(path)",
                    metadata: ["pid": "\(holder.pid)", "cmdline": "\(holder.command)"])
            }
            holders.kill(stopped, failed: cannotKill)
            if try takeLock(lock, path: path, before: min(deadline, monotonicNanoseconds() + leftoverScanNanoseconds)) {
                return
            }
            guard monotonicNanoseconds() < deadline else { throw .lockHeldByLeftovers(path, pids: holders.pids()) }
        }
    }

    /// Tries `flock(LOCK_EX)` on `lock` until `deadline`: whether it was taken.
    static func takeLock(_ lock: Int32, path: FilePath, before deadline: UInt64) throws(SupervisorError) -> Bool {
        while flock(lock, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { throw .setup("flock \(path)", Errno(rawValue: errno)) }
            guard monotonicNanoseconds() < deadline else { return false }
            usleep(10_000)
        }
        return true
    }

    /// How long a new supervisor gives the dying workers of the last one before it kills what
    /// still holds supervisor.lock: they exit within milliseconds of its death, once their
    /// writes in flight are done; a second spares one finishing a slow write a needless kill.
    static let leftoverGraceNanoseconds: UInt64 = 1_000_000_000

    /// How long after killing leftovers it waits for the lock before scanning again.
    static let leftoverScanNanoseconds: UInt64 = 100_000_000

    /// How long a new supervisor waits, once it has killed what held supervisor.lock, for the
    /// lock: the killed processes' writes in flight finish first.
    static let workerExitWaitNanoseconds: UInt64 = 5_000_000_000
}
