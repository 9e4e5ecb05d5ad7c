import ArgumentParser
import CLinuxShims
import Foundation
import Glibc
import HostLimits
import IOUring
import Stress
import SystemPackage

struct StressCampaignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress",
        abstract: "Kill workers (and now and then the supervisor) while browsing; prove nothing acknowledged was lost.",
        discussion: """
            Runs a supervisor on ROOT and drives seeded random browsing on every scene: open \
            (regular and incognito), navigate, close, move, activate, prerender replace, close \
            all incognito, background and foreground, disconnect and reconnect, save --wait. \
            Meanwhile it kills workers with SIGKILL (half the time aimed at a save in flight, \
            as shared memory shows it), sometimes kills the supervisor and starts a new one on \
            the same root, and sometimes damages a newest snapshot first. It moves tabs between \
            windows (move-to-window), and aims half the kills at a move: the supervisor a moment \
            after it was asked, or one side's worker as the move enters a stage (kill \
            --aim-move). Once a move is over, the tab must be in exactly one of its two \
            windows (duplicated, lost in move), and in the destination if the move was acknowledged. After every recovery \
            an independent model of each window judges it: lost (acknowledged durable, then \
            missing), unexpected (never sent, yet present), recovered (sent, not acknowledged, \
            present), torn (matches no prefix of the commands). Exit 0 when none was lost, \
            unexpected or torn, 1 otherwise, with a line that reproduces it. \
            The same seed makes the same decisions as long as the same states come back.

            --hostile: now and then (seeded) the campaign fills the disk and frees it, plants \
            symlinks (in a window's session directories, as windows.order.tmp, as a window \
            under windows/) pointing at a canary outside the root, and puts FIFOs, directories \
            and (when not root) unreadable files where session files are read. The oracle is \
            the same; the canary must survive, saves must be durable within seconds of space \
            coming back, and any reply slower than \(Self.hostileReplyTimeoutSeconds) s is a hang. \
            As root it mounts a \(Self.hostileTmpfsMiB) MiB tmpfs as the root, in a mount namespace \
            of its own (other processes do not see it; it goes with the campaign however the \
            campaign ends; --root, if given, must be empty); otherwise --root must be on a filesystem of at \
            most \(Self.hostileMaxFilesystemMiB) MiB, which it fills.
            """)

    /// The tmpfs `--hostile` mounts as the root when run as root: room for every scene's
    /// sessions, small enough to fill in a moment.
    static let hostileTmpfsMiB = 64
    /// Without root, the largest filesystem `--hostile` agrees to fill.
    static let hostileMaxFilesystemMiB = 512
    static let hostileReplyTimeoutSeconds = 20

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

    @Option(help: "Write the report as JSON to this file: every event, one a line.")
    var json: String?

    @Option(
        help:
            "Write a self-contained HTML page to this file: a timeline of kills, damage and recoveries, recovery-time and save-latency distributions, the oracle's verdicts, summaries of the recoveries and hostile events."
    )
    var html: String?

    @Flag(help: "Workers write through the powercut engine: every kill also loses each write not yet synced.")
    var powerCut = false

    @Option(help: "One worker kill in this many first damages the window's newest snapshot (0: never).")
    var damageOneIn = 12

    @Option(
        help:
            "One step in this many moves a tab between two windows (move-to-window), and half the kills are aimed at a move (0: no moves)."
    )
    var moveOneIn = 10

    @Flag(help: "Now and then fill the disk, plant symlinks, FIFOs and unreadable entries (see above).")
    var hostile = false

    @OptionGroup var io: IOOptions

    func validate() throws {
        guard !powerCut || io.choice == nil else {
            throw ValidationError("--power-cut chooses the engine: leave out --io")
        }
        guard kills == nil || duration == nil else { throw ValidationError("give --kills or --duration, not both") }
        guard (1...Limits.maxOpenWindows).contains(scenes) else {
            throw ValidationError("--scenes must be within 1...\(Limits.maxOpenWindows)")
        }
        guard killRate > 0, killRate <= 1000 else { throw ValidationError("--kill-rate must be within (0, 1000]") }
        if let kills, kills < 1 { throw ValidationError("--kills must be at least 1") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        guard damageOneIn >= 0 else { throw ValidationError("--damage-one-in must be 0 (never) or more") }
        guard moveOneIn >= 0 else { throw ValidationError("--move-one-in must be 0 (never) or more") }
        guard !hostile || geteuid() == 0 || root != nil else {
            throw ValidationError(
                "--hostile fills the disk: without root, give --root on a filesystem of at most \(Self.hostileMaxFilesystemMiB) MiB"
            )
        }
    }

    func run() throws {
        StopSignals.install()
        let engine = powerCut ? IOEngineChoice.powercut.rawValue : try io.makeEngine().name
        let seed = seed ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let temporary = root == nil
        let rootPath =
            try root.map { FilePath($0) }
            ?? PrivateFiles.makeTemporaryDirectory(prefix: "windowhost-stress").appending("host")
        defer {
            if temporary {
                let parent = rootPath.removingLastComponent().string
                try? FileManager.default.removeItem(atPath: parent)
            }
        }
        // The supervisor's logs go beside the root.
        try PrivateFiles.makeDirectories(rootPath.removingLastComponent())
        var mounted: HostileFilesystem?
        defer { mounted?.unmount() }
        if hostile {
            mounted = try HostileFilesystem.prepare(rootPath)
        }
        // Before the unmount: the keys are named by the root as the campaign saw it. A hostile
        // campaign's root is its own tmpfs, gone with the unmount, so its keys go too.
        defer { if temporary || mounted?.mountPoint != nil { PrivateFiles.forgetTemporaryRootKeys(rootPath) } }
        var options = CampaignOptions(
            root: rootPath, scenes: scenes, kills: duration == nil ? (kills ?? 100) : nil, duration: duration,
            killRate: killRate,
            seed: seed, saveDelayMilliseconds: saveDelay, io: engine, executable: try RunCommand.executablePath())
        options.stopRequested = { StopSignals.receivedSignal != nil }
        options.progress = ProgressMeter(name: "windowhost stress", terminal: isatty(STDERR_FILENO) == 1)
        options.corruptionOneIn = damageOneIn
        options.moveOneIn = moveOneIn
        if hostile {
            options.hostile = HostileOptions(canaryDirectory: FilePath(rootPath.string + ".hostile-canary"))
            options.replyTimeoutSeconds = Self.hostileReplyTimeoutSeconds
        }
        defer { if hostile { try? FileManager.default.removeItem(atPath: rootPath.string + ".hostile-canary") } }
        print(
            "windowhost stress: seed \(seed), \(scenes) scenes, engine \(engine), root \(rootPath)\(mounted.map { " (\($0))" } ?? "")"
        )
        let report: CampaignReport
        do {
            report = try Campaign(options: options).run()
        } catch {
            StandardStreams.error("windowhost stress: \(error)\n")
            throw ExitCode(.unavailable)
        }
        print(Self.summary(report))
        if let json { try ReportFile.write(try report.json(), to: FilePath(json)) }
        if let html { try ReportFile.write(Array(report.html.utf8), to: FilePath(html)) }
        if !report.passed { throw ExitCode(.checkFailed) }
    }

    static func summary(_ report: CampaignReport) -> String {
        var lines = [
            String(
                format:
                    "%d kills (%d of the supervisor, %d while a save was in flight, %d after damaging a snapshot) in %.1f s",
                report.kills, report.supervisorKills, report.killedWhileSaving, report.corruptions, report.durationS),
            "\(report.commands) commands, \(report.acknowledged) acknowledged durable, \(report.recoveries) recoveries checked",
            "lost \(report.lost), unexpected \(report.unexpected), torn \(report.torn), recovered (sent, not acknowledged, present) \(report.recovered)",
            "\(report.movesStarted) moves between windows, \(report.movesAcknowledged) acknowledged, \(report.movesResolved) resolved (\(report.movesCommitted) committed), "
                + "\(report.moveKills.values.reduce(0, +)) worker kills in the stage aimed at, \(report.supervisorKillsInMoves) supervisor kills during one: "
                + "duplicated \(report.duplicated), lost in move \(report.lostInMove)",
            String(
                format: "recovery (kill → restored, taking commands): p50 %.1f ms, p99 %.1f ms, max %.1f ms",
                report.recoveryMs.p50, report.recoveryMs.p99, report.recoveryMs.max),
            String(
                format: "save latency (request → durable): p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs, max %.0f µs",
                report.saveLatencyUs.p50, report.saveLatencyUs.p99, report.saveLatencyUs.p999 ?? 0,
                report.saveLatencyUs.max),
        ]
        if report.hostileEvents > 0 {
            lines.append(
                "hostile: \(report.hostileEvents) events (\(report.diskFills) disk fills, \(report.plantedEntries) entries planted), "
                    + "\(report.refusedWhileFull) saves refused (74) while the disk was full")
        }
        lines += report.failures.prefix(20).map { "FAILED: \(report.shown($0)); reproduce: \(report.reproduce)" }
        lines.append(report.passed ? "nothing acknowledged was lost" : "FAILED")
        return lines.joined(separator: "\n")
    }
}

