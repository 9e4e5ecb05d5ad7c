import BrowserModel
import CLinuxShims
import CTestShims
import Foundation
import Glibc
import HostControl
import HostCoordination
import Supervisor
import SystemPackage
import TestSupport

/// The built `windowhost` next to the test bundle.
let windowhostBinary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("windowhost")
/// Its test build (Tests/WindowhostFaults): the same commands plus `save-loop`, and the fault
/// switches (`WINDOWHOST_FAULT_*`) read from its environment. What a test that sets one runs.
let windowhostFaultsBinary = windowhostBinary.deletingLastPathComponent().appendingPathComponent("windowhost-faults")

/// Runs `windowhost ARGUMENTS` (`binary`: or its test build) to the end: its status and stdout + stderr.
/// `prefix`: a command that runs it (`setpriv …`), found on PATH.
func runWindowhost(
    _ arguments: [String], prefix: [String] = [], environment: [String: String]? = nil, binary: URL = windowhostBinary
) throws -> (status: Int32, output: String) {
    if prefix.isEmpty { return try runProcess(binary, arguments, environment: environment) }
    return try runProcess(
        URL(fileURLWithPath: "/usr/bin/env"), prefix + [binary.path] + arguments, environment: environment)
}

/// Runs `executable ARGUMENTS` to the end: its status and stdout + stderr.
func runProcess(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil) throws -> (
    status: Int32, output: String
) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = environment }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

/// Runs `windowhost ARGUMENTS` (under `prefix`, a command found on PATH) until it exits, prints
/// `marker`, or `seconds` pass; still running then, it is stopped with `signal`. Its status
/// (nil when stopped), its stdout + stderr and how long it ran: a hang fails a test instead of
/// stalling it.
func runWindowhostBounded(
    _ arguments: [String], prefix: [String] = [], seconds: Double = 10, until marker: String? = nil,
    stoppingWith signal: Int32 = SIGKILL
) throws -> (status: Int32?, output: String, seconds: Double) {
    let process = Process()
    if prefix.isEmpty {
        process.executableURL = windowhostBinary
        process.arguments = arguments
    } else {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = prefix + [windowhostBinary.path] + arguments
    }
    let output = FileManager.default.temporaryDirectory.appendingPathComponent(
        "windowhost-bounded-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: output.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: output) }
    let handle = try FileHandle(forWritingTo: output)
    process.standardOutput = handle
    process.standardError = handle
    func text() -> String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }
    let start = Date()
    try process.run()
    _ = waitFor({ !process.isRunning || marker.map { text().contains($0) } == true }, seconds: seconds)
    let stopped = process.isRunning
    if stopped { Glibc.kill(process.processIdentifier, signal) }
    process.waitUntilExit()
    return (stopped ? nil : process.terminationStatus, text(), Date().timeIntervalSince(start))
}

/// A `windowhost run` in the background on a root of its own, driven over its socket.
final class HostProcess {
    let root: URL
    let process = Process()
    let stdout: URL
    let stderr: URL
    let socket: String

    /// `logs`: where stdout and stderr go (default: beside the root), e.g. off a disk a test fills.
    /// `socket`: the control socket (default: `ctl.sock` in the root, `run`'s own default).
    /// `binary`: `windowhostFaultsBinary` for a host whose `environment` sets a fault switch.
    init(
        root: URL, scenes: Int, saveDelay: Int = 0, arguments: [String] = [], environment: [String: String] = [:],
        logs: URL? = nil,
        socket: URL? = nil, binary: URL = windowhostBinary
    ) throws {
        self.root = root
        self.socket = (socket ?? root.appendingPathComponent(DiskLayout.controlSocket)).path
        let logBase = logs?.appendingPathComponent(root.lastPathComponent) ?? root
        stdout = logBase.appendingPathExtension("stdout")
        stderr = logBase.appendingPathExtension("stderr")
        _ = FileManager.default.createFile(atPath: stdout.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
        process.executableURL = binary
        process.arguments =
            ["run", "--root", root.path, "--scenes", "\(scenes)", "--save-delay", "\(saveDelay)"]
            + (socket.map { ["--socket", $0.path] } ?? []) + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: stdout)
        process.standardError = try FileHandle(forWritingTo: stderr)
        try process.run()
        guard waitFor({ self.output.contains("ready ") || !self.process.isRunning }, seconds: 30), process.isRunning
        else {
            throw HostFailure("no ready line: \(output) \(log)")
        }
    }

    var output: String { (try? String(contentsOf: stdout, encoding: .utf8)) ?? "" }
    var log: String { (try? String(contentsOf: stderr, encoding: .utf8)) ?? "" }

    /// `timeout`: seconds to wait for the reply (none: as long as it takes).
    func call(_ request: ControlRequest, timeout: Int? = nil) -> ControlReply {
        ControlClient.call(request, socket: FilePath(socket), timeout: timeout)
    }

    /// `request` of `window`, a UUID `status` showed.
    func call(_ request: WindowRequest, window: String, timeout: Int? = nil) -> ControlReply {
        guard let id = UUID(exactly: window) else { return .failure(.usage, "'\(window)' is not a UUID") }
        return call(.window(id, request), timeout: timeout)
    }

