import Foundation
import Glibc
import Supervisor
import Testing
import TestSupport

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

        let demo = try runProcess(windowhostBinary, ["demo", "--seed", "3", "--commands", "80", "--save-delay", "0"], environment: environment)
        #expect(demo.status == 0, "\(demo.output)")
        let stress = try runProcess(windowhostBinary, ["stress", "--kills", "3", "--scenes", "2", "--seed", "5"], environment: environment)
        #expect(stress.status == 0, "\(stress.output)")

        let root = temporary.appendingPathComponent("windowhost-leftovers")
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://leftover.example/", incognito: true) != nil)
        #expect(try host.ctl(["wait-durable", "--window", window]).status == 0)
        #expect(Set(try Self.leftovers(in: temporary).keys).subtracting(before.keys).count == 1, "the open window's key, until its root goes")
        #expect(host.terminate() == 0)
        removeHostFiles(root)

        let after = try Self.leftovers(in: temporary)
        #expect(after.files.isEmpty, "files left: \(after.files)")
        #expect(Set(after.keys).subtracting(before.keys).isEmpty, "keys left: \(Set(after.keys).subtracting(before.keys))")
    }
}
