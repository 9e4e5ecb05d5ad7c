import Foundation
import Testing

@Suite struct BenchCommandTests {
    /// The whole run, short: real worker processes on every contender, restore, round trips,
    /// and the files a script or a person reads.
    @Test func aShortRunMeasuresEveryContenderAndWritesJSONAndHTML() throws {
        let directory = temporaryRoot("bench")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("bench.json")
        let html = directory.appendingPathComponent("bench.html")
        let (status, output) = try runWindowhost([
            "bench", "--quick", "--windows", "1,2", "--seconds", "0.2", "--tabs", "500", "--dir", directory.path,
            "--json", json.path, "--html", html.path,
        ])
        #expect(status == 0, "\(output)")
        #expect(output.contains("targets"))

        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any])
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(results.count == 2 * 2 * 4, "windows 1 and 2, small and large, four contenders")
        for result in results {
            #expect((result["saves_per_s"] as? Double ?? 0) > 0, "\(result)")
            #expect((result["p50_us"] as? Int ?? 0) > 0 && (result["max_us"] as? Int ?? 0) >= (result["p99_us"] as? Int ?? .max))
        }
        let floor = try #require(object["floor"] as? [String: Any])
        #expect((floor["p99_us"] as? Int ?? 0) > 0)
        let restore = try #require(object["restore"] as? [String: Any])
        #expect(restore["tabs"] as? Int == 500 && (restore["eager_ms"] as? Double ?? 0) > 0)
        let coordination = try #require(object["coordination"] as? [String: Any])
        #expect((coordination["shm_rtt_p50_us"] as? Double ?? 0) > 0 && (coordination["ctl_p50_us"] as? Double ?? 0) > 0)

        let page = try String(contentsOf: html, encoding: .utf8)
        #expect(page.contains("<svg") && page.contains("<title>rewrite</title>"))
        // Its working directory is gone; only the two reports are left.
        #expect(try Set(FileManager.default.contentsOfDirectory(atPath: directory.path)) == ["bench.json", "bench.html"])
    }

    @Test func badArgumentsExitWithUsage() throws {
        for arguments in [["--windows", "0"], ["--windows", "1,x"], ["--seconds", "0"], ["--tabs", "-3"], ["--rounds", "0"]] {
            #expect(try runWindowhost(["bench"] + arguments).status == 64, "\(arguments)")
        }
    }
}
