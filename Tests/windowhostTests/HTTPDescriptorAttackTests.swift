import Foundation
import Glibc
import Supervisor
import TestSupport
import Testing

/// Issue 15, attacked: HTTP clients holding every connection `run --http` allows must not
/// spend the descriptors the supervisor needs to start a worker or take a control client.
@Suite(.serialized) struct HTTPDescriptorAttackTests {
    /// A supervisor whose descriptor limit is 80 (as `prlimit --nofile=80:80 windowhost run`
    /// would set it: a small limit, but the supervisor caps its own control clients from it)
    /// and 32 `/api/live` streams that never end: every window up to the capacity must still
    /// connect (each one's worker spawned), and a crashed worker start again. Seen failing at
    /// 4cdde3f: posix_spawn fails with EMFILE ("the supervisor is short of resources") at every
    /// retry while the streams last, and the 4th window's `connect` hangs until killed at 20 s.
    @Test(.timeLimit(.minutes(2))) func heldHTTPConnectionsLeaveDescriptorsToStartWorkers() throws {
        let host = try HostProcess(
            root: temporaryRoot("http-descriptors"), scenes: 2, arguments: ["--http", "127.0.0.1:0"])
        defer { removeHostFiles(host.root) }
        #expect(waitFor({ host.output.contains("\nhttp ") }, seconds: 10), "no http line: \(host.output)")
        let line = try #require(host.output.split(separator: "\n").first { $0.hasPrefix("http http://127.0.0.1:") })
        let http = HTTPTarget(port: try #require(UInt16(line.split(separator: ":").last ?? "")))
        let supervisor = host.process.processIdentifier
        let limited = try runProcess(
            URL(fileURLWithPath: "/usr/bin/prlimit"), ["--pid", "\(supervisor)", "--nofile=80:80"])
        try #require(limited.status == 0, "prlimit: \(limited.output)")
        func descriptors() -> Int {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(supervisor)/fd").count) ?? 0
        }
        let before = descriptors()

        var streams: [Int32] = []
        defer { for fd in streams { close(fd) } }
        for _ in 0..<32 {
            let fd = try #require(http.connect())
            let request = "GET /api/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            streams.append(fd)
        }
        // The server takes what it can spare (closing the rest at once): fewer than 32 here.
        usleep(500_000)
        #expect(descriptors() - before < 32, "the server kept all 32 connections under a limit of 80")

        // Without the streams, 16 windows (the default capacity) fit under 80 descriptors (71).
        for index in 2..<16 {
            let connected = try host.ctlBounded(["connect"], seconds: 20)
            guard connected.status == 0 else {
                Issue.record(
                    "window \(index + 1) of 16 with 32 HTTP streams held: connect \(connected.status) after \(connected.seconds) s: \(connected.output)"
                )
                break
            }
        }
        #expect(
            !host.log.contains("Too many open files"),
            "\(host.log.split(separator: "\n").filter { $0.contains("Too many open files") }.prefix(3))")
        // A worker that crashes is started again, streams or not.
        let window = try #require(host.windowIDs().first)
        let crashed = try #require(host.windows()[window]?.pid)
        Glibc.kill(crashed, SIGKILL)
        #expect(
            waitFor(
                { (host.windows()[window].map { $0.pid != crashed && $0.state == "foreground" }) == true }, seconds: 10),
            "the crashed worker was not started again with 32 HTTP streams held")
        for fd in streams { close(fd) }
        streams = []
        #expect(host.terminate() == 0)
    }
}
