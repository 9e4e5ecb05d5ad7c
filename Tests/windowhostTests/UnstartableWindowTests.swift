import BrowserModel
import Foundation
import Glibc
import Testing

/// A window that cannot start because the root itself is broken (`windows/` swapped for a
/// symlink while the host runs): `ctl connect` is answered with why, the supervisor retries at
/// its slowest pace instead of restarting the worker without end, nothing is followed, and the
/// window starts once the root is mended.
@Suite struct UnstartableWindowTests {
    @Test(.timeLimit(.minutes(10))) func aConnectThatCannotStartIsAnsweredAndRetriedSlowly() throws {
        let root = temporaryRoot("unstartable")
        let canary = temporaryRoot("unstartable-canary")
        defer {
            removeHostFiles(root)
            try? FileManager.default.removeItem(at: canary)
        }
        try FileManager.default.createDirectory(at: canary, withIntermediateDirectories: false)
        let host = try HostProcess(root: root, scenes: 0)
        defer { if host.process.isRunning { host.kill9() } }
        let windows = root.appendingPathComponent(DiskLayout.windows).path
        #expect(rename(windows, windows + ".real") == 0)
        #expect(symlink(canary.path, windows) == 0)

        let connect = try host.ctlBounded(["connect"], seconds: 40)
        #expect(connect.status == 74, "\(connect.output)")
        #expect(connect.output.contains("windows"), "the answer names the broken entry: \(connect.output)")
        let restartsAfterAnswer = host.windows().values.first?.restarts ?? -1
        usleep(6_000_000)
        let restartsLater = host.windows().values.first?.restarts ?? -1
        #expect(restartsLater - restartsAfterAnswer <= 3, "retried slowly: \(restartsAfterAnswer) → \(restartsLater)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: canary.path).isEmpty, "nothing went through the symlink"
        )

        #expect(unlink(windows) == 0)
        #expect(rename(windows + ".real", windows) == 0)
        #expect(waitFor({ host.windows().values.first?.state == "foreground" }, seconds: 15), "\(host.windows())")
        #expect(host.terminate() == 0)
    }
}
