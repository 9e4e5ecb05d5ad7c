import Foundation
import Glibc
import HostControl
import Stress
import Supervisor
import TestSupport
import Testing

/// A run ends as it started: what `windowhost demo` and `stress` make in their temporary roots,
/// and what a process test makes through `HostProcess`, goes with them: no file under the
/// temporary directory and no key in the user keyring. The temporary directory is a tmpfs of
/// the test's own, so its device number names its roots' keys and no other test's (keys left
/// by an earlier mount that had the number are there before, and not counted).
@Suite(.serialized) struct LeavesNothingBehindTests {
    /// Files in `directory`, and user keys of roots on its file system (`/proc/keys`).
    static func leftovers(in directory: URL) throws -> (files: [String], keys: [String]) {
        var status = stat()
        guard lstat(directory.path, &status) == 0 else { throw HostFailure("lstat \(directory.path): errno \(errno)") }
        let prefix = " windowhost:\(status.st_dev):"
        // A revoked key lingers in the table (flag R or D) until the kernel collects it.
        let keys = (procText("/proc/keys") ?? "").split(separator: "\n").map(String.init).filter { line in
            let flags = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? ""
            return line.contains(prefix) && !flags.contains("R") && !flags.contains("D")
        }
        return (try FileManager.default.contentsOfDirectory(atPath: directory.path), keys)
    }

    @Test func demoStressAndAHostLeaveNoFileAndNoKey() throws {
        let tmpfs = try Tmpfs(megabytes: 64)
        defer { tmpfs.unmount() }
        let temporary = tmpfs.mountPoint
        try FileManager.default.removeItem(at: tmpfs.root)
        let before = try Self.leftovers(in: temporary)
        #expect(before.files.isEmpty, "\(before)")
        let environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": temporary.path]) { $1 }

        let demo = try runProcess(
            windowhostBinary, ["demo", "--seed", "3", "--commands", "80", "--save-delay", "0"], environment: environment
        )
        #expect(demo.status == 0, "\(demo.output)")
        let stress = try runProcess(
            windowhostBinary, ["stress", "--kills", "3", "--scenes", "2", "--seed", "5"], environment: environment)
        #expect(stress.status == 0, "\(stress.output)")

        let root = temporary.appendingPathComponent("windowhost-leftovers")
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://leftover.example/", incognito: true) != nil)
        #expect(try host.ctl(["wait-durable", "--window", window]).status == 0)
        #expect(
            Set(try Self.leftovers(in: temporary).keys).subtracting(before.keys).count == 1,
            "the open window's key, until its root goes")
        #expect(host.terminate() == 0)
        removeHostFiles(root)

