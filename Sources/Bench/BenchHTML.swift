import Foundation
import Stress

/// One self-contained page (inline SVG, no scripts, no fetches): latency percentile curves per
/// engine, and saves/s against the number of windows.
extension BenchReport {
    public var html: String {
        var body =
            "<h1>windowhost bench</h1>\n<p>\(ReportPage.escape(machine)); \(ReportPage.escape(date)); \(secondsPerCase) s per case under <code>\(ReportPage.escape(directory))</code>. "
        body += "Each window keeps one save outstanding; latency is request → durable.</p>\n"
        let sizes = SaveSize.allCases.filter { size in results.contains { $0.size == size.rawValue } }
        let windowCounts = Set(results.map(\.windows)).sorted()
        for size in sizes {
            body += "<h2>\(size.rawValue) saves</h2>\n"
            body += "<div class=row>\n"
            body += ReportPage.lineChart(
                title: "saves/s against windows (\(size.rawValue))", xLabel: "windows saving at once",
                yLabel: "durable saves/s",
                series: Contender.allCases.map { engine in
                    (
                        engine.rawValue,
                        results.filter { $0.engine == engine.rawValue && $0.size == size.rawValue }
                            .map { (Double($0.windows), $0.savesPerSecond) }
                    )
                }, xTicks: windowCounts.map(Double.init), style: engineStyle)
            for windows in [windowCounts.first, windowCounts.last].compactMap({ $0 }).uniqued() {
                body += ReportPage.percentileChart(
                    title: "latency percentiles, \(windows) window\(windows == 1 ? "" : "s") (\(size.rawValue))",
                    yLabel: "µs, request → durable",
                    series: Contender.allCases.compactMap { engine in
                        Self.row(in: results, engine, size.rawValue, windows).map { (engine.rawValue, $0.curve) }
                    },
                    style: engineStyle)
            }
            body += "</div>\n"
        }
        if !openLoop.isEmpty {
            body += "<h2>Open loop</h2>\n<p>Small commands arrive at a fixed rate per window, whatever the saves do; "
            body +=
                "latency runs from each command's arrival to durable, so the time a command waits behind a save counts.</p>\n"
            body += "<div class=row>\n"
            let series = Set(openLoop.map { OpenLoopSeries(engine: $0.engine, windows: $0.windows) }).sorted()
            body += ReportPage.lineChart(
                title: "open loop: p99 against offered rate", xLabel: "commands offered per second, per window",
                yLabel: "p99 µs, arrival → durable",
                series: series.map { line in
                    (
                        line.name,
                        openLoop.filter { $0.engine == line.engine && $0.windows == line.windows }.map {
                            ($0.offeredPerSecond, Double($0.p99))
                        }
                    )
                }, xTicks: Set(openLoop.map(\.offeredPerSecond)).sorted(),
                style: { name in (palette[String(name.prefix { $0 != "," })] ?? "#000", !name.hasSuffix(", 1 window")) }
            )
            body += "</div>\n"
        }
        body += "<h2>Table</h2>\n<pre>\(ReportPage.escape(text))</pre>\n"
        return ReportPage.page(title: "windowhost bench", body: body)
    }
}

private let palette = [
    "floor": "#777777", "floor-buffered": "#bbbbbb", "uring": "#1f77b4", "sync": "#2ca02c", "rewrite": "#d62728",
]

/// A contender's line: its colour, solid.
private func engineStyle(_ name: String) -> (color: String, dashed: Bool) { (palette[name] ?? "#000", false) }

/// One line of the open-loop chart: an engine at a window count.
private struct OpenLoopSeries: Hashable, Comparable {
    let engine: String
    let windows: Int
    var name: String { "\(engine), \(windows) window\(windows == 1 ? "" : "s")" }
    static func < (a: Self, b: Self) -> Bool { (a.windows, a.engine) < (b.windows, b.engine) }
}

extension Array where Element: Hashable {
    fileprivate func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
