import BrowserModel
import Foundation
import Glibc
import HostControl
import SessionKeys
import Supervisor
import SystemPackage
import Testing

/// `ctl close-window` and `run --keep-closed` through real processes: a window closed for good
/// leaves no directory, no order entry and never comes back; a kill at any instant of a close
/// leaves the window whole or gone, and the next start finishes it.
@Suite(.serialized) struct CloseWindowProcessTests {
    static func directory(_ root: URL, _ window: String) -> String {
        root.appendingPathComponent("windows/\(window)").path
    }

    static func discarding(_ root: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(DiskLayout.setAside).path))
            ?? [])
            .filter { $0.hasPrefix(".discarding-") }
    }

    static func status(_ host: HostProcess) throws -> StatusReply { try host.call(.status).decode(StatusReply.self) }

    /// A window with tabs (regular and incognito) made durable, then disconnected: closed, on disk.
    static func closedWindow(_ host: HostProcess, tabs: Int = 2) throws -> String {
        let window = try host.call(.connect).decode(ConnectReply.self).window
        for index in 0..<tabs { try #require(host.open(window, "https://closed\(index).example/") != nil) }
        _ = host.open(window, "https://private.example/", incognito: true)
        try #require(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        try #require(try host.ctl(["disconnect", "--window", window]).status == 0)
        return window
    }

    @Test(.timeLimit(.minutes(10))) func closeWindowDeletesItAndALaterConnectGetsAFreshEmptyWindow() throws {
        let root = temporaryRoot("close-window")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        defer { if host.process.isRunning { host.kill9() } }
        let kept = try #require(host.windowIDs().first)
        #expect(host.open(kept, "https://kept.example/") != nil)
        let closed = try Self.closedWindow(host)
        #expect(FileManager.default.fileExists(atPath: Self.directory(root, closed)))
        #expect(try Self.status(host).order == [kept, closed] && Self.status(host).closedWindows == 1)

        let key = try WindowKeyName(root: root.path, window: try #require(UUID(uuidString: closed)))
        #expect(try KernelKeyring().find(key) != nil, "the closed window's incognito key is held")
        let gone = try host.ctl(["close-window", "--window", closed])
        #expect(try KernelKeyring().find(key) == nil, "revoked with the window")
        #expect(gone.status == 0 && gone.output.contains("closed for good \(closed)"), "\(gone.output)")
        #expect(
            !FileManager.default.fileExists(atPath: Self.directory(root, closed)), "the directory went in the rename")
        #expect(
            waitFor({ Self.discarding(root).isEmpty }, seconds: 10), "its bytes are removed: \(Self.discarding(root))")
        let status = try Self.status(host)
        #expect(status.order == [kept] && WindowOrderProcessTests.order(root) == [kept] && status.closedWindows == 0)
        #expect(try host.ctl(["close-window", "--window", closed]).status == 65, "already gone")

        let fresh = try host.call(.connect).decode(ConnectReply.self).window
        #expect(fresh != closed && fresh != kept)
        #expect(host.windows()[fresh]?.tabs == 0, "no tab of the closed window")

        // An open window: disconnected (it saves), then deleted.
        #expect(host.open(fresh, "https://open.example/") != nil)
        let open = try host.ctl(["--json", "close-window", "--window", fresh])
        #expect(open.status == 0 && open.output.contains(fresh), "\(open.output)")
        #expect(host.windows()[fresh] == nil && !FileManager.default.fileExists(atPath: Self.directory(root, fresh)))
        #expect(try Self.status(host).order == [kept])
        #expect(host.terminate() == 0)

        let next = try HostProcess(root: root, scenes: 2)
        defer { if next.process.isRunning { next.kill9() } }
        let reopened = next.windowIDs()
        #expect(reopened.count == 2, "\(reopened)")
        #expect(reopened.first == kept, "\(reopened) kept \(kept)")
        #expect(!reopened.contains(closed) && !reopened.contains(fresh), "\(reopened) closed \(closed) \(fresh)")
        #expect(next.terminate() == 0)
    }

    @Test(.timeLimit(.minutes(10))) func pastKeepClosedTheLeastRecentlyClosedIsDeleted() throws {
        let root = temporaryRoot("keep-closed")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 4, arguments: ["--keep-closed", "2"])
        defer { if host.process.isRunning { host.kill9() } }
        let windows = host.windowIDs()
        try #require(windows.count == 4)
        for window in windows {
            try #require(host.open(window, "https://kept.example/") != nil)
            try #require(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        }
        let (kept, first, second, third) = (windows[0], windows[1], windows[2], windows[3])
        for window in [first, second] { try #require(try host.ctl(["disconnect", "--window", window]).status == 0) }
        var status = try Self.status(host)
        #expect(
            status.closedWindowsEvicted == 0 && status.closedWindows == 2
                && status.order == [kept, third, second, first])
        try #require(try host.ctl(["disconnect", "--window", third]).status == 0)
        status = try Self.status(host)
        #expect(status.order == [kept, third, second], "the least recently closed went: \(status.order)")
        #expect(status.closedWindows == 2 && status.keepClosed == 2 && status.closedWindowsEvicted == 1)
        #expect(!FileManager.default.fileExists(atPath: Self.directory(root, first)))
        #expect(
            FileManager.default.fileExists(atPath: Self.directory(root, second))
                && FileManager.default.fileExists(atPath: Self.directory(root, third)))
        #expect(host.log.contains("closed window deleted") && host.log.contains(first))
        let text = try host.ctl(["status"])
        #expect(text.output.contains("closed windows kept: 2 of 2; deleted past it: 1"), "\(text.output)")
        #expect(host.terminate() == 0)
    }

    /// Windows on disk from an earlier run (open when it stopped) never count toward the bound:
    /// a restart with fewer scenes and a smaller bound deletes only what this supervisor closed.
    @Test(.timeLimit(.minutes(10))) func windowsFromAnEarlierRunAreNeverEvicted() throws {
        let root = temporaryRoot("keep-closed-restart")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 3)
        let windows = host.windowIDs()
        try #require(windows.count == 3)
        for window in windows {
            try #require(host.open(window, "https://kept.example/") != nil)
            try #require(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        }
        #expect(host.terminate() == 0)
        host = try HostProcess(root: root, scenes: 1, arguments: ["--keep-closed", "0"])
        defer { if host.process.isRunning { host.kill9() } }
        #expect(host.windowIDs() == [windows[0]])
        try #require(try host.ctl(["disconnect", "--window", windows[0]]).status == 0)
        let status = try Self.status(host)
        #expect(status.closedWindowsEvicted == 1 && status.order == [windows[1], windows[2]], "\(status.order)")
        #expect(
            !FileManager.default.fileExists(atPath: Self.directory(root, windows[0])),
            "the window this supervisor closed went")
        for window in windows[1...] {
            #expect(FileManager.default.fileExists(atPath: Self.directory(root, window)), "\(window) was never closed")
        }
        #expect(host.terminate() == 0)
    }

    /// Malformed, sentinel, unknown and set-aside UUIDs, and no argument: refused with their
    /// codes, and nothing on disk or in the order changes.
    @Test(.timeLimit(.minutes(10))) func hostileInputIsRefusedAndChangesNothing() throws {
        let root = temporaryRoot("close-window-hostile")
        defer { removeHostFiles(root) }
        // A symlink named like a window directory: set aside at start, as its own UUID.
        let planted = UUID().uuidString
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent(DiskLayout.windows), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: Self.directory(root, planted), withDestinationPath: "/tmp")
        let host = try HostProcess(root: root, scenes: 1)
        defer { if host.process.isRunning { host.kill9() } }
        let kept = try #require(host.windowIDs().first)
        let closed = try Self.closedWindow(host)
        let before = (
            try Self.status(host).order,
            try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(DiskLayout.windows).path)
                .sorted()
        )
        let setAside = try FileManager.default.contentsOfDirectory(
            atPath: root.appendingPathComponent(DiskLayout.setAside).path
        ).sorted()
        #expect(setAside.contains { $0.hasPrefix(planted) }, "\(setAside)")

        let cases: [([String], Int32)] = [
            (["close-window"], 64),
            (["close-window", "--window", "not-a-uuid"], 64),
            (["close-window", "--window", closed.lowercased() + "x"], 64),
            (["close-window", "--window", WindowRegistry.unavailable.uuidString], 65),
            (["close-window", "--window", WindowRegistry.unitTestDefault.uuidString], 65),
            (["close-window", "--window", WindowRegistry.uiTestDefault.uuidString], 65),
            (["close-window", "--window", UUID().uuidString], 65),
            (["close-window", "--window", planted], 65),
        ]
        for (arguments, code) in cases {
            let refused = try host.ctl(arguments)
            #expect(refused.status == code, "\(arguments): \(refused.output)")
        }
        #expect(try Self.status(host).order == before.0)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(DiskLayout.windows).path)
                .sorted()
                == before.1)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(DiskLayout.setAside).path)
                .sorted()
                == setAside)
        #expect(host.windowIDs() == [kept])
        #expect(host.terminate() == 0)
    }

    /// A kill right after the rename that decides a close (the window's directory is
    /// `set-aside/.discarding-<UUID>`, the order and the key not yet changed): the next start
    /// does not reopen it, drops it from the order, revokes its key and removes its bytes.
    @Test(.timeLimit(.minutes(10))) func aCloseLeftUnderWayIsFinishedByTheNextStart() throws {
        let root = temporaryRoot("close-window-under-way")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let kept = try #require(host.windowIDs().first)
        #expect(host.open(kept, "https://kept.example/") != nil)
        let closed = try Self.closedWindow(host)
        let key = try WindowKeyName(root: root.path, window: try #require(UUID(uuidString: closed)))
        defer { try? KernelKeyring().revoke(key) }
        host.kill9()
        let setAside = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(
            at: setAside, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try #require(
            rename(Self.directory(root, closed), setAside.appendingPathComponent(".discarding-\(closed)").path) == 0)
        #expect(
            try WindowOrderProcessTests.order(root) == [kept, closed] && KernelKeyring().find(key) != nil,
            "the state a kill leaves")

        let next = try HostProcess(root: root, scenes: 1)
        defer { if next.process.isRunning { next.kill9() } }
        #expect(try next.windowIDs() == [kept] && Self.status(next).order == [kept])
        #expect(WindowOrderProcessTests.order(root) == [kept], "the order is rewritten without it")
        #expect(waitFor({ Self.discarding(root).isEmpty }, seconds: 10), "its bytes removed: \(Self.discarding(root))")
        #expect(try KernelKeyring().find(key) == nil, "its key revoked")
        #expect(next.log.contains("a close for good left under way is finished"))
        let fresh = try next.call(.connect).decode(ConnectReply.self).window
        #expect(fresh != closed && next.windows()[fresh]?.tabs == 0)
        #expect(next.terminate() == 0)
    }

    /// The supervisor SIGKILLed at many instants of a close (before it, during the rename and
    /// the order's rewrite, during the removal of a big window's bytes): each time the next start
    /// finds the window whole (it reopens with its tabs) or gone (not reopened, not in the order,
    /// its leftover removed), never half.
    @Test(.timeLimit(.minutes(15))) func aKillAtAnyInstantOfACloseLeavesTheWindowWholeOrGone() throws {
        let root = temporaryRoot("close-window-kill")
        defer { removeHostFiles(root) }
        var outcomes: [String: Int] = [:]
        for delay in [0, 100, 250, 500, 750, 1000, 1500, 2000, 3000, 5000, 20_000, 300_000] {
            let host = try HostProcess(root: root, scenes: 1)
            let kept = try #require(host.windowIDs().first)
            let closed = try Self.closedWindow(host, tabs: 40)
            // Sent from this process (no ctl to start), so the delays fall within the close.
            let (socket, id) = (FilePath(host.socket), try #require(UUID(uuidString: closed)))
            let sent = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                _ = ControlClient.call(.closeWindow(id), socket: socket, timeout: 5)
                sent.signal()
            }
            usleep(UInt32(delay))
            host.kill9()
            sent.wait()

            let next = try HostProcess(root: root, scenes: 1)
            #expect(next.windowIDs() == [kept])
            let order = try Self.status(next).order
            if FileManager.default.fileExists(atPath: Self.directory(root, closed)) {
                outcomes["whole", default: 0] += 1
                #expect(order == [kept, closed], "delay \(delay): whole, in its place: \(order)")
                let reopened = try next.call(.connect).decode(ConnectReply.self).window
                #expect(reopened == closed && next.windows()[closed]?.regularTabs == 40, "delay \(delay): whole")
                #expect(try next.ctl(["close-window", "--window", closed]).status == 0)
            } else {
                outcomes["gone", default: 0] += 1
                #expect(order == [kept], "delay \(delay): gone from the order: \(order)")
            }
            #expect(
                waitFor({ Self.discarding(root).isEmpty }, seconds: 10),
                "delay \(delay): the start finished the close: \(Self.discarding(root))")
            #expect(!FileManager.default.fileExists(atPath: Self.directory(root, closed)))
            let fresh = try next.call(.connect).decode(ConnectReply.self).window
            #expect(fresh != closed, "never handed out again")
            #expect(try next.ctl(["close-window", "--window", fresh]).status == 0)
            #expect(next.terminate() == 0)
        }
        #expect(outcomes["gone", default: 0] > 0, "some kill came after the close: \(outcomes)")
        print("close-window kills: \(outcomes)")
    }
}
