import BrowserModel
import Foundation
import Glibc
import Histogram
import HostControl
import IOUring
import Platform
import SystemPackage

public struct CampaignOptions: Sendable {
    public var root: FilePath
    public var scenes: Int
    /// Stop after this many kills (workers and supervisors)…
    public var kills: Int?
    /// …or after this many seconds.
    public var duration: Double?
    public var killRate: Double
    public var seed: UInt64
    public var saveDelayMilliseconds: UInt64
    public var io: String
    /// The `windowhost` binary whose `run` the campaign drives.
    public var executable: String
    /// One kill in this many is of the supervisor itself.
    public var supervisorKillOneIn = 25
    /// One worker kill in this many first damages the window's newest snapshot; 0: never.
    public var corruptionOneIn = 12
    /// Small, so windows compact (and have a generation to fall back on) during the campaign.
    public var compactAfterRecords = 48
    /// Where the campaign shows its progress (kills done, elapsed, ETA); nil: nowhere.
    public var progress: ProgressMeter?
    /// Asked at every step: true stops the campaign there, and it cleans up (shuts the
    /// supervisor down; a hostile one frees the disk). `stress` answers it from its signals.
    public var stopRequested: @Sendable () -> Bool = { false }
    /// `--hostile`: the world around the store turns hostile now and then; nil: never.
    public var hostile: HostileOptions?
    /// How long any reply may take before the campaign calls it a hang.
    public var replyTimeoutSeconds = 60
    /// One step in this many moves a tab between two windows, and half the kills are aimed at
    /// a move's steps; 0: no moves.
    public var moveOneIn = 10

    public init(
        root: FilePath, scenes: Int, kills: Int?, duration: Double?, killRate: Double, seed: UInt64,
        saveDelayMilliseconds: UInt64, io: String, executable: String
    ) {
        self.root = root
        self.scenes = scenes
        self.kills = kills
        self.duration = duration
        self.killRate = killRate
        self.seed = seed
        self.saveDelayMilliseconds = saveDelayMilliseconds
        self.io = io
        self.executable = executable
    }
}

/// The hostile world of `stress --hostile`. The root must be on a filesystem the campaign may
/// fill (`stress` mounts a small tmpfs there, or checks the one given).
public struct HostileOptions: Sendable {
    /// One step in this many is a hostile event instead of a command.
    public var oneIn = 30
    /// Outside the root: what the planted symlinks point at, checked after every event.
    public var canaryDirectory: FilePath
    /// Once space comes back, every window's saves must be durable within this many seconds,
    /// with no command sent but `wait-durable` (which asks for no save).
    public var durableAfterFreeSeconds = 20.0

    public init(canaryDirectory: FilePath) { self.canaryDirectory = canaryDirectory }
}

/// What a campaign found; `CodingKeys` names the JSON report's fields.
public struct CampaignReport: Codable, Sendable {
    public struct Percentiles: Codable, Sendable {
        public var p50: Double
        public var p99: Double
        public var p999: Double?
        public var max: Double
    }

    public var seed: UInt64
    public var scenes: Int
    public var kills = 0
    public var supervisorKills = 0
    public var killedWhileSaving = 0
    public var corruptions = 0
    public var recoveries = 0
    public var commands = 0
    /// Tab commands that changed their window, by verb: what the campaign exercised.
    public var changesByVerb: [String: Int] = [:]
    public var acknowledged = 0
    public var lost = 0
    public var unexpected = 0
    public var recovered = 0
    public var torn = 0
    /// Moves of tabs between windows: asked, answered ok (durable on both sides), and over with
    /// their outcome checked on both windows (committed or undone), whatever was killed.
    public var movesStarted = 0
    public var movesAcknowledged = 0
    public var movesResolved = 0
    public var movesCommitted = 0
    /// Worker kills that landed in the move stage they were aimed at, by side and stage
    /// ("source importing"), and supervisor kills a moment after a move was asked.
    public var moveKills: [String: Int] = [:]
    public var supervisorKillsInMoves = 0
    /// Moved tabs found in both windows, or in neither of the two that owed one.
    public var duplicated = 0
    public var lostInMove = 0
    /// `--hostile`: events in all, of them disk fills and entries planted; saves refused (74)
    /// while the disk was full.
    public var hostileEvents = 0
    public var diskFills = 0
    public var plantedEntries = 0
    public var refusedWhileFull = 0
    /// Every hostile event, "step N: what", in order: what a failure may come from.
    public var hostileLog: [String] = []
    public var recoveryMs = Percentiles(p50: 0, p99: 0, max: 0)
    public var saveLatencyUs = Percentiles(p50: 0, p99: 0, p999: 0, max: 0)
    public var durationS = 0.0
    /// The recovery times and save latencies at each of `PercentilePoint.percentiles`, in µs
    /// (empty when none was measured): the HTML report's distributions.
    public var recoveryCurve: [PercentilePoint] = []
    public var saveLatencyCurve: [PercentilePoint] = []
    /// Every kill, damage and recovery, in order: the HTML report's timeline.
    public var timeline: [CampaignEvent] = []
    /// The command line that makes the same decisions again; each failure ends with it.
    public var reproduce = ""
    /// One line per failure: what went wrong and how to run the same decisions again.
    public var failures: [String] = []

