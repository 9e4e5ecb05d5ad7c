import Foundation
import HostLimits
import SystemPackage
import TestSupport
import Testing

@testable import Bench

private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

private func fixture(_ name: String) throws -> Data { try Data(contentsOf: fixtures.appendingPathComponent(name)) }

/// The 1-job io_uring fixture with `change` made to its one job's `write` object.
private func hostile(_ change: (inout [String: Any]) -> Void) throws -> Data {
    var root = try #require(
        try JSONSerialization.jsonObject(with: fixture("fio-io_uring-depth4-1job.json")) as? [String: Any])
    var jobs = try #require(root["jobs"] as? [[String: Any]])
    var write = try #require(jobs[0]["write"] as? [String: Any])
    change(&write)
    jobs[0]["write"] = write
    root["jobs"] = jobs
    return try JSONSerialization.data(withJSONObject: root)
}

private func latency(_ write: inout [String: Any], _ key: String, _ value: Any?) {
    var lat = write["lat_ns"] as? [String: Any] ?? [:]
    var percentile = lat["percentile"] as? [String: Any] ?? [:]
    percentile[key] = value
    lat["percentile"] = percentile
    write["lat_ns"] = lat
}

/// The error fio's parse threw, or nil when it parsed.
private func parseError(_ data: Data) -> FioError? {
    do {
        _ = try FioBench.parse(data)
        return nil
    } catch {
        return error
    }
}

@Suite struct FioParseTests {
    /// Output fio 3.33 wrote on this machine (`--group_reporting --lat_percentiles=1
    /// --output-format=json`): the figures are the write side's, latency in µs.
    @Test func realOutputGivesItsRateAndPercentiles() throws {
        let uring = try FioBench.parse(fixture("fio-io_uring-depth4-1job.json"))
        #expect(abs(uring.writesPerSecond - 14032.967033) < 0.001)
        #expect(uring.p50 == 142 && uring.p99 == 4014)
        let eightJobs = try FioBench.parse(fixture("fio-pvsync2-depth1-8jobs.json"))
        #expect(abs(eightJobs.writesPerSecond - 31604.373757) < 0.001)
        #expect(eightJobs.p50 == 144 && eightJobs.p99 == 3751)
    }

    /// fio printed its complaint before the JSON, whose job carries EINVAL: a failed job, not
    /// a figure, and not a JSON error.
    @Test func aJobErrorAfterLinesOfNotesIsTheJobsFailure() throws {
        let data = try fixture("fio-direct-io-refused.json")
        #expect(String(decoding: data.prefix(4), as: UTF8.self) == "fio:")
        #expect(parseError(data) == .jobFailed(errno: 22))
        #expect("\(FioError.jobFailed(errno: 22))".contains("Invalid argument"))
    }

