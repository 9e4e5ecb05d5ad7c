import ArgumentParser
import BrowserModel
import Foundation
import HostControl
import HostCoordination
import HostLimits
import Stress
import Supervisor
import SystemPackage

/// `windowhost ctl VERB …`: one request to a running supervisor, returning once it is applied.
struct ControlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Drive a running supervisor: scenes, tabs, saves, kills, reports.",
        usage: "windowhost ctl [--socket <socket>] [--json] [--timeout <timeout>]\n       <subcommand>",
        discussion: """
            Each call returns once the supervisor has applied it. --json prints the reply as one \
            JSON object.

            \(exitCodesParagraph(exitCodes))

            A tab command prints the window's seq after it (`seq N`). Only a command that changes \
            the window takes a new seq; one that changes nothing prints the seq as it was. Within \
            a supervisor's life no seq and no tab id is handed out twice, and no reply shows a seq \
            below one before; seqs may have gaps: commands replied to and then lost with a worker \
            killed before their save was durable (`ctl` exited 75 for any still waiting; `dump` \
            and `wait-durable` show the seq the window restored until its next change).

            No call waits forever: connecting, sending and the reply together get --timeout \
            seconds (default \(ControlClient.defaultTimeoutSeconds)); past it ctl exits 75 saying what it waited for (a \
            stopped or overloaded supervisor). `kill` waits at most 5 s for a worker to die \
            (after \(SignalName.list(SignalName.stopping)), the watchdog's period more) before the supervisor \
            answers 75; a signal ignored by default (\(SignalName.list(SignalName.ignoredByDefault))) is answered at \
            once, with no restart expected.
            """,
        subcommands: [
            Status.self, Connect.self, Disconnect.self, Background.self, Foreground.self, Open.self, Navigate.self,
            Close.self, CloseAll.self, Activate.self, Move.self, MoveToWindow.self, Replace.self, Pin.self, Unpin.self,
            Back.self,
            Forward.self, Save.self, WaitDurable.self, Kill.self,
            Dump.self, Stats.self, SetAside.self, Adopt.self, Discard.self, CloseWindow.self, Shutdown.self,
        ])

    /// What each exit of `ctl` means, in the help: every code a reply carries.
    static let exitCodes: KeyValuePairs<ControlCode, String> = [
        .ok: "ok",
        .usage: "usage",
        .badData:
            "unknown window, tab or set-aside entry, a session that still does not start when adopted, or text that is not UTF-8, a URL holding a control character (U+0000-U+001F, U+007F) or a lone surrogate in the socket's JSON (bad data)",
        .unavailable: "no supervisor at the socket",
        .software: "a reply ctl cannot read (a supervisor of another version, or a bug)",
        .memoryOnly:
            "a durable wait (`wait-durable`, `save --wait`) covering a command whose effect is only in incognito tabs kept in memory only (the kernel keyring is refused): a kill loses them, and the regular Browser is durable through the seq printed (with --json, `durable_seq` and `memory_only_since`)",
        .ioError:
            "a save failed (a durable wait, `save --wait` or `disconnect` on a full or failing disk: the window keeps its changes, goes on serving and retries by itself)",
        .temporary:
            "temporary (the window's worker is restarting, a set-aside entry is being adopted, or no reply within the timeout): retry",
        .seqExhausted:
            "the window has used the highest command seq (only crafted or damaged files get there): it takes no more tab commands, while `dump` and `save` still work (docs/recovery.md)",
    ]

    /// Given before the verb (`ctl --socket PATH status`); each verb reads the same group.
    @OptionGroup var control: ControlOptions
}

struct ControlOptions: ParsableArguments {
    @Option(
        help: "The supervisor's control socket (default: $WINDOWHOST_SOCKET, else ROOT/ctl.sock of the default root).")
    var socket: String?

    @Flag(help: "Print the reply as one JSON object.")
    var json = false

    @Option(help: "Seconds to wait for connecting, sending and the reply together; past it, exit 75.")
    var timeout = ControlClient.defaultTimeoutSeconds

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be at least 1 second") }
    }

    var socketPath: FilePath {
        (socket ?? ProcessInfo.processInfo.environment["WINDOWHOST_SOCKET"]).map { FilePath($0) }
            ?? DiskLayout.defaultControlSocket(root: FilePath(DefaultPaths.root))
    }
}

struct WindowOption: ParsableArguments {
    @Option(help: "The window's UUID.")
    var window: String