    /// The JSON report's field names, which scripts read.
    enum CodingKeys: String, CodingKey {
        case seed, scenes, kills, corruptions, recoveries, commands, acknowledged, lost, unexpected, recovered, torn,
            timeline, reproduce, failures
        case supervisorKills = "supervisor_kills"
        case killedWhileSaving = "killed_while_saving"
        case changesByVerb = "changes_by_verb"
        case hostileEvents = "hostile_events"
        case diskFills = "disk_fills"
        case plantedEntries = "planted_entries"
        case refusedWhileFull = "refused_while_full"
        case hostileLog = "hostile_log"
        case recoveryMs = "recovery_ms"
        case saveLatencyUs = "save_latency_us"
        case durationS = "duration_s"
        case recoveryCurve = "recovery_curve"
        case saveLatencyCurve = "save_latency_curve"
        case movesStarted = "moves_started"
        case movesAcknowledged = "moves_acknowledged"
        case movesResolved = "moves_resolved"
        case movesCommitted = "moves_committed"
        case lostInMove = "lost_in_move"
        case duplicated
        case moveKills = "move_kills"
        case supervisorKillsInMoves = "supervisor_kills_in_moves"
    }

    public var passed: Bool {
        lost == 0 && unexpected == 0 && torn == 0 && duplicated == 0 && lostInMove == 0 && failures.isEmpty
    }
}

/// One event of a campaign's timeline; `CodingKeys` names the JSON report's fields.
public struct CampaignEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case workerKill = "worker_kill"
        case supervisorKill = "supervisor_kill"
        /// A window's newest snapshot damaged, just before its worker is killed.
        case damage
        /// A window checked by the oracle after a kill, or after a disconnect and reconnect.
        case recovery
        /// A tab moved between windows (`move-to-window`): its outcome and verdict.
        case move
    }

    /// The oracle's verdict on a recovery.
    public enum Verdict: String, Codable, Sendable, CaseIterable {
        case intact, lost, unexpected, torn
        /// Came back below its acknowledged seq.
        case wentBack = "went_back"
        /// A moved tab in both windows once the move was over.
        case duplicated
        /// A moved tab in neither window, though one of them owed it.
        case lostInMove = "lost_in_move"
    }

    public var kind: Kind
    /// Seconds since the campaign started.
    public var at: Double
    /// The window's UUID (a move's source); nil for a supervisor kill.
    public var window: String?
    /// A move's destination, and where the move left the tab.
    public var to: String?
    public var outcome: MoveOutcome?
    /// A kill's recovery time: kill → restored and taking commands.
    public var recoveryMs: Double?
    public var verdict: Verdict?

    /// The JSON report's field names.
    enum CodingKeys: String, CodingKey {
        case kind, at, window, verdict, to, outcome
        case recoveryMs = "recovery_ms"
    }

    public init(
        kind: Kind, at: Double, window: String? = nil, to: String? = nil, outcome: MoveOutcome? = nil,
        recoveryMs: Double? = nil, verdict: Verdict? = nil
    ) {
        self.kind = kind
        self.at = at
        self.window = window
        self.to = to
        self.outcome = outcome
        self.recoveryMs = recoveryMs
        self.verdict = verdict
    }
}

