import Foundation
import Glibc
import HostCoordination
import SystemPackage
import Testing

@testable import Supervisor

/// One worker process as the supervisor holds it, with a shell script standing in for
/// `windowhost worker` (it ignores the options): the descriptors arrive at the numbers
/// `WorkerLaunch.Descriptor` names, signals go through the pidfd, the end is reaped as what it
/// was, a failed spawn is a typed failure, and closing twice closes once.
@Suite struct WorkerProcessTests {
    private static let launch = WorkerLaunch(
        slot: 0, generation: 1, window: UUID(), root: "/nonexistent", saveDelayMilliseconds: 0, io: "sync",
        supervisorPID: getpid(),
        seqFloor: 0, tabFloor: 0, compactAfterRecords: nil)

    /// An executable script running `body`, removed by `remove`.
    private func script(_ body: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "worker-process-\(UUID().uuidString).sh"
        ).path
        try Data("#!/bin/sh\n\(body)\n".utf8).write(to: URL(fileURLWithPath: path))
        try #require(chmod(path, 0o700) == 0)
        return path
    }

    /// Three files opened read-only to hand over at the numbers the worker inherits besides
    /// its command doorbell, which the spawn makes.
    private func inheritable() throws -> (
        files: [WorkerLaunch.Descriptor: String], descriptors: [WorkerLaunch.Descriptor: Int32]
    ) {
        var files: [WorkerLaunch.Descriptor: String] = [:]
        var descriptors: [WorkerLaunch.Descriptor: Int32] = [:]
        for descriptor in [WorkerLaunch.Descriptor.slotMemory, .supervisorBell, .supervisorLock] {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent(
                "worker-process-\(descriptor)-\(UUID().uuidString)"
            ).path
            try Data().write(to: URL(fileURLWithPath: path))
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            try #require(fd >= 0)
            files[descriptor] = path
            descriptors[descriptor] = fd
        }
        return (files, descriptors)
    }

    /// Waits (at most 10 s) until the worker has ended, and reaps it.
    private func waitForEnd(_ worker: WorkerProcess) throws -> WorkerProcess.End {
        var polled = pollfd(fd: worker.pidfd, events: Int16(POLLIN), revents: 0)
        try #require(poll(&polled, 1, 10_000) == 1, "the worker did not end")
        return try #require(try worker.reap())
    }

    @Test(.timeLimit(.minutes(10))) func theDescriptorsArriveAtTheNumbersTheLaunchNames() throws {
        let (files, descriptors) = try inheritable()
        let output = FileManager.default.temporaryDirectory.appendingPathComponent(
            "worker-process-\(UUID().uuidString).out"
        ).path
        let executable = try script(#"for n in 3 4 5 6; do readlink /proc/$$/fd/$n; done > "\#(output)""#)
        defer {
            for (_, fd) in descriptors { close(fd) }
            for path in Array(files.values) + [output, executable] { unlink(path) }
        }
        let worker = try WorkerProcess.spawn(Self.launch, executable: executable, inheriting: descriptors)
        #expect(try waitForEnd(worker) == .exited(status: 0))
        let lines = try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(
            lines == [files[.slotMemory], "anon_inode:[eventfd]", files[.supervisorBell], files[.supervisorLock]],
            "\(lines)")
        worker.close()
    }

    @Test(.timeLimit(.minutes(10))) func aSignalGoesThroughThePidfdAndTheEndIsReapedOnce() throws {
        let (files, descriptors) = try inheritable()
        let executable = try script("exec sleep 30")
        defer {
            for (_, fd) in descriptors { close(fd) }
            for path in Array(files.values) + [executable] { unlink(path) }
        }
        let worker = try WorkerProcess.spawn(Self.launch, executable: executable, inheriting: descriptors)
        #expect(worker.pid > 0 && worker.pidfd >= 0)
        #expect(try worker.reap() == nil, "it runs")
        try worker.signal(SIGKILL)
        #expect(try waitForEnd(worker) == .signaled(SIGKILL))
        // Reaped: the pidfd names a process that is gone.
        #expect(throws: Errno.noSuchProcess) { try worker.signal(SIGTERM) }
        worker.close()
        // A second close (or the deinit after it) closes nothing: closing a descriptor twice
        // asserts (EBADF), and could close whatever another thread opened under its number.
        worker.close()
        #expect(worker.pidfd == -1)
    }

    @Test func aSpawnThatFailsNamesTheCallAndItsErrno() throws {
        let (files, descriptors) = try inheritable()
        defer {
            for (_, fd) in descriptors { close(fd) }
            for path in files.values { unlink(path) }
        }
        let failure = #expect(throws: WorkerProcess.SpawnFailure.self) {
            try WorkerProcess.spawn(Self.launch, executable: "/nonexistent/windowhost", inheriting: descriptors)
        }
        #expect(
            failure?.call == "posix_spawn" && failure?.errno == .noSuchFileOrDirectory, "\(String(describing: failure))"
        )
    }
}
