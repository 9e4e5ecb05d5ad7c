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
        let orderPath = disk.root.appendingPathComponent("windows.order").path
        func order() -> [String] {
            ((try? String(contentsOfFile: orderPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        #expect(waitFor({ Set(order()) == Set(windows) }, seconds: 10), "\(order())")

        // The disconnected window (never saved) leaves the order; the disk refuses the write.
        try disk.fill()
        let gone = try host.ctlBounded(["disconnect", "--window", windows[0]])
        #expect(gone.status == 0, "\(gone.output)")
        #expect(waitFor({ host.log.contains("cannot write windows.order") }, seconds: 5), "\(host.log)")
        #expect(Set(order()) == Set(windows), "the old order stays while the disk is full")
        usleep(1_000_000)  // several failed retries: logged once

        disk.free()
        #expect(waitFor({ order() == [windows[1]] }, seconds: 5), "the order lands by itself: \(order())")
        #expect(host.log.components(separatedBy: "cannot write windows.order").count == 2, "one error line per episode: \(host.log)")
        #expect(waitFor({ host.log.contains("windows.order written again") }, seconds: 2), "\(host.log)")
    }
}
