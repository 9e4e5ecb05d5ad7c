import ArgumentParser
import BrowserModel
import Foundation
import Glibc
import HostLimits
import IOUring
import Logging
import SessionStore
import StatusServer
import Stress
import Supervisor
import SystemPackage

/// Where the host keeps its state unless told: `$XDG_STATE_HOME/windowhost`, else
/// `~/.local/state/windowhost`; the control socket is `ROOT/ctl.sock`.
enum DefaultPaths {
    static var root: String {
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["XDG_STATE_HOME"], !state.isEmpty { return state + "/windowhost" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state/windowhost"
    }

}

/// Logs go to stderr, one line each; `WINDOWHOST_LOG_LEVEL` (trace … critical) sets how much.
enum Logs {
    static func bootstrap() {
        let level =
            ProcessInfo.processInfo.environment["WINDOWHOST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the supervisor in the foreground: one worker process per scene.",
        discussion: """
            Prints exactly one line, `ready SOCKET`, on stdout once the initial scenes are restored \
            and take commands; logs go to stderr. SIGTERM, SIGINT or SIGHUP (one it was started ignoring, as under nohup, \
            stays ignored): every window saves, then \
            everything exits 0; if some window could not save (a full or failing disk), the log \
            names it and the exit status is 75. Drive it with `windowhost ctl`. A root another user \
            owns or can write, or whose windows/, windows.order or supervisor.lock is not what the \
            host needs there (a symlink, a FIFO, the wrong kind: never followed), is refused with \
            exit 77 and the fix named.

            The control socket is replaced only when it is a stale socket (one nobody answers at). \
            Anything else at --socket is left untouched and refused: a file, directory or other \
            entry that is not a socket exits 73; a socket another supervisor answers at exits 75. \
            At exit the socket is removed only if it is still the one this supervisor bound.

            A supervisor killed leaves its workers finishing their writes, each holding \
            supervisor.lock: the next `run` waits 1 s for them, then SIGKILLs every process still \
            holding it (logged with its pid) and waits up to 5 s more; a lock still held then \
            exits 75 saying so.

            Control connections are bounded: at most --max-clients at once (and never more than \
            half the descriptor limit); at the cap, the client idle longest is dropped for the \
            new one. A client idle for --client-timeout seconds (no complete request sent, or a \
            reply it does not read) is dropped; a client whose request is being worked on \
            (kill --wait, wait-durable) is not idle. Replies never block the loop: a client \
            that does not read delays only itself.

            --http HOST:PORT (off by default; a bare PORT listens on 127.0.0.1; port 0 picks one) \
            serves /metrics (Prometheus), /api/status (the JSON of `ctl status --json`), and a live \
            dashboard at /, on threads of their own: no HTTP client delays a command. The address \
            bound is printed as `http http://HOST:PORT` after the ready line. An address that does \
            not bind exits 69 before any window starts; docs/observability.md lists the metrics.
            """)

    @Option(help: "The state directory (default: $XDG_STATE_HOME/windowhost, else ~/.local/state/windowhost).")
    var root: String?

    @Option(help: "Scenes to connect at start.")
    var scenes = SupervisorConfiguration.Defaults.scenes

    @Option(help: "The control socket (default: ROOT/ctl.sock).")
    var socket: String?

    @Option(help: "Milliseconds from a change to its delayed save (Chrome's); 0 saves every change at once.")
    var saveDelay = SupervisorConfiguration.Defaults.saveDelayMilliseconds

    @Option(help: "Kill and restart a worker whose heartbeat is older than this many milliseconds.")
    var watchdog = SupervisorConfiguration.Defaults.watchdogMilliseconds

    @Option(help: "Windows that may be open at once.")
    var capacity = SupervisorConfiguration.Defaults.capacity

    @Option(
        help:
            "Windows closed by this supervisor kept on disk (default: --capacity); past it the least recently closed is deleted for good."
    )
    var keepClosed: Int?

    @Option(
        help:
            "Compact a window's journal past this many records (default \(StoreOptions().compactAfterRecords)); small values exercise compaction."
    )
    var compactAfter: Int?

    @Option(
        help:
            "Control connections at once (room for a waiting ctl per window at the largest --capacity); at the cap the longest-idle one is dropped."
    )
    var maxClients = SupervisorConfiguration.Defaults.maxClients

    @Option(
        help: "Seconds a control client may sit without sending its request or reading its reply before it is dropped.")
    var clientTimeout = SupervisorConfiguration.Defaults.clientTimeoutMilliseconds / 1000

    @Flag(
        inversion: .prefixedNo,
        help:
            "Keep one worker started with no window, handed to the next restart, connect or adoption instead of a spawn."
    )
    var spare = SupervisorConfiguration.Defaults.keepsSpare

    @Option(
        help:
            "Serve /metrics, /api/status and the live dashboard at HOST:PORT (a bare PORT: 127.0.0.1; port 0 picks one)."
    )
    var http: String?

    @OptionGroup var io: IOOptions

    func validate() throws {
        guard (1...Limits.maxOpenWindows).contains(capacity) else {
            throw ValidationError("--capacity must be within 1...\(Limits.maxOpenWindows)")
        }
        guard (0...capacity).contains(scenes) else { throw ValidationError("--scenes must be within 0...\(capacity)") }
        if let keepClosed, !(0...Limits.maxKeptClosedWindows).contains(keepClosed) {
            throw ValidationError(
                "--keep-closed must be within 0...\(Limits.maxKeptClosedWindows) (Limits.maxKeptClosedWindows)")
        }
        if let compactAfter, compactAfter < 2 { throw ValidationError("--compact-after must be at least 2") }
        guard (1...4096).contains(maxClients) else { throw ValidationError("--max-clients must be within 1...4096") }
        guard (1...3600).contains(clientTimeout) else {
            throw ValidationError("--client-timeout must be within 1...3600 seconds")
        }
        guard watchdog >= 200 else {
            throw ValidationError("--watchdog must be at least 200 ms (the heartbeat is 100 ms)")
        }
        if let http {
            do throws(StatusServerError) { _ = try HTTPAddress(parsing: http) } catch {
                throw ValidationError("\(error)")
            }
        }
    }

    func run() throws {
        Logs.bootstrap()
        // Before anything is written under it: someone else's root, or one others can write, is refused.
        let root = try PrivateFiles.checkedRootOrExit(FilePath(self.root ?? DefaultPaths.root))
        // Decided once here, so every worker runs the same engine and the reason is said once.
        let engineName = try io.makeEngine().name
        var configuration = SupervisorConfiguration(
            root: root, scenes: scenes,
            socketPath: socket.map { FilePath($0) } ?? DiskLayout.defaultControlSocket(root: root),
            saveDelayMilliseconds: saveDelay, io: engineName, executable: try Self.executablePath())
        configuration.watchdogMilliseconds = watchdog
        configuration.capacity = capacity
        configuration.keepClosed = keepClosed
        configuration.compactAfterRecords = compactAfter
        configuration.maxClients = maxClients
        configuration.clientTimeoutMilliseconds = clientTimeout * 1000
        configuration.keepsSpare = spare
        // Made before the supervisor, which counts into it from its first turn; served after.
        let exporter = http.map { _ in MetricsExporter() }
        configuration.observation = exporter?.hostObservation
        let supervisor: Supervisor
        do {
            supervisor = try Supervisor(configuration: configuration, logger: Logger(label: "windowhost.supervisor"))
        } catch SupervisorError.alreadyRunning(let root) {
            StandardStreams.error("windowhost: another supervisor runs on \(root)\n")
            throw ExitCode(.temporary)
        } catch SupervisorError.misplacedEntries(let entries) {
            // Same class as a root another user owns: the user must change the root first.
            for entry in entries { StandardStreams.error("windowhost: \(entry)\n") }
            throw ExitCode(.permission)
        } catch SupervisorError.socket(let error) {
            StandardStreams.error("windowhost: \(error)\n")
            switch error {
            case .notASocket: throw ExitCode(.cantCreate)
            case .inUse: throw ExitCode(.temporary)
            case .pathTooLong: throw ExitCode(.usage)
            case .failed: throw ExitCode(.ioError)
            }
        } catch {
            StandardStreams.error("windowhost: \(error)\n")
            // No supervisor runs, but none can start while the leftovers hold the lock: try again.
            if case SupervisorError.lockHeldByLeftovers = error { throw ExitCode(.temporary) }
            throw ExitCode(.ioError)
        }
        var served: HTTPAddress?
        if let http, let exporter {
            do throws(StatusServerError) {
                served = try StatusServer.start(
                    try HTTPAddress(parsing: http), exporter: exporter, capacity: capacity,
                    logger: Logger(label: "windowhost.http"))
            } catch {
                StandardStreams.error("windowhost: \(error)\n")
                throw ExitCode(.unavailable)
            }
        }
        let status = supervisor.run { socket in
            StandardStreams.output("ready \(socket)\n" + (served.map { "http http://\($0)\n" } ?? ""))
        }
        throw ExitCode(status)
    }

    static func executablePath() throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { throw ExitCode(.ioError) }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