    @Test func hostileOrBrokenOutputIsRefusedWithTheReason() throws {
        let cases: [(String, Data)] = [
            ("empty", Data()),
            ("not JSON", Data("fio: something went wrong\n".utf8)),
            ("truncated", try fixture("fio-io_uring-depth4-1job.json").prefix(900)),
            ("no jobs key", Data(#"{"fio version": "fio-3.33"}"#.utf8)),
            ("no job", Data(#"{"jobs": []}"#.utf8)),
            ("no write", try hostile { $0 = [:] }),
            ("negative rate", try hostile { $0["iops"] = -5.0 }),
            ("rate of no disk", try hostile { $0["iops"] = 1e12 }),
            ("rate against the count", try hostile { $0["iops"] = 99_999.0 }),
            ("no writes", try hostile { $0["total_ios"] = 0 }),
            ("negative count", try hostile { $0["total_ios"] = -1 }),
            ("fractional count", try hostile { $0["total_ios"] = 1.5 }),
            ("count past UInt64", try hostile { $0["total_ios"] = 1e30 }),
            ("no runtime", try hostile { $0["runtime"] = 0 }),
            ("rate as a string", try hostile { $0["iops"] = "14032" }),
            ("no p99", try hostile { latency(&$0, "99.000000", nil) }),
            ("p50 over p99", try hostile { latency(&$0, "50.000000", 9_000_000) }),
            ("zero p50", try hostile { latency(&$0, "50.000000", 0) }),
            ("negative percentile", try hostile { latency(&$0, "50.000000", -3) }),
            ("percentile as a string", try hostile { latency(&$0, "99.000000", "fast") }),
            ("a latency of days", try hostile { latency(&$0, "99.000000", 400_000_000_000_000) }),
            ("no percentiles", try hostile { $0["lat_ns"] = ["min": 1] }),
        ]
        for (name, data) in cases {
            let error = parseError(data)
            guard case .malformed(let why) = error else {
                Issue.record("\(name): \(error.map { "\($0)" } ?? "parsed")")
                continue
            }
            #expect(!why.isEmpty && why.count < 300, "\(name): \(why)")
        }
        // Two job reports: not the one --group_reporting gives.
        let single = try #require(
            try JSONSerialization.jsonObject(with: fixture("fio-io_uring-depth4-1job.json")) as? [String: Any])
        let job = try #require((single["jobs"] as? [Any])?.first)
        let twoJobs = try JSONSerialization.data(withJSONObject: ["jobs": [job, job]])
        #expect(parseError(twoJobs).map { "\($0)" }?.contains("2 job reports") == true)
    }

    @Test func outputLargerThanFioWouldPrintIsRefusedUnread() {
        let huge = Data(repeating: UInt8(ascii: " "), count: FioBench.maxOutputBytes + 1)
        #expect(parseError(huge).map { "\($0)" }?.contains("more than") == true)
    }
}

@Suite struct FioRunTests {
    /// The bench's fio step, for real: every case on a small directory on this disk, each
    /// for a fraction of a second. fio must be installed (scripts/test.sh installs it).
    @Test func theRefereeRunsEveryCaseAndLeavesNothingBehind() throws {
        #expect(FioBench.locate() != nil, "fio is not on PATH: scripts/test.sh installs Debian's fio")
        let directory = FilePath(
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "windowhost-fio-\(UUID().uuidString.prefix(8))"
            ).path)
        try FileManager.default.createDirectory(atPath: directory.string, withIntermediateDirectories: true)
        defer { removeTestRoot(directory.string) }
        var started: [Int] = []
        let (results, problem) = FioBench.run(FioBench.cases, seconds: 0.25, directory: directory) { index, _ in
            started.append(index)
        }
        #expect(problem == nil, "\(problem ?? "")")
        #expect(started == Array(0..<6))
        #expect(
            results.map { "\($0.engine) \($0.jobs) \($0.depth)" } == [
                "pvsync2 1 1", "io_uring 1 1", "io_uring 1 \(Limits.maxSavesInFlight)", "pvsync2 8 1", "io_uring 8 1",
                "io_uring 8 \(Limits.maxSavesInFlight)",
            ])
        for result in results {
            #expect(result.failure == nil, "\(result)")
            #expect(
                (result.writesPerSecond ?? 0) > 0 && (result.p50 ?? 0) > 0 && (result.p50 ?? .max) <= (result.p99 ?? 0),
                "\(result)")
            #expect(result.block.map { $0 >= 512 && $0 & ($0 - 1) == 0 } == true, "the directory's direct I/O block")
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.string).isEmpty,
            "fio's private directory is gone")
    }

    @Test func fioIsFoundOnlyThroughAbsolutePathEntries() throws {
        #expect(FioBench.locate(searchPath: "/nonexistent-dir:relative/bin:") == nil)
        #expect(FioBench.locate(searchPath: nil) == nil)
        #expect(FioBench.locate(searchPath: "/nonexistent-dir:/usr/bin") == "/usr/bin/fio")
    }

    /// A child that runs too long is killed at its timeout, one that fails is reported with
    /// its first line of standard error, one killed by a signal says which: none throws past
    /// the step.
    @Test func aChildThatHangsFailsOrDiesIsReportedNotFatal() throws {
        let directory = FilePath(
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "windowhost-fio-\(UUID().uuidString.prefix(8))"
            ).path)
        try FileManager.default.createDirectory(atPath: directory.string, withIntermediateDirectories: true)
        defer { removeTestRoot(directory.string) }
        func outcome(_ arguments: [String], timeout: Double = 10) -> FioError? {
            do {
                _ = try FioBench.runChild(arguments, in: directory, timeout: timeout)
                return nil
            } catch {
                return error
            }
        }
        let start = Date()
        #expect(outcome(["/bin/sleep", "30"], timeout: 0.2) == .timedOut(seconds: 0.2))
        #expect(Date().timeIntervalSince(start) < 5, "killed at its timeout, not waited for")
        #expect(
            outcome(["/bin/sh", "-c", "echo 'fio: bad option' >&2; exit 3"])
                == .exited(status: 3, message: "fio: bad option"))
        #expect(outcome(["/bin/sh", "-c", "kill -9 $$"]) == .killed(signal: 9))
        #expect(
            outcome(["/nonexistent/fio"]).map { if case .exited(127, _) = $0 { true } else { false } } == true,
            "exec failed")
        let printed = try FioBench.runChild(["/bin/sh", "-c", "echo '{}'"], in: directory, timeout: 10)
        #expect(String(decoding: printed, as: UTF8.self) == "{}\n")
    }
}
