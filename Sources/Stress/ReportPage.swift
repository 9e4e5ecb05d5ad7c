import Foundation
import Histogram

/// A latency at one percentile: a point of the curves the HTML reports draw.
public struct PercentilePoint: Codable, Sendable, Equatable {
    public static let percentiles: [Double] = [0, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100]
    public var percentile: Double
    public var microseconds: UInt64

    enum CodingKeys: String, CodingKey {
        case percentile
        case microseconds = "us"
    }

    public init(percentile: Double, microseconds: UInt64) {
        self.percentile = percentile
        self.microseconds = microseconds
    }

    /// `histogram` (of microseconds) at each of `percentiles`.
    public static func curve(of histogram: Histogram<UInt64>) -> [PercentilePoint] {
        percentiles.map { PercentilePoint(percentile: $0, microseconds: histogram.valueAtPercentile($0)) }
    }
}

/// The parts of the self-contained pages `bench --html` and `stress --html` write: inline CSS
/// and SVG, no scripts, nothing fetched; every string put in a page goes through `escape`.
public enum ReportPage {
    /// A whole page around `body` (already HTML).
    public static func page(title: String, body: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title>
        <style>
        body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
        .row { display: flex; flex-wrap: wrap; gap: 1em; }
        svg { background: #fff; border: 1px solid #ddd; }
        pre, code { font-size: 12px; overflow-x: auto; }
        .failed { color: #b00; }
        table { border-collapse: collapse; }
        td, th { padding: 2px 10px; text-align: right; }
        </style></head><body>
        \(body)
        </body></html>

        """
    }

    /// `text` as HTML text or an attribute value: `&`, `<`, `>` and `"` escaped.
    public static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// A number with `decimals` digits after the point, as the charts' coordinates and labels.
    public static func fixed(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

    /// The opening tag of an SVG chart `width` × `height`, with its title centred on top.
    static func svgStart(width: Double, height: Double, title: String) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
            + "<text x=\"\(Int(width / 2))\" y=\"18\" text-anchor=\"middle\" font-weight=\"bold\">\(escape(title))</text>\n"
    }

    /// Percentile p as "nines": 90 → 1, 99 → 2, 99.9 → 3; the usual x axis of latency curves.
    public static func nines(_ percentile: Double) -> Double {
        percentile >= 100 ? 5 : Swift.min(5, -log10(1 - percentile / 100))
    }

    /// Latency percentile curves: x in nines (0 % to 99.99 %), y log-scaled, each point's
    /// microseconds divided by `unit` (1000 for milliseconds).
    public static func percentileChart(
        title: String, yLabel: String, series: [(name: String, points: [PercentilePoint])], unit: Double = 1,
        style: (String) -> (color: String, dashed: Bool) = { _ in ("#1f77b4", false) }
    ) -> String {
        lineChart(
            title: title, xLabel: "percentile", yLabel: yLabel,
            series: series.map { line in
                (
                    line.name,
                    line.points.filter { $0.percentile < 100 }.map {
                        (nines($0.percentile), Double($0.microseconds) / unit)
                    }
                )
            }, xTicks: [0, 1, 2, 3, 4], xTickLabel: { ["0%", "90%", "99%", "99.9%", "99.99%"][Int($0)] }, style: style)
    }

    /// A line chart with a log-scaled y axis: one polyline and legend entry per series; the x
    /// axis log-scaled too when its ticks span a factor of 8 or more.
    public static func lineChart(
        title: String, xLabel: String, yLabel: String, series: [(name: String, points: [(Double, Double)])],
        xTicks: [Double],
        xTickLabel: (Double) -> String = { ReportPage.fixed($0, 0) }, style: (String) -> (color: String, dashed: Bool)
    ) -> String {
        let width = 460.0
        let height = 300.0
        let left = 64.0
        let right = 16.0
        let top = 32.0
        let bottom = 48.0
        let plotted = series.filter { !$0.points.isEmpty }
        let values = plotted.flatMap { $0.points.map { Swift.max($0.1, 1) } }
        guard let low = values.min(), let high = values.max(), let xMin = xTicks.min(), let xMax = xTicks.max() else {
            return ""
        }
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
        var svg = svgStart(width: width, height: height, title: title)
        var decade = yMin
        while decade <= yMax {
            let position = y(pow(10, decade))
            svg +=
                "<line x1=\"\(left)\" y1=\"\(position)\" x2=\"\(width - right)\" y2=\"\(position)\" stroke=\"#eee\"/>"
            svg +=
                "<text x=\"\(left - 6)\" y=\"\(position + 4)\" text-anchor=\"end\" font-size=\"11\">\(fixed(pow(10, decade), 0))</text>\n"
            decade += 1
        }
        for tick in xTicks {
            svg +=
                "<text x=\"\(x(tick))\" y=\"\(height - bottom + 16)\" text-anchor=\"middle\" font-size=\"11\">\(escape(xTickLabel(tick)))</text>\n"
        }
        svg += axisLabels(
            xLabel: xLabel, yLabel: yLabel, width: width, height: height, left: left, right: right, top: top,
            bottom: bottom)
        for (index, line) in plotted.enumerated() {
            let (color, dashed) = style(line.name)
            let points = line.points.map { "\(fixed(x($0.0), 1)),\(fixed(y($0.1), 1))" }.joined(separator: " ")
            svg +=
                "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"\(dashed ? " stroke-dasharray=\"6 3\"" : "") points=\"\(points)\"><title>\(escape(line.name))</title></polyline>\n"
            for point in line.points {
                svg +=
                    "<circle cx=\"\(fixed(x(point.0), 1))\" cy=\"\(fixed(y(point.1), 1))\" r=\"2.5\" fill=\"\(color)\"/>"
            }
            let legendY = top + 14 + Double(index) * 14
            svg +=
                "<text x=\"\(left + 8)\" y=\"\(legendY)\" font-size=\"11\" fill=\"\(color)\">■ \(escape(line.name))</text>\n"
        }
        return svg + "</svg>\n"
    }

    /// The axis titles (the y one turned) and the plot area's frame.
    static func axisLabels(
        xLabel: String, yLabel: String, width: Double, height: Double, left: Double, right: Double, top: Double,
        bottom: Double
    ) -> String {
        "<text x=\"\(Int((left + width - right) / 2))\" y=\"\(Int(height - 8))\" text-anchor=\"middle\" font-size=\"12\">\(escape(xLabel))</text>\n"
            + "<text transform=\"translate(14 \(Int((top + height - bottom) / 2))) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">\(escape(yLabel))</text>\n"
            + "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(width - left - right)\" height=\"\(height - top - bottom)\" fill=\"none\" stroke=\"#999\"/>\n"
    }
}
