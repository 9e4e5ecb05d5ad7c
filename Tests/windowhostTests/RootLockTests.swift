import Foundation
import Glibc
import Testing

/// One supervisor per root, even when someone who can write the root swaps `supervisor.lock`
/// under the one that runs: a second supervisor would serve the same windows, and its saves
/// and the first one's would name the same seqs (a hostile tester lost a tab that way).
@Suite struct RootLockTests {
    @Test(.timeLimit(.minutes(2))) func swappingTheLockFileLetsNoSecondSupervisorIn() throws {
        let root = temporaryRoot("root-lock")
        defer { try? FileManager.default.removeItem(at: root) }
        let host = try HostProcess(root: root, scenes: 1)
        defer { if host.process.isRunning { host.kill9() } }
        let lock = root.appendingPathComponent("supervisor.lock").path
        #expect(rename(lock, root.appendingPathComponent("moved.lock").path) == 0)
        #expect(FileManager.default.createFile(atPath: lock, contents: nil, attributes: [.posixPermissions: 0o600]))

        let second = try runWindowhost(
            ["run", "--root", root.path, "--scenes", "1", "--socket", root.appendingPathComponent("ctl2.sock").path])
        #expect(second.status == 75, "\(second.output)")
        #expect(second.output.contains("another supervisor runs"), "\(second.output)")
        #expect(host.process.isRunning)
        #expect(host.terminate() == 0)
    }
}
