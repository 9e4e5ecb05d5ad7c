import Foundation

/// The campaign's timeline on its page: each lane's events counted in `timelineBuckets` equal
/// slices of the campaign and drawn as bars, so a campaign of a day draws no more than one of a
/// minute; each recovery the oracle failed stays a mark of its own.
extension CampaignReport {
    /// Slices of the timeline, whatever the campaign's length.
    static let timelineBuckets = 160

    /// Each lane's events per slice of `span` seconds: `[lane][slice]`, lanes in
    /// `CampaignEvent.Kind.allCases` order.
    func timelineCounts(span: Double) -> [[Int]] {
        let lanes = CampaignEvent.Kind.allCases
        var counts = Array(repeating: Array(repeating: 0, count: Self.timelineBuckets), count: lanes.count)
        for event in timeline {
            guard let lane = lanes.firstIndex(of: event.kind) else { continue }
            counts[lane][Self.bucket(of: event.at, span: span)] += 1
        }
        return counts
    }

    /// The slice `seconds` falls in; the last one holds the end itself.
    static func bucket(of seconds: Double, span: Double) -> Int {
        guard seconds.isFinite, span > 0 else { return 0 }
        return Swift.min(timelineBuckets - 1, Swift.max(0, Int(seconds / span * Double(timelineBuckets))))
    }

    /// Recoveries and moves the oracle failed, in order.
    var failedRecoveries: [CampaignEvent] {
        timeline.filter { [.recovery, .move].contains($0.kind) && ($0.verdict.map { $0 != .intact } ?? false) }
    }

    func timelineChart() -> String {
        let plot = TimelinePlot(span: Swift.max(durationS, timeline.map(\.at).max() ?? 0, 1))
        var svg = ReportPage.svgStart(
            width: plot.width, height: plot.height, title: "kills, damage, recoveries and moves over the campaign")
        svg += plot.axes()
        svg += timelineBars(plot) + failedRecoveryMarks(plot) + timelineLegend(plot)
        let failed = failedRecoveries.count
        let slice = plot.span / Double(Self.timelineBuckets)
        var caption =
            "<p>Each bar counts one lane's events in \(ReportPage.fixed(slice, slice < 10 ? 2 : 1)) s, one of \(Self.timelineBuckets) equal slices "
        caption +=
            "of the campaign; the busiest slice of a lane is its full height (its count under the lane's name). Hover a lane for its total. "
        caption += "Each recovery or move the oracle failed is a red diamond of its own"
        if failed > Self.failuresListed {
            caption +=
                ": the first \(Self.failuresListed) are drawn, the \(failed - Self.failuresListed) more are in the JSON"
        }
        return svg + "</svg>\n" + caption + ".</p>\n"
    }

    /// Each lane's counts as one outline of bars over every slice (a fixed number of points,
    /// however many events), its counts in `data-counts`.
    private func timelineBars(_ plot: TimelinePlot) -> String {
        let counts = timelineCounts(span: plot.span)
        let slice = plot.span / Double(Self.timelineBuckets)
        var svg = ""
        for (lane, kind) in CampaignEvent.Kind.allCases.enumerated() {
            guard let peak = counts[lane].max(), peak > 0 else { continue }
            svg +=
                "<text x=\"\(plot.left - 6)\" y=\"\(ReportPage.fixed(plot.center(lane) + 12, 1))\" text-anchor=\"end\" font-size=\"9\" fill=\"#777\">peak \(peak)</text>\n"
            let floor = plot.laneTop(lane) + plot.laneHeight - 2
            var outline = "M\(ReportPage.fixed(plot.x(0), 1)),\(ReportPage.fixed(floor, 1))"
            for (bucket, count) in counts[lane].enumerated() {
                let height = count == 0 ? 0 : Swift.max(1.5, Double(count) / Double(peak) * (plot.laneHeight - 6))
                outline +=
                    "V\(ReportPage.fixed(floor - height, 1))H\(ReportPage.fixed(plot.x(Double(bucket + 1) * slice), 1))"
            }
            let total = counts[lane].reduce(0, +)
            let title = "\(Self.counted(kind, total)); at most \(peak) in a slice of \(ReportPage.fixed(slice, 2)) s"
            svg +=
                "<path class=\"bin \(kind.rawValue)\" data-counts=\"\(counts[lane].map(String.init).joined(separator: " "))\" "
            svg +=
                "d=\"\(outline)V\(ReportPage.fixed(floor, 1))Z\" fill=\"\(Self.color(kind))\"><title>\(title)</title></path>\n"
        }
        return svg
    }

    /// A red diamond per failed recovery or move, up to `failuresListed`, over its lane's bars.
    private func failedRecoveryMarks(_ plot: TimelinePlot) -> String {
        var svg = ""
        for event in failedRecoveries.prefix(Self.failuresListed) {
            guard let lane = CampaignEvent.Kind.allCases.firstIndex(of: event.kind) else { continue }
            var title = "\(event.kind.rawValue) at \(ReportPage.fixed(event.at, 2)) s"
            if let window = event.window { title += ", window \(window)" }
            if let to = event.to { title += " to \(to)" }
            if let verdict = event.verdict { title += ": \(verdict.rawValue)" }
            svg += Self.failedMark(
                x: plot.x(event.at), y: plot.center(lane),
                attributes: "class=\"mark \(event.kind.rawValue) failed\"")
            svg += "<title>\(ReportPage.escape(title))</title></polygon>\n"
        }
        return svg
    }