/// A stress campaign: seeded random browsing on every scene of a real supervisor, while
/// workers, and now and then the supervisor, are killed with SIGKILL and snapshots damaged;
/// after every recovery the oracle checks the window against its model.
public final class Campaign {
    let options: CampaignOptions
    var random: SeededGenerator
    var supervisor: SupervisorProcess?
    var windows: [String: WindowHistory] = [:]
    var report: CampaignReport
    var recoveryTimes = Histogram<UInt64>(
        highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
    private var saveLatency = Histogram<UInt64>(highestTrackableValue: 1 << 42, numberOfSignificantValueDigits: .three)
    var step = 0
    private let started = Date()
    private var progress: ProgressMeter?
    /// A hang or a supervisor that did not come back: nothing after it could be judged.
    private var aborted = false
    private var hostile: (options: HostileOptions, planter: HostilePlanter, filler: DiskFiller)?
    /// The disk stays full until this step.
    var fullUntilStep: Int?
    private var lastHostileEvent: (step: Int, event: HostileEvent)?
    private var canaryReported = false
    /// Since when each window has answered only "retry" (75).
    private var retryingSince: [String: Date] = [:]
    /// Longer than any restart: a window answering "retry" this long is stuck.
    private static let stuckAfterSeconds = 30.0

    public init(options: CampaignOptions) {
        self.options = options
        random = SeededGenerator(seed: options.seed)
        report = CampaignReport(seed: options.seed, scenes: options.scenes)
        progress = options.progress
        report.reproduce =
            "windowhost stress --seed \(options.seed) --scenes \(options.scenes) "
            + "\(options.kills.map { "--kills \($0)" } ?? "--duration \(options.duration ?? 0)") --kill-rate \(options.killRate) --save-delay \(options.saveDelayMilliseconds) "
            + "--damage-one-in \(options.corruptionOneIn) --move-one-in \(options.moveOneIn) \(options.io == "powercut" ? "--power-cut" : "--io \(options.io)")\(options.hostile != nil ? " --hostile" : "")"
    }

    private func startSupervisor() throws -> SupervisorProcess {
        try SupervisorProcess(
            executable: options.executable, root: options.root, arguments: supervisorArguments, environment: [:],
            replyTimeoutSeconds: options.replyTimeoutSeconds)
    }

    private var supervisorArguments: [String] {
        [
            "--scenes", "\(options.scenes)", "--save-delay", "\(options.saveDelayMilliseconds)", "--io", options.io,
            "--watchdog", "5000",
            "--compact-after", "\(options.compactAfterRecords)",
        ]
    }

    public func run() throws -> CampaignReport {
        if let options = options.hostile {
            let canary = try Canary(directory: options.canaryDirectory, seed: self.options.seed)
            hostile = (
                options, HostilePlanter(root: self.options.root, canary: canary),
                DiskFiller(path: self.options.root.appending("hostile-fill"))
            )
        }
        supervisor = try startSupervisor()
        adoptWindows(checking: false)
        let interval = 1 / max(options.killRate, 0.001)
        var nextKill = Date().addingTimeInterval(interval)
        while !finished {
            if Date() >= nextKill {
                do {
                    try kill()
                } catch {
                    abort("\(error)")
                }
                checkCanary()
                // Counted from the end of the recovery, so commands always run between kills.
                nextKill = Date().addingTimeInterval(interval)
            } else if let hostile, Int.random(in: 0..<hostile.options.oneIn, using: &random) == 0 {
                hostileEvent()
            } else if options.moveOneIn > 0, windows.count >= 2,
                Int.random(in: 0..<options.moveOneIn, using: &random) == 0
            {
                sendMove()
            } else {
                sendCommand()
            }
            if let fullUntilStep, step >= fullUntilStep || finished { freeDisk() }
            showProgress(final: false)
        }
        checkCanary()
        mergeSaveLatency()
        if let supervisor {
            switch supervisor.shutdown() {
            case 0?: break
            case let status?: report.failures.append(reproduce("the supervisor exited \(status) at shutdown"))
            case nil:
                report.failures.append(
                    reproduce("hang: the supervisor did not exit within \(options.replyTimeoutSeconds) s of shutdown"))
            }
        }
        showProgress(final: true)
        progress?.finish()
        report.durationS = Date().timeIntervalSince(started)
        report.recoveryMs = CampaignReport.Percentiles(
            p50: Double(recoveryTimes.valueAtPercentile(50)) / 1000,
            p99: Double(recoveryTimes.valueAtPercentile(99)) / 1000,
            max: Double(recoveryTimes.totalCount > 0 ? recoveryTimes.maxRecorded : 0) / 1000)
        report.saveLatencyUs = CampaignReport.Percentiles(
            p50: Double(saveLatency.valueAtPercentile(50)), p99: Double(saveLatency.valueAtPercentile(99)),
            p999: Double(saveLatency.valueAtPercentile(99.9)),
            max: Double(saveLatency.totalCount > 0 ? saveLatency.maxRecorded : 0))
        report.recoveryCurve = recoveryTimes.totalCount > 0 ? PercentilePoint.curve(of: recoveryTimes) : []
        report.saveLatencyCurve = saveLatency.totalCount > 0 ? PercentilePoint.curve(of: saveLatency) : []
        return report
    }

    private var finished: Bool {
        if aborted { return true }
        if options.stopRequested() {
            abort("stopped by a signal before the end")
            return true
        }
        if let kills = options.kills, report.kills >= kills { return true }
        if let duration = options.duration, Date().timeIntervalSince(started) >= duration { return true }
        return false
    }

    func call(_ request: ControlRequest) -> ControlReply {
        supervisor?.call(request) ?? .failure(.unavailable, "no supervisor")
    }

    /// Asks window `id` (a UUID the supervisor showed) `request`.
    /// `answer(to:orHang:)` for one of the windows the supervisor showed.
    func answer(_ id: String, _ request: WindowRequest, orHang what: String) -> ControlReply? {
        guard let window = UUID(exactly: id) else {
            return .failure(.software, "the supervisor showed a window '\(id)' that is no UUID")
        }
        return answer(to: .window(window, request), orHang: what)
    }

    func reproduce(_ what: String) -> String {
        let context =
            lastHostileEvent.map {
                " after hostile event '\($0.event)' at step \($0.step)\(fullUntilStep != nil ? ", the disk full" : "")"
            } ?? ""
        return "\(what) (seed \(options.seed), step \(step)\(context)); reproduce: \(report.reproduce)"
    }

    /// A failure after which nothing could be judged (a hang, a supervisor that did not come
    /// back): reported, and the campaign ends.
    func abort(_ what: String) {
        report.failures.append(reproduce(what))
        aborted = true
    }

    /// The reply to `request` (the client's own failures as replies), or nil for a hang: no
    /// reply within the timeout, reported as `what` got none, and the campaign ends.
    func answer(to request: ControlRequest, orHang what: String) -> ControlReply? {
        guard let supervisor else { return call(request) }
        do {
            return try supervisor.exchange(request)
        } catch .timedOut(.reply, _, _) {
            abort("hang: \(what) got no reply in \(options.replyTimeoutSeconds) s")
            return nil
        } catch {
            return error.reply
        }
    }

    // MARK: the hostile world

    private func hostileEvent() {
        guard var world = hostile else { return }
        step += 1
        let event: HostileEvent?
        do {
            if fullUntilStep == nil, Int.random(in: 0..<3, using: &random) == 0 {
                event = .filledDisk(bytes: try world.filler.fill())
                // Full for a while: commands go on, and their acknowledgements wait.
                fullUntilStep = step + Int.random(in: 5...40, using: &random)
                report.diskFills += 1
            } else {
                let ids = windows.keys.sorted()
                guard !ids.isEmpty else { return }
                event = try world.planter.plant(in: ids[Int.random(in: 0..<ids.count, using: &random)], using: &random)
                if event != nil { report.plantedEntries += 1 }
            }
        } catch {
            abort("\(error)")
            return
        }
        hostile = world
        guard let event else { return }
        record(event)
        checkCanary()
    }

    private func record(_ event: HostileEvent) {
        report.hostileEvents += 1
        report.hostileLog.append("step \(step): \(event)")
        lastHostileEvent = (step, event)
    }

    /// Space comes back. With no command but `wait-durable` (which asks for no save), every
    /// window's saves must land within `durableAfterFreeSeconds`. `unjudged`: windows whose
    /// workers died since their last check: their seqs are a new worker's, which their history
    /// does not know yet, so what is durable there is not taken as acknowledged.
    func freeDisk(unjudged: Set<String> = []) {
        guard var world = hostile else { return }
        do {
            try world.filler.free()
        } catch {
            abort("\(error)")
            return
        }
        hostile = world
        fullUntilStep = nil
        record(.freedDisk)
        let deadline = Date().addingTimeInterval(world.options.durableAfterFreeSeconds)
        for id in windows.keys.sorted() where !aborted {
            while true {
                guard
                    let reply = answer(
                        id, .waitDurable(seq: nil), orHang: "wait-durable of window \(id) once space came back")
                else { break }
                if reply.code == .ok, let durable = try? reply.decode(DurableReply.self), var history = windows[id] {
                    if !unjudged.contains(id) { report.acknowledged += history.acknowledge(durable.durableSeq) }
                    windows[id] = history
                    break
                }
                // A save that failed before space came back may answer 74; the retry must follow.
                if Date() < deadline, reply.code == .ioError || reply.code == .temporary {
                    usleep(100_000)
                    continue
                }
                report.failures.append(
                    reproduce(
                        "window \(id): saves not durable \(world.options.durableAfterFreeSeconds) s after space came back: \(reply.code) \(reply.error ?? "")"
                    ))
                break
            }
        }
    }

    /// The planted symlinks a canary failure names (the newest, the likeliest to have been
    /// followed): the JSON's `hostile_log` has them all.
    static let symlinksNamedInAFailure = 5

    /// The canary outside the root is as it was made: no symlink was followed.
    private func checkCanary() {
        guard let hostile, !canaryReported, let damage = hostile.planter.canary.damage() else { return }
        canaryReported = true
        let symlinks = report.hostileLog.filter { $0.contains("symlink") }
        let latest = symlinks.suffix(Self.symlinksNamedInAFailure).joined(separator: ", ")
        report.failures.append(
            reproduce(
                "a symlink was followed out of the root: \(damage); \(symlinks.count) planted so far, the latest: \(latest)"
            ))
    }

    // MARK: commands

    private func sendCommand() {
        let ids = windows.keys.sorted()
        guard !ids.isEmpty else { return }
        sendCommand(to: ids[Int.random(in: 0..<ids.count, using: &random)])
    }

    private func sendCommand(to id: String) {
        step += 1
        guard var history = windows[id] else { return }
        let command = StressCommand.next(for: history.current, using: &random)
        guard let reply = answer(id, command.request, orHang: "window \(id): '\(command)'") else { return }
        guard reply.code == .ok else {
            if reply.code == .temporary {
                let since = retryingSince[id] ?? Date()
                retryingSince[id] = since
                if Date().timeIntervalSince(since) > Self.stuckAfterSeconds {
                    abort("window \(id) has answered only 'retry' (75) for \(Int(Self.stuckAfterSeconds)) s: stuck")
                }
            } else if reply.code == .ioError, fullUntilStep != nil, command.waitsForDurability {
                // The disk is full: a save that fails says so (74), and the change stays applied.
                report.refusedWhileFull += 1
            } else {
                report.failures.append(reproduce("window \(id): '\(command)' was refused: \(reply.error ?? "?")"))
            }
            return
        }
        retryingSince[id] = nil
        report.commands += 1
        do {
            switch command {
            case .reconnect:
                reconnect(id)
                return
            case .saveAndWait:
                report.acknowledged += history.acknowledge(try reply.decode(DurableReply.self).durableSeq)
            case .scene:
                break
            case .tab(let change):
                let applied = try reply.decode(CommandReply.self)
                var window = history.current
                guard window.apply(change, tab: applied.tab) else {
                    report.failures.append(
                        reproduce("window \(id): the host applied '\(command)', which the model refuses"))
                    return
                }
                if window != history.current, let uuid = UUID(exactly: id) {
                    report.changesByVerb[ControlRequest.window(uuid, .tab(change)).verb.rawValue, default: 0] += 1
                }
                history.applied(seq: applied.seq, window: window)
            }
        } catch {
            report.failures.append(reproduce("window \(id): '\(command)': \(error.message)"))
            return
        }
        windows[id] = history
    }

    /// The scene disconnected (saving what was unsaved); a new scene reopens the window.
    private func reconnect(_ id: String) {
        guard var history = windows.removeValue(forKey: id) else { return }
        let reply = call(.connect)
        guard let reopened = try? reply.decode(ConnectReply.self).window else {
            report.failures.append(reproduce("connect after disconnecting \(id) failed: \(reply.error ?? "?")"))
            return
        }
        guard reopened == id else {
            report.failures.append(
                reproduce("disconnected \(id) but \(reopened) reopened: the most recently closed must reopen first"))
            windows[reopened] = WindowHistory(start: OracleWindow(), seq: 0)
            return
        }
        // A clean disconnect saved everything applied.
        report.acknowledged += history.acknowledge(history.lastSeq)
        check(id, &history)
        windows[id] = history
    }

    // MARK: kills

    private func kill() throws {
        report.kills += 1
        let at = secondsSinceStart
        if Int.random(in: 0..<options.supervisorKillOneIn, using: &random) == 0 {
            try killSupervisor()
            return
        }
        if options.moveOneIn > 0, windows.count >= 2, Bool.random(using: &random), let move = pickMove() {
            try killDuringMove(move)
            return
        }
        let ids = windows.keys.sorted()
        guard !ids.isEmpty else { return }
        let id = ids[Int.random(in: 0..<ids.count, using: &random)]
        if Bool.random(using: &random) { acknowledgeDurable(id) }
        var evidence: String?
        if options.corruptionOneIn > 0, Int.random(in: 0..<options.corruptionOneIn, using: &random) == 0,
            damageNewestSnapshot(id)
        {
            report.corruptions += 1
            mark(.damage, window: id)
            evidence = keepEvidence(of: id)
        }
        let failuresBefore = report.failures.count
        defer {
            // Kept only when the recovery that follows it failed its check.
            if let evidence, report.failures.count == failuresBefore {
                try? FileManager.default.removeItem(atPath: evidence)
            }
        }
        // Half the kills are aimed: a command makes the window save, and the supervisor signals
        // the moment shared memory shows the save in flight.
        let aim = Bool.random(using: &random)
        if aim { sendCommand(to: id) }
        let sent = monotonicNanoseconds() / 1000
        guard
            let reply = answer(
                id, .kill(signal: SIGKILL, wait: true, aim: aim ? .save : nil), orHang: "kill of window \(id)'s worker")
        else {
            mark(.workerKill, at: at, window: id)
            return
        }
        guard reply.code == .ok else {
            mark(.workerKill, at: at, window: id)
            report.failures.append(reproduce("kill of \(id)'s worker failed: \(reply.error ?? "?")"))
            return
        }
        if (try? reply.decode(KillReply.self))?.whileSaving == true { report.killedWhileSaving += 1 }
        let recovered = monotonicNanoseconds() / 1000 - sent
        _ = recoveryTimes.record(recovered)
        mark(.workerKill, at: at, window: id, recoveryMicroseconds: recovered)
        guard var history = windows[id] else { return }
        check(id, &history)
        windows[id] = history
    }

    /// A copy of the window's directory as the damage left it, just before the kill: what the
    /// recovery read, for a failure to be traced (`<root>.evidence/<UUID>-step<N>`). The worker
    /// may be writing meanwhile, so it is a best effort. Regular files and directories only,
    /// three levels down (`<kind>/damaged/`), and never in a hostile campaign: a planted FIFO
    /// would block the open that copies it, and a planted tree could be deep.
    private func keepEvidence(of id: String) -> String? {
        guard hostile == nil else { return nil }
        let evidence = FilePath(options.root.string + ".evidence").appending("\(id)-step\(step)").string
        try? FileManager.default.removeItem(atPath: evidence)
        return Self.copyRegularFiles(
            from: DiskLayout.windowDirectory(root: options.root, name: id).string, to: evidence, levels: 3)
            ? evidence : nil
    }

    private static func copyRegularFiles(from source: String, to target: String, levels: Int) -> Bool {
        let files = FileManager.default
        guard levels > 0,
            (try? files.createDirectory(
                atPath: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])) != nil,
            let names = try? files.contentsOfDirectory(atPath: source)
        else { return false }
        for name in names {
            let from = source + "/" + name
            // lstat: a symlink is its own type here, never followed.
            switch (try? files.attributesOfItem(atPath: from))?[.type] as? FileAttributeType {
            case .typeRegular?:
                if let bytes = files.contents(atPath: from) {
                    _ = files.createFile(
                        atPath: target + "/" + name, contents: bytes, attributes: [.posixPermissions: 0o600])
                }
            case .typeDirectory?:
                _ = copyRegularFiles(from: from, to: target + "/" + name, levels: levels - 1)
            default:
                continue
            }
        }
        return true
    }