/// The filesystem a `--hostile` campaign fills: a tmpfs it mounts as the root when run as
/// root, else the one the root is on, if it is small enough.
struct HostileFilesystem: CustomStringConvertible {
    let mountPoint: FilePath?
    let description: String

    static func prepare(_ root: FilePath) throws -> HostileFilesystem {
        guard geteuid() == 0 else {
            var existing = root
            while access(existing.string, F_OK) != 0, !existing.removingLastComponent().isEmpty {
                existing = existing.removingLastComponent()
            }
            var stats = statvfs()
            guard statvfs(existing.string, &stats) == 0 else {
                throw ValidationError("--hostile: statvfs \(existing): \(Errno(rawValue: errno))")
            }
            let mebibytes =
                UInt64(stats.f_blocks).multipliedReportingOverflow(by: UInt64(stats.f_frsize)).partialValue >> 20
            guard mebibytes <= StressCampaignCommand.hostileMaxFilesystemMiB else {
                throw ValidationError(
                    "--hostile fills the disk: \(existing) is on a filesystem of \(mebibytes) MiB, above \(StressCampaignCommand.hostileMaxFilesystemMiB) MiB; "
                        + "give --root on a small one (a tmpfs or a loop device)")
            }
            return HostileFilesystem(mountPoint: nil, description: "a filesystem of \(mebibytes) MiB")
        }
        try PrivateFiles.makeDirectories(root)
        guard ((try? FileManager.default.contentsOfDirectory(atPath: root.string)) ?? []).isEmpty else {
            throw ValidationError("--hostile mounts a tmpfs over the root: \(root) must be empty or new")
        }
        // Mounted in a mount namespace of the campaign's own, which its supervisor and workers
        // inherit: the tmpfs ends with the last of them even when the campaign is killed with
        // SIGKILL and cannot unmount it (other processes never see it mounted).
        guard wh_private_mount_namespace() == 0 else {
            let error = Errno(rawValue: errno)
            StandardStreams.error("windowhost stress: --hostile could not make a private mount namespace: \(error)\n")
            throw ExitCode(.unavailable)
        }
        let size = "size=\(StressCampaignCommand.hostileTmpfsMiB)m,mode=0700"
        guard mount("tmpfs", root.string, "tmpfs", UInt(MS_NOSUID | MS_NODEV), size) == 0 else {
            let error = Errno(rawValue: errno)
            StandardStreams.error("windowhost stress: --hostile could not mount a tmpfs on \(root): \(error)\n")
            throw ExitCode(.unavailable)
        }
        return HostileFilesystem(
            mountPoint: root,
            description: "a tmpfs of \(StressCampaignCommand.hostileTmpfsMiB) MiB mounted for the campaign")
    }

    /// Unmounts what `prepare` mounted; lazily when a straggling worker still holds it.
    func unmount() {
        guard let mountPoint else { return }
        if umount2(mountPoint.string, 0) != 0 { umount2(mountPoint.string, Int32(MNT_DETACH)) }
    }
}
