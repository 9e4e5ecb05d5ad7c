extension BenchReport {
    /// The highest offered rate, per window, up to which uring's p99 is held against the
    /// device floor's: past it the commands of one flush's time outnumber what one save carries.
    static let floorComparedRate: Double = 8000

    /// The open loop's targets, per window count the sweep ran: uring's p99 over sync's at
    /// every rate both keep up with (the worst of them), and over the floor's small p99 at
    /// 1 window at every rate up to `floorComparedRate`; then, at 1 window, the highest rate
    /// uring keeps up with over the highest sync keeps up with.
    func openLoopTargets() -> [Target] {
        var targets: [Target] = []
        for windows in Set(openLoop.map(\.windows)).sorted() {
            let label = "open loop, \(windows) window\(windows == 1 ? "" : "s")"
            let overSync = openLoopRatio(windows: windows)
            targets.append(
                Target(
                    name: "\(label): uring p99 over sync p99, the worst at any rate both keep up with",
                    measured: overSync, goal: "≤ 0.8",
                    met: overSync.map { $0 <= 0.8 }))
            let overFloor = openLoopOverFloor(windows: windows)
            targets.append(
                Target(
                    name:
                        "\(label): uring p99 over the floor's small p99 at 1 window, the worst at rates up to \(format(Self.floorComparedRate, 0))/s",
                    measured: overFloor, goal: "≤ 3", met: overFloor.map { $0 <= 3 }))
        }
        if openLoop.contains(where: { $0.windows == 1 }) {
            let reach = openLoopReach()
            targets.append(
                Target(
                    name: "open loop, 1 window: highest rate uring keeps up with over the highest sync keeps up with",
                    measured: reach,
                    goal: "≥ 2", met: reach.map { $0 >= 2 }))
        }
        return targets
    }

    /// The points of `engine` at `windows` windows.
    private func points(_ engine: Contender, _ windows: Int) -> [OpenLoopResult] {
        openLoop.filter { $0.engine == engine.rawValue && $0.windows == windows }
    }

    /// uring's p99 over sync's at each offered rate where both made ≥ 95 % of the commands
    /// durable, at `windows` windows: the largest; nil when there is no such rate.
    func openLoopRatio(windows: Int) -> Double? {
        let sync = points(.sync, windows)
        let ratios = points(.uring, windows).compactMap { uring -> Double? in
            guard uring.keptUp, let other = sync.first(where: { $0.offeredPerSecond == uring.offeredPerSecond }),
                other.keptUp, other.p99 > 0
            else { return nil }
            return Double(uring.p99) / Double(other.p99)
        }
        return ratios.max()
    }

    /// uring's p99 over the floor's small p99 at 1 window, the largest at rates up to
    /// `floorComparedRate`; nil without the floor or such a point.
    func openLoopOverFloor(windows: Int) -> Double? {
        guard let floor, floor.p99 > 0 else { return nil }
        return points(.uring, windows).filter { $0.offeredPerSecond <= Self.floorComparedRate }.map {
            Double($0.p99) / Double(floor.p99)
        }.max()
    }

    /// The highest rate uring kept up with at 1 window over the highest sync kept up with; nil
    /// when sync kept up with none. An engine keeps up to a rate only if it kept up with every
    /// rate below it too: one that fell behind at 1,000/s does not reach 8,000/s because it
    /// kept up there. The sweep stops past sync's last: a uring that kept up there measured at
    /// least that ratio (rates double).
    func openLoopReach() -> Double? {
        func highest(_ engine: Contender) -> Double? {
            points(engine, 1).sorted { $0.offeredPerSecond < $1.offeredPerSecond }.prefix(while: \.keptUp).last?
                .offeredPerSecond
        }
        guard let sync = highest(.sync), sync > 0 else { return nil }
        return (highest(.uring) ?? 0) / sync
    }
}
