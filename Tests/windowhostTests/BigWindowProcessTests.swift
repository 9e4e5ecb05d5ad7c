import Foundation
import Glibc
import Testing

/// Issue 11, item 1, as a user meets it: a big window (150 tabs of 65 KB URLs through `ctl`) is
/// saved, shut down cleanly and started again, and every tab is there with the same digest.
/// The issue's size (1,040+ tabs, list metadata over 64 MiB) does not run in a debug build: the
/// worker's compaction of 140 MB and its per-command window digest outlast the supervisor's
/// 3 s watchdog, which kills it. BoundsStoreTests.aHugeWindowComesBackAfterARestart covers
/// that size at the store level.
@Suite(.serialized) struct BigWindowProcessTests {
    @Test(.timeLimit(.minutes(10))) func aBigWindowComesBackAfterAShutdownAndRestart() throws {
        let root = temporaryRoot("big-window")
        defer { removeHostFiles(root) }
        let started = Date()
        // No save until wait-durable: one compaction writes the whole window.
        let host = try HostProcess(root: root, scenes: 1, saveDelay: 600_000)
        let window = try #require(host.windowIDs().first)
        // 65,000-byte URLs: the command ring takes up to 64 KiB a command.
        let tabs = 150
        let padding = String(repeating: "q", count: 65_000)
        for index in 0..<tabs {
            let tab = host.open(window, "https://tab\(index).example/\(padding)")
            try #require(tab != nil, "open \(index): \(host.log.suffix(500))")
        }
        #expect(host.windows()[window]?.tabs == UInt64(tabs))
        // The save delay is long: an explicit save starts it, wait-durable waits for it.
        let save = try host.ctl(["save", "--window", window])
        #expect(save.status == 0, "\(save.output)")
        var durable = try host.ctl(["wait-durable", "--window", window])
        for _ in 0..<120 where durable.status == 75 {
            usleep(500_000)
            durable = try host.ctl(["wait-durable", "--window", window])
        }
        #expect(durable.status == 0, "\(durable.output)")
        let saved = Date()
        // The digest of the durable state, published once the save is.
        #expect(waitFor({ host.windows()[window]?.durableSeq == host.windows()[window]?.appliedSeq }, seconds: 60))
        let before = try #require(host.windows()[window])
        let shutdown = try host.ctl(["shutdown"])
        #expect(shutdown.status == 0, "\(shutdown.output)")
        host.process.waitUntilExit()
        #expect(host.process.terminationStatus == 0, "\(host.log.suffix(2000))")

        let snapshotBytes =
            (try? FileManager.default.subpathsOfDirectory(atPath: root.path))?
            .filter { $0.contains("/regular/snapshot-") }
            .compactMap {
                try? FileManager.default.attributesOfItem(atPath: root.appendingPathComponent($0).path)[.size] as? Int
            }
            .max() ?? 0
        #expect(snapshotBytes > 2 * tabs * 65_000, "metadata and histories in one snapshot: \(snapshotBytes)")

        let next = try HostProcess(root: root, scenes: 1)
        #expect(next.windowIDs() == [window])
        let restored = waitFor({ next.windows()[window]?.tabs == UInt64(tabs) }, seconds: 120)
        let after = next.windows()[window]
        #expect(restored, "tabs after the restart: \(after.map { "\($0.tabs)" } ?? "none"); \(next.log.suffix(2000))")
        #expect(after?.digest == before.digest, "the same tabs, URLs and order")
        #expect(after?.durableSeq == before.appliedSeq)
        #expect(next.terminate() == 0)
        print(
            "big window: \(tabs) tabs, snapshot \(snapshotBytes) bytes; opened and saved in \(saved.timeIntervalSince(started)) s, restored by \(Date().timeIntervalSince(saved)) s later"
        )
    }
}