    func acknowledgeDurable(_ id: String) {
        guard let reply = answer(id, .waitDurable(seq: nil), orHang: "wait-durable of window \(id)") else { return }
        if reply.code == .ioError, fullUntilStep != nil { report.refusedWhileFull += 1 }
        guard let durable = try? reply.decode(DurableReply.self), var history = windows[id] else { return }
        report.acknowledged += history.acknowledge(durable.durableSeq)
        windows[id] = history
    }

    /// Snapshots the campaign damaged, by window: never two generations in a row.
    private var damagedSnapshots: [String: Set<String>] = [:]

    /// Flips a byte in the middle of the regular Browser's newest snapshot, if the generation
    /// before it is there, undamaged, to fall back on: one fault at a time, the store's promise
    /// (two damaged generations in a row are beyond it; see docs/recovery.md).
    private func damageNewestSnapshot(_ id: String) -> Bool {
        let directory = DiskLayout.browserDirectory(
            window: DiskLayout.windowDirectory(root: options.root, name: id), kind: .regular)
        // Regular files only, opened without following a link: a hostile campaign plants
        // symlinks under snapshot names, and the campaign must not write through them itself.
        let snapshots = ((try? NoFollow.entries(directory)) ?? nil ?? [])
            .map { (name: $0.name.string, kind: $0.kind) }
            .filter {
                $0.kind == .file && $0.name.hasPrefix(DiskLayout.snapshotPrefix)
                    && !$0.name.hasSuffix(DiskLayout.temporarySuffix)
            }.map(\.name)
        guard snapshots.count >= 2, let newest = snapshots.last else { return false }
        let damaged = damagedSnapshots[id, default: []]
        guard !damaged.contains(newest), !damaged.contains(snapshots[snapshots.count - 2]),
            let file = try? NoFollow.open(directory.appending(newest), .write)
        else { return false }
        damagedSnapshots[id, default: []].insert(newest)
        defer { try? file.close() }
        guard let size = try? file.seek(offset: 0, from: .end), size > 32 else { return false }
        var byte: UInt8 = 0
        guard (try? withUnsafeMutableBytes(of: &byte) { try file.read(fromAbsoluteOffset: size / 2, into: $0) }) == 1
        else { return false }
        byte ^= 0x5A
        return (try? withUnsafeBytes(of: &byte) { try file.write(toAbsoluteOffset: size / 2, $0) }) == 1
    }

