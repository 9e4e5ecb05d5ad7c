import Foundation
import Glibc
import Testing

/// `windows.order` is read as if crafted, like every file under the root: one of 1 GiB (sparse,
/// all zeros) is never read, so neither `inspect` nor `run` spends its size in memory and time
/// (on the old code `inspect` ran past 20 s at 2 GB and `run` never became ready).
@Suite struct OrderFileTests {
    @Test(.timeLimit(.minutes(10))) func aHugeOrderFileIsNeverRead() throws {
        let root = temporaryRoot("huge-order")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://kept.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.terminate() == 0)
        try #require(truncate(root.path + "/windows.order", 1 << 30) == 0)

        let started = Date()
        let inspect = try runWindowhost(["inspect", root.path])
        #expect(inspect.status == 0, "\(inspect.output)")
        #expect(inspect.output.contains(window))
        #expect(Date().timeIntervalSince(started) < 10, "inspect read the file")

        host = try HostProcess(root: root, scenes: 1)
        #expect(host.windowIDs() == [window], "the window reopens, ordered by name")
        #expect(host.terminate() == 0)
    }
}
