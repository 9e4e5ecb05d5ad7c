import Foundation
import Glibc
import Testing

/// "A command whose output went nowhere exits 74", on the paths where ArgumentParser would end
/// the process itself: help and the version, and `run`, which ends by throwing its status as an
/// `ExitCode`.
@Suite struct OutputLostAttackTests {
    /// Help and version text lost on a full disk is no success either.
    @Test(arguments: [["--help"], ["--version"], ["bench", "--help"], ["ctl", "--help"], ["inspect", "--help"]])
    func helpAndVersionOnAFullDiskAreNoSuccess(_ arguments: [String]) throws {
        let (status, output) = try runWindowhost(arguments, prefix: ["sh", "-c", "exec \"$@\" >/dev/full", "sh"])
        #expect(status == 74, "windowhost \(arguments.joined(separator: " ")) > /dev/full exited \(status): \(output)")
    }

    /// A supervisor whose `ready` line went nowhere still serves, and says so when it stops.
    @Test func aRunWhoseReadyLineWasLostSaysSoAtExit() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("windowhost-test-\(UUID().uuidString)")
        defer { removeHostFiles(root) }
        let log = root.appendingPathExtension("stderr")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "sh", "-c", "exec \"$@\" >/dev/full", "sh", windowhostBinary.path, "run", "--root", root.path, "--scenes",
            "1", "--save-delay", "0",
        ]
        process.standardError = try FileHandle(forWritingTo: log)
        try process.run()
        func text() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        let ready = waitFor({ text().contains("[Supervisor] ready") || !process.isRunning }, seconds: 30)
        #expect(ready && process.isRunning, "no supervisor: \(text())")
        let status = try runWindowhost(["ctl", "--socket", root.appendingPathComponent("ctl.sock").path, "status"])
        #expect(status.status == 0, "it still serves: \(status.output)")
        Glibc.kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(text().contains("standard output could not be written"), "nothing said the ready line was lost")
        #expect(process.terminationStatus == 74, "run exited \(process.terminationStatus) with its ready line lost")
    }
}