    /// Kills the supervisor (its workers die with it) and starts a new one. `move`: a move it
    /// was asked for just before, its reply read if it came before the kill; the new
    /// supervisor finishes or undoes it, and the oracle judges where the tab went.
    func killSupervisor(during move: (MoveInFlight, ControlClient.Pending)? = nil) throws {
        report.supervisorKills += 1
        let at = secondsSinceStart
        if move == nil {
            for id in windows.keys.sorted() where Bool.random(using: &random) { acknowledgeDurable(id) }
            mergeSaveLatency()
        }
        supervisor?.kill()
        let sent = monotonicNanoseconds() / 1000
        let answered = move.flatMap { try? $0.1.reply() }
        supervisor = nil
        do {
            supervisor = try startSupervisor()
        } catch {
            mark(.supervisorKill, at: at)
            throw error
        }
        let recovered = monotonicNanoseconds() / 1000 - sent
        _ = recoveryTimes.record(recovered)
        mark(.supervisorKill, at: at, recoveryMicroseconds: recovered)
        if let (move, _) = move {
            judge(move, reply: answered, killed: [move.source, move.destination])
        }
        adoptWindows(checking: true)
    }

    /// The windows the (new) supervisor shows: known ones are checked against the model, new
    /// ones start from what they show.
    private func adoptWindows(checking: Bool) {
        let shown = ((try? call(.status).decode(StatusReply.self))?.windows ?? []).map(\.uuid)
        var adopted: [String: WindowHistory] = [:]
        for id in shown {
            if checking, var history = windows[id] {
                check(id, &history)
                adopted[id] = history
            } else {
                let dump = try? answer(id, .dump, orHang: "dump of window \(id), new to the campaign")?.decode(
                    DumpReply.self)
                adopted[id] = WindowHistory(
                    start: dump.map(OracleWindow.init(dump:)) ?? OracleWindow(), seq: dump?.appliedSeq ?? 0)
            }
        }
        // A window with nothing on disk does not reopen: it must have had nothing acknowledged.
        for (id, var history) in windows where adopted[id] == nil && checking {
            report.recoveries += 1
            let verdict = history.recovered(digest: OracleWindow().digest, dump: nil, appliedSeq: 0)
            mark(.recovery, window: id, verdict: CampaignEvent.Verdict(verdict))
            if case .lost(let count) = verdict {
                report.lost += count
                report.failures.append(
                    reproduce(
                        "window \(id) did not reopen after the supervisor was killed: \(count) acknowledged commands lost"
                    ))
            }
        }
        windows = adopted
    }

