import BrowserModel
import Foundation
import Glibc
import Histogram
import HostControl
import Stress
import SystemPackage

/// How a window waiting to be restored is held on disk.
public enum HostRestoreShape: String, Codable, Sendable, CaseIterable {
    /// Every tab in the first generation's journal: a window that never compacted.
    case journal
    /// A snapshot, then a few saves in its journal (`RestoreBench.save`).
    case compacted
}

/// Restores through the real host, as a user of `ctl kill` feels them: a window's worker
/// killed with SIGKILL, and the time until its replacement is ready (`KillReply.recoveryMs`:
/// the supervisor's own measure, from the death it noticed to the ready it read). Then the
/// replacement's memory beside an empty window's worker in the same host.
public struct HostRestoreResult: Codable, Sendable, Equatable {
    public var tabs: Int
    public var shape: HostRestoreShape
    /// Whether the supervisor kept a spare worker (`run --no-spare` when not): with one, each
    /// kill waits for a spare to wait, so every restart is a hand-over.
    public var spare: Bool
    public var kills: Int
    public var p50Milliseconds: Double
    public var p99Milliseconds: Double
    /// The last replacement's proportional set size and anonymous memory (`smaps_rollup`), KiB.
    public var pssKiB: Int
    public var anonymousKiB: Int
    /// The same of the host's other window, which holds no tab.
    public var emptyPssKiB: Int
    public var emptyAnonymousKiB: Int

    enum CodingKeys: String, CodingKey {
        case tabs, shape, spare, kills
        case p50Milliseconds = "p50_ms"
        case p99Milliseconds = "p99_ms"
        case pssKiB = "pss_kib"
        case anonymousKiB = "anon_kib"
        case emptyPssKiB = "empty_pss_kib"
        case emptyAnonymousKiB = "empty_anon_kib"
    }

    /// Anonymous memory the restored tabs cost the worker, KiB (negative when the empty
    /// window's worker happens to hold more).
    public var anonymousOverEmptyKiB: Int { anonymousKiB - emptyAnonymousKiB }
}

public enum HostRestoreBench {
    /// The small window's tabs.
    public static let smallTabs = 20

    /// The windows measured: a small one, and one of `largeTabs` (the restore case's, `--tabs`)
    /// in each shape.
    public static func cases(largeTabs: Int) -> [(tabs: Int, shape: HostRestoreShape)] {
        [(smallTabs, .journal), (largeTabs, .journal), (largeTabs, .compacted)]
    }

    /// For each case, without and with a spare worker: a window of that shape saved under a
    /// root of its own, a `windowhost run --scenes 2` started on it (the saved window first,
    /// then an empty one), and its worker killed `kills` times, each waited for until the
    /// replacement is ready.
    public static func run(
        executable: String, kills: Int, directory: FilePath, cases: [(tabs: Int, shape: HostRestoreShape)]
    ) throws -> [HostRestoreResult] {
        precondition(kills > 0, "a restore is measured by killing at least once")
        var results: [HostRestoreResult] = []
        for (index, measured) in cases.enumerated() {
            for spare in [false, true] {
                let root = directory.appending("host-\(index)" + (spare ? "-spare" : ""))
                let window = UUID()
                switch measured.shape {
                case .compacted: try RestoreBench.save(window, tabs: measured.tabs, directory: root)
                case .journal: try RestoreBench.saveInJournalOnly(window, tabs: measured.tabs, directory: root)
                }
                results.append(
                    try measure(
                        executable: executable, root: root, window: window, tabs: measured.tabs,
                        shape: measured.shape, spare: spare, kills: kills))
            }
        }
        return results
    }

    /// How long a kill waits for the host's spare to wait before it is measured.
    static let spareWaitSeconds = 10.0

