import Foundation
import Glibc
import SystemPackage
import TestSupport
import Testing

@testable import Stress

/// `stress --html`'s page, its file, and the progress line of `stress` and `bench`.
@Suite struct CampaignReportPageTests {
    /// A campaign report made by hand: three worker kills (one after damage), a supervisor kill,
    /// four recoveries of which one torn; a window name, a failure and a hostile event carrying
    /// markup.
    private func fabricatedReport() -> CampaignReport {
        var report = CampaignReport(seed: 9, scenes: 2)
        report.kills = 4
        report.supervisorKills = 1
        report.corruptions = 2
        report.recoveries = 4
        report.torn = 1
        report.durationS = 10
        report.reproduce =
            "windowhost stress --seed 9 --scenes 2 --kills 4 --kill-rate 5.0 --save-delay 0 --damage-one-in 12 --io sync"
        let hostileWindow = "\"><script>alert(2)</script>"
        report.timeline = [
            CampaignEvent(kind: .workerKill, at: 1, window: "A", recoveryMs: 30),
            CampaignEvent(kind: .recovery, at: 1.1, window: "A", verdict: .intact),
            CampaignEvent(kind: .damage, at: 2, window: hostileWindow),
            CampaignEvent(kind: .workerKill, at: 2.1, window: hostileWindow, recoveryMs: 40),
            CampaignEvent(kind: .recovery, at: 2.2, window: hostileWindow, verdict: .torn),
            CampaignEvent(kind: .supervisorKill, at: 5, recoveryMs: 200),
            CampaignEvent(kind: .recovery, at: 5.3, window: "A", verdict: .intact),
            CampaignEvent(kind: .damage, at: 7, window: "A"),
            CampaignEvent(kind: .workerKill, at: 7.1, window: "A", recoveryMs: 35),
            CampaignEvent(kind: .recovery, at: 7.2, window: "A", verdict: .intact),
            CampaignEvent(kind: .move, at: 7.5, window: "A", to: "B", outcome: .committed, verdict: .intact),
            CampaignEvent(kind: .move, at: 7.8, window: "B", to: "A", outcome: .committed, verdict: .duplicated),
        ]
        report.recoveryCurve = PercentilePoint.percentiles.map {
            PercentilePoint(percentile: $0, microseconds: 30_000 + UInt64($0) * 1000)
        }
        report.saveLatencyCurve = PercentilePoint.percentiles.map {
            PercentilePoint(percentile: $0, microseconds: 900 + UInt64($0) * 100)
        }
        report.failures = [
            "window <script>alert(1)</script>: came back torn (seed 9, step 17); reproduce: \(report.reproduce)"
        ]
        report.hostileLog = ["step 3: planted a symlink <img src=x> at windows.order.tmp"]
        report.hostileEvents = 1
        return report
    }

    private func occurrences(of needle: String, in text: String) -> Int {
        text.components(separatedBy: needle).count - 1
    }

    /// The `data-counts` of the timeline's lane of `kind`, summed.
    private func binned(_ kind: CampaignEvent.Kind, in html: String) -> Int {
        html.components(separatedBy: "class=\"bin \(kind.rawValue)\" data-counts=\"").dropFirst()
            .flatMap { $0.prefix { $0 != "\"" }.split(separator: " ").compactMap { Int($0) } }.reduce(0, +)
    }

