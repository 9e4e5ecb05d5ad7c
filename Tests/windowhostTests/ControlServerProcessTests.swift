import BrowserModel
import Foundation
import Glibc
import HostControl
import Supervisor
import SystemPackage
import Testing

/// The control socket against hostile and careless clients, and its path against what may
/// already be there: `ctl` keeps working, nobody's slowness delays another, and nothing at the
/// path is removed that is not a stale socket.
@Suite(.serialized) struct ControlServerProcessTests {
    /// A connection to `path` that never blocks the test: nil when the backlog is full.
    func idleConnection(_ path: String) -> Int32? {
        let fd = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0, var address = UnixSocketAddress.make(FilePath(path)) else { return nil }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Hundreds of idle clients against a supervisor 8 descriptors short of its limit (EMFILE before the cap): it evicts
    /// the longest idle ones, and `ctl` answers in bounded time (it spun on EMFILE and `ctl`
    /// hung).
    @Test(.timeLimit(.minutes(10))) func idleClientsUnderALowDescriptorLimitDoNotStopCtl() throws {
        let root = temporaryRoot("idle-clients")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        // A few descriptors above what it holds now (a memfd per slot, the ring, the root's
        // lock…): EMFILE long before the client cap.
        let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(host.process.processIdentifier)/fd")
            .count
        let limit = held + 8
        let limited = try runProcess(
            URL(fileURLWithPath: "/usr/bin/prlimit"),
            ["--pid", "\(host.process.processIdentifier)", "--nofile=\(limit):\(limit)"])
        try #require(limited.status == 0, "\(limited.output)")

        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<400 {
            if let fd = idleConnection(host.socket) { idle.append(fd) } else { usleep(2_000) }
        }
        #expect(idle.count >= 200, "only \(idle.count) connections were made")

        // `timeout -s KILL`: a ctl stuck in connect on the old code must not hang the test.
        let bounded = ["timeout", "-s", "KILL", "10"]
        for round in 0..<3 {
            let started = Date()
            let status = try runWindowhost(["ctl", "--socket", host.socket, "status", "--json"], prefix: bounded)
            #expect(status.status == 0 && status.output.contains(window), "round \(round): \(status.output)")
            let open = try runWindowhost(
                [
                    "ctl", "--socket", host.socket, "open", "--window", window, "--url",
                    "https://idle-\(round).example/", "--json",
                ],
                prefix: bounded)
            #expect(open.status == 0, "round \(round): \(open.output)")
            #expect(Date().timeIntervalSince(started) < 5, "round \(round) took \(Date().timeIntervalSince(started)) s")
            // More idle clients between rounds.
            for _ in 0..<50 { if let fd = idleConnection(host.socket) { idle.append(fd) } }
        }
        let status = try runWindowhost(["ctl", "--socket", host.socket, "status", "--json"], prefix: bounded)
        #expect(status.output.contains(#""tabs":3"#), "\(status.output)")
        #expect(host.terminate() == 0)
    }

    /// Ten clients ask for a large dump and never read it; another window's `open` is not
    /// delayed (it took 18 s behind blocking sends), and the readers are dropped at the timeout.
    @Test(.timeLimit(.minutes(10))) func clientsThatDoNotReadDelayNobody() throws {
        let root = temporaryRoot("slow-readers")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2, arguments: ["--client-timeout", "2"])
        let windows = host.windowIDs()
        try #require(windows.count == 2)
        let (big, other) = (windows[0], windows[1])
        // About 320 KB of dump: more than a socket's buffers hold (208 KB here), small enough
        // that encoding ten of them in a debug build is not what the bound measures.
        let long = "https://big.example/" + String(repeating: "x", count: 8_000)
        for index in 0..<40 { #expect(host.open(big, long + "\(index)") != nil) }

        var slow: [Int32] = []
        defer { for fd in slow { close(fd) } }
        let request = Array(#"{"verb":"dump","window":"\#(big)"}"#.utf8) + [UInt8(ascii: "\n")]
        for _ in 0..<10 {
            let fd = try #require(idleConnection(host.socket))
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            slow.append(fd)
        }
        // Every reply begins to arrive (seen with MSG_PEEK, taking nothing) in the time encoding
        // them takes (about 2 s in a debug build on a loaded machine); a supervisor blocking in
        // each send for its 1 s timeout needs more than 10 s.
        var peek = [UInt8](repeating: 0, count: 1)
        let requested = Date()
        let allBegan = waitFor(
            { slow.allSatisfy { recv($0, &peek, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) > 0 } }, seconds: 20)
        let beginning = Date().timeIntervalSince(requested)
        #expect(allBegan && beginning < 8, "the replies took \(beginning) s to begin")
        let started = Date()
        let opened = host.open(other, "https://quick.example/")
        let elapsed = Date().timeIntervalSince(started)
        #expect(opened != nil)
        #expect(elapsed < 2, "open took \(elapsed) s behind clients that do not read")

        // Past the timeout (2 s from the reply queued) the supervisor hangs up on each of them
        // (seen without reading, which would count as progress), having sent only what the
        // socket's buffers took.
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        for fd in slow {
            var hangUp = pollfd(fd: fd, events: 0, revents: 0)
            #expect(
                poll(&hangUp, 1, 20_000) == 1 && hangUp.revents & Int16(POLLHUP) != 0,
                "a slow reader's connection is still open")
            var total = 0
            while case let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)), count > 0 { total += count }
            #expect(total > 0 && total < 320_000, "a slow reader got \(total) bytes of its dump")
        }
        #expect(host.windows()[other]?.tabs == 1)
        let status = host.terminate()
        #expect(status == 0, "\(host.log.suffix(3000))")
    }

    /// `--socket` naming a regular file: refused with 73, the file untouched (it was deleted).
    @Test(.timeLimit(.minutes(10))) func aFileAtTheSocketPathIsRefusedAndLeft() throws {
        let root = temporaryRoot("socket-file")
        let precious = root.appendingPathExtension("precious.txt")
        defer {
            removeHostFiles(root)
            try? FileManager.default.removeItem(at: precious)
        }
        try Data("precious".utf8).write(to: precious)
        let run = try runWindowhostBounded(
            ["run", "--root", root.path, "--scenes", "0", "--socket", precious.path], seconds: 20)
        #expect(run.status == 73, "\(run.output)")
        #expect(run.output.contains(precious.path), "\(run.output)")
        #expect(try String(contentsOf: precious, encoding: .utf8) == "precious")
    }

    /// A second supervisor (another root) given a live supervisor's socket: refused with 75,
    /// and the first one still answers after it is gone (it took the path over, then unlinked it).
    @Test(.timeLimit(.minutes(10))) func aLiveSupervisorsSocketIsNotTakenOver() throws {
        let first = temporaryRoot("socket-live")
        let second = temporaryRoot("socket-live-second")
        defer {
            removeHostFiles(first)
            removeHostFiles(second)
        }
        let host = try HostProcess(root: first, scenes: 1)
        let run = try runWindowhostBounded(
            ["run", "--root", second.path, "--scenes", "0", "--socket", host.socket], seconds: 5)
        #expect(run.status == 75, "\(run.output)")
        #expect(host.call(.status, timeout: 10).code == .ok)
        #expect(host.terminate() == 0)
        #expect(!FileManager.default.fileExists(atPath: host.socket), "the supervisor removes its own socket at exit")
    }

    /// A socket nobody answers at (a killed supervisor's): replaced, and the supervisor serves.
    @Test(.timeLimit(.minutes(10))) func aStaleSocketIsReplaced() throws {
        let root = temporaryRoot("socket-stale")
        defer { removeHostFiles(root) }
        try FileManager.default.createDirectory(
            at: root, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let path = root.appendingPathComponent(DiskLayout.controlSocket).path
        close(try boundSocket(path))
        let host = try HostProcess(root: root, scenes: 1)
        #expect(host.call(.status, timeout: 10).code == .ok)
        #expect(host.terminate() == 0)
    }
}
