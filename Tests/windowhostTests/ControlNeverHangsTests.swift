import BrowserModel
import Foundation
import Glibc
import Supervisor
import SystemPackage
import TestSupport
import Testing

/// `ctl` never waits forever: a stopped supervisor, a socket nobody accepts on and a kill that
/// cannot kill all end in bounded time with a clear answer.
@Suite(.serialized) struct ControlNeverHangsTests {
    @Test(.timeLimit(.minutes(10))) func ctlAgainstAStoppedSupervisorExits75WithinItsTimeout() throws {
        let root = temporaryRoot("ctl-stopped")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let supervisor = host.process.processIdentifier
        Glibc.kill(supervisor, SIGSTOP)
        defer { Glibc.kill(supervisor, SIGCONT) }
        let start = Date()
        let stopped = try host.ctl(["--timeout", "2", "status"])
        let elapsed = Date().timeIntervalSince(start)
        #expect(stopped.status == 75 && stopped.output.contains("no reply"), "\(stopped.output)")
        #expect(elapsed >= 1.9 && elapsed < 8, "\(elapsed) s")
        Glibc.kill(supervisor, SIGCONT)
        let status = try host.ctl(["--timeout", "10", "status"])
        #expect(status.status == 0, "\(status.output)")
    }

    @Test(.timeLimit(.minutes(10))) func ctlAgainstASocketNobodyAcceptsOnExits75WithinItsTimeout() throws {
        let path = temporaryRoot("ctl-mute").path + ".sock"
        defer { unlink(path) }
        let fd = try boundSocket(path, listening: 1)
        defer { close(fd) }
        // The backlog fills: later connections are not even queued.
        for _ in 0..<4 {
            let start = Date()
            let result = try runWindowhost(["ctl", "--socket", path, "--timeout", "1", "status"])
            let elapsed = Date().timeIntervalSince(start)
            #expect(result.status == 75 && result.output.contains("1 s timeout"), "\(result.output)")
            #expect(elapsed < 5, "\(elapsed) s")
        }
    }

    @Test(.timeLimit(.minutes(10))) func killWithASignalThatCannotKillIsAnsweredAtOnce() throws {
        let root = temporaryRoot("ctl-cont")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        let pid = try #require(host.windows()[window]?.pid)
        for signal in ["CONT", "\(SIGWINCH)"] {
            let start = Date()
            let result = try host.ctl(["--timeout", "10", "kill", "--window", window, "--signal", signal])
            #expect(Date().timeIntervalSince(start) < 5)
            #expect(result.status == 0 && result.output.contains("no restart expected"), "\(result.output)")
        }
        let json = try host.ctl(["--timeout", "10", "--json", "kill", "--window", window, "--signal", "CONT"])
        #expect(json.status == 0 && json.output.contains(#""restart_expected":false"#), "\(json.output)")
        // The worker was not touched, and a later kill restarts it as always.
        #expect(host.windows()[window]?.pid == pid && host.windows()[window]?.state == "foreground")
        let killed = try host.ctl(["--timeout", "20", "kill", "--window", window])
        #expect(killed.status == 0 && killed.output.contains("restored by"), "\(killed.output)")
    }

    /// EMFILE in the supervisor while it restarts a worker is the supervisor's shortage, not
    /// the window's failed start: the session is never set aside, and the window comes back
    /// with its tabs once descriptors are available again.
    @Test(.timeLimit(.minutes(10))) func aRespawnShortOfDescriptorsDoesNotSetTheSessionAside() throws {
        let root = temporaryRoot("ctl-emfile")
        defer { removeHostFiles(root) }
        // No spare: a waiting spare takes the restart with no new descriptor of the
        // supervisor's (the hand-over passes one it holds), and this is the spawn's shortage.
        let host = try HostProcess(root: root, scenes: 1, arguments: ["--no-spare"])
        let window = try #require(host.windowIDs().first)
        for index in 0..<3 { _ = try #require(host.open(window, "https://durable\(index).example/")) }
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        let supervisor = host.process.processIdentifier
        let worker = try #require(host.windows()[window]?.pid)

        // The limit leaves the supervisor two descriptor numbers free once the worker's pidfd
        // and doorbell close, three when the control server gives up its spare descriptor to
        // answer a client: enough to set a session aside (the old code did), never the four a
        // start holds at once (a doorbell and three descriptors lifted for the child).
        let fds = "/proc/\(supervisor)/fd"
        let open = try FileManager.default.contentsOfDirectory(atPath: fds).compactMap(Int.init)
        func target(_ fd: Int) -> String {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fds)/\(fd)")) ?? ""
        }
        let pidfd = try #require(open.filter { target($0).contains("pidfd") }.max())
        let doorbell = try #require(open.filter { target($0).contains("eventfd") }.max())
        let held = Set(open).subtracting([pidfd, doorbell])
        var limit = 0
        var free = 0
        while free < 2 {
            if !held.contains(limit) { free += 1 }
            limit += 1
        }
        // The soft limit only: raising a hard limit again needs CAP_SYS_RESOURCE.
        let hard = try #require(Self.hardDescriptorLimit(of: supervisor))
        let lowered = try runProcess(
            URL(fileURLWithPath: "/usr/bin/prlimit"), ["--pid", "\(supervisor)", "--nofile=\(limit):\(hard)"])
        try #require(lowered.status == 0, "\(lowered.output)")
        Glibc.kill(Int32(worker), SIGKILL)
        // Once the supervisor has seen the death, no worker starts while the limit holds.
        #expect(
            waitFor(
                { host.call(.status, timeout: 2).result?["windows"]?.array?.first?["state"]?.string != "foreground" },
                seconds: 10))