        let after = try Self.leftovers(in: temporary)
        #expect(after.files.isEmpty, "files left: \(after.files)")
        #expect(
            Set(after.keys).subtracting(before.keys).isEmpty, "keys left: \(Set(after.keys).subtracting(before.keys))")
    }

    /// How a test asks a command to stop.
    enum Stop: Sendable, Equatable, CustomTestStringConvertible {
        /// The signal, to the command alone (`kill PID`).
        case signal(Int32)
        /// The signal, to the command's process group (a terminal's Ctrl-C): its supervisor,
        /// workers and bench workers must not take it, or they fail the run before it stops.
        case signalToGroup(Int32)
        /// The reader of its output gone (`| head`): SIGPIPE at its next line.
        case readerGone

        var testDescription: String {
            switch self {
            case .signal(let number): "SIG\(SignalName.name(number))"
            case .signalToGroup(let number): "SIG\(SignalName.name(number)) to the group"
            case .readerGone: "the reader gone"
            }
        }
    }

    /// Ctrl-C, `kill`, a closed terminal and a reader gone (SIGINT, SIGTERM, SIGHUP, SIGPIPE)
    /// stop `demo`, `stress` and `bench` at their next step: each removes its temporary root
    /// and revokes its keys. `demo` and `bench` exit with the signal's status (128 + its
    /// number); a campaign stopped before its end fails (1), saying so.
    @Test(
        .timeLimit(.minutes(3)),
        arguments: zip(
            ["demo", "demo", "stress", "stress", "bench", "bench", "stress", "bench", "stress", "bench"],
            [
                Stop.signal(SIGINT), .signal(SIGHUP), .signal(SIGHUP), .signal(SIGTERM), .signal(SIGTERM),
                .signal(SIGINT), .signalToGroup(SIGINT),
                .signalToGroup(SIGINT), .readerGone, .readerGone,
            ]))
    func aCommandStoppedLeavesNoFileAndNoKey(command: String, stop: Stop) throws {
        let tmpfs = try Tmpfs(megabytes: 64)
        defer { tmpfs.unmount() }
        let temporary = tmpfs.mountPoint
        try FileManager.default.removeItem(at: tmpfs.root)
        let before = try Self.leftovers(in: temporary)
        let (process, output) = try Self.start(command, temporary: temporary)
        // Under way: its temporary directory made, and a window's files in it (the bench's
        // first step writes files of its own).
        let started = waitFor({ Self.deepestPath(in: temporary).count >= (command == "bench" ? 2 : 3) }, seconds: 60)
        usleep(300_000)
        let signal: Int32
        switch stop {
        case .signal(let number):
            signal = number
            Glibc.kill(process.processIdentifier, number)
        case .signalToGroup(let number):
            signal = number
            // Foundation puts the child in a process group of its own, led by it.
            #expect(getpgid(process.processIdentifier) == process.processIdentifier)
            Glibc.kill(-process.processIdentifier, number)
        case .readerGone:
            signal = SIGPIPE
            try output.fileHandleForReading.close()
        }
        let text =
            stop == .readerGone
            ? "" : String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(started, "\(command) never started: \(text)")
        #expect(process.terminationReason == .exit, "\(command) died of a signal instead of stopping: \(text)")
        #expect(process.terminationStatus == (command == "stress" ? 1 : 128 + signal), "\(text)")
        if stop != .readerGone {
            #expect(
                text.contains(command == "stress" ? "stopped by a signal" : "stopped by SIG\(SignalName.name(signal))"),
                "\(text)")
            #expect(!text.contains("did not get ready") && !text.contains("exited with status"), "\(text)")
        }
        let after = try Self.leftovers(in: temporary)
        #expect(after.files.isEmpty, "files left: \(after.files)")
        #expect(
            Set(after.keys).subtracting(before.keys).isEmpty, "keys left: \(Set(after.keys).subtracting(before.keys))")
    }

    /// A signal the command was started ignoring (`nohup`'s SIGHUP) stays ignored: the
    /// campaign runs on.
    @Test(.timeLimit(.minutes(3))) func nohupKeepsACampaignRunning() throws {
        let tmpfs = try Tmpfs(megabytes: 64)
        defer { tmpfs.unmount() }
        try FileManager.default.removeItem(at: tmpfs.root)
        let (process, output) = try Self.start("stress", temporary: tmpfs.mountPoint, prefix: ["/usr/bin/nohup"])
        #expect(waitFor({ Self.deepestPath(in: tmpfs.mountPoint).count >= 3 }, seconds: 60))
        Glibc.kill(process.processIdentifier, SIGHUP)
        usleep(1_000_000)
        #expect(process.isRunning, "SIGHUP stopped a campaign started under nohup")
        Glibc.kill(process.processIdentifier, SIGTERM)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1 && text.contains("stopped by a signal"), "\(text)")
        #expect(try Self.leftovers(in: tmpfs.mountPoint).files.isEmpty)
    }

    /// `windowhost COMMAND` (under `prefix`) with its temporary files in `temporary`, its
    /// stdout and stderr on one pipe.
    private static func start(_ command: String, temporary: URL, prefix: [String] = []) throws -> (Process, Pipe) {
        let arguments: [String: [String]] = [
            "demo": ["demo", "--seed", "3", "--commands", "100000", "--save-delay", "0"],
            "stress": ["stress", "--kills", "1000", "--scenes", "2", "--seed", "5"],
            "bench": ["bench", "--quick", "--dir", temporary.path],
        ]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: prefix.first ?? windowhostBinary.path)
        process.arguments =
            prefix.dropFirst() + (prefix.isEmpty ? [] : [windowhostBinary.path]) + (arguments[command] ?? [])
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": temporary.path]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        return (process, output)
    }

    /// `stress --hostile --root R` mounts a tmpfs of its own on R, which goes at the end: the
    /// keys of its windows, named by that tmpfs, go with it, also when R is a symlink to the
    /// directory (the keys are named by the directory, as `run` resolves it).
    @Test(.timeLimit(.minutes(5)), arguments: [false, true]) func aHostileCampaignOnARootGivenLeavesNoKey(
        throughASymlink: Bool
    ) throws {
        let base = temporaryRoot("hostile-keys")
        defer { removeTestRoot(base.path) }
        let report = base.appendingPathComponent("report.json")
        let root = base.appendingPathComponent(throughASymlink ? "link" : "host")
        if throughASymlink {
            try FileManager.default.createDirectory(
                at: base.appendingPathComponent("target"), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: root.path, withDestinationPath: "target")
        }
        let campaign = try runWindowhost([
            "stress", "--hostile", "--root", root.path, "--kills", "4", "--scenes", "2", "--seed", "5", "--json",
            report.path,
        ])
        #expect(campaign.status == 0, "\(campaign.output)")
        let windows = Set(
            try JSONDecoder().decode(CampaignReport.self, from: Data(contentsOf: report)).timeline.compactMap(\.window))
        #expect(!windows.isEmpty)
        let keys = (procText("/proc/keys") ?? "").split(separator: "\n").filter { line in
            let flags = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? ""
            return !flags.contains("R") && !flags.contains("D") && windows.contains { line.contains($0) }
        }
        #expect(keys.isEmpty, "keys of the campaign's windows left: \(keys)")
    }

    /// The longest chain of directories under `directory`, as path components.
    private static func deepestPath(in directory: URL) -> [String] {
        let walker = FileManager.default.enumerator(atPath: directory.path)
        var deepest: [String] = []
        while let name = walker?.nextObject() as? String {
            let components = name.split(separator: "/").map(String.init)
            if components.count > deepest.count { deepest = components }
        }
        return deepest
    }
}
