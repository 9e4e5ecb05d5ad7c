import Foundation
import SystemPackage
import TestSupport
import Testing

@testable import Bench

/// The move bench through a real `windowhost run`: a tab moved back and forth between its two
/// windows, each move timed beside a small save of the same host, and the report's target read
/// from both.
@Suite struct MoveBenchTests {
    @Test func eachMoveIsTimedBesideASmallSaveAndTheTargetIsTheirRatio() throws {
        let directory = FilePath(FileManager.default.temporaryDirectory.path).appending(
            "windowhost-moves-\(UUID().uuidString.prefix(8))")
        defer { removeTestRoot(directory.string) }
        let result = try MoveBench.run(executable: HostRestoreBenchTests.binary, moves: 20, directory: directory)
        #expect(result.moves == 20)
        #expect(result.p50Milliseconds > 0 && result.p50Milliseconds <= result.p99Milliseconds, "\(result)")
        #expect(result.saveP50Milliseconds > 0 && result.saveP50Milliseconds <= result.saveP99Milliseconds)
        #expect(result.ratio == result.p50Milliseconds / result.saveP50Milliseconds)
        print(
            "MoveBenchTests: move p50 \(result.p50Milliseconds) ms, p99 \(result.p99Milliseconds) ms; "
                + "small save p50 \(result.saveP50Milliseconds) ms, p99 \(result.saveP99Milliseconds) ms; ratio \(result.ratio)"
        )
        let report = BenchReport(
            date: "", machine: "", directory: "", secondsPerCase: 1, results: [], restore: nil, coordination: nil,
            moves: result)
        let target = try #require(report.targets.first { $0.name.hasPrefix("a move between windows") })
        #expect(target.measured == result.ratio && target.met == (result.ratio <= 3))
        #expect(report.text.contains("move a tab between windows"))
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as? [String: Any]
        #expect((json?["moves"] as? [String: Any])?["save_p50_ms"] != nil)
    }
}
