import Foundation

/// `stress --html`: one self-contained page (inline SVG, no scripts, no fetches) of a campaign:
/// its timeline, recovery-time and save-latency distributions, and the oracle's verdicts with
/// the line that reproduces each failure.
extension CampaignReport {
    public var html: String {
        let escape = ReportPage.escape
        var body = "<h1>windowhost stress</h1>\n"
        body += "<p>Seed \(seed), \(scenes) scenes, \(ReportPage.fixed(duration_s, 1)) s: \(kills) kills (\(supervisor_kills) of the supervisor, "
        body += "\(killed_while_saving) while a save was in flight, \(corruptions) after damaging a snapshot), \(commands) commands, "
        body += "\(acknowledged) acknowledged durable, \(recoveries) recoveries checked. "
        body += passed ? "<strong>Nothing acknowledged was lost.</strong></p>\n" : "<strong class=failed>FAILED.</strong></p>\n"
        body += "<p>Run it again: <code>\(escape(reproduce))</code></p>\n"
        body += "<h2>Timeline</h2>\n" + timelineChart()
        body += "<h2>Distributions</h2>\n<div class=row>\n"
        body += ReportPage.percentileChart(
            title: "recovery time (kill → restored, taking commands)", yLabel: "ms", series: [("recovery", recovery_curve)], unit: 1000)
        body += ReportPage.percentileChart(title: "save latency (request → durable)", yLabel: "µs", series: [("save", save_latency_curve)])
        body += "</div>\n"
        body += "<p>Recovery: p50 \(ReportPage.fixed(recovery_ms.p50, 1)) ms, p99 \(ReportPage.fixed(recovery_ms.p99, 1)) ms, "
        body += "max \(ReportPage.fixed(recovery_ms.max, 1)) ms. Save latency: p50 \(ReportPage.fixed(save_latency_us.p50, 0)) µs, "
        body += "p99 \(ReportPage.fixed(save_latency_us.p99, 0)) µs, p99.9 \(ReportPage.fixed(save_latency_us.p999 ?? 0, 0)) µs, "
        body += "max \(ReportPage.fixed(save_latency_us.max, 0)) µs.</p>\n"
        body += verdictSection()
        if !hostile_log.isEmpty {
            body += "<h2>Hostile events</h2>\n<p>\(hostile_events) events: \(disk_fills) disk fills, \(planted_entries) entries planted; "
            body += "\(refused_while_full) saves refused (74) while the disk was full.</p>\n"
            body += "<pre>\(escape(hostile_log.joined(separator: "\n")))</pre>\n"
        }
        return ReportPage.page(title: "windowhost stress, seed \(seed)", body: body)
    }

    /// The oracle's counts, then each failure with the command line that reproduces it.
    private func verdictSection() -> String {
        let wentBack = timeline.filter { $0.verdict == .wentBack }.count
        var section = "<h2 id=verdicts>Verdicts</h2>\n<table>\n"
        for (name, count) in [
            ("recoveries checked", recoveries), ("acknowledged commands lost", lost), ("unexpected (never sent, yet present)", unexpected),
            ("torn (no prefix of the commands)", torn), ("went back below the acknowledged seq", wentBack),
            ("recovered (sent, not acknowledged, present)", recovered),
        ] {
            let bad = count > 0 && name != "recoveries checked" && !name.hasPrefix("recovered")
            section += "<tr\(bad ? " class=failed" : "")><th>\(ReportPage.escape(name))</th><td>\(count)</td></tr>\n"
        }
        section += "</table>\n"
        guard !failures.isEmpty else { return section + "<p>No failures.</p>\n" }
        section += "<h3 class=failed>\(failures.count) failure\(failures.count == 1 ? "" : "s")</h3>\n<ol>\n"
        let suffix = "; reproduce: \(reproduce)"
        for failure in failures.prefix(Self.failuresListed) {
            let what = failure.hasSuffix(suffix) ? String(failure.dropLast(suffix.count)) : failure
            section += "<li class=failed>\(ReportPage.escape(what))<br>reproduce: <code>\(ReportPage.escape(reproduce))</code></li>\n"
        }
        section += "</ol>\n"
        if failures.count > Self.failuresListed {
            section += "<p class=failed>… and \(failures.count - Self.failuresListed) more (every one in the report's JSON, <code>--json</code>).</p>\n"
        }
        return section
    }

    /// Failures listed on the page: the first ones say what went wrong; a campaign whose
    /// supervisor is gone can fail every command after, thousands of lines alike.
    static let failuresListed = 200

