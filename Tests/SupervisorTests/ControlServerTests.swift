import Foundation
import Glibc
import HostLimits
import IOUring
import Platform
import SystemPackage
import TestSupport
import Testing

@testable import HostControl
@testable import Supervisor

/// The control server without a supervisor or a worker: real sockets in this process, the
/// clock passed in, so eviction, timeouts and slow readers are seen turn by turn.
@Suite final class ControlServerTests {
    let directory: String

    init() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "windowhost-control-server-\(UUID().uuidString.prefix(8))"
            ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { removeTestRoot(directory) }

    var path: FilePath { FilePath(directory + "/ctl.sock") }

    /// One turn of a loop: poll (at most `wait` ms), then service.
    @discardableResult
    func turn(_ server: ControlServer, now: UInt64 = monotonicNanoseconds(), wait: Int32 = 20) -> [(
        ControlServer.ClientID, ControlRequest
    )] {
        var descriptors = server.pollDescriptors(accepting: true, now: now)
        _ = poll(&descriptors, nfds_t(descriptors.count), wait)
        return server.service(descriptors, now: now)
    }

    /// A connected client socket (non-blocking, so a test never hangs on it).
    func connectClient() throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = try #require(UnixSocketAddress.make(path))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(connected == 0, "connect: \(Errno(rawValue: errno))")
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    func sendRequest(_ fd: Int32, _ request: ControlRequest) {
        let line = Array((try? JSONEncoder().encode(request)) ?? Data()) + [UInt8(ascii: "\n")]
        _ = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Whether the server closed `fd`'s connection (EOF once any reply is read).
    func isClosed(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 { continue }
            return count == 0 || (count < 0 && errno != EAGAIN)
        }
    }

    /// Reads one reply line, waiting at most a second.
    func reply(_ fd: Int32) throws -> ControlReply {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        let deadline = Date().addingTimeInterval(1)
        while bytes.last != UInt8(ascii: "\n"), Date() < deadline {
            let count = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if count > 0 { bytes += chunk[..<count] } else { usleep(1000) }
        }
        return try JSONDecoder().decode(ControlReply.self, from: Data(bytes))
    }

