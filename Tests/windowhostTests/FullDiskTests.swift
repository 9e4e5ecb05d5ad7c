import Foundation
import Glibc
import HostControl
import SessionKeys
import Supervisor
import TestSupport
import Testing

/// A real full disk: a small tmpfs mounted for the test (as root), filled with a file until
/// `ENOSPC`, under a real `windowhost run`, driven with `windowhost ctl` as a script would.
/// Every wait is bounded: a command that hangs fails the test instead of hanging it.
@Suite(.serialized) struct FullDiskTests {
    /// Durable waits, explicit saves and a disconnect get 74 at once on a full disk; the window
    /// goes on serving; each failure is counted and the episode logged once; once space
    /// returns the save lands by itself, with no command sent.
    @Test func failedSavesAreReportedAndRetriedByThemselves() throws {
        let disk = try Tmpfs(megabytes: 8)
        defer { disk.unmount() }
        let host = try HostProcess(root: disk.root, scenes: 1, logs: disk.logs)
        defer { if host.process.isRunning { host.kill9() } }
        let window = try #require(host.windowIDs().first)

        // The regular Browser's session is made before the window is ready, its journal
        // preallocated; the incognito one at its first save, which a full disk refuses.
        try disk.fill()
        let opened = try host.ctlBounded(["open", "--window", window, "--incognito", "--url", "https://full.example/"])
        #expect(opened.status == 0, "the command applies: \(opened.output)")

        let wait = try host.ctlBounded(["wait-durable", "--window", window])
        #expect(wait.status == 74, "wait-durable: \(wait.output)")
        #expect(wait.output.contains("No space left on device"), "the storage error is said: \(wait.output)")
        #expect(wait.seconds < 2, "74 promptly, not after a hang: \(wait.seconds) s")

        let save = try host.ctlBounded(["save", "--wait", "--window", window])
        #expect(save.status == 74 && save.seconds < 2, "save --wait: \(save.output) in \(save.seconds) s")

        let disconnect = try host.ctlBounded(["disconnect", "--window", window])
        #expect(
            disconnect.status == 74 && disconnect.seconds < 2,
            "disconnect: \(disconnect.output) in \(disconnect.seconds) s")
        let serving = try #require(host.windows()[window])
        #expect(serving.state == "foreground", "a failed disconnect goes back to serving: \(serving)")
        let more = try host.ctlBounded([
            "open", "--window", window, "--incognito", "--url", "https://still-serving.example/",
        ])
        #expect(more.status == 0, "and takes commands: \(more.output)")