        let session = root.appendingPathComponent("windows/\(window)/regular").path
        let setAside = root.appendingPathComponent(DiskLayout.setAside).path
        var sawRefusal = false
        let until = Date().addingTimeInterval(4)
        while Date() < until {
            #expect(host.process.isRunning)
            #expect(
                ((try? FileManager.default.contentsOfDirectory(atPath: setAside)) ?? []).isEmpty, "nothing set aside")
            #expect(FileManager.default.fileExists(atPath: session), "the session stays")
            let status = host.call(.status, timeout: 2)
            if let result = status.result {
                #expect(result["set_aside"]?.array?.isEmpty ?? true, "\(result)")
                #expect(
                    result["windows"]?.array?.first?["state"]?.string != "foreground",
                    "no worker can start yet: \(result)")
            }
            // A command to a window without a worker is refused, and takes no seq.
            let refused = host.call(.open("https://refused.example/"), window: window, timeout: 2)
            if refused.code == .temporary, refused.error?.contains("retry") == true { sawRefusal = true }
            usleep(300_000)
        }
        #expect(sawRefusal)
        #expect(host.log.contains("short of resources"), "\(host.log)")

        let raised = try runProcess(
            URL(fileURLWithPath: "/usr/bin/prlimit"), ["--pid", "\(supervisor)", "--nofile=\(hard):\(hard)"])
        try #require(raised.status == 0, "\(raised.output)")
        #expect(waitFor({ host.windows()[window]?.state == "foreground" }, seconds: 20), "\(host.log)")
        let dump = try #require(host.call(.dump, window: window, timeout: 10).result)
        let urls = (dump["regular"]?["tabs"]?.array ?? []).compactMap { $0["url"]?.string }
        #expect(urls == (0..<3).map { "https://durable\($0).example/" }, "\(dump)")
        #expect(host.call(.status).result?["set_aside"]?.array?.isEmpty ?? false)
        let next = host.call(.open("https://after.example/"), window: window)
        #expect(next.result?["seq"]?.int == 4, "the refusals took no seq: \(next)")
        #expect(host.terminate() == 0)
    }

    /// Every refusal in the supervisor's `read` and `handle` answers before a seq is taken:
    /// malformed, too large, unknown verb or window, missing what the verb needs. (Passes on
    /// the old code too: it guards the order of `handle`, where a seq is taken last.)
    @Test(.timeLimit(.minutes(10))) func refusedRequestsTakeNoSeq() throws {
        let root = temporaryRoot("ctl-refused")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://first.example/") != nil)
        #expect(
            try rawSocketReplyText(host.socket, Array(#"{"verb":"open","window":"\#(window)","#.utf8) + [10]).contains(
                #""code":64"#))
        #expect(
            try rawSocketReplyText(
                host.socket,
                Array(#"{"verb":"open","window":"\#(window)","url":""#.utf8)
                    + Array(repeating: UInt8(ascii: "a"), count: 1 << 20)
            ).contains(#""code":64"#))
        for line in [
            #"{"verb":"teleport","window":"\#(window)"}"#, #"{"verb":"navigate","window":"\#(window)","tab":1}"#,
            #"{"verb":"move","window":"\#(window)","tab":1}"#,
        ] {
            #expect(try rawSocketReplyText(host.socket, Array(line.utf8) + [10]).contains(#""code":64"#), "\(line)")
        }
        #expect(host.call(.open("about:blank"), window: UUID().uuidString).code == .badData)
        #expect(host.windows()[window]?.appliedSeq == 1)
        let next = host.call(.open("https://second.example/"), window: window)
        #expect(next.result?["seq"]?.int == 2, "\(next)")
        #expect(host.terminate() == 0)
    }

    /// The hard `Max open files` of `pid`, from /proc.
    static func hardDescriptorLimit(of pid: Int32) -> String? {
        let limits = procText("/proc/\(pid)/limits") ?? ""
        guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else {
            return nil
        }
        let fields = line.split(separator: " ")
        return fields.count >= 5 ? String(fields[4]) : nil
    }
}