    private static func measure(
        executable: String, root: FilePath, window: UUID, tabs: Int, shape: HostRestoreShape, spare: Bool, kills: Int
    ) throws -> HostRestoreResult {
        let supervisor = try SupervisorProcess(
            executable: executable, root: root, arguments: ["--scenes", "2"] + (spare ? [] : ["--no-spare"]),
            environment: [:])
        defer { _ = supervisor.shutdown() }
        var times = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
        var restoredPID: Int32 = 0
        for _ in 0..<kills {
            if spare { try waitForSpare(supervisor) }
            let reply = supervisor.call(.window(window, .kill(signal: SIGKILL, wait: true, aim: nil)))
            guard reply.code == .ok, let killed = try? reply.decode(KillReply.self),
                let milliseconds = killed.recoveryMs, let pid = killed.pid
            else {
                throw BenchError.worker("ctl kill of the \(tabs)-tab window: \(reply.error ?? "\(reply.code)")")
            }
            _ = times.record(UInt64(max(1, min(milliseconds * 1000, 3_600_000_000))))
            restoredPID = pid
        }
        // Two round trips through the worker: the second is taken after the first turn of its
        // loop, where the fallback generation is read, so the memory read next is the window's
        // at rest, not mid-check.
        for _ in 0..<2 {
            let saved = supervisor.call(.window(window, .save(wait: true)))
            guard saved.code == .ok else {
                throw BenchError.worker("ctl save of the \(tabs)-tab window: \(saved.error ?? "\(saved.code)")")
            }
        }
        guard let status = try? supervisor.call(.status).decode(StatusReply.self),
            let empty = status.windows.first(where: { $0.uuid != window.uuidString && $0.pid > 0 }),
            let restored = status.windows.first(where: { $0.uuid == window.uuidString }), restored.tabs == UInt64(tabs)
        else {
            throw BenchError.worker("the host does not show the \(tabs)-tab window restored beside an empty one")
        }
        // Killed windows make no save, so none compacts: the shape measured is the shape saved.
        let snapshots = try FileManager.default.contentsOfDirectory(
            atPath: DiskLayout.browserDirectory(root: root, id: window, kind: .regular).string
        ).filter { DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix) != nil }
        guard shape == .compacted || snapshots == [DiskLayout.snapshotName(1)] else {
            throw BenchError.worker(
                "the \(tabs)-tab window held in its journal was compacted while measured: \(snapshots)")
        }
        let restoredMemory = try memory(of: restoredPID)
        let emptyMemory = try memory(of: empty.pid)
        return HostRestoreResult(
            tabs: tabs, shape: shape, spare: spare, kills: kills,
            p50Milliseconds: Double(times.valueAtPercentile(50)) / 1000,
            p99Milliseconds: Double(times.valueAtPercentile(99)) / 1000,
            pssKiB: restoredMemory.pss, anonymousKiB: restoredMemory.anonymous, emptyPssKiB: emptyMemory.pss,
            emptyAnonymousKiB: emptyMemory.anonymous)
    }

    /// Until the host's spare waits (`spareWaitSeconds` at most): the next kill's restart is
    /// then a hand-over.
    private static func waitForSpare(_ supervisor: SupervisorProcess) throws {
        let deadline = Date().addingTimeInterval(spareWaitSeconds)
        while (try? supervisor.call(.status).decode(StatusReply.self))?.spare != .waiting {
            guard Date() < deadline else {
                throw BenchError.worker("no spare worker waited within \(spareWaitSeconds) s")
            }
            usleep(1_000)
        }
    }

    /// `Pss` and `Anonymous` of `/proc/PID/smaps_rollup`, KiB.
    static func memory(of pid: Int32) throws -> (pss: Int, anonymous: Int) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else {
            throw BenchError.worker("cannot read /proc/\(pid)/smaps_rollup")
        }
        func field(_ name: String) -> Int? {
            let line = text.split(separator: "\n").first { $0.hasPrefix(name + ":") }
            return line?.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
        }
        guard let pss = field("Pss"), let anonymous = field("Anonymous") else {
            throw BenchError.worker("/proc/\(pid)/smaps_rollup has no Pss or Anonymous line")
        }
        return (pss, anonymous)
    }
}