        // Backoff retries run meanwhile (100, 200, 400 ms…): counted, logged once.
        usleep(1_200_000)
        let stats = try host.ctlBounded(["--json", "stats"])
        let failures = try #require(statsLine(stats.output)).total.saves.saveFailures
        #expect(failures >= 4, "every failed attempt is counted: \(stats.output)")
        // tmpfs: the journals are written through the page cache, said once and in the stats.
        #expect(try #require(statsLine(stats.output)?.windows.first).directIo == false, "\(stats.output)")
        #expect(
            host.log.components(
                separatedBy: "windowhost: journal writes buffered: the file system is in memory (tmpfs)"
            ).count - 1 == 1, "\(host.log)")
        #expect(host.windows()[window]?.failing?.browsers == ["incognito"])
        #expect(
            host.log.components(separatedBy: "saves are failing").count - 1 == 1, "one line per episode: \(host.log)")

        // Space comes back: the save lands by itself. `status` reads shared memory only.
        disk.free()
        let freedAt = Date()
        let landed = waitFor(
            {
                let status = host.windows()[window]
                return status != nil && status?.durableSeq == status?.appliedSeq && status?.failing == nil
            }, seconds: 6)
        let recovery = Date().timeIntervalSince(freedAt)
        #expect(
            landed,
            "the save lands within seconds of space returning, no command sent: \(String(describing: host.windows()[window]))"
        )
        #expect(recovery < 4, "landed \(recovery) s after space returned")
        #expect(host.log.contains("saves work again"), "the episode's end is logged")
        let durable = try host.ctlBounded(["wait-durable", "--window", window])
        #expect(durable.status == 0, "\(durable.output)")
        #expect(host.terminate() == 0, "nothing unsaved: a clean stop. \(host.log)")
    }

    /// With a long save delay no save has failed yet when `save --wait` asks: its own save
    /// fails, and it answers 74 at once; so does a durable wait after it, and a disconnect.
    @Test func anExplicitSaveThatFailsIsReportedAtOnce() throws {
        let disk = try Tmpfs(megabytes: 8)
        defer { disk.unmount() }
        let host = try HostProcess(root: disk.root, scenes: 1, saveDelay: 60_000, logs: disk.logs)
        defer { if host.process.isRunning { host.kill9() } }
        let window = try #require(host.windowIDs().first)
        #expect(
            try host.ctlBounded(["open", "--window", window, "--incognito", "--url", "https://delayed.example/"]).status
                == 0)
        try disk.fill()
        #expect(host.windows()[window]?.saveFailures == 0, "nothing tried yet")
        let save = try host.ctlBounded(["save", "--wait", "--window", window])
        #expect(save.status == 74 && save.seconds < 2, "save --wait: \(save.output) in \(save.seconds) s")
        let wait = try host.ctlBounded(["wait-durable", "--window", window])
        #expect(wait.status == 74 && wait.seconds < 2, "wait-durable: \(wait.output) in \(wait.seconds) s")
        let stats = try host.ctlBounded(["--json", "stats"])
        #expect(
            try #require(statsLine(stats.output)?.windows.first).saves.saveFailures >= 2,
            "explicit saves count: \(stats.output)")
        disk.free()
        #expect(
            try host.ctlBounded(["save", "--wait", "--window", window]).status == 0, "an explicit save retries at once")
        #expect(host.terminate() == 0, "\(host.log)")
    }

    /// SIGTERM on a full disk: the window that cannot save is named and the exit is 75, the
    /// other window saved; its regular Browser saved though its incognito one could not, so
    /// after a restart the regular tab is back and the incognito one is not.
    @Test func shutdownOnAFullDiskNamesTheWindowsThatKeptUnsavedChanges() throws {
        let disk = try Tmpfs(megabytes: 8)
        defer { disk.unmount() }
        var host = try HostProcess(root: disk.root, scenes: 2, logs: disk.logs)
        defer { if host.process.isRunning { host.kill9() } }
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        let (saved, unsaved) = (ids[0], ids[1])
        #expect(try host.ctlBounded(["open", "--window", saved, "--url", "https://saved.example/"]).status == 0)
        #expect(try host.ctlBounded(["wait-durable", "--window", saved]).status == 0)

        try disk.fill()
        // The saved window's regular journal has room preallocated; a first incognito save
        // needs new files.
        #expect(
            try host.ctlBounded(["open", "--window", saved, "--incognito", "--url", "https://private.example/"]).status
                == 0)
        #expect(try host.ctlBounded(["open", "--window", saved, "--url", "https://after.example/"]).status == 0)
        #expect(
            try host.ctlBounded(["open", "--window", unsaved, "--incognito", "--url", "https://lost.example/"]).status
                == 0)
        #expect(waitFor({ host.windows()[saved]?.failing?.browsers == ["incognito"] }, seconds: 3))

        let stopStart = Date()
        host.process.terminate()
        let stopped = waitFor({ !host.process.isRunning }, seconds: 10)
        #expect(stopped, "shutdown ends on a full disk")
        if !stopped { host.kill9() }
        #expect(Date().timeIntervalSince(stopStart) < 5)
        #expect(host.process.terminationStatus == 75, "some window kept unsaved changes: \(host.log)")
        let named = host.log.split(separator: "\n").filter { $0.contains("kept unsaved changes") }
        #expect(named.contains { $0.contains(unsaved) } && named.contains { $0.contains(saved) }, "\(named)")
        #expect(!host.log.contains("every window saved"))

        disk.free()
        host = try HostProcess(root: disk.root, scenes: 2, logs: disk.logs)
        try #require(host.windowIDs().contains(saved), "the window comes back: \(host.windowIDs())")
        let dump = try #require(host.call(.dump, window: saved).result)
        let urls = (dump["regular"]?["tabs"]?.array ?? []).compactMap { $0["url"]?.string }
        // The regular tab opened after the incognito one whose save failed was saved, but the
        // window was never durable through it: it comes back as it was after one command.
        #expect(urls == ["https://saved.example/"], "the window as it was before the failed incognito save: \(dump)")
        #expect(dump["incognito"]?["tabs"]?.array?.isEmpty == true)
        #expect(host.terminate() == 0, "\(host.log)")
    }
}

/// `ctl --json stats` as it printed it.
private func statsLine(_ text: String) -> StatsReply? {
    try? ReplyCoding.decoder().decode(StatsReply.self, from: Data(text.utf8))
}

/// A tmpfs of a few megabytes mounted on a fresh directory: the root goes in a private
/// subdirectory, logs beside the mount (a full disk must not swallow them). Mounting needs
/// root; when the machine refuses, the test fails saying why.
struct Tmpfs {
    let mountPoint: URL
    let logs: URL
    var root: URL { mountPoint.appendingPathComponent("root") }
    private var filler: URL { mountPoint.appendingPathComponent("filler") }

    init(megabytes: Int) throws {
        let base = temporaryRoot("tmpfs")
        mountPoint = base.appendingPathComponent("mnt")
        logs = base
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        let (status, output) = try runProcess(
            URL(fileURLWithPath: "/bin/mount"), ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", mountPoint.path])
        guard status == 0 else {
            removeTestRoot(base.path)
            throw HostFailure(
                "cannot mount a tmpfs (this test needs root to fill a real disk; uid \(getuid())): \(output)")
        }
        try FileManager.default.createDirectory(
            at: root, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    }

    /// Writes a file until the filesystem refuses with ENOSPC.
    func fill() throws {
        let fd = open(filler.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw HostFailure("cannot create \(filler.path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0xA5, count: 4096)
        var written = 0
        while true {
            let count = write(fd, chunk, chunk.count)
            if count > 0 {
                written += count
                continue
            }
            if count < 0, errno == EINTR { continue }
            guard count < 0, errno == ENOSPC else {
                throw HostFailure("filling stopped without ENOSPC: \(String(cString: strerror(errno)))")
            }
            break
        }
        // What is left below a page goes too, byte by byte.
        while write(fd, chunk, 1) == 1 { written += 1 }
        #expect(written > 0)
    }

    func free() { unlink(filler.path) }

    func unmount() {
        // Before the unmount: the root's keys are named by the mount's device.
        _ = try? KernelKeyring().revokeEveryKey(ofRootAt: root.path)
        _ = try? runProcess(URL(fileURLWithPath: "/bin/umount"), ["-l", mountPoint.path])
        try? FileManager.default.removeItem(at: logs)
    }
}
