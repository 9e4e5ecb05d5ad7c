import Foundation

/// One self-contained page (inline SVG, no scripts, no fetches): latency percentile curves per
/// engine, and saves/s against the number of windows.
extension BenchReport {
    public var html: String {
        var body = "<h1>windowhost bench</h1>\n<p>\(escape(machine)); \(escape(date)); \(secondsPerCase) s per case under <code>\(escape(directory))</code>. "
        body += "Each window keeps one save outstanding; latency is request → durable.</p>\n"
        let sizes = SaveSize.allCases.filter { size in results.contains { $0.size == size.rawValue } }
        let windowCounts = Set(results.map(\.windows)).sorted()
        for size in sizes {
            body += "<h2>\(size.rawValue) saves</h2>\n"
            body += "<div class=row>\n"
            body += lineChart(
                title: "saves/s against windows (\(size.rawValue))", xLabel: "windows saving at once", yLabel: "durable saves/s",
                series: Contender.allCases.map { engine in
                    (engine.rawValue, results.filter { $0.engine == engine.rawValue && $0.size == size.rawValue }
                        .map { (Double($0.windows), $0.savesPerSecond) })
                }, xTicks: windowCounts.map(Double.init))
            for windows in [windowCounts.first, windowCounts.last].compactMap({ $0 }).uniqued() {
                body += lineChart(
                    title: "latency percentiles, \(windows) window\(windows == 1 ? "" : "s") (\(size.rawValue))",
                    xLabel: "percentile", yLabel: "µs, request → durable",
                    series: Contender.allCases.compactMap { engine in
                        Self.row(in: results, engine, size.rawValue, windows).map { row in
                            (engine.rawValue, row.curve.filter { $0.percentile < 100 }.map { (nines($0.percentile), Double($0.microseconds)) })
                        }
                    }, xTicks: [0, 1, 2, 3, 4].map(Double.init), xTickLabel: { ["0%", "90%", "99%", "99.9%", "99.99%"][Int($0)] })
            }
            body += "</div>\n"
        }
        if !openLoop.isEmpty {
            body += "<h2>Open loop</h2>\n<p>Small commands arrive at a fixed rate per window, whatever the saves do; "
            body += "latency runs from each command's arrival to durable, so the time a command waits behind a save counts.</p>\n"
            body += "<div class=row>\n"
            let series = Set(openLoop.map { OpenLoopSeries(engine: $0.engine, windows: $0.windows) }).sorted()
            body += lineChart(
                title: "open loop: p99 against offered rate", xLabel: "commands offered per second, per window", yLabel: "p99 µs, arrival → durable",
                series: series.map { line in
                    (line.name, openLoop.filter { $0.engine == line.engine && $0.windows == line.windows }.map { ($0.offeredPerSecond, Double($0.p99)) })
                }, xTicks: Set(openLoop.map(\.offeredPerSecond)).sorted(),
                style: { name in (palette[String(name.prefix { $0 != "," })] ?? "#000", !name.hasSuffix(", 1 window")) })
            body += "</div>\n"
        }
        body += "<h2>Table</h2>\n<pre>\(escape(text))</pre>\n"
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>windowhost bench</title>
            <style>
            body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
            .row { display: flex; flex-wrap: wrap; gap: 1em; }
            svg { background: #fff; border: 1px solid #ddd; }
            pre { font-size: 12px; overflow-x: auto; }
            </style></head><body>
            \(body)
            </body></html>

            """
    }

    /// Percentile p as "nines": 90 → 1, 99 → 2, 99.9 → 3; the usual x axis of latency curves.
    private func nines(_ percentile: Double) -> Double {
        percentile >= 100 ? 5 : Swift.min(5, -log10(1 - percentile / 100))
    }
}

private let palette = ["floor": "#777777", "floor-buffered": "#bbbbbb", "uring": "#1f77b4", "sync": "#2ca02c", "rewrite": "#d62728"]

/// One line of the open-loop chart: an engine at a window count.
private struct OpenLoopSeries: Hashable, Comparable {
    let engine: String
    let windows: Int
    var name: String { "\(engine), \(windows) window\(windows == 1 ? "" : "s")" }
    static func < (a: Self, b: Self) -> Bool { (a.windows, a.engine) < (b.windows, b.engine) }
}

/// A line chart with a log-scaled y axis: one polyline and legend entry per series.
private func lineChart(
    title: String, xLabel: String, yLabel: String, series: [(name: String, points: [(Double, Double)])], xTicks: [Double],
    xTickLabel: (Double) -> String = { format($0, 0) },
    style: (String) -> (color: String, dashed: Bool) = { (palette[$0] ?? "#000", false) }
) -> String {
    let width = 460.0
    let height = 300.0
    let left = 64.0
    let right = 16.0
    let top = 32.0
    let bottom = 48.0
    let plotted = series.filter { !$0.points.isEmpty }
    let values = plotted.flatMap { $0.points.map { Swift.max($0.1, 1) } }
    guard let low = values.min(), let high = values.max(), let xMin = xTicks.min(), let xMax = xTicks.max() else { return "" }
    let yMin = floor(log10(low))
    let yMax = Swift.max(ceil(log10(high)), yMin + 1)
    let logX = xTicks.count > 1 && xMin > 0 && xMax / xMin >= 8
    func x(_ value: Double) -> Double {
        let (a, b, v) = logX ? (log2(xMin), log2(xMax), log2(value)) : (xMin, xMax, value)
        return left + (b > a ? (v - a) / (b - a) : 0.5) * (width - left - right)
    }
    func y(_ value: Double) -> Double {
        top + (1 - (log10(Swift.max(value, 1)) - yMin) / (yMax - yMin)) * (height - top - bottom)
    }
    var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
    svg += "<text x=\"\(Int(width / 2))\" y=\"18\" text-anchor=\"middle\" font-weight=\"bold\">\(escape(title))</text>\n"
    var decade = yMin
    while decade <= yMax {
        let position = y(pow(10, decade))
        svg += "<line x1=\"\(left)\" y1=\"\(position)\" x2=\"\(width - right)\" y2=\"\(position)\" stroke=\"#eee\"/>"
        svg += "<text x=\"\(left - 6)\" y=\"\(position + 4)\" text-anchor=\"end\" font-size=\"11\">\(format(pow(10, decade), 0))</text>\n"
        decade += 1
    }
    for tick in xTicks {
        svg += "<text x=\"\(x(tick))\" y=\"\(height - bottom + 16)\" text-anchor=\"middle\" font-size=\"11\">\(escape(xTickLabel(tick)))</text>\n"
    }
    svg += "<text x=\"\(Int((left + width - right) / 2))\" y=\"\(Int(height - 8))\" text-anchor=\"middle\" font-size=\"12\">\(escape(xLabel))</text>\n"
    svg += "<text transform=\"translate(14 \(Int((top + height - bottom) / 2))) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">\(escape(yLabel))</text>\n"
    svg += "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(width - left - right)\" height=\"\(height - top - bottom)\" fill=\"none\" stroke=\"#999\"/>\n"
    for (index, line) in plotted.enumerated() {
        let (color, dashed) = style(line.name)
        let points = line.points.map { "\(format(x($0.0), 1)),\(format(y($0.1), 1))" }.joined(separator: " ")
        svg += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"\(dashed ? " stroke-dasharray=\"6 3\"" : "") points=\"\(points)\"><title>\(escape(line.name))</title></polyline>\n"
        for point in line.points {
            svg += "<circle cx=\"\(format(x(point.0), 1))\" cy=\"\(format(y(point.1), 1))\" r=\"2.5\" fill=\"\(color)\"/>"
        }
        let legendY = top + 14 + Double(index) * 14
        svg += "<text x=\"\(left + 8)\" y=\"\(legendY)\" font-size=\"11\" fill=\"\(color)\">■ \(escape(line.name))</text>\n"
    }
    return svg + "</svg>\n"
}

private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        .replacingOccurrences(of: "\"", with: "&quot;")
}

extension Array where Element: Hashable {
    fileprivate func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
