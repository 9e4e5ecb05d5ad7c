import Atomics
import Foundation
import Glibc
import HostCoordination
import Testing

/// One supervisor per root, even when someone who can write the root swaps `supervisor.lock`
/// under the one that runs: a second supervisor would serve the same windows, and its saves
/// and the first one's would name the same seqs (a hostile tester lost a tab that way).
@Suite struct RootLockTests {
    @Test(.timeLimit(.minutes(2))) func swappingTheLockFileLetsNoSecondSupervisorIn() throws {
        let root = temporaryRoot("root-lock")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        defer { if host.process.isRunning { host.kill9() } }
        let lock = root.appendingPathComponent("supervisor.lock").path
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
    /// until its last thread is gone, and the next supervisor starts only once it can take it.
    @Test(.timeLimit(.minutes(2))) func aNewSupervisorWaitsUntilNoWorkerOfTheOneBeforeCanWrite() throws {
        let root = temporaryRoot("worker-lock")
        defer { removeHostFiles(root) }
        let lock = root.appendingPathComponent("supervisor.lock").path
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
        // This process stands in for a worker still finishing its writes.
        let holder = open(lock, O_RDONLY | O_CLOEXEC)
        try #require(holder >= 0 && flock(holder, LOCK_SH) == 0)
        defer { close(holder) }
        let second = Process()
        second.executableURL = windowhostBinary
        second.arguments = ["run", "--root", root.path, "--scenes", "1"]
        let output = Pipe()
        second.standardOutput = output
        second.standardError = FileHandle.nullDevice
        try second.run()
        defer { if second.isRunning { second.terminate() } }
        let ready = ManagedAtomic(false)
        Thread.detachNewThread {
            var seen = Data()
            while case let chunk = output.fileHandleForReading.availableData, !chunk.isEmpty {
                seen += chunk
                if String(decoding: seen, as: UTF8.self).contains("ready ") { ready.store(true, ordering: .relaxed) }
            }
        }
        usleep(1_500_000)
        #expect(second.isRunning && !ready.load(ordering: .relaxed), "started while a worker of the supervisor before could still write")
        #expect(flock(holder, LOCK_UN) == 0)
        #expect(waitFor({ ready.load(ordering: .relaxed) }, seconds: 30), "ready once the last worker is gone")
    }
}
