import Foundation
import Glibc

/// The progress of a long command (`stress`, `bench`) on stderr. On a terminal one line redrawn
/// in place (`\r`): a bar, the count done, elapsed and ETA, at most `terminalInterval` apart
/// and ended with a newline; elsewhere (a log, a pipe) a plain line every `plainInterval`, with
/// no control characters.
public struct ProgressMeter: Sendable {
    /// At most four redraws a second: faster is unreadable and costs the caller a measurement.
    public static let terminalInterval = 0.25
    /// A log gets a line every few seconds, not a flood.
    public static let plainInterval = 5.0
    static let barWidth = 24

    /// A terminal (a redrawn bar), or not (plain lines).
    public let terminal: Bool
    /// Each plain line starts with it, e.g. "windowhost stress".
    let name: String
    /// The terminal's width: a longer line would wrap, and `\r` redraw only its last row.
    let columns: Int?
    private let started: Date
    private var lastShown: Date?

    public init(name: String, terminal: Bool, started: Date = Date()) {
        self.name = name
        self.terminal = terminal
        self.started = started
        var size = winsize()
        columns =
            terminal && ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : nil
    }

    /// Whether a line is due: the first one, then one `terminalInterval` (a terminal) or
    /// `plainInterval` after the last. A caller with a costly detail asks before making it.
    public func isDue(now: Date = Date()) -> Bool {
        guard let lastShown else { return true }
        return now.timeIntervalSince(lastShown) >= (terminal ? Self.terminalInterval : Self.plainInterval)
    }

    /// Writes the line for `fraction` done (0...1; nil: unknown, no bar nor ETA), `count` (what
    /// is done, e.g. "kills 12/100") and `detail`, whether or not one is due.
    public mutating func show(fraction: Double?, count: String, detail: String, now: Date = Date()) {
        lastShown = now
        let line = Self.line(
            terminal: terminal, name: name, elapsed: now.timeIntervalSince(started), fraction: fraction, count: count,
            detail: detail, columns: columns)
        StandardStreams.error(line)
    }

    /// Ends the bar's line on a terminal, so what follows starts on a line of its own.
    public func finish() {
        if terminal, lastShown != nil { StandardStreams.error("\n") }
    }

    /// One progress line. Terminal: `\r`, erase to the end of the line, the bar and the rest,
    /// cut to `columns` - 1 characters, no newline (the next redraws it). Plain: the name and
    /// the rest, ended by a newline.
    public static func line(
        terminal: Bool, name: String, elapsed: Double, fraction: Double?, count: String, detail: String,
        columns: Int? = nil
    ) -> String {
        let done = fraction.map { Swift.min(Swift.max($0, 0), 1) }
        var parts = [count, "elapsed \(duration(elapsed))"]
        if let eta = eta(elapsed: elapsed, fraction: done) { parts.append("ETA \(duration(eta))") }
        if !detail.isEmpty { parts.append(detail) }
        let text = parts.joined(separator: "  ")
        guard terminal else {
            let percent = done.map { " \(Int(($0 * 100).rounded(.down)))%" } ?? ""
            return "\(name):\(percent) \(parts.joined(separator: ", "))\n"
        }
        let filled = Int((Double(barWidth) * (done ?? 0)).rounded(.down))
        let bar = "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: barWidth - filled) + "]"
        let percent = done.map { String(format: " %3d%%", Int(($0 * 100).rounded(.down))) } ?? ""
        let full = "\(bar)\(percent)  \(text)"
        return "\r\u{1B}[K" + String(full.prefix(columns.map { Swift.max($0 - 1, 1) } ?? full.count))
    }

    /// Seconds left when `fraction` of the work took `elapsed`, at the same pace; nil before
    /// anything is done (no pace to go by).
    static func eta(elapsed: Double, fraction: Double?) -> Double? {
        guard let fraction, fraction > 0 else { return nil }
        return elapsed * (1 - fraction) / fraction
    }

    /// "42 s", "3:07", "1:02:03".
    static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded())
        if whole < 60 { return "\(whole) s" }
        let (hours, minutes, rest) = (whole / 3600, whole / 60 % 60, whole % 60)
        return hours > 0
            ? String(format: "%d:%02d:%02d", hours, minutes, rest) : String(format: "%d:%02d", minutes, rest)
    }
}