    /// The oracle's verdict on a window that just came back.
    func check(_ id: String, _ history: inout WindowHistory) {
        guard let reply = answer(id, .dump, orHang: "dump of window \(id) after its recovery") else { return }
        let dump: DumpReply
        do {
            dump = try reply.decode(DumpReply.self)
        } catch {
            report.failures.append(reproduce("window \(id) did not answer after its recovery: \(error.message)"))
            return
        }
        guard let digest = UInt64(dump.digest, radix: 16) else {
            report.failures.append(
                reproduce("window \(id) after its recovery: a dump whose digest is not hex: \(dump.digest)"))
            return
        }
        report.recoveries += 1
        let before = history
        let verdict = history.recovered(digest: digest, dump: dump, appliedSeq: dump.appliedSeq)
        mark(.recovery, window: id, verdict: CampaignEvent.Verdict(verdict))
        if case .intact = verdict {
        } else {
            StandardStreams.error("windowhost stress: window \(id) \(explain(dump, against: before))\n")
        }
        switch verdict {
        case .intact(let recovered):
            report.recovered += recovered
        case .lost(let count):
            report.lost += count
            report.failures.append(reproduce("window \(id): \(count) acknowledged commands lost"))
        case .unexpected:
            report.unexpected += 1
            report.failures.append(reproduce("window \(id): came back with tabs no command created"))
        case .torn:
            report.torn += 1
            report.failures.append(
                reproduce("window \(id): came back in a state that matches no prefix of its commands"))
        case .wentBack(let seq):
            report.failures.append(
                reproduce(
                    "window \(id): came back at seq \(seq), below the \(before.acknowledged) acknowledged, so a seq would name two commands"
                ))
        }
    }

