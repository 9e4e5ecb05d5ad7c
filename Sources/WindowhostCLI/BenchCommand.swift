import ArgumentParser
import Bench
import Foundation
import Glibc
import HostLimits
import Stress
import SystemPackage

/// `windowhost bench`: every contender on one disk, side by side (docs/benchmarks.md).
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract:
            "Measure durable save throughput, latency and CPU side by side (floor, floor-buffered, uring, sync, rewrite, and fio as a referee), open-loop latency, first saves, restore and round trips.",
        discussion: """
            For each window count, N worker processes save at once, each with one save outstanding, \
            in rounds interleaved with the other contenders': \
            small saves (a navigation in a 20-tab window) and large ones (a 500-tab window's full \
            state). floor is one aligned O_DIRECT pwritev2(RWF_DSYNC) per save (a small save: one \
            block) into a pre-written file, floor-buffered the same through the page cache; \
            rewrite applies each change to a Browser like the store's and rewrites the whole session \
            atomically per save, as the mobile browsers do. Each row has its CPU per save (the \
            saving processes', and at 1 window the whole machine's from /proc/stat). \
            The device's write and flush are timed apart. When fio is on PATH it runs as an \
            outside referee with the floor's semantics (O_DIRECT blocks, each O_DSYNC; pvsync2 at \
            depth 1, io_uring at depth 1 and at the store's depth; 1 and 8 jobs). Then the open loop: small commands \
            arriving at fixed rates per window (--rates) on uring and sync, at 1 and 4 windows, \
            latency from each command's arrival to durable, the sweep stopping past the rate the \
            sync engine no longer keeps up with; and the first save of fresh windows. Then a 10,000-tab \
            window's restore, unrealized against eager; host restores (a real run's window of 20 \
            tabs, and of 10,000 held in its journal or compacted, killed with ctl kill until its \
            replacement is ready, and that worker's memory against an empty window's); and a \
            command's round trip through the shared-memory ring, a Unix socket and a ctl call. Exit 0 when it ran (missed targets \
            are reported, not failed), 1 with --check-targets when one was missed, 69 when a \
            contender could not run.
            """)

    @Flag(
        help:
            "Window counts 1 and 8 only, 1 s per case; open loop at 1000, 8000, 64000, 128000, 256000 and 512000 commands/s per window; fio 2 s per case."
    )
    var quick = false

    @Option(help: "Window counts, comma-separated (default 1,2,4,8,16).")
    var windows: String?

    @Option(help: "Tabs of the restored window.")
    var tabs: Int?

    @Option(
        help:
            "Seconds each case saves for, each open-loop rate and each fio case runs for (default 3, 2 and 3; quick 1, 1 and 2)."
    )
    var seconds: Double?

    @Option(help: "Open-loop rates, commands per second per window, comma-separated (default 500,1000,...,512000).")
    var rates: String?

    @Option(
        help: "Rounds each case's seconds are split into, interleaved with the other contenders' (default 3, quick 2).")
    var rounds: Int?

    @Option(
        help:
            "Where the files go: a real disk, never tmpfs (default: a new directory under $XDG_STATE_HOME, else ~/.local/state)."
    )
    var dir: String?

    @Option(help: "Write the report as JSON to this file.")
    var json: String?

    @Option(help: "Write a self-contained HTML page with SVG charts to this file.")
    var html: String?

    @Flag(help: "Exit 1 when a measured target is missed.")
    var checkTargets = false

    func plan() throws -> BenchPlan {
        var plan = quick ? BenchPlan.quick : BenchPlan.full
        if let windows {
            let counts = windows.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard !counts.isEmpty, counts.allSatisfy({ $0.map { (1...Limits.maxOpenWindows).contains($0) } ?? false })
            else {
                throw ValidationError(
                    "--windows takes counts within 1...\(Limits.maxOpenWindows), comma-separated, e.g. 1,2,4,8,16")
            }
            // Each count once, in the order given: the page and the JSON have a point per count.
            var seen = Set<Int>()
            plan.windows = counts.compactMap { $0 }.filter { seen.insert($0).inserted }
        }
        if let tabs {
            guard (1...Limits.maxTabsPerBrowser).contains(tabs) else {
                throw ValidationError("--tabs must be within 1...\(Limits.maxTabsPerBrowser), the most a Browser holds")
            }
            plan.restoreTabs = tabs
        }
        if let seconds {
            guard seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds must be within (0, 3600]") }
            plan.secondsPerCase = seconds
            plan.openLoopSeconds = seconds
            plan.fioSeconds = seconds
        }
        if let rates {
            let values = rates.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard !values.isEmpty, values.allSatisfy({ $0.map { $0 >= 1 && $0 <= 1_000_000 } ?? false }) else {
                throw ValidationError(
                    "--rates takes commands per second within 1...1000000, comma-separated, e.g. 1000,4000")
            }
            let distinct = Set(values.compactMap { $0 }).sorted()
            guard distinct.count <= BenchPlan.maxOpenLoopRates else {
                throw ValidationError("--rates takes at most \(BenchPlan.maxOpenLoopRates) rates")
            }
            plan.openLoopRates = distinct
        }
        if let rounds {
            guard (1...100).contains(rounds) else { throw ValidationError("--rounds must be within 1...100") }
            plan.rounds = rounds
        }
        return plan
    }

    func validate() throws { _ = try plan() }

    func run() throws {
        let plan = try plan()
        StopSignals.install()
        let directory: FilePath
        if let dir {
            directory = FilePath(dir).appending("windowhost-bench-\(getpid())")
        } else {
            let base = FilePath(DefaultPaths.root).removingLastComponent()
            try PrivateFiles.makeDirectories(base)
            directory = base.appending("windowhost-bench-\(getpid())")
        }
        try PrivateFiles.makeDirectories(directory)
        defer { try? FileManager.default.removeItem(atPath: directory.string) }
        if BenchRunner.isInMemory(directory) {
            StandardStreams.error(
                "windowhost bench: \(directory) is on tmpfs: no save reaches a disk; give --dir on one\n")
        }
        var progress = ProgressMeter(name: "windowhost bench", terminal: isatty(STDERR_FILENO) == 1)
        let report: BenchReport
        do {
            // Every step shown: each takes a second or more, and the line names it.
            report = try BenchRunner.run(plan, executable: try RunCommand.executablePath(), directory: directory) {
                done, total, step in
                try StopSignals.stopIfAsked("bench")
                progress.show(fraction: Double(done) / Double(total), count: "step \(done + 1)/\(total)", detail: step)
            }
        } catch let stopped as ExitCode {
            progress.finish()
            throw stopped
        } catch {
            progress.finish()
            StandardStreams.error("windowhost bench: \(error)\n")
            throw ExitCode(.unavailable)
        }
        // A signal during the last step stops here, before anything is printed or written.
        try StopSignals.stopIfAsked("bench")
        progress.show(fraction: 1, count: "steps \(plan.stepCount)/\(plan.stepCount)", detail: "done")
        progress.finish()
        print(report.text)
        if let json { try ReportFile.write(Array(try report.json()) + [UInt8(ascii: "\n")], to: FilePath(json)) }
        if let html { try ReportFile.write(Array(report.html.utf8), to: FilePath(html)) }
        if checkTargets, report.targets.contains(where: { $0.met == false }) { throw ExitCode(.checkFailed) }
    }
}

/// One window saving for the benchmark; spawned by `windowhost bench`, descriptors 3 (ready)
/// and 4 (go) inherited.
struct BenchWorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-worker", abstract: "One window saving for windowhost bench.", shouldDisplay: false)

    @Option var contender: Contender
    @Option var size: SaveSize
    @Option var directory: String
    @Option var seconds: Double
    @Option var result: String
    @Option(help: "Open loop: small commands offered at this rate per second.") var rate: Double?

    func run() throws {
        TerminalStops.ignore()
        try SaveBench.work(
            contender: contender, size: size, directory: FilePath(directory), seconds: seconds,
            result: FilePath(result), perSecond: rate)
    }
}

/// The far end of the round-trip benchmark: echoes every message on the ring and the socket.
struct BenchEchoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-echo", abstract: "The echo end of windowhost bench's round trips.", shouldDisplay: false)

    func run() throws {
        TerminalStops.ignore()
        try CoordinationBench.echo()
    }
}

extension Contender: ExpressibleByArgument {}
extension SaveSize: ExpressibleByArgument {}
