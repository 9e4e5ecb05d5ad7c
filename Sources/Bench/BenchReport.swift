import Foundation

/// Everything one `windowhost bench` run measured, on one disk, side by side.
public struct BenchReport: Codable, Sendable {
    public struct Floor: Codable, Sendable, Equatable {
        public var p50: UInt64
        public var p99: UInt64
        enum CodingKeys: String, CodingKey {
            case p50 = "p50_us"
            case p99 = "p99_us"
        }
    }

    /// One of the targets, as this run measured it.
    public struct Target: Codable, Sendable, Equatable {
        public var name: String
        /// The measured ratio, in the direction the target states (nil: not measured).
        public var measured: Double?
        public var goal: String
        public var met: Bool?
    }

    public var date: String
    public var machine: String
    public var directory: String
    public var secondsPerCase: Double
    public var floor: Floor?
    public var results: [SaveResult]
    public var restore: RestoreResult?
    public var coordination: CoordinationResult?
    public var targets: [Target] = []

    enum CodingKeys: String, CodingKey {
        case date, machine, directory, floor, results, restore, coordination, targets
        case secondsPerCase = "seconds_per_case"
    }

    public init(
        date: String, machine: String, directory: String, secondsPerCase: Double, results: [SaveResult],
        restore: RestoreResult?, coordination: CoordinationResult?
    ) {
        self.date = date
        self.machine = machine
        self.directory = directory
        self.secondsPerCase = secondsPerCase
        self.restore = restore
        self.coordination = coordination
        self.results = results.map { row in
            var row = row
            if let floor = Self.row(in: results, .floor, row.size, row.windows), floor.p99 > 0 {
                row.p99OverFloor = Double(row.p99) / Double(floor.p99)
            }
            if let rewrite = Self.row(in: results, .rewrite, row.size, row.windows), rewrite.savesPerSecond > 0 {
                row.savesOverRewrite = row.savesPerSecond / rewrite.savesPerSecond
            }
            return row
        }
        floor = Self.row(in: results, .floor, SaveSize.small.rawValue, 1).map { Floor(p50: $0.p50, p99: $0.p99) }
        targets = makeTargets()
    }

    static func row(in results: [SaveResult], _ engine: Contender, _ size: String, _ windows: Int) -> SaveResult? {
        results.first { $0.engine == engine.rawValue && $0.size == size && $0.windows == windows }
    }

    private func row(_ engine: Contender, _ size: SaveSize, _ windows: Int) -> SaveResult? {
        Self.row(in: results, engine, size.rawValue, windows)
    }

    private func makeTargets() -> [Target] {
        func target(_ name: String, _ goal: String, _ measured: Double?, _ met: (Double) -> Bool) -> Target {
            Target(name: name, measured: measured, goal: goal, met: measured.map(met))
        }
        let uring1 = row(.uring, .small, 1)
        let uring8 = row(.uring, .small, 8)
        let rewrite8 = row(.rewrite, .small, 8)
        let sync8 = row(.sync, .small, 8)
        return [
            target(
                "uring small p99, 1 window, over floor p99", "≤ 1.5", uring1.flatMap { $0.p99OverFloor }, { $0 <= 1.5 }),
            target(
                "uring small saves/s at 8 windows over rewrite", "≥ 3",
                uring8.flatMap { row in rewrite8.map { row.savesPerSecond / $0.savesPerSecond } }, { $0 >= 3 }),
            target(
                "uring small saves/s at 8 windows over sync", "≥ 1",
                uring8.flatMap { row in sync8.map { row.savesPerSecond / $0.savesPerSecond } }, { $0 >= 1 }),
            target("restore: eager time over unrealized time", "≥ 10", restore?.speedup, { $0 >= 10 }),
            target(
                "shared-memory round trip p50 over socket p50", "< 1",
                coordination.map { $0.shmRoundTripP50 / $0.socketRoundTripP50 }, { $0 < 1 }),
        ]
    }

    // MARK: text

    public var text: String {
        var lines: [String] = []
        lines.append("windowhost bench: \(machine); \(date); \(secondsPerCase) s per case under \(directory)")
        lines.append("")
        lines.append("saves (one outstanding per window, request → durable)")
        lines.append(
            pad("engine", 8) + pad("size", 6) + padLeft("windows", 8) + padLeft("saves/s", 11) + padLeft("MB/s", 9)
                + padLeft("p50 µs", 9) + padLeft("p99 µs", 9) + padLeft("p99.9 µs", 10) + padLeft("max µs", 9)
                + padLeft("p99×floor", 11) + padLeft("×rewrite", 10))
        for row in results {
            lines.append(
                pad(row.engine, 8) + pad(row.size, 6) + padLeft("\(row.windows)", 8) + padLeft(format(row.savesPerSecond, 0), 11)
                    + padLeft(format(row.megabytesPerSecond, 2), 9) + padLeft("\(row.p50)", 9) + padLeft("\(row.p99)", 9)
                    + padLeft("\(row.p999)", 10) + padLeft("\(row.max)", 9)
                    + padLeft(row.p99OverFloor.map { format($0, 2) } ?? "-", 11)
                    + padLeft(row.savesOverRewrite.map { format($0, 2) } ?? "-", 10))
        }
        if let restore {
            lines.append("")
            lines.append(
                "restore \(restore.tabs) tabs, until the active tab is usable: unrealized \(format(restore.unrealizedMilliseconds, 1)) ms, "
                    + "eager \(format(restore.eagerMilliseconds, 1)) ms (\(format(restore.speedup, 1))×)")
        }
        if let coordination {
            lines.append("")
            lines.append(
                "round trip of a command, p50 (p99): shared-memory ring \(format(coordination.shmRoundTripP50, 1)) µs "
                    + "(\(format(coordination.shmRoundTripP99, 1))), Unix socket \(format(coordination.socketRoundTripP50, 1)) µs "
                    + "(\(format(coordination.socketRoundTripP99, 1))), ctl call \(format(coordination.ctlP50, 1)) µs "
                    + "(\(format(coordination.ctlP99, 1)))")
        }
        lines.append("")
        lines.append("targets")
        for target in targets {
            let verdict = target.met.map { $0 ? "met" : "MISSED" } ?? "not measured"
            lines.append("  \(target.name): \(target.measured.map { format($0, 2) } ?? "-") (goal \(target.goal)): \(verdict)")
        }
        return lines.joined(separator: "\n")
    }

    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(self)
    }
}

func format(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }
private func pad(_ text: String, _ width: Int) -> String { text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count) }
private func padLeft(_ text: String, _ width: Int) -> String { text.count >= width ? " " + text : String(repeating: " ", count: width - text.count) + text }
