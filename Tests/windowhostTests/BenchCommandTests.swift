import Bench
import Foundation
import HostLimits
import TestSupport
import Testing

@Suite struct BenchCommandTests {
    /// The whole run, short: real worker processes on every contender, restore, round trips,
    /// and the files a script or a person reads.
    @Test func aShortRunMeasuresEveryContenderAndWritesJSONAndHTML() throws {
        let directory = temporaryRoot("bench")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { removeTestRoot(directory.path) }
        let json = directory.appendingPathComponent("bench.json")
        let html = directory.appendingPathComponent("bench.html")
        let (status, output) = try runWindowhost([
            "bench", "--quick", "--windows", "1,2", "--seconds", "0.2", "--rates", "200,400", "--tabs", "500", "--dir",
            directory.path,
            "--json", json.path, "--html", html.path,
        ])
        #expect(status == 0, "\(output)")
        #expect(output.contains("targets"))

        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any])
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(
            results.count == 2 * (2 * 5 + 2),
            "windows 1 and 2: small and large on five contenders, incognito on the store's two")
        #expect(
            results.filter { $0["size"] as? String == "incognito" }.compactMap { $0["engine"] as? String }.sorted() == [
                "sync", "sync", "uring", "uring",
            ])
        #expect(
            Set(results.compactMap { $0["engine"] as? String }) == [
                "floor", "floor-buffered", "uring", "sync", "rewrite",
            ])
        for result in results {
            #expect((result["saves_per_s"] as? Double ?? 0) > 0, "\(result)")
            // CPU per save for every row; the whole machine's at 1 window only.
            let cpu = result["cpu_per_save"] as? [String: Double]
            #expect((cpu?["user_us"] ?? 0) + (cpu?["system_us"] ?? 0) > 0, "\(result)")
            #expect(
                (result["machine_cpu_per_save"] is [String: Double]) == (result["windows"] as? Int == 1), "\(result)")
            #expect(
                (result["with_kernel_threads_cpu_per_save"] is [String: Double]) == (result["windows"] as? Int == 1),
                "\(result)")
            #expect(
                (result["p50_us"] as? Int ?? 0) > 0
                    && (result["max_us"] as? Int ?? 0) >= (result["p99_us"] as? Int ?? .max))
        }
        let floor = try #require(object["floor"] as? [String: Any])
        #expect((floor["p99_us"] as? Int ?? 0) > 0)
        let restore = try #require(object["restore"] as? [String: Any])
        #expect(restore["tabs"] as? Int == 500 && (restore["eager_ms"] as? Double ?? 0) > 0)
        // The long-history window, in its journal, with half its navigations, and compacted.
        let long = try #require(restore["long_histories"] as? [String: Any])
        #expect(long["tabs"] as? Int == 100 && long["navigations"] as? Int == 50, "\(long)")
        #expect(
            ["journal_ms", "half_journal_ms", "compacted_ms"].allSatisfy { (long[$0] as? Double ?? 0) > 0 }, "\(long)")
        // Host restores take the restore's size for their large window; each case runs without,
        // then with, a spare worker.
        let hostRestores = try #require(object["host_restore"] as? [[String: Any]])
        #expect(hostRestores.compactMap { $0["tabs"] as? Int } == [20, 20, 500, 500, 500, 500])
        #expect(
            hostRestores.compactMap { $0["shape"] as? String }
                == ["journal", "journal", "journal", "journal", "compacted", "compacted"])
        #expect(hostRestores.compactMap { $0["spare"] as? Bool } == [false, true, false, true, false, true])
        #expect(
            hostRestores.allSatisfy { ($0["p50_ms"] as? Double ?? 0) > 0 && ($0["anon_kib"] as? Int ?? 0) > 0 },
            "\(hostRestores)")
        let coordination = try #require(object["coordination"] as? [String: Any])
        #expect(
            (coordination["shm_rtt_p50_us"] as? Double ?? 0) > 0 && (coordination["ctl_p50_us"] as? Double ?? 0) > 0)
        // The device's write and flush apart, both real: each at least a microsecond.
        let device = try #require(object["device"] as? [String: Any])
        #expect((device["write_p50_us"] as? Int ?? 0) > 0 && (device["flush_p50_us"] as? Int ?? 0) > 0, "\(device)")
        // The open loop: both engines at 1 and 4 windows, at each rate up to where sync falls
        // behind (200/s keeps up on any disk: at least that point for each).
        let openLoop = try #require(object["open_loop"] as? [[String: Any]])
        for engine in ["uring", "sync"] {
            for windows in [1, 4] {
                let points = openLoop.filter { $0["engine"] as? String == engine && $0["windows"] as? Int == windows }
                #expect(points.first?["offered_per_s"] as? Double == 200, "\(engine) ×\(windows)")
                for point in points {
                    let offered = point["offered_per_s"] as? Double ?? 0
                    #expect(
                        (point["achieved_per_s"] as? Double ?? 0) > 0.5 * offered
                            && (point["achieved_per_s"] as? Double ?? .infinity) <= 1.01 * offered, "\(point)")
                    #expect(
                        (point["p50_us"] as? Int ?? 0) > 0
                            && (point["p99_us"] as? Int ?? 0) >= (point["p50_us"] as? Int ?? .max), "\(point)")
                }
            }
        }
        let firstSave = try #require(object["first_save"] as? [String: [String: Any]])
        #expect((firstSave["uring"]?["p50_us"] as? Int ?? 0) > 0 && (firstSave["sync"]?["p50_us"] as? Int ?? 0) > 0)
        let targets = try #require(object["targets"] as? [[String: Any]])
        #expect(targets.contains { ($0["name"] as? String)?.hasPrefix("open loop, 4 windows") == true })
        // fio, the referee: every case ran (scripts/test.sh installs it), beside the floor.
        #expect(object["fio_problem"] == nil, "\(object["fio_problem"] ?? "")")
        let fio = try #require(object["fio"] as? [[String: Any]])
        #expect(
            fio.map { "\($0["engine"] ?? "") \($0["jobs"] ?? "") \($0["depth"] ?? "")" } == [
                "pvsync2 1 1", "io_uring 1 1", "io_uring 1 \(Limits.maxSavesInFlight)", "pvsync2 8 1", "io_uring 8 1",
                "io_uring 8 \(Limits.maxSavesInFlight)",
            ])
        for row in fio { #expect((row["writes_per_s"] as? Double ?? 0) > 0 && row["failure"] == nil, "\(row)") }
        #expect(output.contains("fio, the outside referee") && output.contains("CPU per save"))
        #expect(
            targets.contains {
                ($0["name"] as? String)?.hasPrefix("CPU per small save, 1 window") == true && $0["met"] is Bool
            })

        let page = try String(contentsOf: html, encoding: .utf8)
        #expect(page.contains("<svg") && page.contains("<title>rewrite</title>"))
        #expect(page.contains("open loop: p99 against offered rate") && page.contains("<title>sync, 4 windows</title>"))
        // Its working directory is gone; only the two reports are left.
        #expect(
            try Set(FileManager.default.contentsOfDirectory(atPath: directory.path)) == ["bench.json", "bench.html"])
    }

    @Test func badArgumentsExitWithUsage() throws {
        for arguments in [
            ["--windows", "0"], ["--windows", "1,x"], ["--seconds", "0"], ["--tabs", "-3"], ["--rounds", "0"],
            ["--rates", "0"], ["--rates", "100,x"],
            ["--rates", (1...(BenchPlan.maxOpenLoopRates + 1)).map { "\($0 * 100)" }.joined(separator: ",")],
        ] {
            #expect(try runWindowhost(["bench"] + arguments).status == 64, "\(arguments)")
        }
    }
}
