import BrowserModel
import Foundation
import Glibc
import HostCoordination
import IOUring
import Platform
import SessionStore
import Supervisor
import SystemPackage
import Testing

/// A worker whose restore runs short of its own descriptors (a real EMFILE: `prlimit` caps the
/// worker alone) exits 75 (EX_TEMPFAIL, `WorkerExit.restoreShortOfResources`), with the files as
/// they were; the supervisor retries that after its shortage backoff and never counts it toward
/// setting the session aside (`WorkerShortageTests`). Before, it exited 74 like a failed restore,
/// and the second one set a good session aside.
@Suite struct WorkerShortageProcessTests {
    @Test(.timeLimit(.minutes(10))) func aWorkerShortOfDescriptorsWhileRestoringExitsTempfailAndTouchesNothing() throws
    {
        let root = temporaryRoot("worker-emfile")
        defer { removeHostFiles(root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try #require(chmod(root.path, 0o700) == 0)
        let window = UUID()
        // A window with tabs in both Browsers, durable.
        let store = WindowStore(
            root: FilePath(root.path), windowID: window, engine: SyncEngine(), saveDelayMilliseconds: 0)
        _ = try store.recover()
        for seq in 1...6 as ClosedRange<UInt64> {
            let browser = seq % 3 == 0 ? store.incognito : store.regular
            try store.apply(seq: seq) {
                var history = NavigationHistory()
                history.commit(NavigationItem(url: "https://tab\(seq).example/", timestamp: .zero))
                try browser.webStateList.insert(
                    WebState(id: browser.profile.makeWebStateID(), creationTime: .zero, history: history))
            }
        }
        try store.waitUntilDurable(6)
        let before = try snapshotOfFiles(root)

        var shortages = 0
        // From 7: below it the dynamic loader has no descriptor for the libraries (exit 127),
        // past 3, 4 and 5 (the slot, the two doorbells) the worker inherits.
        for cap in 7...24 {
            let outcome = try runWorker(root: root, window: window, nofile: cap)
            switch outcome {
            case .exited(let status):
                #expect(
                    status == WorkerExit.restoreShortOfResources.status,
                    "cap \(cap): a shortage is no failed restore (74)")
                shortages += 1
            case .ready:
                break
            }
            #expect(try snapshotOfFiles(root) == before, "cap \(cap): the files are left as they were")
        }
        #expect(shortages > 0, "some cap makes the restore itself run short")

        // With its descriptors, the same worker restores the whole window.
        guard case .ready(let stats) = try runWorker(root: root, window: window, nofile: nil) else {
            Issue.record("the worker did not restore without a cap")
            return
        }
        #expect(stats.regularTabs == 4 && stats.incognitoTabs == 2 && stats.appliedSeq == 6, "\(stats)")
    }
}

private enum WorkerOutcome {
    case exited(Int32)
    /// It said it was ready (then it was killed): what it published.
    case ready(WorkerStats)
}

/// Spawns `windowhost worker` for `window` in slot 0 of a region this process made, as the
/// supervisor does, under `prlimit --nofile=CAP:CAP` (which execs it: its parent is this
/// process); its exit status, or what it published once ready.
private func runWorker(root: URL, window: UUID, nofile cap: Int?) throws -> WorkerOutcome {
    // Its descriptor is closed by its deinit alone: closing it here too closed, a moment later,
    // whatever descriptor another test had opened under the same number.
    let memory = try SlotMemory(index: 0, supervisorPID: getpid())
    memory.slot.generation = 1
    memory.slot.windowID = window
    let commands = try Doorbell()
    let bell = try Doorbell()
    defer {
        commands.close()
        bell.close()
    }
    let worker = WorkerLaunch(
        slot: 0, generation: 1, window: window, root: FilePath(root.path), saveDelayMilliseconds: 0, io: "sync",
        supervisorPID: getpid(),
        seqFloor: 0, tabFloor: 0, compactAfterRecords: nil
    ).arguments(executable: windowhostBinary.path)
    let arguments = (cap.map { ["/usr/bin/prlimit", "--nofile=\($0):\($0)"] } ?? []) + worker
    let pid = try spawnProcess(
        arguments, inheriting: [memory.descriptor.rawValue, commands.descriptor.rawValue, bell.descriptor.rawValue]
    ).get()
    let deadline = Date().addingTimeInterval(20)
    var status: Int32 = 0
    while Date() < deadline {
        if waitpid(pid, &status, WNOHANG) == pid {
            // Exited or killed by a signal: the status as the supervisor reads it.
            return .exited((status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f))
        }
        if memory.slot.readyGeneration == 1 {
            let stats = memory.slot.readStats() ?? WorkerStats()
            kill(pid, SIGKILL)
            while waitpid(pid, &status, 0) < 0, errno == EINTR {}
            return .ready(stats)
        }
        usleep(5_000)
    }
    kill(pid, SIGKILL)
    while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    throw HostFailure("the worker neither exited nor became ready")
}

/// Every entry under `root/windows`, with a file's bytes: what a restore must leave as it was.
private func snapshotOfFiles(_ root: URL) throws -> [String: Data] {
    let windows = root.appendingPathComponent(DiskLayout.windows)
    var result: [String: Data] = [:]
    guard let walker = FileManager.default.enumerator(atPath: windows.path) else { return result }
    while let relative = walker.nextObject() as? String {
        let path = windows.appendingPathComponent(relative).path
        var info = stat()
        guard lstat(path, &info) == 0 else { continue }
        result[relative] =
            (info.st_mode & S_IFMT) == S_IFREG ? try Data(contentsOf: URL(fileURLWithPath: path)) : Data()
    }
    return result
}
