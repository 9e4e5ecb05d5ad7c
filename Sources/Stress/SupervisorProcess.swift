import Foundation
import Glibc
import Supervisor
import SystemPackage

/// A `windowhost run` the campaign starts, kills and starts again on the same root. Its
/// stdout and stderr go to `ROOT.stress-stdout` and `ROOT.stress-log` beside the root. The
/// benchmark's `ctl` round trips use one too.
public final class SupervisorProcess {
    let process = Process()
    public let socket: FilePath
    private let stdout: URL

    /// How long a reply may take: longer is a hang, and a campaign never waits forever.
    private let replyTimeoutSeconds: Int

    /// Starts it and waits until it says `ready` (at most 60 s); one that does not is killed.
    public init(
        executable: String, root: FilePath, arguments: [String], environment: [String: String], replyTimeoutSeconds: Int = 60
    ) throws {
        self.replyTimeoutSeconds = replyTimeoutSeconds
        socket = root.appending("ctl.sock")
        stdout = URL(fileURLWithPath: root.string + ".stress-stdout")
        let log = URL(fileURLWithPath: root.string + ".stress-log")
        _ = FileManager.default.createFile(atPath: stdout.path, contents: nil)
        if !FileManager.default.fileExists(atPath: log.path) { _ = FileManager.default.createFile(atPath: log.path, contents: nil) }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["run", "--root", root.string] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: stdout)
        let logHandle = try FileHandle(forWritingTo: log)
        logHandle.seekToEndOfFile()
        process.standardError = logHandle
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, process.isRunning {
            if let text = try? String(contentsOf: stdout, encoding: .utf8), text.hasPrefix("ready ") { return }
            usleep(2_000)
        }
        if process.isRunning { kill() }
        throw StressError.supervisor("the supervisor did not get ready (see \(log.path))")
    }

    /// A window that does not answer within the timeout is a finding.
    public func call(_ request: ControlRequest) -> ControlReply { ControlClient.call(request, socket: socket, timeout: replyTimeoutSeconds) }

    public func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Asks it to shut down and waits for its exit status; nil when it has not exited within
    /// the reply timeout (it is then killed: a campaign never waits forever).
    public func shutdown() -> Int32? {
        _ = call(ControlRequest(verb: "shutdown"))
        let deadline = Date().addingTimeInterval(Double(replyTimeoutSeconds))
        while process.isRunning, Date() < deadline { usleep(10_000) }
        guard !process.isRunning else {
            kill()
            return nil
        }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

public enum StressError: Error, CustomStringConvertible {
    case supervisor(String)
    /// The campaign could not do what `--hostile` asked of it (a mount, a planted entry).
    case hostile(String)

    public var description: String {
        switch self {
        case .supervisor(let message): message
        case .hostile(let message): "hostile: \(message)"
        }
    }
}