    /// A window the oracle could not explain, against the model where it claims to be (the last
    /// state at or below its seq) and where the model ends: every field that differs.
    private func explain(_ dump: DumpReply, against history: WindowHistory) -> String {
        let claimed = history.states.last { $0.seq <= dump.appliedSeq } ?? history.states[0]
        func against(_ state: (seq: UInt64, window: OracleWindow)) -> String {
            let found = state.window.differences(from: dump)
            return "the model at seq \(state.seq): "
                + (found.isEmpty ? "the same, but for histories or digest" : found.joined(separator: "; "))
        }
        var detail =
            "came back at seq \(dump.appliedSeq) (acknowledged \(history.acknowledged), \(history.states.count) states since the last recovery, "
            + "from seq \(history.states[0].seq)); against \(against(claimed))"
        if claimed.seq != history.lastSeq { detail += "; against \(against(history.states[history.states.count - 1]))" }
        return detail
    }

    private func mergeSaveLatency() {
        guard let encoded = (try? call(.stats(histogram: true)).decode(StatsReply.self))?.total.histogram,
            let data = Data(base64Encoded: encoded),
            let histogram = try? JSONDecoder().decode(Histogram<UInt64>.self, from: data)
        else { return }
        saveLatency.add(histogram)
    }

    var secondsSinceStart: Double { Date().timeIntervalSince(started) }

