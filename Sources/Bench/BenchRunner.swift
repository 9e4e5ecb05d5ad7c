import CLinuxShims
import Foundation
import Glibc
import IOUring
import SystemPackage

/// What a run measures.
public struct BenchPlan: Sendable {
    public var windows: [Int]
    public var sizes: [SaveSize] = SaveSize.allCases
    public var contenders: [Contender] = Contender.allCases
    public var secondsPerCase: Double
    /// Each case's seconds are split into this many rounds, interleaved with the other cases'.
    public var rounds: Int
    public var restoreTabs: Int
    public var restoreRepeats: Int
    public var roundTrips: Int
    public var ctlCalls: Int
    /// Kills of each host-restore window (`HostRestoreBench.cases`, the large one of `restoreTabs`).
    public var hostRestoreKills: Int
    /// Moves of a tab between two windows of a host (`MoveBench`).
    public var moves: Int
    /// Window counts of the open loop, each window offered every rate of `openLoopRates` (per
    /// window, ascending) for `openLoopSeconds`, until the sync engine no longer keeps up.
    public var openLoopWindows: [Int] = [1, 4]
    public var openLoopRates: [Double]
    public var openLoopSeconds: Double
    /// Fresh windows per engine whose first save is timed.
    public var firstSaves = 20
    /// Timed writes, and timed flushes, of the device measurement.
    public var deviceIterations: Int
    /// The outside referee's cases (when fio is on PATH), each run this long.
    public var fioCases = FioBench.cases
    public var fioSeconds: Double

    public static let full = BenchPlan(
        windows: [1, 2, 4, 8, 16], secondsPerCase: 3, rounds: 3, restoreTabs: 10_000, restoreRepeats: 5,
        roundTrips: 20_000, ctlCalls: 500, hostRestoreKills: 50, moves: 200,
        openLoopRates: [500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128_000, 256_000, 512_000],
        openLoopSeconds: 2, deviceIterations: 1000, fioSeconds: 3)
    /// Every contender and both sizes still, on fewer window counts and shorter cases; a short
    /// open-loop sweep.
    public static let quick = BenchPlan(
        windows: [1, 8], secondsPerCase: 1, rounds: 2, restoreTabs: 10_000, restoreRepeats: 3, roundTrips: 5_000,
        ctlCalls: 200, hostRestoreKills: 15, moves: 50,
        openLoopRates: [1000, 8000, 64000, 128_000, 256_000, 512_000], openLoopSeconds: 1, deviceIterations: 500,
        fioSeconds: 2)

    /// The most rates an open-loop sweep offers: with each window count (1 to `Limits.maxOpenWindows`,
    /// each once) they bound the points of the bench page and its JSON.
    public static let maxOpenLoopRates = 16

    public var caseCount: Int {
        windows.count * sizes.reduce(0) { count, size in count + contenders.filter(size.applies).count }
    }

    /// The steps a run shows progress by: the device measurement, each fio case, each round of
    /// each case, each open-loop point (at most: the sweep may stop early), first saves,
    /// restore, host restores, moves, round trips.
    public var stepCount: Int { 1 + fioCases.count + caseCount * rounds + openLoopSteps + 5 }
    var openLoopSteps: Int { openLoopWindows.count * openLoopRates.count * Self.openLoopContenders.count }
    /// The store engines the open loop compares, uring first.
    static let openLoopContenders: [Contender] = [.uring, .sync]
}

