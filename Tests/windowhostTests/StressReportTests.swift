import Foundation
import Glibc
import Testing

/// `windowhost stress --html`: the page a real campaign writes, and its progress lines.
@Suite struct StressReportTests {
    /// A short real campaign writes a private page with its timeline and verdicts; with stderr
    /// not a terminal, its progress comes as plain lines.
    @Test func aShortCampaignWritesItsPage() throws {
        let page = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-stress-\(UUID().uuidString).html")
        defer { try? FileManager.default.removeItem(at: page) }
        let (status, output) = try runWindowhost([
            "stress", "--seed", "4", "--duration", "3", "--kill-rate", "5", "--scenes", "2", "--html", page.path,
        ])
        #expect(status == 0, "\(output)")
        var info = stat()
        #expect(lstat(page.path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o777 == 0o600)
        let html = try String(contentsOf: page, encoding: .utf8)
        #expect(html.contains("<svg") && html.contains("class=\"bin worker_kill\""), "the timeline has a kill")
        #expect(
            html.contains("class=\"bin recovery\"") && html.contains("id=verdicts")
                && html.contains("Nothing acknowledged was lost"))
        #expect(html.contains("windowhost stress --seed 4 --scenes 2 --duration 3.0"))
        #expect(output.contains("windowhost stress: 100% kills"), "a plain progress line at the end: \(output)")
        #expect(
            !output.contains("\u{1B}") && !output.contains("\r"), "no control characters when stderr is not a terminal")
    }

    /// A campaign that fails (saves acknowledged before the sync, under power cuts) lists each
    /// failure on its page with the line that runs the same decisions again.
    @Test func aFailedCampaignsPageShowsTheReproducingLine() throws {
        let page = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-stress-bug-\(UUID().uuidString).html")
        defer { try? FileManager.default.removeItem(at: page) }
        var environment = ProcessInfo.processInfo.environment
        environment["WINDOWHOST_FAULT_ACK_BEFORE_SYNC"] = "1"
        let (status, output) = try runWindowhost(
            [
                "stress", "--power-cut", "--kills", "40", "--kill-rate", "20", "--scenes", "3", "--seed", "5",
                "--damage-one-in", "0", "--html", page.path,
            ],
            environment: environment, binary: windowhostFaultsBinary)
        #expect(status == 1, "\(output)")
        let html = try String(contentsOf: page, encoding: .utf8)
        let repro =
            "windowhost stress --seed 5 --scenes 3 --kills 40 --kill-rate 20.0 --save-delay 0 --damage-one-in 0 --move-one-in 10 --power-cut"
        #expect(html.contains("acknowledged commands lost (seed 5, step"), "\(html)")
        #expect(html.contains("<br>reproduce: <code>\(repro)</code></li>"))
        #expect(html.contains("class=\"mark recovery failed\""), "the failed recovery is marked on the timeline")
    }
}
