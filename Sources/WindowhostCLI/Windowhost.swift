import ArgumentParser
import Foundation
import Glibc
import HostCoordination
import Stress
import Supervisor

/// The command line, as a library: the shipped `windowhost` is `start(Windowhost.self)` alone; a
/// test build (`windowhost-faults`, under Tests/) starts a root command of its own that adds
/// commands to these and installs `CommandFaults`.
public struct Windowhost: ParsableCommand {
    public static let configuration: CommandConfiguration = Windowhost.configuration(adding: [])

    /// This command's configuration with `extra` after its own subcommands.
    public static func configuration(adding extra: [any ParsableCommand.Type]) -> CommandConfiguration {
        CommandConfiguration(
            commandName: "windowhost",
            abstract: "A multi-process window host that keeps every window's tabs safe across sudden termination.",
            discussion: exitCodesParagraph(exitCodes),
            version: "0.1.0",
            subcommands: [
                RunCommand.self, ControlCommand.self, StressCampaignCommand.self, DemoCommand.self, InspectCommand.self,
                BenchCommand.self, WorkerProcessCommand.self, SpareWorkerCommand.self, BenchWorkerCommand.self,
                BenchEchoCommand.self,
            ] + extra
        )
    }

    public init() {}

    /// What each exit of any command means, in the help: the whole table.
    static let exitCodes: KeyValuePairs<ControlCode, String> = [
        .ok: "ok",
        .checkFailed: "a check failed",
        .usage: "bad arguments",
        .badData: "corrupt data, an unknown window or tab, or an argument that is not UTF-8",
        .noInput: "no such input",
        .unavailable: "a required service unavailable (io_uring, or no supervisor at the socket)",
        .software: "a reply ctl cannot read (a supervisor of another version, or a bug)",
        .memoryOnly: "not durable: incognito tabs kept in memory only (the kernel keyring is refused)",
        .cantCreate: "cannot create the control socket (something that is not a socket at its path)",
        .ioError: "an I/O error (standard output too: results that could not be written)",
        .temporary:
            "temporary (a worker restarting, another supervisor on the root or at the socket, supervisor.lock still held by what a dead supervisor left, io_uring setup short of memory or rings): retry",
        .seqExhausted: "a window that has used the highest command seq (it takes no more tab commands)",
        .permission:
            "a root (or a fixed entry under it) that is someone else's, open to others, or not what the host needs there",
        .config: "a worker given shared memory of another window, generation or layout (a binary of another version)",
    ]

    /// Runs `root` on this process's arguments with `faults` installed (none in the shipped
    /// command). Refuses an argument that is not valid UTF-8 (exit 65) before anything parses
    /// it: Swift reads `argv` into `String` by replacing bad bytes with U+FFFD, so a URL or title
    /// (or a path) would be taken, stored and acknowledged as text the caller never gave.
    public static func start<Root: ParsableCommand>(_ root: Root.Type, faults: CommandFaults = .none) {
        let arguments = (0..<Int(CommandLine.argc)).map { index in
            CommandLine.unsafeArgv[index].map {
                Array(UnsafeBufferPointer(start: $0, count: strlen($0))).map(UInt8.init(bitPattern:))
            } ?? []
        }
        if let invalid = InvalidUTF8Argument.first(in: arguments) {
            StandardStreams.error("windowhost: \(invalid)\n")
            Glibc.exit(ControlCode.badData.rawValue)
        }
        CommandFaults.install(faults)
        var status: Int32 = 0
        do {
            var command = try root.parseAsRoot(nil)
            try command.run()
        } catch {
            // What `ParsableCommand.main` does on the way out, but through the output check below:
            // help, the version and `throw ExitCode(…)` would otherwise exit before it.
            status = root.exitCode(for: error).rawValue
            let text = root.fullMessage(for: error)
            if !text.isEmpty {
                if status == 0 { StandardStreams.output(text + "\n") } else { StandardStreams.error(text + "\n") }
            }
        }
        exitReportingLostOutput(status)
    }

    /// Exits with `status`; a command that would exit 0 but whose output went nowhere (a full
    /// disk under a redirect, a reader gone at its last lines) exits 74: a script must not take
    /// results it never got for a success.
    static func exitReportingLostOutput(_ status: Int32) -> Never {
        guard status == 0, !StandardStreams.flushOutput() else { Glibc.exit(status) }
        StandardStreams.error("windowhost: standard output could not be written: what the command printed is lost\n")
        Glibc.exit(ControlCode.ioError.rawValue)
    }
}

/// An argument whose bytes are not UTF-8: refused whole, never read with replacements.
struct InvalidUTF8Argument: Error, Equatable, CustomStringConvertible {
    /// Its place in `argv` (0 is the program).
    let index: Int
    /// Where in it the first byte that is not UTF-8 is.
    let offset: Int

    /// The first argument in `arguments` (argv's bytes) that is not valid UTF-8.
    static func first(in arguments: [[UInt8]]) -> InvalidUTF8Argument? {
        for (index, bytes) in arguments.enumerated() {
            var decoder = UTF8()
            var iterator = bytes.makeIterator()
            var offset = 0
            decoding: while true {
                switch decoder.decode(&iterator) {
                case .scalarValue(let scalar): offset += UTF8.width(scalar)
                case .emptyInput: break decoding
                case .error: return InvalidUTF8Argument(index: index, offset: offset)
                }
            }
        }
        return nil
    }

    var description: String { "argument \(index) is not valid UTF-8 (at byte \(offset)): refused, nothing was done" }
}

/// The exit codes a help text lists, one paragraph: numbers from the one table (`ControlCode`),
/// so the help cannot name a code the commands do not exit with.
func exitCodesParagraph(_ meanings: KeyValuePairs<ControlCode, String>) -> String {
    "Exit codes (sysexits(3)): " + meanings.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: "; ") + "."
}

extension ExitCode {
    /// An exit from the one table (`ControlCode`). Bad arguments exit 64 through ArgumentParser.
    init(_ code: ControlCode) { self.init(code.rawValue) }
}