    /// `request` of the window named, or the refusal (64) the supervisor would give a name
    /// that is no UUID.
    func asking(_ request: WindowRequest) throws(ControlFailure) -> ControlRequest {
        .window(try ControlRequest.windowID(window), request)
    }
}

/// The bound on a URL the control plane carries, as `ctl`'s help states it.
let urlHelp = "at most \(Limits.maxControlURLBytes) UTF-8 bytes, Limits.maxControlURLBytes; a longer one exits 65"

/// A verb: how it asks, and how its answer reads as text.
protocol ControlVerb: ParsableCommand {
    var control: ControlOptions { get }
    func request() throws(ControlFailure) -> ControlRequest
    /// The reply, decoded as the verb's reply type, as text; a failure, or a reply that does
    /// not decode (70), throws.
    func text(_ reply: ControlReply) throws(ControlFailure) -> String
}

extension ControlVerb {
    func run() throws {
        let request: ControlRequest
        do throws(ControlFailure) {
            request = try self.request()
            if let refusal = Self.refusal(of: request) { throw refusal }
        } catch {
            StandardStreams.error("windowhost ctl: \(error.message)\n")
            throw ExitCode(error.code)
        }
        let reply = ControlClient.call(request, socket: control.socketPath, timeout: control.timeout)
        let output: String
        do {
            // Decoded with --json too: a reply of another shape is 70 either way.
            let text = try text(reply)
            output = control.json ? reply.result?.line ?? "" : text
        } catch {
            // A failure with a result (`wait-durable`'s memory-only outcome) prints it with --json.
            if control.json, let line = reply.result?.line { print(line) }
            StandardStreams.error("windowhost ctl: \(error.message)\n")
            throw ExitCode(error.code)
        }
        if !output.isEmpty { print(output) }
    }

    /// A command the window applied: its seq after it.
    func text(_ reply: ControlReply) throws(ControlFailure) -> String {
        "seq \(try reply.decode(CommandReply.self).seq)"
    }

    /// Why the supervisor would refuse `request` for its text or size, and the exit code it would
    /// give (65 for a URL holding a control character or past its bound, 64 for a request too
    /// long), said before it is sent:
    /// the supervisor stops reading past `Limits.maxControlRequestBytes` and hangs up, which a
    /// client still sending sees as a broken connection, not as the reason.
    static func refusal(of request: ControlRequest) -> ControlFailure? {
        if let url = request.url {
            do throws(ControlFailure) { try ControlRequest.check(url: url) } catch { return error }
        }
        let size = (try? JSONEncoder().encode(request).count) ?? 0
        guard size <= Limits.maxControlRequestBytes else {
            return ControlFailure(
                code: .usage,
                message:
                    "request of \(size) bytes is longer than the control plane's \(Limits.maxControlRequestBytes) (characters JSON escapes count more)"
            )
        }
        return nil
    }
}