    /// `windowhost ctl --socket S ARGUMENTS`, as a script runs it.
    func ctl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try runWindowhost(["ctl", "--socket", socket] + arguments)
    }

    /// `windowhost ctl --socket S ARGUMENTS` with `arguments` as shell words, as a script passes
    /// bytes (`printf` escapes) that argv in Swift cannot: `"$2"` in them is `window`.
    func ctlThroughShell(_ arguments: String, window: String) throws -> (status: Int32, output: String) {
        try runProcess(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", #"exec "$0" ctl --socket "$1" "# + arguments, windowhostBinary.path, socket, window])
    }

    /// `windowhost ctl` with a bound: a call still running after `seconds` is killed and
    /// reported as status -1, so a hang fails the test rather than stalling it.
    func ctlBounded(_ arguments: [String], seconds: Double = 10) throws -> (
        status: Int32, output: String, seconds: Double
    ) {
        let run = try runWindowhostBounded(["ctl", "--socket", socket] + arguments, seconds: seconds)
        guard let status = run.status else { return (-1, "hung for \(seconds) s: \(run.output)", run.seconds) }
        return (status, run.output, run.seconds)
    }

    /// The windows `status` lists, by UUID (none when the reply does not decode).
    func windows() -> [String: WindowStatus] {
        let status = try? call(.status).decode(StatusReply.self)
        return Dictionary((status?.windows ?? []).map { ($0.uuid, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func windowIDs() -> [String] {
        ((try? call(.status).decode(StatusReply.self))?.windows ?? []).map(\.uuid)
    }

    func open(_ window: String, _ url: String, incognito: Bool = false) -> Int64? {
        let reply = call(.open(url, incognito: incognito), window: window)
        return (try? reply.decode(CommandReply.self))?.tab
    }

    func terminate() -> Int32 {
        process.terminate()
        process.waitUntilExit()
        return process.terminationStatus
    }

    func kill9() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning { kill9() }
    }
}

struct HostFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` for at most `seconds`: after 1 ms, then at intervals doubling to 20 ms.
/// Many conditions ask the supervisor for its status or read a whole log, and the suite runs
/// its tests side by side on few cores: a wait must not spend one.
func waitFor(_ condition: () -> Bool, seconds: Double) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    var interval: UInt32 = 1_000
    while Date() < deadline {
        if condition() { return true }
        usleep(interval)
        interval = min(interval * 2, 20_000)
    }
    return condition()
}

/// Whether `pid` is a running process (not gone, not a zombie).
func isRunning(_ pid: Int32) -> Bool {
    guard let stat = procText("/proc/\(pid)/stat") else { return false }
    guard let close = stat.lastIndex(of: ")") else { return false }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state != "Z" && state != "X"
}

func temporaryRoot(_ name: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("windowhost-\(name)-\(UUID().uuidString.prefix(8))")
}

/// Removes a `HostProcess` root and the two log files it writes beside it (by default).
/// A Unix stream socket bound at `path` and, with `backlog`, listening: the end of a fake, mute
/// or dead supervisor. The caller closes it.
func boundSocket(_ path: String, listening backlog: Int32? = nil) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw HostFailure("socket: \(Errno(rawValue: errno))") }
    guard var address = UnixSocketAddress.make(FilePath(path)) else {
        close(fd)
        throw HostFailure("\(path) is too long for a socket")
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0, backlog.map({ listen(fd, $0) == 0 }) ?? true else {
        let failure = Errno(rawValue: errno)
        close(fd)
        throw HostFailure("bind or listen at \(path): \(failure)")
    }
    return fd
}

func removeHostFiles(_ root: URL) {
    removeTestRoot(root.path)
    for url in [root.appendingPathExtension("stdout"), root.appendingPathExtension("stderr")] {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Writes `bytes` to the control socket at `path` as they are, and reads the reply until the
/// server closes: what a client that does not speak the protocol sees.
func rawSocketReply(_ path: String, _ bytes: [UInt8]) throws -> [UInt8] {
    let fd = try rawSocketSend(path, bytes)
    defer { close(fd) }
    return rawSocketReceive(fd)
}

/// Connects to the control socket at `path` and writes `bytes`: the connection, its reply unread.
func rawSocketSend(_ path: String, _ bytes: [UInt8]) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard var address = UnixSocketAddress.make(FilePath(path)) else {
        close(fd)
        throw HostFailure("socket path too long")
    }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard connected == 0 else {
        close(fd)
        throw HostFailure("connect: \(errno)")
    }
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    return fd
}

/// What the server writes on `fd` until it closes.
func rawSocketReceive(_ fd: Int32) -> [UInt8] {
    var reply: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { break }
        reply += chunk[..<count]
    }
    return reply
}

/// `rawSocketReply` as text.
func rawSocketReplyText(_ path: String, _ bytes: [UInt8]) throws -> String {
    String(decoding: try rawSocketReply(path, bytes), as: UTF8.self)
}

extension WindowRequest {
    /// `open` of `url` at the end of its Browser, made active: the tab most tests open.
    static func open(_ url: String, incognito: Bool = false) -> WindowRequest {
        .tab(.open(url: url, incognito: incognito, index: nil, opener: nil, background: false))
    }
}

/// A copy of worker `pid`'s inherited descriptor (through its pidfd: an eventfd or the lock's
/// open file description cannot be reopened through /proc), as a compromised worker could hand
/// it on. The caller closes it.
func descriptor(_ inherited: WorkerLaunch.Descriptor, of pid: Int32) -> Int32? {
    let pidfd = wh_pidfd_open(pid)
    guard pidfd >= 0 else { return nil }
    defer { close(pidfd) }
    let copy = wh_pidfd_getfd(pidfd, inherited.rawValue)
    return copy >= 0 ? copy : nil
}
