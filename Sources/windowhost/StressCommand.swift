import ArgumentParser
import Foundation
import Glibc
import IOUring
import Stress
import SystemPackage

struct StressCampaignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress",
        abstract: "Kill workers (and now and then the supervisor) while browsing; prove nothing acknowledged was lost.",
        discussion: """
            Runs a supervisor on ROOT and drives seeded random browsing on every scene: open
            (regular and incognito), navigate, close, move, activate, prerender replace, close
            all incognito, background and foreground, disconnect and reconnect, save --wait.
            Meanwhile it kills workers with SIGKILL (half the time aimed at a save in flight,
            as shared memory shows it), sometimes kills the supervisor and starts a new one on
            the same root, and sometimes damages a newest snapshot first. After every recovery
            an independent model of each window judges it: lost (acknowledged durable, then
            missing), unexpected (never sent, yet present), recovered (sent, not acknowledged,
            present), torn (matches no prefix of the commands). Exit 0 when none was lost,
            unexpected or torn, 1 otherwise, with a line that reproduces it.
            The same seed makes the same decisions as long as the same states come back.
            """)

    @Option(help: "The state directory (default: a new temporary one, removed at the end).")
    var root: String?

    @Option(help: "Scenes, each its own worker process.")
    var scenes = 4

    @Option(help: "Stop after this many kills (default 100 unless --duration).")
    var kills: Int?

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(help: "Kills per second.")
    var killRate = 5.0

    @Option(help: "Seed of every decision (default: random, printed).")
    var seed: UInt64?

    @Option(help: "The workers' save delay in ms (0: every change saved at once).")
    var saveDelay: UInt64 = 0

    @Option(help: "Write the report as JSON to this file.")
    var json: String?

    @Flag(help: "Workers write through the powercut engine: every kill also loses each write not yet synced.")
    var powerCut = false

    @Option(help: "One worker kill in this many first damages the window's newest snapshot (0: never).")
    var damageOneIn = 12

    @OptionGroup var io: IOOptions

    func validate() throws {
        guard !powerCut || io.choice == nil else { throw ValidationError("--power-cut chooses the engine: leave out --io") }
        guard kills == nil || duration == nil else { throw ValidationError("give --kills or --duration, not both") }
        guard (1...64).contains(scenes) else { throw ValidationError("--scenes must be within 1...64") }
        guard killRate > 0, killRate <= 1000 else { throw ValidationError("--kill-rate must be within (0, 1000]") }
        if let kills, kills < 1 { throw ValidationError("--kills must be at least 1") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        guard damageOneIn >= 0 else { throw ValidationError("--damage-one-in must be 0 (never) or more") }
    }

    func run() throws {
        let engine = powerCut ? IOEngineChoice.powercut.rawValue : try io.makeEngine().name
        let seed = seed ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let temporary = root == nil
        let rootPath = try root.map { FilePath($0) } ?? PrivateFiles.makeTemporaryDirectory(prefix: "windowhost-stress").appending("host")
        defer {
            if temporary {
                let parent = rootPath.removingLastComponent().string
                try? FileManager.default.removeItem(atPath: parent)
            }
        }
        // The supervisor's logs go beside the root.
        try PrivateFiles.makeDirectories(rootPath.removingLastComponent())
        var options = CampaignOptions(
            root: rootPath, scenes: scenes, kills: duration == nil ? (kills ?? 100) : nil, duration: duration, killRate: killRate,
            seed: seed, saveDelayMilliseconds: saveDelay, io: engine, executable: try RunCommand.executablePath())
        options.progress = isatty(STDERR_FILENO) == 1
        options.corruptionOneIn = damageOneIn
        print("windowhost stress: seed \(seed), \(scenes) scenes, engine \(engine), root \(rootPath)")
        let report: CampaignReport
        do {
            report = try Campaign(options: options).run()
        } catch {
            FileHandle.standardError.write(Data("windowhost stress: \(error)\n".utf8))
            throw ExitStatus.unavailable
        }
        print(Self.summary(report))
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try PrivateFiles.write(Array(try encoder.encode(report)) + [UInt8(ascii: "\n")], to: FilePath(json))
        }
        if !report.passed { throw ExitStatus.checkFailed }
    }

    static func summary(_ report: CampaignReport) -> String {
        var lines = [
            String(format: "%d kills (%d of the supervisor, %d while a save was in flight, %d after damaging a snapshot) in %.1f s",
                   report.kills, report.supervisor_kills, report.killed_while_saving, report.corruptions, report.duration_s),
            "\(report.commands) commands, \(report.acknowledged) acknowledged durable, \(report.recoveries) recoveries checked",
            "lost \(report.lost), unexpected \(report.unexpected), torn \(report.torn), recovered (sent, not acknowledged, present) \(report.recovered)",
            String(format: "recovery (kill → restored, taking commands): p50 %.1f ms, p99 %.1f ms, max %.1f ms",
                   report.recovery_ms.p50, report.recovery_ms.p99, report.recovery_ms.max),
            String(format: "save latency (request → durable): p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs, max %.0f µs",
                   report.save_latency_us.p50, report.save_latency_us.p99, report.save_latency_us.p999 ?? 0, report.save_latency_us.max),
        ]
        lines += report.failures.prefix(20).map { "FAILED: \($0)" }
        lines.append(report.passed ? "nothing acknowledged was lost" : "FAILED")
        return lines.joined(separator: "\n")
    }
}
