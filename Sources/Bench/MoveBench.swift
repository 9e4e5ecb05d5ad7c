import Foundation
import Histogram
import HostControl
import Stress
import SystemPackage

/// Moves of one tab between two windows of a real host (`move-to-window`), each timed from the
/// request to its answer, which comes once the move is durable on both sides; beside a single
/// small change of the same host made durable the same way (`navigate`, then `wait-durable`),
/// the save a move is measured against.
public struct MoveBenchResult: Codable, Sendable, Equatable {
    public var moves: Int
    public var p50Milliseconds: Double
    public var p99Milliseconds: Double
    public var saveP50Milliseconds: Double
    public var saveP99Milliseconds: Double

    enum CodingKeys: String, CodingKey {
        case moves
        case p50Milliseconds = "p50_ms"
        case p99Milliseconds = "p99_ms"
        case saveP50Milliseconds = "save_p50_ms"
        case saveP99Milliseconds = "save_p99_ms"
    }

    /// A move's p50 over a small save's: the target is ≤ 3 (a move is three synced writes in a
    /// row: the supervisor's log, the destination's import, the source's drop).
    public var ratio: Double { saveP50Milliseconds > 0 ? p50Milliseconds / saveP50Milliseconds : .infinity }
}

public enum MoveBench {
    /// `moves` moves of one tab back and forth between the two windows of a host rooted in
    /// `directory`, interleaved with as many small saves, so both see the same disk.
    public static func run(executable: String, moves: Int, directory: FilePath) throws -> MoveBenchResult {
        precondition(moves > 0, "a move is measured by moving at least once")
        try FileManager.default.createDirectory(
            atPath: directory.string, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let supervisor = try SupervisorProcess(
            // No save delay: the small change saves at once, as a move's steps do whatever the delay.
            executable: executable, root: directory.appending("root"),
            arguments: ["--scenes", "2", "--save-delay", "0"],
            environment: [:])
        defer { _ = supervisor.shutdown() }
        guard let status = try? supervisor.call(.status).decode(StatusReply.self), status.windows.count == 2,
            let first = UUID(uuidString: status.windows[0].uuid), let second = UUID(uuidString: status.windows[1].uuid)
        else {
            throw BenchError.worker("the move bench's host does not show two windows")
        }
        var windows = (from: first, to: second)
        let opened = supervisor.call(
            .window(
                windows.from,
                .tab(
                    .open(url: "https://moving.example/", incognito: false, index: nil, opener: nil, background: false))
            ))
        guard var tab = (try? opened.decode(CommandReply.self))?.tab else {
            throw BenchError.worker("open in the move bench: \(opened.error ?? "\(opened.code)")")
        }
        var moveTimes = histogram()
        var saveTimes = histogram()
        for round in 0..<moves {
            let savedIn = try timed { try saveOnce(supervisor, windows.to, round: round) }
            _ = saveTimes.record(savedIn)
            var moved: MoveReply?
            let movedIn = try timed {
                let reply = supervisor.call(.moveToWindow(from: windows.from, tab: tab, to: windows.to, index: nil))
                guard reply.code == .ok, let answer = try? reply.decode(MoveReply.self) else {
                    throw BenchError.worker("move-to-window: \(reply.error ?? "\(reply.code)")")
                }
                moved = answer
            }
            _ = moveTimes.record(movedIn)
            tab = moved?.tab ?? tab
            windows = (windows.to, windows.from)
        }
        return MoveBenchResult(
            moves: moves, p50Milliseconds: Double(moveTimes.valueAtPercentile(50)) / 1000,
            p99Milliseconds: Double(moveTimes.valueAtPercentile(99)) / 1000,
            saveP50Milliseconds: Double(saveTimes.valueAtPercentile(50)) / 1000,
            saveP99Milliseconds: Double(saveTimes.valueAtPercentile(99)) / 1000)
    }

    /// A small change of `window` (a tab opened in the background) made durable, as a client
    /// does it: the change, then `wait-durable` for its seq.
    private static func saveOnce(_ supervisor: SupervisorProcess, _ window: UUID, round: Int) throws {
        let url = "https://saved.example/\(round)"
        let changed = supervisor.call(
            .window(window, .tab(.open(url: url, incognito: false, index: nil, opener: nil, background: true))))
        guard changed.code == .ok, let seq = (try? changed.decode(CommandReply.self))?.seq else {
            throw BenchError.worker("a small change in the move bench: \(changed.error ?? "\(changed.code)")")
        }
        let durable = supervisor.call(.window(window, .waitDurable(seq: seq)))
        guard durable.code == .ok else {
            throw BenchError.worker("wait-durable in the move bench: \(durable.error ?? "\(durable.code)")")
        }
    }

    private static func histogram() -> Histogram<UInt64> {
        Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    }

    /// Microseconds `body` took (at least 1).
    private static func timed(_ body: () throws -> Void) throws -> UInt64 {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        return max(1, (DispatchTime.now().uptimeNanoseconds - start) / 1000)
    }
}