    @Test func theTimelineCountsEveryEventInItsLaneAndMarksEachFailedRecovery() {
        let report = fabricatedReport()
        let html = report.html
        for kind in CampaignEvent.Kind.allCases {
            #expect(binned(kind, in: html) == report.timeline.filter { $0.kind == kind }.count, "\(kind)")
        }
        #expect(
            occurrences(of: "class=\"mark recovery failed\"", in: html) == 1,
            "the torn recovery is marked failed, the others not")
        #expect(
            occurrences(of: "class=\"mark move failed\"", in: html) == 1,
            "the duplicated move is marked failed, the intact one not")
        // A legend entry for each kind, and for a failed recovery.
        #expect(occurrences(of: "class=\"legend\"", in: html) == CampaignEvent.Kind.allCases.count + 1)
    }

    /// Every event falls in one of a fixed number of slices, the end in the last.
    @Test func eventsFallInAFixedNumberOfSlices() {
        let slices = CampaignReport.timelineBuckets
        #expect(CampaignReport.bucket(of: 0, span: 100) == 0)
        #expect(CampaignReport.bucket(of: 100, span: 100) == slices - 1)
        #expect(CampaignReport.bucket(of: 50, span: 100) == slices / 2)
        #expect(
            CampaignReport.bucket(of: .nan, span: 100) == 0 && CampaignReport.bucket(of: 1e12, span: 100) == slices - 1)
    }

    /// A campaign of `kills` kills (one in 25 of the supervisor) over `kills / 5` seconds, each followed by a recovery,
    /// a hostile event for every kill and a half, and the same three failed recoveries (with their
    /// failures) whatever its length.
    private func longReport(kills: Int) -> CampaignReport {
        var report = fabricatedReport()
        report.durationS = Double(kills) / 5
        report.timeline = []
        for index in 0..<kills {
            let at = Double(index) / 5
            let window = "window-\(index % 8)"
            if index % 12 == 0 { report.timeline.append(CampaignEvent(kind: .damage, at: at, window: window)) }
            if index % 2 == 0 {
                report.timeline.append(
                    CampaignEvent(
                        kind: .move, at: at, window: window, to: "window-\((index + 1) % 8)", outcome: .undone))
            }
            let supervisor = index % 25 == 0
            report.timeline.append(
                CampaignEvent(
                    kind: supervisor ? .supervisorKill : .workerKill, at: at, window: supervisor ? nil : window,
                    recoveryMs: 20 + Double(index % 97)))
            let failed = [kills / 4, kills / 2, 3 * kills / 4].contains(index)
            report.timeline.append(
                CampaignEvent(kind: .recovery, at: at + 0.05, window: window, verdict: failed ? .lost : .intact))
        }
        report.failures = ["lost", "went back", "torn"].map {
            "window W: \($0) (seed 9, step 1); reproduce: \(report.reproduce)"
        }
        report.hostileLog = (0..<(kills * 3 / 2)).map {
            "step \($0 * 7): planted a symlink windows/W/regular/snap-\($0) -> /tmp/canary"
        }
        report.hostileEvents = report.hostileLog.count
        return report
    }

    /// The page's size follows the failures, not the events: under 1 MB for 1,000 kills and for
    /// 10,000, the longer at most 10 % bigger, and each failure and failed recovery still on it.
    @Test func thePageStaysSmallAtAnyLength() {
        let short = longReport(kills: 1_000).html
        let long = longReport(kills: 10_000)
        let page = long.html
        #expect(
            short.utf8.count < 1 << 20 && page.utf8.count < 1 << 20, "\(short.utf8.count), \(page.utf8.count) bytes")
        #expect(
            Double(page.utf8.count) <= 1.1 * Double(short.utf8.count), "\(short.utf8.count) → \(page.utf8.count) bytes")
        #expect(occurrences(of: "class=\"mark recovery failed\"", in: page) == 3)
        #expect(
            occurrences(of: "<li class=failed>", in: page) == 3
                && occurrences(of: "<br>reproduce: <code>\(long.reproduce)</code>", in: page) == 3)
        for kind in CampaignEvent.Kind.allCases {
            #expect(binned(kind, in: page) == long.timeline.filter { $0.kind == kind }.count, "\(kind)")
        }
        #expect(occurrences(of: "class=\"bin ", in: page) == CampaignEvent.Kind.allCases.count, "one outline per lane")
        // The long lists summed up: counts by kind, the ends, the slowest.
        #expect(page.contains("<tr><th>planted a symlink</th><td>15000</td></tr>"))
        #expect(
            page.contains("… \(15_000 - 2 * CampaignReport.listEnds) more …") && page.contains("snap-14999 -&gt;")
                && !page.contains("snap-5000 "))
        #expect(page.contains("10000 checked by the oracle: 9997 intact, 3 lost"))
        #expect(
            page.contains("<h3>The \(CampaignReport.slowestListed) slowest</h3>") && page.contains("<td>116.0</td>"))
        #expect(page.contains("… \(10_000 - 2 * CampaignReport.listEnds) more …"))
    }

    /// The JSON keeps every event, one a line, and reads back whole; a report written
    /// pretty-printed, as before, reads the same.
    @Test func theJSONKeepsEveryEventOneALine() throws {
        let report = longReport(kills: 10_000)
        let bytes = try report.json()
        let decoded = try JSONDecoder().decode(CampaignReport.self, from: Data(bytes))
        #expect(
            decoded.timeline == report.timeline && decoded.hostileLog == report.hostileLog
                && decoded.failures == report.failures)
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("    {\"at\":") }.count == report.timeline.count, "one line per event")
        #expect(
            lines.filter { $0.hasPrefix("    \"step ") }.count == report.hostileLog.count, "one line per hostile event")
        #expect(lines.contains("  \"seed\":9,") && lines.first == "{" && lines.last == "}")
        #expect((try JSONSerialization.jsonObject(with: Data(bytes))) is [String: Any])
        let pretty = JSONEncoder()
        pretty.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let old = try pretty.encode(report)
        #expect(bytes.count < old.count, "\(bytes.count) bytes against \(old.count) pretty-printed")
        #expect(try JSONDecoder().decode(CampaignReport.self, from: old).timeline.count == report.timeline.count)
    }

    /// Strings with brackets, commas and escaped quotes stay whole; empty lists stay `[]`.
    @Test func theJSONLayoutBreaksOnlyBetweenTopLevelEntries() {
        let compact = #"{"a":[],"b":["x,]\"[","y"],"c":{"d":[1,2]},"e":[{"f":[3]}]}"#
        let expected =
            "{\n  \"a\":[],\n  \"b\":[\n    \"x,]\\\"[\",\n    \"y\"\n  ],\n  \"c\":{\"d\":[1,2]},\n  \"e\":[\n    {\"f\":[3]}\n  ]\n}"
        #expect(String(decoding: ReportJSON.lines(Array(compact.utf8)), as: UTF8.self) == expected)
    }

    @Test func everyStringIsEscapedAndNothingIsFetched() {
        let html = fabricatedReport().html
        #expect(!html.contains("<script"), "untrusted text reached the page as markup")
        #expect(!html.contains("<img"))
        #expect(html.contains("window &lt;script&gt;alert(1)&lt;/script&gt;: came back torn"))
        #expect(
            html.contains("&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"),
            "a window name in a mark's title is escaped")
        #expect(html.contains("planted a symlink &lt;img src=x&gt;"))
        // Self-contained: no source or link to fetch, no stylesheet import.
        for fetch in ["src=\"", "src='", "href=", "@import", "url("] { #expect(!html.contains(fetch), "\(fetch)") }
        #expect(html.hasPrefix("<!doctype html>") && html.hasSuffix("</html>\n"))
    }

    @Test func aFailureShowsTheLineThatReproducesIt() throws {
        let report = fabricatedReport()
        let html = report.html
        let item = try #require(html.components(separatedBy: "<li class=failed>").dropFirst().first)
        #expect(
            item.hasPrefix(
                "window &lt;script&gt;alert(1)&lt;/script&gt;: came back torn (seed 9, step 17)<br>reproduce: <code>\(report.reproduce)</code>"
            ))
        #expect(
            html.contains("id=verdicts")
                && html.contains("<tr class=failed><th>torn (no prefix of the commands)</th><td>1</td></tr>"))
        #expect(html.contains("FAILED"))
    }

    /// A campaign whose supervisor is gone fails every command after: the page lists the first
    /// ones and says how many more the JSON has.
    @Test func thousandsOfFailuresAreCutShort() {
        var report = fabricatedReport()
        report.failures = (0..<(CampaignReport.failuresListed + 50)).map {
            "command \($0) refused; reproduce: \(report.reproduce)"
        }
        let html = report.html
        #expect(occurrences(of: "<li class=failed>", in: html) == CampaignReport.failuresListed)
        #expect(html.contains("<li class=failed>command 0 refused<br>") && html.contains("… and 50 more"))
    }

    /// A failure's text may name what grew with the campaign (every symlink planted, say): the
    /// page shows the start of each, and its size stays bounded by the failures listed.
    @Test func aLongFailureIsCutOnThePage() {
        var report = fabricatedReport()
        let long =
            "a symlink was followed out of the root: "
            + String(repeating: "step 1: planted a symlink at windows.order.tmp, ", count: 20_000)
        report.failures = Array(
            repeating: long + "; reproduce: \(report.reproduce)", count: CampaignReport.failuresListed)
        let html = report.html
        #expect(html.utf8.count < 1_000_000, "\(html.utf8.count) bytes")
        #expect(occurrences(of: "more bytes in the JSON", in: html) == CampaignReport.failuresListed)
        #expect(report.shown("short; reproduce: \(report.reproduce)") == "short")
        // Combining marks make one character of many bytes: the cut counts bytes.
        let marks = String(repeating: "e\u{301}\u{301}\u{301}\u{301}", count: 5_000)
        let cut = report.shown(marks)
        #expect(
            cut.utf8.count < CampaignReport.failureBytesShown + 100 && cut.hasSuffix("more bytes in the JSON)"),
            "\(cut.utf8.count)")
    }

    @Test func aReportIsWrittenPrivateAndAtomicallyAndNeverThroughASymlink() throws {
        let base = FilePath(FileManager.default.temporaryDirectory.path).appending(
            "windowhost-report-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: base.string, withIntermediateDirectories: true)
        defer { removeTestRoot(base.string) }
        let path = base.appending("report.html")
        _ = FileManager.default.createFile(
            atPath: path.string, contents: Data("old, longer than the new".utf8), attributes: [.posixPermissions: 0o644]
        )
        try ReportFile.write(Array("new".utf8), to: path)
        #expect(FileManager.default.contents(atPath: path.string) == Data("new".utf8))
        var status = stat()
        #expect(lstat(path.string, &status) == 0 && status.st_mode & 0o777 == 0o600)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: base.string) == ["report.html"],
            "no temporary file is left")

        let target = base.appending("elsewhere")
        _ = FileManager.default.createFile(atPath: target.string, contents: Data("kept".utf8))
        let link = base.appending("link.html")
        #expect(symlink(target.string, link.string) == 0)
        #expect(throws: ReportFile.SymlinkRefused.self) { try ReportFile.write(Array("through".utf8), to: link) }
        #expect(FileManager.default.contents(atPath: target.string) == Data("kept".utf8))
    }

    @Test func aProgressLineOnATerminalIsARedrawnBar() {
        let line = ProgressMeter.line(
            terminal: true, name: "windowhost stress", elapsed: 10, fraction: 0.5, count: "kills 5/10", detail: "lost 0"
        )
        #expect(
            line.hasPrefix(
                "\r\u{1B}[K[" + String(repeating: "#", count: 12) + String(repeating: "-", count: 12) + "]  50%"))
        #expect(
            line.contains("kills 5/10") && line.contains("elapsed 10 s") && line.contains("ETA 10 s")
                && line.contains("lost 0"))
        #expect(!line.contains("\n"), "the next line redraws this one")
        let narrow = ProgressMeter.line(
            terminal: true, name: "windowhost stress", elapsed: 10, fraction: 0.5, count: "kills 5/10",
            detail: "lost 0", columns: 40)
        #expect(
            narrow == "\r\u{1B}[K" + String(line.dropFirst(4).prefix(39)),
            "cut to the terminal's width: a wrapped line is not redrawn")
    }

    @Test func aPlainProgressLineHasNoControlCharacters() {
        let line = ProgressMeter.line(
            terminal: false, name: "windowhost bench", elapsed: 10, fraction: 0.25, count: "step 3/12",
            detail: "restore")
        #expect(line == "windowhost bench: 25% step 3/12, elapsed 10 s, ETA 30 s, restore\n")
        #expect(!line.dropLast().unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
    }

    @Test func theETAIsTheTimeLeftAtTheSamePace() {
        #expect(ProgressMeter.eta(elapsed: 10, fraction: 0.25) == 30)
        #expect(ProgressMeter.eta(elapsed: 30, fraction: 1) == 0)
        #expect(ProgressMeter.eta(elapsed: 3, fraction: 0) == nil, "nothing done: no pace to go by")
        // --duration 60, 15 s in: the fraction is elapsed over the duration, the ETA what is left of it.
        #expect(ProgressMeter.eta(elapsed: 15, fraction: 15.0 / 60) == 45)
        #expect(
            ProgressMeter.duration(125) == "2:05" && ProgressMeter.duration(3723) == "1:02:03"
                && ProgressMeter.duration(42) == "42 s")
        let unknown = ProgressMeter.line(
            terminal: false, name: "x", elapsed: 5, fraction: nil, count: "kills 3", detail: "")
        #expect(unknown == "x: kills 3, elapsed 5 s\n")
    }

    @Test func linesAreDueAtMostFourTimesASecondOnATerminalAndEveryFewSecondsElsewhere() {
        let start = Date(timeIntervalSince1970: 1000)
        for (terminal, interval) in [(true, ProgressMeter.terminalInterval), (false, ProgressMeter.plainInterval)] {
            var meter = ProgressMeter(name: "windowhost test", terminal: terminal, started: start)
            #expect(meter.isDue(now: start), "the first line is due at once")
            meter.show(fraction: 0, count: "0/1", detail: "", now: start)
            #expect(!meter.isDue(now: start.addingTimeInterval(interval * 0.9)))
            #expect(meter.isDue(now: start.addingTimeInterval(interval)))
            meter.finish()
        }
        #expect(ProgressMeter.terminalInterval >= 0.25 && ProgressMeter.plainInterval >= 2)
    }
}
