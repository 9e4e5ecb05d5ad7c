import Atomics
import BrowserModel
import CLinuxShims
import Foundation
import Glibc
import HostCoordination
import Platform
import Supervisor
import SystemPackage
import TestSupport
import Testing

/// One supervisor per root, even when someone who can write the root swaps `supervisor.lock`
/// under the one that runs: a second supervisor would serve the same windows, and its saves
/// and the first one's would name the same seqs (a hostile tester lost a tab that way).
@Suite struct RootLockTests {
    @Test(.timeLimit(.minutes(10))) func swappingTheLockFileLetsNoSecondSupervisorIn() throws {
        let root = temporaryRoot("root-lock")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        defer { if host.process.isRunning { host.kill9() } }
        let lock = root.appendingPathComponent(DiskLayout.lock).path
        #expect(rename(lock, root.appendingPathComponent("moved.lock").path) == 0)
        #expect(FileManager.default.createFile(atPath: lock, contents: nil, attributes: [.posixPermissions: 0o600]))

        let second = try runWindowhost(
            ["run", "--root", root.path, "--scenes", "1", "--socket", root.appendingPathComponent("ctl2.sock").path])
        #expect(second.status == 75, "\(second.output)")
        #expect(second.output.contains("another supervisor runs"), "\(second.output)")
        #expect(host.process.isRunning)
        #expect(host.terminate() == 0)
    }