public enum BenchRunner {
    /// Runs `plan` with files under `directory` (created, emptied after each case), telling
    /// `progress` how many of the plan's steps are done, of how many, and what runs now; a
    /// `progress` that throws stops the run there.
    public static func run(
        _ plan: BenchPlan, executable: String, directory: FilePath,
        progress: (_ done: Int, _ total: Int, _ step: String) throws -> Void
    ) throws -> BenchReport {
        try FileManager.default.createDirectory(
            atPath: directory.string, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try progress(0, plan.stepCount, "device: a direct write alone, a flush alone")
        let device = try DeviceBench.run(iterations: plan.deviceIterations, directory: directory)
        let fio = try FioBench.run(plan.fioCases, seconds: plan.fioSeconds, directory: directory) {
            try progress(1 + $0, plan.stepCount, $1)
        }
        let results = try runSaveCases(plan, executable: executable, directory: directory) {
            try progress(plan.fioCases.count + $0, plan.stepCount, $1)
        }
        let beforeOpenLoop = 1 + plan.fioCases.count + plan.caseCount * plan.rounds
        let openLoop = try runOpenLoop(plan, executable: executable, directory: directory) { step, what in
            try progress(beforeOpenLoop + step, plan.stepCount, what)
        }
        let afterOpenLoop = beforeOpenLoop + plan.openLoopSteps
        try progress(afterOpenLoop, plan.stepCount, "first save of a fresh window, \(plan.firstSaves) of each engine")
        let firstSave = try FirstSaveBench.run(repeats: plan.firstSaves, directory: directory)
        settle()
        try progress(afterOpenLoop + 1, plan.stepCount, "restore of \(plan.restoreTabs) tabs")
        let restoreDirectory = directory.appending("restore")
        defer { try? FileManager.default.removeItem(atPath: restoreDirectory.string) }
        let restore = try RestoreBench.run(
            tabs: plan.restoreTabs, repeats: plan.restoreRepeats, directory: restoreDirectory)
        settle()
        try progress(
            afterOpenLoop + 2, plan.stepCount,
            "host restores: ctl kill until ready, \(plan.hostRestoreKills) kills a window")
        let hostDirectory = directory.appending("host-restore")
        // Each host's root and its logs beside it are all inside.
        defer { try? FileManager.default.removeItem(atPath: hostDirectory.string) }
        let hostRestore = try HostRestoreBench.run(
            executable: executable, kills: plan.hostRestoreKills, directory: hostDirectory,
            cases: HostRestoreBench.cases(largeTabs: plan.restoreTabs))
        settle()
        try progress(afterOpenLoop + 3, plan.stepCount, "moves of a tab between two windows, \(plan.moves)")
        let moveDirectory = directory.appending("moves")
        defer { try? FileManager.default.removeItem(atPath: moveDirectory.string) }
        let moves = try MoveBench.run(executable: executable, moves: plan.moves, directory: moveDirectory)
        settle()
        try progress(afterOpenLoop + 4, plan.stepCount, "round trips: shared memory, socket, ctl")
        let coordinationDirectory = directory.appending("coordination")
        // The supervisor's root and its logs beside it are all inside.
        defer { try? FileManager.default.removeItem(atPath: coordinationDirectory.string) }
        let coordination = try CoordinationBench.run(
            executable: executable, iterations: plan.roundTrips, ctlCalls: plan.ctlCalls,
            directory: coordinationDirectory)
        return BenchReport(
            date: ISO8601DateFormatter().string(from: Date()), machine: machineDescription(directory),
            directory: directory.string,
            secondsPerCase: plan.secondsPerCase, results: results, restore: restore, coordination: coordination,
            device: device,
            openLoop: openLoop, firstSave: firstSave, fio: fio.results, fioProblem: fio.problem,
            hostRestore: hostRestore, moves: moves)
    }

    /// Every closed-loop save case, `plan.rounds` rounds each; `progress` is told how many
    /// rounds of cases are done and what runs now.
    static func runSaveCases(
        _ plan: BenchPlan, executable: String, directory: FilePath,
        progress: (_ done: Int, _ step: String) throws -> Void
    ) throws -> [SaveResult] {
        var results: [SaveResult] = []
        var done = 0
        // Window counts outermost, then rounds, contenders innermost: the disk of a shared
        // machine drifts over minutes, so every contender gets a share of each stretch of it,
        // and the rows compared with each other ran seconds apart.
        for windows in plan.windows {
            var workers: [String: [WorkerResult]] = [:]
            for round in 1...plan.rounds {
                for size in plan.sizes {
                    for contender in plan.contenders where size.applies(to: contender) {
                        done += 1
                        try progress(
                            done,
                            "case \(done)/\(plan.caseCount * plan.rounds): \(contender.rawValue) \(size.rawValue) saves, "
                                + "\(windows) window\(windows == 1 ? "" : "s"), round \(round) of \(plan.rounds)")
                        let caseDirectory = directory.appending("\(contender.rawValue)-\(size.rawValue)-\(windows)")
                        defer { try? FileManager.default.removeItem(atPath: caseDirectory.string) }
                        try FileManager.default.createDirectory(
                            atPath: caseDirectory.string, withIntermediateDirectories: true,
                            attributes: [.posixPermissions: 0o700])
                        let measured = try SaveBench.run(
                            executable: executable, contender: contender, size: size, windows: windows,
                            seconds: plan.secondsPerCase / Double(plan.rounds), directory: caseDirectory)
                        let key = "\(contender.rawValue) \(size.rawValue)"
                        workers[key] = zip(workers[key] ?? measured.map { _ in WorkerResult() }, measured).map {
                            total, round in
                            var total = total
                            total.add(round)
                            return total
                        }
                    }
                }
            }
            for size in plan.sizes {
                for contender in plan.contenders where size.applies(to: contender) {
                    results.append(
                        SaveResult(
                            engine: contender, windows: windows, size: size,
                            workers: workers["\(contender.rawValue) \(size.rawValue)"] ?? []))
                }
            }
        }
        return results
    }

    /// The open-loop sweep: for each window count, the rates in ascending order, both store
    /// engines at each (uring first), up to and including the first rate the sync engine does
    /// not keep up with (under 95 % achieved, or a p99 ten times its p99 at the lowest rate).
    /// `progress` is told each point's place in the full sweep (a sweep stopped early skips
    /// the rest of its window count's places) and what it measures.
    static func runOpenLoop(
        _ plan: BenchPlan, executable: String, directory: FilePath,
        progress: (_ step: Int, _ what: String) throws -> Void
    ) throws -> [OpenLoopResult] {
        var points: [OpenLoopResult] = []
        for (windowIndex, windows) in plan.openLoopWindows.enumerated() {
            var syncBaselineP99: UInt64?
            for (rateIndex, rate) in plan.openLoopRates.enumerated() {
                var syncKeptUp = true
                for (contenderIndex, contender) in BenchPlan.openLoopContenders.enumerated() {
                    try progress(
                        (windowIndex * plan.openLoopRates.count + rateIndex) * BenchPlan.openLoopContenders.count
                            + contenderIndex,
                        "open loop: \(contender.rawValue), \(windows) window\(windows == 1 ? "" : "s"), \(format(rate, 0)) commands/s each"
                    )
                    let caseDirectory = directory.appending("open-\(contender.rawValue)-\(windows)")
                    defer { try? FileManager.default.removeItem(atPath: caseDirectory.string) }
                    try FileManager.default.createDirectory(
                        atPath: caseDirectory.string, withIntermediateDirectories: true,
                        attributes: [.posixPermissions: 0o700])
                    let workers = try SaveBench.run(
                        executable: executable, contender: contender, size: .small, windows: windows,
                        seconds: plan.openLoopSeconds,
                        directory: caseDirectory, perSecond: rate)
                    let point = OpenLoopResult(
                        engine: contender, windows: windows, offeredPerSecond: rate, workers: workers)
                    points.append(point)
                    if contender == .sync {
                        let baseline = syncBaselineP99 ?? point.p99
                        syncBaselineP99 = baseline
                        syncKeptUp = point.keptUp && point.p99 <= 10 * Swift.max(baseline, 1)
                    }
                }
                if !syncKeptUp { break }
            }
        }
        return points
    }

    /// Lets the writeback the save cases left behind finish before a measurement that is about
    /// the CPU: restore from the page cache and round trips would otherwise pay for it.
    private static func settle() {
        Glibc.sync()
        sleep(1)
    }

    /// Kernel, cores and the file system the files went to: what a reader needs to compare runs.
    static func machineDescription(_ directory: FilePath) -> String {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let machine = withUnsafeBytes(of: &name.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return "Linux \(release) \(machine), \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, \(fileSystem(directory))"
    }

    /// tmpfs's magic number (statfs `f_type`).
    /// Whether `directory` is on tmpfs: no save there reaches a disk.
    public static func isInMemory(_ directory: FilePath) -> Bool { DirectIO.isInMemory(directory) }

    /// The file system's name by its magic number; tmpfs is named so no one mistakes it for a disk.
    public static func fileSystem(_ directory: FilePath) -> String {
        let type = wh_filesystem_type(directory.string)
        guard type >= 0 else { return "unknown file system" }
        switch type {
        case 0xEF53: return "ext4"
        case 0x5846_5342: return "xfs"
        case 0x9123_683E: return "btrfs"
        case DirectIO.tmpfsMagic: return "tmpfs (memory, not a disk)"
        case 0x794C_7630: return "overlayfs"
        default: return String(format: "file system 0x%llx", type)
        }
    }
}
