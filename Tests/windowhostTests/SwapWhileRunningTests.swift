import Foundation
import Glibc
import Supervisor
import Testing

/// A hostile tester's find, through a real `windowhost run` driven by `windowhost ctl`: the
/// regular Browser's directory swapped for a symlink while the window runs. The journal
/// descriptor the worker held went on writing outside the root, every save was acknowledged,
/// and after a restart every tab was gone. Now a save into the moved directory is refused (74)
/// and the window heals by itself: every tab `wait-durable` acknowledged comes back.
@Suite(.serialized) struct SwapWhileRunningTests {
    @Test func aBrowserDirectorySwappedForASymlinkWhileRunningLosesNoAcknowledgedTab() throws {
        let root = temporaryRoot("swap")
        let elsewhere = root.path + "-elsewhere"
        defer {
            removeHostFiles(root)
            try? FileManager.default.removeItem(atPath: elsewhere)
        }
        var host = try HostProcess(root: root, scenes: 1)
        defer { if host.process.isRunning { host.kill9() } }
        let window = try #require(host.windowIDs().first)
        var acknowledged: [String] = []
        var refused = 0
        func openAndWait(_ url: String) throws {
            let opened = try host.ctlBounded(["open", "--window", window, "--url", url])
            #expect(opened.status == 0, "\(opened.output)")
            let wait = try host.ctlBounded(["wait-durable", "--window", window])
            if wait.status == 0 {
                acknowledged.append(url)
            } else {
                #expect(wait.status == 74, "a refused save is an I/O failure: \(wait.output)")
                refused += 1
            }
        }
        for index in 0..<3 { try openAndWait("https://before.example/\(index)") }
        #expect(acknowledged.count == 3)

        let regular = root.path + "/windows/\(window)/regular"
        try #require(rename(regular, elsewhere) == 0)
        try #require(symlink(elsewhere, regular) == 0)
        let outside = try FileManager.default.contentsOfDirectory(atPath: elsewhere).sorted()
        for index in 0..<12 {
            try openAndWait("https://during.example/\(index)")
            usleep(100_000)
        }
        // The save right after the swap (started by `open`, the save delay being 0) failed; the
        // wait after it found the window healed, or got 74.
        let status = host.windows()[window]
        #expect(
            (status?.saveFailures ?? 0) >= 1, "the save into the moved directory failed: \(String(describing: status))")
        #expect(
            acknowledged.count == 3 + 12 - refused && acknowledged.last == "https://during.example/11",
            "it heals: \(acknowledged)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: elsewhere).sorted() == outside,
            "nothing outside created or removed")
        #expect(host.terminate() == 0, "nothing unsaved at the end: \(host.log)")

        host = try HostProcess(root: root, scenes: 1)
        let tabs = (host.call(.dump, window: window).result?["regular"]?["tabs"]?.array ?? []).compactMap {
            $0["url"]?.string
        }
        for url in acknowledged { #expect(tabs.contains(url), "acknowledged \(url) is back: \(tabs)") }
        let damaged = root.path + "/windows/\(window)/damaged"
        let asides = (try? FileManager.default.contentsOfDirectory(atPath: damaged)) ?? []
        #expect(asides.contains { $0.hasPrefix("regular-") }, "the symlink is kept as itself: \(asides)")
        #expect(host.terminate() == 0)
    }
}