    /// Between the title and the plot: each lane's colour, and a failed recovery's mark.
    private func timelineLegend(_ plot: TimelinePlot) -> String {
        var svg = ""
        var legendX = plot.left
        let legendY = plot.top - 10
        for kind in CampaignEvent.Kind.allCases {
            svg +=
                "<rect class=\"legend\" x=\(Self.q(legendX + 1)) y=\(Self.q(legendY - 9)) width=\"10\" height=\"10\" fill=\"\(Self.color(kind))\"/>"
            svg += "<text x=\"\(legendX + 16)\" y=\"\(legendY)\" font-size=\"11\">\(Self.laneName(kind))</text>\n"
            legendX += 40 + Double(Self.laneName(kind).count) * 6
        }
        let name = "recovery or move the oracle failed"
        svg += Self.failedMark(x: legendX + 6, y: legendY - 4, attributes: "class=\"legend\"") + "</polygon>"
        svg += "<text x=\"\(legendX + 16)\" y=\"\(legendY)\" font-size=\"11\">\(name)</text>\n"
        return svg
    }

    static func laneName(_ kind: CampaignEvent.Kind) -> String {
        switch kind {
        case .workerKill: "worker kill"
        case .supervisorKill: "supervisor kill"
        case .damage: "damage"
        case .recovery: "recovery"
        case .move: "move"
        }
    }

    /// "3 worker kills", "1 snapshot damaged".
    static func counted(_ kind: CampaignEvent.Kind, _ count: Int) -> String {
        let one = count == 1
        return switch kind {
        case .workerKill: "\(count) worker kill\(one ? "" : "s")"
        case .supervisorKill: "\(count) supervisor kill\(one ? "" : "s")"
        case .damage: "\(count) snapshot\(one ? "" : "s") damaged"
        case .recovery: "\(count) recover\(one ? "y" : "ies")"
        case .move: "\(count) move\(one ? "" : "s") between windows"
        }
    }

    /// A lane's colour: red worker kills, purple supervisor kills, orange damage, green
    /// recoveries, blue moves.
    private static func color(_ kind: CampaignEvent.Kind) -> String {
        switch kind {
        case .workerKill: "#d62728"
        case .supervisorKill: "#9467bd"
        case .damage: "#ff7f0e"
        case .recovery: "#2ca02c"
        case .move: "#1f77b4"
        }
    }

    /// The opening tag of a failed recovery's red diamond at (x, y), left open for a `<title>`.
    private static func failedMark(x: Double, y: Double, attributes: String) -> String {
        let points = [(0.0, -6.0), (5, 0), (0, 6), (-5, 0)].map {
            "\(ReportPage.fixed(x + $0.0, 1)),\(ReportPage.fixed(y + $0.1, 1))"
        }
        return
            "<polygon \(attributes) points=\"\(points.joined(separator: " "))\" fill=\"#b00\" stroke=\"#fff\" stroke-width=\"0.5\">"
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

/// Where the timeline's lanes and seconds fall in its SVG.
private struct TimelinePlot {
    let width = 940.0
    let height = 260.0
    let left = 110.0
    let right = 16.0
    let top = 50.0
    let bottom = 48.0
    /// Seconds the x axis spans.
    let span: Double

    var laneHeight: Double { (height - top - bottom) / Double(CampaignEvent.Kind.allCases.count) }
    func laneTop(_ lane: Int) -> Double { top + Double(lane) * laneHeight }
    func center(_ lane: Int) -> Double { laneTop(lane) + laneHeight / 2 }
    func x(_ seconds: Double) -> Double { left + seconds / span * (width - left - right) }

    /// Lane names and separators, the seconds' ticks, the axis title and the frame.
    func axes() -> String {
        var svg = ""
        for (lane, kind) in CampaignEvent.Kind.allCases.enumerated() {
            let bottomLine = laneTop(lane) + laneHeight
            svg +=
                "<line x1=\"\(left)\" y1=\"\(bottomLine)\" x2=\"\(width - right)\" y2=\"\(bottomLine)\" stroke=\"#eee\"/>"
            svg +=
                "<text x=\"\(left - 6)\" y=\"\(ReportPage.fixed(center(lane), 1))\" text-anchor=\"end\" font-size=\"11\">\(CampaignReport.laneName(kind))</text>\n"
        }
        let step = CampaignReport.tickStep(span)
        var tick = 0.0
        while tick <= span + step / 1000 {
            svg +=
                "<text x=\"\(ReportPage.fixed(x(tick), 1))\" y=\"\(height - bottom + 16)\" text-anchor=\"middle\" font-size=\"11\">\(ReportPage.fixed(tick, step < 1 ? 1 : 0))</text>\n"
            tick += step
        }
        return svg
            + ReportPage.axisLabels(
                xLabel: "seconds since the start", yLabel: "", width: width, height: height, left: left, right: right,
                top: top, bottom: bottom)
    }
}