    /// Adds an event to the timeline, at `at` (seconds since the start) or now.
    func mark(
        _ kind: CampaignEvent.Kind, at: Double? = nil, window: String? = nil, to: String? = nil,
        outcome: MoveOutcome? = nil, recoveryMicroseconds: UInt64? = nil, verdict: CampaignEvent.Verdict? = nil
    ) {
        report.timeline.append(
            CampaignEvent(
                kind: kind, at: at ?? secondsSinceStart, window: window, to: to, outcome: outcome,
                recoveryMs: recoveryMicroseconds.map { Double($0) / 1000 }, verdict: verdict))
    }

    /// Kills done of the target, elapsed and ETA (from --duration, or from the pace of the
    /// kills), when a line is due or, `final`, at the end.
    private func showProgress(final: Bool) {
        guard var progress, final || progress.isDue() else { return }
        let elapsed = max(secondsSinceStart, 0.001)
        let fraction =
            options.kills.map { Double(report.kills) / Double(max($0, 1)) }
            ?? options.duration.map { elapsed / max($0, 0.001) }
        let target = options.kills.map { "/\($0)" } ?? ""
        // Asked only when a line is due: a control call of its own.
        let p99 = final ? nil : (try? call(.stats(histogram: false)).decode(StatsReply.self))?.total.saves.p99Us
        let detail =
            String(format: "%.0f commands/s  ", Double(report.commands) / elapsed)
            + (p99.map { "save p99 \($0) µs  " } ?? "")
            + "recoveries \(report.recoveries)  lost \(report.lost)  torn \(report.torn)"
        progress.show(fraction: fraction, count: "kills \(report.kills)\(target)", detail: detail)
        self.progress = progress
    }
}

extension CampaignEvent.Verdict {
    /// The kind of `verdict`, without its counts.
    init(_ verdict: WindowHistory.Verdict) {
        switch verdict {
        case .intact: self = .intact
        case .lost: self = .lost
        case .unexpected: self = .unexpected
        case .torn: self = .torn
        case .wentBack: self = .wentBack
        }
    }
}