    @Test func theLongestIdleClientMakesRoomAtTheCap() throws {
        let server = try ControlServer(path: path, maxClients: 3, idleTimeout: 60_000_000_000)
        defer { server.stop() }
        var now = monotonicNanoseconds()
        var idle: [Int32] = []
        for _ in 0..<3 {
            idle.append(try connectClient())
            turn(server, now: now)
            now += 1_000_000
        }
        #expect(server.clientCount == 3)
        // The fourth is accepted; the first, idle longest, is dropped for it.
        let fourth = try connectClient()
        turn(server, now: now)
        #expect(server.clientCount == 3)
        #expect(isClosed(idle[0]))
        #expect(!isClosed(idle[1]) && !isClosed(idle[2]))
        // And it is served.
        sendRequest(fourth, .status)
        let requests = turn(server, now: now)
        #expect(requests.map(\.1.verb) == [.status])
        server.answer(try #require(requests.first?.0), .ok(.string("fine")))
        #expect(try reply(fourth).result == .string("fine"))
        for fd in idle + [fourth] { close(fd) }
    }

    @Test func aClientWaitingForItsReplyIsNeitherTimedOutNorEvicted() throws {
        let server = try ControlServer(path: path, maxClients: 1, idleTimeout: 1_000_000_000)
        defer { server.stop() }
        let start = monotonicNanoseconds()
        let waiting = try connectClient()
        turn(server, now: start)
        sendRequest(waiting, .window(UUID(), .waitDurable(seq: nil)))
        let requests = turn(server, now: start)
        let id = try #require(requests.first?.0)
        // Past the timeout, and a newcomer at the cap: the waiting client keeps its place,
        // the newcomer is told to retry.
        let newcomer = try connectClient()
        turn(server, now: start + 5_000_000_000)
        #expect(server.clientCount == 1)
        #expect(try reply(newcomer).code == .temporary)
        server.answer(id, .ok(.null))
        #expect(try reply(waiting).code == .ok)
        close(waiting)
        close(newcomer)
    }

    @Test func aClientThatSendsNothingIsDroppedAfterTheTimeout() throws {
        let server = try ControlServer(path: path, maxClients: 8, idleTimeout: 1_000_000_000)
        defer { server.stop() }
        let start = monotonicNanoseconds()
        let silent = try connectClient()
        turn(server, now: start)
        turn(server, now: start + 500_000_000, wait: 0)
        #expect(server.clientCount == 1)
        turn(server, now: start + 1_000_000_000, wait: 0)
        #expect(server.clientCount == 0)
        #expect(isClosed(silent))
        close(silent)
    }

    /// A reply far larger than the socket's buffers, to a client that does not read: the
    /// answer returns at once, another client's reply goes out, and the slow one is dropped
    /// at the timeout.
    @Test func aClientThatDoesNotReadDelaysNobody() throws {
        let server = try ControlServer(path: path, maxClients: 8, idleTimeout: 1_000_000_000)
        defer { server.stop() }
        let slow = try connectClient()
        let quick = try connectClient()
        let start = monotonicNanoseconds()
        turn(server, now: start)
        sendRequest(slow, .window(UUID(), .dump))
        sendRequest(quick, .status)
        var requests: [(ControlServer.ClientID, ControlRequest)] = []
        for _ in 0..<10 where requests.count < 2 { requests += turn(server, now: start) }
        let slowID = try #require(requests.first { $0.1.verb == .dump }?.0)
        let quickID = try #require(requests.first { $0.1.verb == .status }?.0)
        // Returns with most of the reply queued (encoding 4 MiB is the time it takes).
        server.answer(slowID, .ok(.string(String(repeating: "d", count: 4 << 20))))
        let started = Date()
        server.answer(quickID, .ok(.string("fine")))
        #expect(try reply(quick).result == .string("fine"))
        #expect(Date().timeIntervalSince(started) < 0.5)
        // The answers stamped the clients with the real clock, a moment after `start`.
        turn(server, now: start + 500_000_000, wait: 0)
        #expect(server.clientCount == 1)
        turn(server, now: monotonicNanoseconds() + 1_000_000_000, wait: 0)
        #expect(server.clientCount == 0)
        close(slow)
        close(quick)
    }

    /// The bound is on the line without its newline, as `ctl` counts it: a line of exactly
    /// `maxControlRequestBytes` is read, a longer one is refused with 64 even when its newline
    /// comes in the read that crosses the bound (lines up to about 128 KiB were served).
    @Test func aRequestLineIsBoundedExactly() throws {
        let server = try ControlServer(path: path, maxClients: 8, idleTimeout: 60_000_000_000)
        defer { server.stop() }
        /// A `status` request padded with spaces to `length` bytes, then its newline.
        func line(_ length: Int) -> [UInt8] {
            let open = Array(#"{"verb":"status""#.utf8)
            return open + [UInt8](repeating: UInt8(ascii: " "), count: length - open.count - 1) + Array("}\n".utf8)
        }
        let lengths = [Limits.maxControlRequestBytes, Limits.maxControlRequestBytes + 1, 120 << 10]
        var clients: [Int32] = []
        for length in lengths {
            let fd = try connectClient()
            clients.append(fd)
            let bytes = line(length)
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            try #require(sent == bytes.count, "sent \(sent) of \(bytes.count): \(errno)")
        }
        defer { for fd in clients { close(fd) } }
        var requests: [(ControlServer.ClientID, ControlRequest)] = []
        for _ in 0..<20 { requests += turn(server) }
        #expect(requests.count == 1 && requests.first?.1 == .status, "\(requests)")
        for fd in clients.dropFirst() {
            let refused = try reply(fd)
            #expect(refused.code == .usage && refused.error?.contains("request longer than") == true, "\(refused)")
        }
    }

    /// A line whose top-level object names a key twice is two requests to two parsers
    /// (JSONDecoder keeps the first `window`, a script's parser the last): refused with 64,
    /// however the key is spelled, and nothing reaches a window.
    @Test func aRequestNamingAKeyTwiceIsRefused() throws {
        let server = try ControlServer(path: path, maxClients: 8, idleTimeout: 60_000_000_000)
        defer { server.stop() }
        let (a, b) = (UUID().uuidString, UUID().uuidString)
        let lines = [
            #"{"verb":"open","window":"\#(a)","url":"https://a.example/","window":"\#(b)"}"#,
            #"{"verb":"dump","window":"\#(a)", "wind\u006fw" : "\#(b)"}"#,
            #"{"verb":"status","verb":"shutdown"}"#,
        ]
        var clients: [Int32] = []
        for line in lines {
            let fd = try connectClient()
            clients.append(fd)
            _ = Array((line + "\n").utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        defer { for fd in clients { close(fd) } }
        var requests: [(ControlServer.ClientID, ControlRequest)] = []
        for _ in 0..<10 { requests += turn(server) }
        #expect(requests.isEmpty, "\(requests)")
        for (fd, key) in zip(clients, ["window", "window", "verb"]) {
            let refused = try reply(fd)
            #expect(
                refused
                    == .failure(
                        .usage,
                        "request names the key \"\(key)\" twice, which parsers read differently: refused, nothing was done"
                    ))
        }

        // Keys repeated only inside a nested value, or text that looks like a key, are no repeat.
        let once =
            #"{"verb":"open","window":"\#(a)","url":"https://a.example/?\"window\":1","x":{"window":1,"window":2},"y":[{"verb":1}]}"#
        #expect(ControlRequest.topLevelKeys(in: Array(once.utf8)) == ["verb", "window", "url", "x", "y"])
        #expect(ControlRequest.repeatedKey(in: Array(once.utf8)) == nil)
        for notAnObject in ["", "[1,2]", #""verb""#, #"{"verb":"status""#, #"{"verb"#, #"{"a\"#] {
            #expect(ControlRequest.topLevelKeys(in: Array(notAnObject.utf8)) == nil, "\(notAnObject)")
        }
    }

    @Test func somethingThatIsNotASocketIsLeftAndRefused() throws {
        try Data("precious".utf8).write(to: URL(fileURLWithPath: path.string))
        #expect(throws: ControlSocketError.self) { _ = try ControlServer(path: path, maxClients: 1, idleTimeout: 1) }
        do {
            _ = try ControlServer(path: path, maxClients: 1, idleTimeout: 1)
        } catch {
            guard case .notASocket = error else {
                Issue.record("\(error)")
                return
            }
        }
        #expect(try String(contentsOfFile: path.string, encoding: .utf8) == "precious")
    }

    @Test func aLiveSocketIsRefusedAndAStaleOneReplaced() throws {
        var first: ControlServer? = try ControlServer(path: path, maxClients: 1, idleTimeout: 1)
        do {
            _ = try ControlServer(path: path, maxClients: 1, idleTimeout: 1)
            Issue.record("a second server took a live socket")
        } catch {
            guard case .inUse = error else {
                Issue.record("\(error)")
                return
            }
        }
        // The first one still answers.
        let client = try connectClient()
        turn(try #require(first))
        #expect(first?.clientCount == 1)
        close(client)
        // Gone without removing its file (a killed supervisor): the socket is stale and replaced.
        first = nil
        let second = try ControlServer(path: path, maxClients: 1, idleTimeout: 1_000_000_000)
        let again = try connectClient()
        turn(second)
        #expect(second.clientCount == 1)
        close(again)
        second.stop()
        #expect(!FileManager.default.fileExists(atPath: path.string))
    }

    @Test func stopLeavesAPathThatIsNoLongerOurs() throws {
        let server = try ControlServer(path: path, maxClients: 1, idleTimeout: 1)
        // Someone replaced the path while it ran.
        unlink(path.string)
        try Data("theirs".utf8).write(to: URL(fileURLWithPath: path.string))
        server.stop()
        #expect(try String(contentsOfFile: path.string, encoding: .utf8) == "theirs")
    }
}
