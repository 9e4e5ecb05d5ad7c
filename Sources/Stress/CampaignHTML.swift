import Foundation

/// `stress --html`: one self-contained page (inline SVG, no scripts, no fetches) of a campaign:
/// its timeline, recovery-time and save-latency distributions, the oracle's verdicts with the
/// line that reproduces each failure, and summaries of its recoveries and hostile events. The
/// page's size grows with the failures, never with the events: the timeline is binned and long
/// lists are summarized; the JSON (`--json`) keeps every event.
extension CampaignReport {
    public var html: String {
        let escape = ReportPage.escape
        var body = "<h1>windowhost stress</h1>\n"
        body +=
            "<p>Seed \(seed), \(scenes) scenes, \(ReportPage.fixed(durationS, 1)) s: \(kills) kills (\(supervisorKills) of the supervisor, "
        body +=
            "\(killedWhileSaving) while a save was in flight, \(corruptions) after damaging a snapshot), \(commands) commands, "
        body += "\(acknowledged) acknowledged durable, \(recoveries) recoveries checked, "
        body += "\(movesStarted) moves between windows (\(movesAcknowledged) acknowledged, \(movesResolved) resolved). "
        body +=
            passed
            ? "<strong>Nothing acknowledged was lost.</strong></p>\n" : "<strong class=failed>FAILED.</strong></p>\n"
        body += "<p>Run it again: <code>\(escape(reproduce))</code></p>\n"
        body += "<h2>Timeline</h2>\n" + timelineChart()
        body += "<h2>Distributions</h2>\n<div class=row>\n"
        body += ReportPage.percentileChart(
            title: "recovery time (kill → restored, taking commands)", yLabel: "ms",
            series: [("recovery", recoveryCurve)], unit: 1000)
        body += ReportPage.percentileChart(
            title: "save latency (request → durable)", yLabel: "µs", series: [("save", saveLatencyCurve)])
        body += "</div>\n"
        body +=
            "<p>Recovery: p50 \(ReportPage.fixed(recoveryMs.p50, 1)) ms, p99 \(ReportPage.fixed(recoveryMs.p99, 1)) ms, "
        body +=
            "max \(ReportPage.fixed(recoveryMs.max, 1)) ms. Save latency: p50 \(ReportPage.fixed(saveLatencyUs.p50, 0)) µs, "
        body +=
            "p99 \(ReportPage.fixed(saveLatencyUs.p99, 0)) µs, p99.9 \(ReportPage.fixed(saveLatencyUs.p999 ?? 0, 0)) µs, "
        body += "max \(ReportPage.fixed(saveLatencyUs.max, 0)) µs.</p>\n"
        body += verdictSection() + recoverySection() + hostileSection()
        return ReportPage.page(title: "windowhost stress, seed \(seed)", body: body)
    }

    /// The oracle's counts, then each failure with the command line that reproduces it.
    private func verdictSection() -> String {
        let wentBack = timeline.filter { $0.verdict == .wentBack }.count
        var section = "<h2 id=verdicts>Verdicts</h2>\n<table>\n"
        for (name, count) in [
            ("recoveries checked", recoveries), ("acknowledged commands lost", lost),
            ("unexpected (never sent, yet present)", unexpected),
            ("torn (no prefix of the commands)", torn), ("went back below the acknowledged seq", wentBack),
            ("recovered (sent, not acknowledged, present)", recovered),
            ("moves started", movesStarted), ("moves acknowledged (durable on both sides)", movesAcknowledged),
            ("moves resolved (committed or undone, checked on both windows)", movesResolved),
            ("moves committed", movesCommitted),
            ("duplicated (a moved tab in both windows)", duplicated),
            ("lost in move (a moved tab in neither window)", lostInMove),
        ] {
            let bad =
                count > 0 && name != "recoveries checked" && !name.hasPrefix("recovered") && !name.hasPrefix("moves")
            section += "<tr\(bad ? " class=failed" : "")><th>\(ReportPage.escape(name))</th><td>\(count)</td></tr>\n"
        }
        section += "</table>\n"
        guard !failures.isEmpty else { return section + "<p>No failures.</p>\n" }
        section += "<h3 class=failed>\(failures.count) failure\(failures.count == 1 ? "" : "s")</h3>\n<ol>\n"
        for failure in failures.prefix(Self.failuresListed) {
            section +=
                "<li class=failed>\(ReportPage.escape(shown(failure)))<br>reproduce: <code>\(ReportPage.escape(reproduce))</code></li>\n"
        }
        section += "</ol>\n"
        if failures.count > Self.failuresListed {
            section +=
                "<p class=failed>… and \(failures.count - Self.failuresListed) more (every one in the report's JSON, <code>--json</code>).</p>\n"
        }
        return section
    }

    /// Failures listed on the page: the first ones say what went wrong; a campaign whose
    /// supervisor is gone can fail every command after, thousands of lines alike.
    static let failuresListed = 200
    /// UTF-8 bytes of one failure shown on the page or in the summary, its reproducing line
    /// aside: whatever a failure's text names, the page stays bounded by the failures listed.
    static let failureBytesShown = 2_000