    /// Every event at its second since the start: one lane (and shape) per kind; a recovery
    /// the oracle failed is red.
    private func timelineChart() -> String {
        let width = 940.0
        let height = 230.0
        let left = 110.0
        let right = 16.0
        let top = 50.0
        let bottom = 48.0
        let span = Swift.max(duration_s, timeline.map(\.at).max() ?? 0, 1)
        func x(_ seconds: Double) -> Double { left + seconds / span * (width - left - right) }
        let lanes = CampaignEvent.Kind.allCases
        let laneHeight = (height - top - bottom) / Double(lanes.count)
        func y(_ kind: CampaignEvent.Kind) -> Double { top + (Double(lanes.firstIndex(of: kind) ?? 0) + 0.5) * laneHeight }
        var svg = ReportPage.svgStart(width: width, height: height, title: "kills, damage and recoveries over the campaign")
        for kind in lanes {
            svg += "<line x1=\"\(left)\" y1=\"\(y(kind))\" x2=\"\(width - right)\" y2=\"\(y(kind))\" stroke=\"#eee\"/>"
            svg += "<text x=\"\(left - 6)\" y=\"\(y(kind) + 4)\" text-anchor=\"end\" font-size=\"11\">\(Self.laneName(kind))</text>\n"
        }
        let step = Self.tickStep(span)
        var tick = 0.0
        while tick <= span + step / 1000 {
            svg += "<text x=\"\(ReportPage.fixed(x(tick), 1))\" y=\"\(height - bottom + 16)\" text-anchor=\"middle\" font-size=\"11\">\(ReportPage.fixed(tick, step < 1 ? 1 : 0))</text>\n"
            tick += step
        }
        svg += ReportPage.axisLabels(
            xLabel: "seconds since the start", yLabel: "", width: width, height: height, left: left, right: right, top: top, bottom: bottom)
        for event in timeline {
            var title = "\(Self.laneName(event.kind)) at \(ReportPage.fixed(event.at, 2)) s"
            if let window = event.window { title += ", window \(window)" }
            if let recovery = event.recovery_ms { title += ", recovered in \(ReportPage.fixed(recovery, 1)) ms" }
            if let verdict = event.verdict { title += ": \(verdict.rawValue)" }
            let failed = event.verdict.map { $0 != .intact } ?? false
            svg += Self.mark(event.kind, x: x(event.at), y: y(event.kind), failed: failed, attributes: "class=\"mark \(event.kind.rawValue)\(failed ? " failed" : "")\"")
            svg += "<title>\(ReportPage.escape(title))</title></\(Self.shape(event.kind))>\n"
        }
        // The legend, between the title and the plot: each kind's shape and colour, and a failed recovery's.
        var legendX = left
        let legendY = top - 10
        for (kind, failed) in lanes.map({ ($0, false) }) + [(.recovery, true)] {
            svg += Self.mark(kind, x: legendX + 6, y: legendY - 4, failed: failed, attributes: "class=\"legend\"") + "</\(Self.shape(kind))>"
            let name = failed ? "recovery the oracle failed" : Self.laneName(kind)
            svg += "<text x=\"\(legendX + 16)\" y=\"\(legendY)\" font-size=\"11\">\(name)</text>\n"
            legendX += 40 + Double(name.count) * 6
        }
        return svg + "</svg>\n"
    }

    private static func laneName(_ kind: CampaignEvent.Kind) -> String {
        switch kind {
        case .workerKill: "worker kill"
        case .supervisorKill: "supervisor kill"
        case .damage: "damage"
        case .recovery: "recovery"
        }
    }

    /// The SVG element of `kind`'s marks.
    private static func shape(_ kind: CampaignEvent.Kind) -> String {
        switch kind {
        case .workerKill: "circle"
        case .supervisorKill: "rect"
        case .damage, .recovery: "polygon"
        }
    }

    /// The opening tag of a mark at (x, y), left open for a `<title>`: a red circle for a
    /// worker kill, a purple square for the supervisor's, an orange triangle for damage, a
    /// green diamond for a recovery (red when failed).
    private static func mark(_ kind: CampaignEvent.Kind, x: Double, y: Double, failed: Bool, attributes: String) -> String {
        let (cx, cy) = (ReportPage.fixed(x, 1), ReportPage.fixed(y, 1))
        func points(_ offsets: [(Double, Double)]) -> String {
            offsets.map { "\(ReportPage.fixed(x + $0.0, 1)),\(ReportPage.fixed(y + $0.1, 1))" }.joined(separator: " ")
        }
        switch kind {
        case .workerKill:
            return "<circle \(attributes) cx=\"\(cx)\" cy=\"\(cy)\" r=\"3.5\" fill=\"#d62728\" fill-opacity=\"0.7\">"
        case .supervisorKill:
            return "<rect \(attributes) x=\(q(x - 5)) y=\(q(y - 5)) width=\"10\" height=\"10\" fill=\"#9467bd\">"
        case .damage:
            return "<polygon \(attributes) points=\"\(points([(0, -5), (5, 4), (-5, 4)]))\" fill=\"#ff7f0e\">"
        case .recovery:
            return "<polygon \(attributes) points=\"\(points([(0, -5), (4, 0), (0, 5), (-4, 0)]))\" fill=\"\(failed ? "#b00" : "#2ca02c")\" fill-opacity=\"\(failed ? 1 : 0.6)\">"
        }
    }

    /// A coordinate as a quoted attribute value.
    private static func q(_ value: Double) -> String { "\"\(ReportPage.fixed(value, 1))\"" }

    /// Seconds between the x axis's ticks: 1, 2 or 5 × a power of ten, about eight ticks.
    static func tickStep(_ span: Double) -> Double {
        let rough = span / 8
        let power = pow(10, floor(log10(rough)))
        return [1.0, 2, 5, 10].first { $0 * power >= rough }.map { $0 * power } ?? power * 10
    }
}