extension ControlCommand {
    struct Status: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract: "Every window: state, worker, tabs, durable seq; set-aside sessions.")
        @OptionGroup var control: ControlOptions
        func request() -> ControlRequest { .status }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            let status = try reply.decode(StatusReply.self)
            var lines = status.windows.map { window in
                let fields = [
                    window.state, "pid \(window.pid)", "generation \(window.generation)",
                    "tabs \(window.regularTabs)+\(window.incognitoTabs)",
                    "applied \(window.appliedSeq)", "durable \(window.durableSeq)", "saves \(window.saves)",
                    "restarts \(window.restarts)",
                ]
                let failing =
                    window.failing.map { ["saves failing (\($0.browsers.joined(separator: "+"))): \($0.error)"] } ?? []
                return "\(window.uuid)  " + (fields + failing).joined(separator: "  ")
            }
            for aside in status.setAside { lines.append("set aside: " + SetAside.line(aside)) }
            if status.closedWindows > 0 || status.closedWindowsEvicted > 0 {
                lines.append(
                    "closed windows kept: \(status.closedWindows) of \(status.keepClosed); deleted past it: \(status.closedWindowsEvicted)"
                )
            }
            for move in status.moves ?? [] { lines.append(move.line) }
            let spare = status.spare.map { ["spare worker: \($0.rawValue)"] } ?? []
            return ((lines.isEmpty ? ["no windows"] : lines) + spare).joined(separator: "\n")
        }
    }

    struct Connect: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract: "Connect a scene: reserve a window, spawn its worker, restore it. Prints the UUID.")
        @OptionGroup var control: ControlOptions
        func request() -> ControlRequest { .connect }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String { try reply.decode(ConnectReply.self).window }
    }

    struct Disconnect: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "Disconnect a scene: save what is unsaved; the worker exits. If the save fails (74), the window goes on serving."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.scene(.disconnect)) }
    }

    struct Background: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "The scene goes to the background: it saves at once, and displays (realizes) no tab until it comes forward."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.scene(.background)) }
    }

    struct Foreground: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "The scene comes to the foreground: its active tabs are displayed (realized) and stamped last active, durably (it takes a seq)."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.scene(.foreground)) }
    }

    struct Open: ControlVerb {
        static let configuration = CommandConfiguration(abstract: "Open a tab. Prints its id.")
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option(help: "The page (\(urlHelp)).") var url = "about:blank"
        @Flag(help: "In the window's incognito Browser.") var incognito = false
        @Option(help: "The tab that opened it.") var opener: Int64?
        @Option(help: "Where it goes in the list (default: the end).") var index: Int?
        @Flag(help: "Do not make it the active tab.") var background = false
        /// A command that makes a tab (`open`, `replace`): the tab's id.
        static func tabText(_ reply: ControlReply) throws(ControlFailure) -> String {
            guard let tab = try reply.decode(CommandReply.self).tab else {
                throw ControlFailure(code: .software, message: "a reply without the new tab's id")
            }
            return "\(tab)"
        }
        func request() throws(ControlFailure) -> ControlRequest {
            try target.asking(
                .tab(.open(url: url, incognito: incognito, index: index, opener: opener, background: background)))
        }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String { try Open.tabText(reply) }
    }

    struct Navigate: ControlVerb {
        static let configuration = CommandConfiguration(abstract: "A tab finishes a navigation to URL.")
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        @Option(help: "The page (\(urlHelp)).") var url: String
        func request() throws(ControlFailure) -> ControlRequest {
            try target.asking(.tab(.navigate(tab: tab, url: url)))
        }
    }

    struct Close: ControlVerb {
        static let configuration = CommandConfiguration(abstract: "Close a tab.")
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.tab(.close(tab: tab))) }
    }

    struct CloseAll: ControlVerb {
        static let configuration = CommandConfiguration(
            commandName: Verb.closeAll.rawValue, abstract: "Close every tab of one Browser.")
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Flag(help: "The incognito Browser (default: the regular one).") var incognito = false
        func request() throws(ControlFailure) -> ControlRequest {
            try target.asking(.tab(.closeAll(incognito: incognito)))
        }
    }

    struct Activate: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "Make a tab the active one, stamping its last-active time (realized if its scene is in the foreground); activating the active tab changes nothing."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.tab(.activate(tab: tab))) }
    }

    struct Move: ControlVerb {
        static let configuration = CommandConfiguration(abstract: "Move a tab to an index of its list.")
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        @Option var index: Int
        func request() throws(ControlFailure) -> ControlRequest {
            try target.asking(.tab(.move(tab: tab, index: index)))
        }
    }

    struct MoveToWindow: ControlVerb {
        static let configuration = CommandConfiguration(
            commandName: Verb.moveToWindow.rawValue,
            abstract: "Move a tab to another window, exactly once. Prints its id there.",
            discussion: """
                The tab arrives with a new id of the other window's, its whole history (unrealized if it was), pinned if \
                it was and its last-active time; an opener in its old window is dropped. Regular tabs go to the regular \
                Browser, incognito to incognito. The reply comes once the move is durable on both sides: whatever is \
                killed after it, the tab is in the other window and not in its own. A move cut short by a kill or a \
                power cut is finished or undone once both windows are back, never left half done (docs/recovery.md). \
                64: the same window twice; 65: no such window or tab, an index out of range, a tab past \
                Limits.maxMovedTabBytes; 75: either window is restarting or in another move; 74: a save failed (the \
                move completes by itself once it lands).
                """)
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        @Option(help: "The window it goes to (UUID).") var to: String
        @Option(help: "Where it goes in its Browser's list there (default: the end).") var index: Int?
        func request() throws(ControlFailure) -> ControlRequest {
            let (from, destination) = (try ControlRequest.windowID(target.window), try ControlRequest.windowID(to))
            return .moveToWindow(from: from, tab: tab, to: destination, index: index)
        }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            let moved = try reply.decode(MoveReply.self)
            return
                "tab \(moved.tab) in window \(moved.window) (was tab \(moved.fromTab) of \(moved.from); move \(moved.move))"
        }
    }

    struct Replace: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract: "A prerendered tab of URL takes a tab's place. Prints the new tab's id.")
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        @Option(help: "The page (\(urlHelp)).") var url: String
        func request() throws(ControlFailure) -> ControlRequest {
            try target.asking(.tab(.replace(tab: tab, url: url)))
        }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String { try Open.tabText(reply) }
    }

    struct Pin: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "Pin a tab: it moves to the end of the pinned tabs. A pinned tab stays as it is (the seq unchanged).")
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        func request() throws(ControlFailure) -> ControlRequest {
            try target.asking(.tab(.setPinned(tab: tab, pinned: true)))
        }
    }

    struct Unpin: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "Unpin a tab: it moves to the start of the unpinned tabs. An unpinned tab stays as it is (the seq unchanged)."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        func request() throws(ControlFailure) -> ControlRequest {
            try target.asking(.tab(.setPinned(tab: tab, pinned: false)))
        }
    }

    struct Back: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract: "A tab goes back one entry of its history. With none behind, nothing changes (the seq unchanged)."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.tab(.go(tab: tab, .back))) }
    }

    struct Forward: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "A tab goes forward one entry of its history. With none ahead, nothing changes (the seq unchanged).")
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option var tab: Int64
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.tab(.go(tab: tab, .forward))) }
    }

    struct Save: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "Save now; with --wait, return once durable (74 as soon as a save fails, 71 if incognito is kept in memory only)."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Flag(help: "Return once the save is durable.") var wait = false
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.save(wait: wait)) }
        // Without --wait, the seq the save covers; with it, what is durable (it printed nothing).
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            wait
                ? WaitDurable.durableText(try reply.decode(DurableReply.self))
                : "seq \(try reply.decode(CommandReply.self).seq)"
        }
    }

    struct WaitDurable: ControlVerb {
        static let configuration = CommandConfiguration(
            commandName: Verb.waitDurable.rawValue,
            abstract:
                "Return once every command applied so far is durable (74 as soon as a save fails, 71 if incognito is kept in memory only)."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option(
            help: ArgumentHelp(
                "Wait for this command only: 75 if it was lost with a worker killed before it was durable, 65 if the window has no such command yet.",
                valueName: "seq")) var seq: UInt64?
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.waitDurable(seq: seq)) }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            Self.durableText(try reply.decode(DurableReply.self))
        }

        /// A durable answer (`wait-durable`, `save --wait`): the seq, and the ranges below it lost
        /// with a killed worker.
        static func durableText(_ reply: DurableReply) -> String {
            let lost = (reply.lostSeqs ?? []).map { $0.first == $0.last ? "\($0.first)" : "\($0.first)-\($0.last)" }
            return "durable \(reply.durableSeq)"
                + (lost.isEmpty ? "" : " (lost with a killed worker, never durable: \(lost.joined(separator: ", ")))")
        }
    }

    struct Kill: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract: "Signal a window's worker (default KILL) and return once its replacement has restored the window."
        )
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        @Option(
            help: """
                A name, with or without SIG (\(SignalName.numbers.sorted { $0.value < $1.value }.map(\.key).joined(separator: " "))), \
                or a number 1–64. \(SignalName.list(SignalName.stopping)) stop the worker: a hang the watchdog catches. One \
                ignored by default (\(SignalName.list(SignalName.ignoredByDefault))) is answered at once, no restart expected; \
                a worker still alive 5 s after the signal (and the watchdog's period, after one that stops it) exits 75.
                """)
        var signal = "KILL"
        @Flag(help: "Return once the signal is sent.") var noWait = false
        @Flag(help: "Signal the moment shared memory shows a save in flight (waiting at most 50 ms).") var whileSaving =
            false
        @Option(
            help: ArgumentHelp(
                "Signal the moment a move between windows this window takes part in (either side) enters this stage, its step sent; with none within 1 s, signal anyway.",
                valueName: "stage")) var aimMove: MoveStage?
        func request() throws(ControlFailure) -> ControlRequest {
            let aim: KillAim? =
                switch (whileSaving, aimMove) {
                case (false, nil): nil
                case (true, nil): .save
                case (false, let stage?): .move(stage)
                case (true, _?):
                    throw ControlFailure(code: .usage, message: "--while-saving or --aim-move: one aim, not both")
                }
            return try target.asking(.kill(signal: try SignalName.checked(signal), wait: !noWait, aim: aim))
        }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            let kill = try reply.decode(KillReply.self)
            if kill.restartExpected == false {
                return
                    "signalled \(kill.killedPid) with SIG\(kill.signal ?? "?"), which cannot kill: no restart expected"
            }
            let stage = kill.moveStage.map { " (its move \($0.rawValue))" } ?? ""
            guard let pid = kill.pid else { return "signalled \(kill.killedPid)\(stage)" }
            return
                "killed \(kill.killedPid)\(stage), restored by \(pid) in \(String(format: "%.1f", kill.recoveryMs ?? 0)) ms"
        }
    }

    /// A time in microseconds since the epoch, as ISO 8601 (UTC, to the second).
    static func isoTime(microseconds: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(microseconds) / 1_000_000))
    }

    struct Dump: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract: "Both Browsers' tabs, the active index, command and durable seq, digest.",
            discussion: """
                Each tab shows whether it is realized (restored tabs are not, until displayed: \
                the active tab of a foreground scene) and when it was last active (activated, or \
                shown by its scene coming to the foreground; last_active_time_us in --json). \
                Dumping realizes nothing.
                """)
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        func request() throws(ControlFailure) -> ControlRequest { try target.asking(.dump) }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            let dump = try reply.decode(DumpReply.self)
            var lines = [
                "window \(dump.window)  applied \(dump.appliedSeq)  durable \(dump.durableSeq)  digest \(dump.digest)"
            ]
            for (kind, browser) in [("regular", dump.regular), ("incognito", dump.incognito)] {
                lines.append("\(kind): \(browser.tabs.count) tabs")
                for (index, tab) in browser.tabs.enumerated() {
                    var marks: [String] = []
                    if tab.pinned { marks.append("pinned") }
                    if !tab.realized { marks.append("unrealized") }
                    if let opener = tab.opener { marks.append("opener \(opener)") }
                    if let count = tab.historyCount {
                        marks.append("history \(tab.historyIndex.map { "\(Int64($0) + 1)" } ?? "?")/\(count)")
                    }
                    if let time = tab.lastActiveTimeUs {
                        marks.append("last active \(ControlCommand.isoTime(microseconds: time))")
                    }
                    lines.append(
                        "\(index == browser.activeIndex.map(Int.init) ? "*" : " ") \(tab.id)  \(tab.url)\(marks.isEmpty ? "" : "  (" + marks.joined(separator: ", ") + ")")"
                    )
                }
            }
            return lines.joined(separator: "\n")
        }
    }

    struct Stats: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract: "Save latency (request → durable) and saves/s per window and in total, from shared memory.")
        @OptionGroup var control: ControlOptions
        func request() -> ControlRequest { .stats(histogram: false) }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            let stats = try reply.decode(StatsReply.self)
            func row(_ name: String, _ saves: StatsReply.SaveSummary, directIO: String) -> String {
                let counts = [
                    saves.p50Us, saves.p90Us, saves.p99Us, saves.p999Us, saves.maxUs, saves.saveFailures,
                    saves.compactionFailures,
                ]
                let columns =
                    ["\(saves.saves)".leftPadded(10), String(format: "%10.1f", saves.savesPerS)]
                    + counts.map { "\($0)".leftPadded(10) }
                return name.padding(toLength: 38, withPad: " ", startingAt: 0) + columns.joined()
                    + directIO.leftPadded(11)
            }
            var lines = [
                "window".padding(toLength: 38, withPad: " ", startingAt: 0)
                    + ["saves", "saves/s", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "failed", "cmp fail"].map
                { $0.leftPadded(10) }.joined()
                    + "direct_io".leftPadded(11)
            ]
            for window in stats.windows {
                lines.append(row(window.uuid, window.saves, directIO: window.directIo.map { $0 ? "yes" : "no" } ?? "-"))
            }
            lines.append(row("total", stats.total.saves, directIO: ""))
            return lines.joined(separator: "\n")
        }
    }

    struct SetAside: ControlVerb {
        static let configuration = CommandConfiguration(
            commandName: Verb.setAside.rawValue,
            abstract:
                "What is set aside under ROOT/set-aside/: id, window, when and why, Browsers, tabs, newest durable seq.",
            discussion: """
                Sessions are set aside when their window crash-loops, and entries that cannot be windows (a symlink, a \
                file, a second spelling of a UUID, a damaged handed-out) when found; nothing there is deleted but by \
                `ctl discard`. What an entry holds is read by `windowhost inspect --set-aside ID` in a process of its own.
                """)
        @OptionGroup var control: ControlOptions
        func request() -> ControlRequest { .setAside }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            let entries = try reply.decode(SetAsideReply.self).setAside
            return entries.isEmpty ? "nothing set aside" : entries.map(Self.line).joined(separator: "\n")
        }

        /// One entry on one line, for `set-aside` and `status`.
        static func line(_ entry: SetAsideStatus) -> String {
            var fields = [entry.id, "window \(entry.uuid ?? "-")", entry.reason, entry.at ?? "time unrecorded"]
            switch entry.summary {
            case "read":
                fields.append(
                    "\((entry.browsers ?? []).joined(separator: "+")) tabs \(entry.regularTabs ?? 0)+\(entry.incognitoTabs ?? 0)"
                )
                fields.append("durable \(entry.durableSeq ?? 0)" + (entry.damaged == true ? " (damaged files)" : ""))
            case "not_a_session": fields.append("a \(entry.kind), no session")
            default: fields.append(entry.summary)
            }
            if let target = entry.adoptingAs { fields.append("being adopted as \(target)") }
            return fields.joined(separator: "  ")
        }
    }

    struct Adopt: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract: "Bring a set-aside session back as a window; returns once it has restored and saved durably.",
            discussion: """
                It comes back under its own UUID when that window is neither open nor on disk, else (or with \
                --as-new-window) under a new one, through the normal restore with every check. The entry leaves \
                set-aside/ only once the window has restored and saved. A session that still does not start goes back \
                to its entry (65), and no other window is touched. 65: no such entry, or it holds no session; 75: the \
                entry is being adopted, no window slot is free, or the supervisor is stopping. Incognito tabs come back \
                too: their key went with the entry, and the restore seals them again under the window's own key, \
                durably, before it is ready; the entry's key is revoked once the adoption ends, and kept with the \
                entry when it is undone (docs/recovery.md, docs/keyring.md).
                """)
        @OptionGroup var control: ControlOptions
        @Argument(help: "The entry's id (ctl set-aside lists them).") var id: String
        @Flag(help: "Under a new UUID even if its own is free.") var asNewWindow = false
        func request() -> ControlRequest { .adopt(entry: id, asNewWindow: asNewWindow) }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            let adopted = try reply.decode(AdoptReply.self)
            return
                "window \(adopted.window)\(adopted.asNewWindow ? " (a new UUID)" : ""): tabs \(adopted.regularTabs)+\(adopted.incognitoTabs), durable \(adopted.durableSeq)"
        }
    }

    struct Discard: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "Delete one set-aside entry durably, and say what it held. The only way anything under set-aside/ is removed.",
            discussion:
                "Its incognito key (the record that went with it) is revoked: a copy of its files opens nothing. 65: no such entry; 75: it is being adopted."
        )
        @OptionGroup var control: ControlOptions
        @Argument(help: "The entry's id (ctl set-aside lists them).") var id: String
        func request() -> ControlRequest { .discard(entry: id) }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            "discarded " + SetAside.line(try reply.decode(DiscardReply.self).discarded)
        }
    }

    struct CloseWindow: ControlVerb {
        static let configuration = CommandConfiguration(
            commandName: Verb.closeWindow.rawValue,
            abstract:
                "Close a window for good: its sessions deleted durably, its incognito key revoked, out of the order; its UUID never comes back.",
            discussion: """
                An open window is disconnected first (it saves), then deleted. A crash at any instant leaves it whole or \
                gone; the next start finishes a close under way. 65: no such window (open or closed), a sentinel UUID, a \
                set-aside entry's; 75: the window is starting, restarting or disconnecting; 74: the deletion failed, the \
                window stays whole.
                """)
        @OptionGroup var control: ControlOptions
        @OptionGroup var target: WindowOption
        func request() throws(ControlFailure) -> ControlRequest {
            .closeWindow(try ControlRequest.windowID(target.window))
        }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            "closed for good " + (try reply.decode(CloseWindowReply.self).window)
        }
    }

    struct Shutdown: ControlVerb {
        static let configuration = CommandConfiguration(
            abstract:
                "Stop the supervisor: every window saves, everything exits 0 (75, naming the windows, if some could not save)."
        )
        @OptionGroup var control: ControlOptions
        func request() -> ControlRequest { .shutdown }
        func text(_ reply: ControlReply) throws(ControlFailure) -> String {
            _ = try reply.decode(ShutdownReply.self)
            return "stopping"
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}

/// `ctl kill --aim-move`: a stage by its name.
extension MoveStage: ExpressibleByArgument {}
