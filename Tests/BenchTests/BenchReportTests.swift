import Foundation
import Testing

@testable import Bench

/// A row whose every save took `microseconds`, `saves` of them over one second.
private func row(_ engine: Contender, _ size: SaveSize = .small, windows: Int = 1, microseconds: UInt64, saves: UInt64) -> SaveResult {
    var worker = WorkerResult()
    for _ in 0..<saves { _ = worker.latency.record(microseconds) }
    worker.saves = saves
    worker.bytes = saves * 256
    worker.seconds = 1
    return SaveResult(engine: engine, windows: windows, size: size, workers: [worker])
}

private func report(_ results: [SaveResult], restore: RestoreResult? = nil, coordination: CoordinationResult? = nil) -> BenchReport {
    BenchReport(
        date: "2026-11-22T00:00:00Z", machine: "test", directory: "/nowhere", secondsPerCase: 1, results: results, restore: restore,
        coordination: coordination)
}

@Suite struct BenchReportTests {
    @Test func ratiosAreAgainstTheFloorAndTheRewriteOfTheSameSizeAndWindows() {
        let built = report([
            row(.floor, microseconds: 200, saves: 5000), row(.uring, microseconds: 250, saves: 4000),
            row(.rewrite, microseconds: 2000, saves: 500), row(.uring, windows: 8, microseconds: 900, saves: 9000),
            row(.rewrite, windows: 8, microseconds: 5000, saves: 1500), row(.sync, windows: 8, microseconds: 800, saves: 10000),
        ])
        let uring1 = try! #require(built.results.first { $0.engine == "uring" && $0.windows == 1 })
        #expect(abs((uring1.p99OverFloor ?? 0) - 1.25) < 0.01)
        #expect(abs((uring1.savesOverRewrite ?? 0) - 8) < 0.01)
        // No floor at 8 windows: no ratio rather than a wrong one.
        #expect(built.results.first { $0.engine == "uring" && $0.windows == 8 }?.p99OverFloor == nil)
        #expect(built.floor == BenchReport.Floor(p50: 200, p99: 200))

        let targets = Dictionary(uniqueKeysWithValues: built.targets.map { ($0.name, $0) })
        #expect(targets["uring small p99, 1 window, over floor p99"]?.met == true)
        #expect(targets["uring small saves/s at 8 windows over rewrite"]?.met == true)
        #expect(targets["uring small saves/s at 8 windows over sync"]?.met == false, "9000/s is less than sync's 10000/s")
        #expect(targets["restore: eager time over unrealized time"]?.met == nil, "not measured, not passed")
        #expect(built.text.contains("MISSED") && built.text.contains("not measured"))
    }

    @Test func theJSONCarriesTheFieldsScriptsRead() throws {
        let built = report(
            [row(.floor, microseconds: 100, saves: 10), row(.uring, .large, microseconds: 3000, saves: 10)],
            restore: RestoreResult(tabs: 10_000, unrealizedMilliseconds: 5, eagerMilliseconds: 80),
            coordination: CoordinationResult(
                shmRoundTripP50: 8, shmRoundTripP99: 20, socketRoundTripP50: 12, socketRoundTripP99: 30, ctlP50: 90, ctlP99: 200))
        let object = try #require(JSONSerialization.jsonObject(with: built.json()) as? [String: Any])
        let floor = try #require(object["floor"] as? [String: Any])
        #expect(floor["p50_us"] as? Int == 100 && floor["p99_us"] as? Int == 100)
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(results.count == 2)
        for key in ["engine", "windows", "size", "saves_per_s", "mb_per_s", "p50_us", "p99_us", "p999_us", "max_us"] {
            #expect(results.allSatisfy { $0[key] != nil }, "\(key)")
        }
        #expect(results[1]["size"] as? String == "large" && results[1]["p99_us"] as? Int == 3000)
        let restore = try #require(object["restore"] as? [String: Any])
        #expect(restore["tabs"] as? Int == 10_000 && restore["unrealized_ms"] as? Double == 5 && restore["eager_ms"] as? Double == 80)
        let coordination = try #require(object["coordination"] as? [String: Any])
        for key in ["shm_rtt_p50_us", "socket_rtt_p50_us", "ctl_p50_us"] { #expect(coordination[key] is Double, "\(key)") }
        let targets = try #require(object["targets"] as? [[String: Any]])
        #expect(targets.contains { $0["name"] as? String == "restore: eager time over unrealized time" && $0["met"] as? Bool == true })
    }

    @Test func theHTMLPageIsSelfContainedWithAChartLinePerEngine() {
        let built = report(
            Contender.allCases.flatMap { engine in
                [1, 4].map { row(engine, windows: $0, microseconds: engine == .rewrite ? 3000 : 300, saves: 100) }
            })
        let page = built.html
        #expect(page.hasPrefix("<!doctype html>"))
        #expect(!page.contains("<script") && !page.contains("src=") && !page.contains("href="))
        // Small saves: saves/s against windows, and latency curves at 1 and at 4 windows.
        #expect(page.components(separatedBy: "<svg").count - 1 == 3)
        for engine in Contender.allCases {
            #expect(page.components(separatedBy: "<title>\(engine.rawValue)</title>").count - 1 == 3, "\(engine)")
        }
        #expect(!page.contains("nan") && !page.contains("inf"))
    }
}

@Suite struct SaveLoopTests {
    final class CountingWorkload: SaveWorkload {
        var prepared = 0
        var saved = 0
        var failAfter: Int?
        var bytesWritten: UInt64 { UInt64(saved * 10) }
        func prepare() throws { prepared += 1 }
        func save() throws {
            if let failAfter, saved >= failAfter { throw BenchError.worker("disk gone") }
            usleep(1_000)
            saved += 1
        }
    }

    @Test func everySaveIsCountedAndTimedAndAFailureEndsTheLoopNamed() {
        let workload = CountingWorkload()
        let result = WorkerResult.measure(workload, seconds: 0.1)
        #expect(result.saves == UInt64(workload.saved) && result.saves > 10)
        #expect(result.latency.totalCount == result.saves)
        #expect(result.latency.valueAtPercentile(50) >= 1_000, "each save slept 1 ms")
        #expect(result.bytes == result.saves * 10)
        #expect(result.failure == nil)

        let failing = CountingWorkload()
        failing.failAfter = 3
        let failed = WorkerResult.measure(failing, seconds: 5)
        #expect(failed.saves == 3 && failed.failure == "disk gone")
    }
}
