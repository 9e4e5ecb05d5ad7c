/// A Prometheus text exposition, read sample by sample (`name{labels} value`): what tests
/// compare after `promtool` has checked the format.
public struct PrometheusScrape: Sendable {
    public let text: String

    public init(text: String) { self.text = text }

    /// The sample of `name` whose labels are exactly `labels`.
    public func value(_ name: String, _ labels: [String: String]) -> Double? {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            let series = line[..<space]
            let (metric, rest) = series.firstIndex(of: "{").map { (series[..<$0], series[$0...]) } ?? (series, "")
            guard metric == name else { continue }
            var found: [String: String] = [:]
            for match in rest.matches(of: /([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/) {
                found[String(match.1)] = String(match.2)
            }
            if found == labels { return Double(line[line.index(after: space)...]) }
        }
        return nil
    }
}