    /// A supervisor killed takes its workers with it (PR_SET_PDEATHSIG), but not at once: a
    /// worker's io_uring writes in flight finish in its io-wq threads first, and one landing
    /// after a new worker restored and saved would overwrite acknowledged saves with stale
    /// ones (found by `windowhost stress` with supervisor kills: a window came back torn when it
    /// fell back to a journal a dead worker had written over). Each worker holds supervisor.lock
    /// until its last thread is gone, and the next supervisor starts only once it can take it:
    /// it waits a grace for the workers, then kills what still holds it and waits for the lock.
    @Test(.timeLimit(.minutes(10))) func aNewSupervisorWaitsUntilNoWorkerOfTheOneBeforeCanWrite() throws {
        let root = temporaryRoot("worker-lock")
        defer { removeHostFiles(root) }
        let lock = root.appendingPathComponent(DiskLayout.lock).path
        do {
            let host = try HostProcess(root: root, scenes: 2)
            let pids = host.windows().values.map(\.pid)
            #expect(pids.count == 2 && pids.allSatisfy { $0 > 0 }, "\(host.windows())")
            for pid in pids {
                let number = WorkerLaunch.Descriptor.supervisorLock.rawValue
                let held = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(number)")
                #expect(held == lock, "worker \(pid) holds \(held ?? "nothing") at descriptor \(number)")
            }
            host.kill9()
        }
        // A child stands in for a worker still finishing its writes (never this process: the
        // next supervisor kills every holder it finds).
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        holder.arguments = ["-s", lock, "/bin/sh", "-c", "echo held; exec sleep 100"]
        let held = Pipe()
        holder.standardOutput = held
        try holder.run()
        defer { if holder.isRunning { holder.terminate() } }
        let locked = ManagedAtomic(false)
        Thread.detachNewThread {
            if !held.fileHandleForReading.availableData.isEmpty { locked.store(true, ordering: .relaxed) }
        }
        try #require(
            waitFor({ locked.load(ordering: .relaxed) }, seconds: 30),
            "flock took supervisor.lock once the workers were gone")
        let second = try StartingSupervisor(root: root)
        defer { second.stop() }
        usleep(500_000)
        #expect(
            second.process.isRunning && !second.isReady,
            "started while a worker of the supervisor before could still write: \(second.output)")
        #expect(holder.isRunning, "killed before the grace for workers passed")
        #expect(waitFor({ second.isReady }, seconds: 30), "ready once the last holder is gone: \(second.output)")
        #expect(waitFor({ !holder.isRunning }, seconds: 5) && holder.terminationReason == .uncaughtSignal)
        #expect(
            second.output.contains("pid=\(holder.processIdentifier)"), "the log names what was killed: \(second.output)"
        )
    }

    /// A worker is untrusted. One compromised that forks, or hands its descriptor 6 on, kept
    /// supervisor.lock held after its supervisor died, and every later start on the root waited
    /// 5 s and exited 75 "another supervisor runs": one window's worker denied every window, for
    /// good (issue 12). The next supervisor, holding the root's own lock, knows no supervisor
    /// runs: after the grace it kills every process holding supervisor.lock and starts.
    @Test(.timeLimit(.minutes(10))) func aLeftoverOfADeadSupervisorHoldingTheLockIsKilledAtTheNextStart() throws {
        try expectLeftoverKilled(
            "leftover-lock",
            holding: """
                import sys, time
                open(sys.argv[1], "w").close()
                time.sleep(1000)
                """)
    }

    /// A leftover whose main thread exited while another thread keeps the lock descriptor: its
    /// leader is a zombie, so `/proc/<pid>/fd` cannot be read, and a scan of it alone found no
    /// holder (the start exited 75 "held by no process this host can find"). Its threads' own
    /// tables (`/proc/<pid>/task/<tid>/fd`) show it, and it is killed.
    @Test(.timeLimit(.minutes(10))) func aLeftoverWhoseMainThreadExitedIsFoundThroughItsThreads() throws {
        try expectLeftoverKilled(
            "zombie-leader",
            holding: """
                import ctypes, sys, threading, time
                threading.Thread(target=lambda: time.sleep(1000), daemon=False).start()
                open(sys.argv[1], "w").close()
                ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the main thread alone exits
                """)
    }

    /// A leftover that mapped supervisor.lock and closed its descriptor: the mapping keeps the
    /// open file description, and with it the flock, though no descriptor table shows it. Its
    /// memory map (`/proc/<pid>/task/<tid>/maps`) does, and it is killed.
    @Test(.timeLimit(.minutes(10))) func aLeftoverThatMappedTheLockAndClosedItIsFoundThroughItsMaps() throws {
        try expectLeftoverKilled(
            "mapped-lock",
            holding: """
                import ctypes, os, sys, time
                libc = ctypes.CDLL(None, use_errno=True)
                libc.mmap.restype = ctypes.c_void_p
                mapped = libc.mmap(None, 4096, 1, 1, 3, 0)  # PROT_READ, MAP_SHARED, the lock at descriptor 3
                assert mapped not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
                os.close(3)
                open(sys.argv[1], "w").close()
                time.sleep(1000)
                """)
    }

    /// Starts a supervisor, hands its worker's supervisor.lock descriptor (as descriptor 3) to a
    /// python `script` standing in for a compromised worker's leftover, which creates the file
    /// named by its first argument once it holds the lock its way; kills the supervisor, then
    /// expects the next start to find the stand-in, kill it and be ready.
    private func expectLeftoverKilled(_ name: String, holding script: String) throws {
        let root = temporaryRoot(name)
        defer { removeHostFiles(root) }
        let ready = root.appendingPathComponent("stand-in-ready").path
        let (standIn, pidfd) = try handOnTheLockAndKillTheSupervisor(root) { copy in
            let standIn = try spawnProcess(["/usr/bin/python3", "-c", script, ready], inheriting: [copy]).get()
            // Watched through a pidfd, as the supervisor kills it: a pid alone can name another
            // process once this one is reaped, and pids wrap within a test run.
            let pidfd = wh_pidfd_open(standIn)
            try #require(pidfd >= 0, "pidfd_open: \(errno)")
            try #require(
                waitFor({ FileManager.default.fileExists(atPath: ready) }, seconds: 30),
                "the stand-in holds the lock its way")
            usleep(200_000)
            return (standIn, pidfd)
        }
        defer { close(pidfd) }
        var ended = false
        defer {
            if !ended {
                _ = wh_pidfd_send_signal(pidfd, SIGKILL)
                waitpid(standIn, nil, 0)
            }
        }

        let second = try runWindowhostBounded(
            ["run", "--root", root.path, "--scenes", "1", "--socket", root.appendingPathComponent("ctl2.sock").path],
            seconds: 30, until: "ready ")
        #expect(second.output.contains("ready "), "\(second.output)")
        #expect(
            second.output.contains("pid=\(standIn)") && second.output.contains("cmdline=/usr/bin/python3 -c"),
            "the log names the stand-in: \(second.output)")
        // A pidfd reads once every thread of its process has exited, reaped or not: a killed
        // leader whose other threads are still dying stays a zombie its parent cannot reap yet.
        // Generous: on a loaded machine a killed process with threads took over 5 s to end.
        var exited = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        ended = waitFor({ poll(&exited, 1, 0) == 1 }, seconds: 20)
        #expect(ended, "the stand-in is dead: \(procText("/proc/\(standIn)/status") ?? "gone")")
        guard ended else { return }
        var code: Int32 = 0
        var signaled: Int32 = 0
        let reaped = wh_pidfd_reap(pidfd, &code, &signaled)
        // ECHILD: ended, and reaped by whatever else in this process waits for children.
        if reaped != -1 || errno != ECHILD {
            #expect(
                reaped == 1 && signaled == 1 && code == SIGKILL, "killed: \(reaped), code \(code), signaled \(signaled)"
            )
        }
    }

    /// The dead supervisor's lock descriptor sent over a unix socket and never received: no
    /// /proc/<pid>/fd shows it, so nothing can be killed. The start says exactly that with 75,
    /// not "another supervisor runs", and once the socket is gone the next start takes the lock.
    @Test(.timeLimit(.minutes(10))) func aLockHeldInASocketsQueueIsSaidToBeHeldByNoProcessFound() throws {
        let root = temporaryRoot("queued-lock")
        defer { removeHostFiles(root) }
        var pair: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        defer { for end in pair where end >= 0 { close(end) } }
        try handOnTheLockAndKillTheSupervisor(root) { copy in
            try #require(sendDescriptor(copy, over: pair[0]), "sendmsg: \(errno)")
        }
        let arguments = ["run", "--root", root.path, "--scenes", "1"]
        let refused = try runWindowhostBounded(arguments, seconds: 30, until: "ready ")
        #expect(refused.status == 75, "\(refused.output)")
        #expect(
            refused.output.contains("supervisor.lock is held by no process this host can find"), "\(refused.output)")
        #expect(!refused.output.contains("another supervisor runs"), "\(refused.output)")
        for end in pair { close(end) }
        pair = [-1, -1]
        let started = try runWindowhostBounded(arguments, seconds: 30, until: "ready ")
        #expect(started.output.contains("ready "), "the queued descriptor went with the socket: \(started.output)")
    }

    /// A supervisor.lock still held by processes found: the message names them.
    @Test func aLockStillHeldByProcessesFoundNamesThem() {
        let error = SupervisorError.lockHeldByLeftovers(FilePath("/r/supervisor.lock"), pids: [12, 13])
        #expect("\(error)".contains("still held by pid 12, pid 13"))
    }
}

