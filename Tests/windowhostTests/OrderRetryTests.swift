import BrowserModel
import Foundation
import Glibc
import Testing

/// A `windows.order` write that fails on a full disk is retried by the supervisor with backoff
/// until it lands: once space returns the file holds the order with no other command (it was
/// written again only at the next order change).
@Suite(.serialized) struct OrderRetryTests {
    @Test(.timeLimit(.minutes(10))) func aFailedOrderWriteLandsOnceSpaceReturns() throws {
        let disk = try Tmpfs(megabytes: 8)
        defer { disk.unmount() }
        let host = try HostProcess(root: disk.root, scenes: 2, logs: disk.logs)
        defer { if host.process.isRunning { host.kill9() } }
        let windows = host.windowIDs()
        try #require(windows.count == 2)
        let orderPath = disk.root.appendingPathComponent(DiskLayout.order).path
        func order() -> [String] {
            ((try? String(contentsOfFile: orderPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        #expect(waitFor({ Set(order()) == Set(windows) }, seconds: 10), "\(order())")

        // The disconnected window (it has tabs) moves after the open one; the disk refuses the write.
        #expect(host.open(windows[0], "https://kept.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: windows[0]).code == .ok)
        let before = order()
        try disk.fill()
        let gone = try host.ctlBounded(["disconnect", "--window", windows[0]])
        #expect(gone.status == 0, "\(gone.output)")
        #expect(waitFor({ host.log.contains("cannot write windows.order") }, seconds: 5), "\(host.log)")
        #expect(order() == before, "the old order stays while the disk is full")
        usleep(1_000_000)  // several failed retries: logged once

        disk.free()
        #expect(waitFor({ order() == [windows[1], windows[0]] }, seconds: 5), "the order lands by itself: \(order())")
        #expect(
            host.log.components(separatedBy: "cannot write windows.order").count == 2,
            "one error line per episode: \(host.log)")
        #expect(waitFor({ host.log.contains("windows.order written again") }, seconds: 2), "\(host.log)")
    }

    /// A window that never took a command leaves nothing when it is disconnected: the session
    /// made ahead at its start is deleted with its directory, and it leaves `windows.order`.
    @Test(.timeLimit(.minutes(10))) func anUnusedWindowDisconnectedLeavesNothing() throws {
        let root = temporaryRoot("unused-window")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        defer { if host.process.isRunning { host.kill9() } }
        let windows = host.windowIDs()
        try #require(windows.count == 2)
        let directory = root.appendingPathComponent("windows/\(windows[0])").path
        #expect(FileManager.default.fileExists(atPath: directory), "the session is made ahead at start")
        let gone = try host.ctlBounded(["disconnect", "--window", windows[0]])
        #expect(gone.status == 0, "\(gone.output)")
        #expect(!FileManager.default.fileExists(atPath: directory), "an unused window's directory goes")
        let order = {
            ((try? String(contentsOf: root.appendingPathComponent(DiskLayout.order), encoding: .utf8)) ?? "").split(
                separator: "\n"
            ).map(String.init)
        }
        #expect(waitFor({ order() == [windows[1]] }, seconds: 5), "\(order())")
        #expect(host.terminate() == 0, "\(host.log)")
    }
}
