import Foundation
import Glibc
import Testing

/// A client waiting on its window when the supervisor shuts down is answered, as a `wait-durable`
/// waiting then is (75), never left to find its connection closed with no reply (which `ctl`
/// reports as 69, no supervisor).
@Suite struct ShutdownWaitersAttackTests {
    @Test func aKillWaitingForTheWatchdogWhenTheSupervisorShutsDownIsAnswered() throws {
        let root = temporaryRoot("shutdown-kill")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://a.example/") != nil)
        // A stopped worker: the kill waits for the watchdog's period and the restart after it.
        let kill = Process()
        kill.executableURL = windowhostBinary
        kill.arguments = ["ctl", "--socket", host.socket, "kill", "--window", window, "--signal", "STOP"]
        let errors = Pipe()
        kill.standardOutput = FileHandle.nullDevice
        kill.standardError = errors
        try kill.run()
        #expect(waitFor({ host.log.contains("killing a worker on request") }, seconds: 10), "\(host.log)")
        let shutdown = try host.ctl(["shutdown"])
        #expect(shutdown.status == 0, "\(shutdown.output)")
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        kill.waitUntilExit()
        #expect(kill.terminationStatus == 75, "the waiting kill exited \(kill.terminationStatus): \(said)")
        _ = host.terminate()
    }
}