    /// What `failure` says, as a page or summary shows it, without its reproducing line (shown
    /// on its own): cut at `failureBytesShown` (on a character's boundary), saying how much the
    /// JSON has beyond.
    public func shown(_ failure: String) -> String {
        let suffix = "; reproduce: \(reproduce)"
        let what = failure.hasSuffix(suffix) ? String(failure.dropLast(suffix.count)) : failure
        guard what.utf8.count > Self.failureBytesShown else { return what }
        var end = what.utf8.index(what.startIndex, offsetBy: Self.failureBytesShown)
        while end > what.startIndex, end.samePosition(in: what.unicodeScalars) == nil {
            end = what.utf8.index(before: end)
        }
        let kept = what[..<end]
        return "\(kept)… (\(what.utf8.count - kept.utf8.count) more bytes in the JSON)"
    }

    /// Entries shown at each end of a long list on the page (recoveries, hostile events).
    static let listEnds = 10
    /// The slowest recoveries shown.
    static let slowestListed = 10

    /// The first and last `listEnds` of `list`, and how many between them are left off.
    static func ends<T>(_ list: [T]) -> (first: ArraySlice<T>, skipped: Int, last: ArraySlice<T>) {
        guard list.count > 2 * listEnds else { return (list[...], 0, []) }
        return (list.prefix(listEnds), list.count - 2 * listEnds, list.suffix(listEnds))
    }

    /// The oracle's verdicts counted, the slowest recoveries, and the first and last checked.
    private func recoverySection() -> String {
        let checked = timeline.filter { $0.kind == .recovery }
        let timed = timeline.filter { $0.recoveryMs != nil }
        guard !checked.isEmpty || !timed.isEmpty else { return "" }
        let verdicts = CampaignEvent.Verdict.allCases.map { verdict in
            "\(checked.filter { $0.verdict == verdict }.count) \(verdict.rawValue)"
        }
        var section =
            "<h2 id=recoveries>Recoveries</h2>\n<p>\(checked.count) checked by the oracle: \(verdicts.joined(separator: ", ")); "
        section +=
            "\(timed.count) kills timed to their recovery. The JSON (<code>--json</code>) has every one in <code>timeline</code>.</p>\n"
        if !timed.isEmpty {
            let slowest = timed.sorted { ($0.recoveryMs ?? 0) > ($1.recoveryMs ?? 0) }.prefix(Self.slowestListed)
            section += "<h3>The \(slowest.count) slowest</h3>\n" + Self.eventTable(slowest.map { $0 })
        }
        if !checked.isEmpty {
            let (first, skipped, last) = Self.ends(checked)
            section +=
                "<h3>The first and last checked</h3>\n"
                + Self.eventTable(first.map { $0 } + (skipped > 0 ? [nil] : []) + last.map { $0 }, skipped: skipped)
        }
        return section
    }

    /// A table of events, a nil one standing for the `skipped` left off.
    private static func eventTable(_ events: [CampaignEvent?], skipped: Int = 0) -> String {
        var table = "<table>\n<tr><th>s</th><th>event</th><th>window</th><th>recovery ms</th><th>verdict</th></tr>\n"
        for event in events {
            guard let event else {
                table += "<tr><td colspan=5>… \(skipped) more …</td></tr>\n"
                continue
            }
            let failed = event.verdict.map { $0 != .intact } ?? false
            table +=
                "<tr\(failed ? " class=failed" : "")><td>\(ReportPage.fixed(event.at, 2))</td><td>\(laneName(event.kind))</td>"
            table +=
                "<td><code>\(ReportPage.escape(event.window ?? "-"))</code></td><td>\(event.recoveryMs.map { ReportPage.fixed($0, 1) } ?? "")</td>"
            table += "<td>\(event.verdict?.rawValue ?? "")</td></tr>\n"
        }
        return table + "</table>\n"
    }

    /// The hostile events counted by kind, and the first and last of them.
    private func hostileSection() -> String {
        guard !hostileLog.isEmpty else { return "" }
        var section =
            "<h2 id=hostile>Hostile events</h2>\n<p>\(hostileEvents) events: \(diskFills) disk fills, \(plantedEntries) entries planted; "
        section +=
            "\(refusedWhileFull) saves refused (74) while the disk was full. The JSON (<code>--json</code>) has every one in <code>hostile_log</code>.</p>\n"
        var byKind: [HostileEvent.Kind?: Int] = [:]
        for line in hostileLog { byKind[HostileEvent.Kind(logLine: line), default: 0] += 1 }
        section += "<table>\n"
        for kind in HostileEvent.Kind.allCases.map(Optional.some) + [nil] {
            guard let count = byKind[kind] else { continue }
            section += "<tr><th>\(kind?.rawValue ?? "other")</th><td>\(count)</td></tr>\n"
        }
        let (first, skipped, last) = Self.ends(hostileLog)
        let lines = first + (skipped > 0 ? ["… \(skipped) more …"] : []) + last
        return section + "</table>\n<pre>\(ReportPage.escape(lines.joined(separator: "\n")))</pre>\n"
    }
}