/// Starts a supervisor on `root`, gives `handOn` a copy of its worker's supervisor.lock
/// descriptor (as a compromised worker could pass it on), then kills the supervisor with SIGKILL.
private func handOnTheLockAndKillTheSupervisor<Held>(_ root: URL, _ handOn: (Int32) throws -> Held) throws -> Held {
    let host = try HostProcess(root: root, scenes: 1)
    defer { if host.process.isRunning { host.kill9() } }
    let worker = try #require(host.windows().values.first?.pid)
    let copy = try #require(descriptor(.supervisorLock, of: worker), "pidfd_getfd: \(errno)")
    defer { close(copy) }
    let held = try handOn(copy)
    host.kill9()
    return held
}

/// Sends `descriptor` over the unix socket `socket` with one byte (SCM_RIGHTS): it sits in the
/// peer's queue until received, in no process's descriptor table.
private func sendDescriptor(_ descriptor: Int32, over socket: Int32) -> Bool {
    let headerSize = MemoryLayout<cmsghdr>.size
    // CMSG_SPACE(sizeof(int)): the header, then the descriptor padded to the header's alignment.
    var control = [UInt8](repeating: 0, count: headerSize + MemoryLayout<Int>.size)
    var byte: UInt8 = 0
    return control.withUnsafeMutableBytes { buffer in
        let header = buffer.baseAddress!.assumingMemoryBound(to: cmsghdr.self)
        header.pointee.cmsg_len = headerSize + MemoryLayout<Int32>.size
        header.pointee.cmsg_level = SOL_SOCKET
        header.pointee.cmsg_type = Int32(SCM_RIGHTS)
        buffer.storeBytes(of: descriptor, toByteOffset: headerSize, as: Int32.self)
        return withUnsafeMutablePointer(to: &byte) { payload in
            var vector = iovec(iov_base: payload, iov_len: 1)
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var message = msghdr()
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                message.msg_control = buffer.baseAddress
                message.msg_controllen = buffer.count
                return sendmsg(socket, &message, 0) == 1
            }
        }
    }
}

/// A `windowhost run` starting in the background, stdout and stderr to one file: whether it
/// said `ready` yet, and what it logged.
private final class StartingSupervisor {
    let process = Process()
    private let log = FileManager.default.temporaryDirectory.appendingPathComponent(
        "windowhost-starting-\(UUID().uuidString)")

    init(root: URL) throws {
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.executableURL = windowhostBinary
        process.arguments = ["run", "--root", root.path, "--scenes", "1"]
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
    var isReady: Bool { output.contains("ready ") }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: log)
    }
}
