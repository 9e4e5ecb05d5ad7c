import Foundation
import Glibc
import HostControl
import Supervisor
import SystemPackage
import Testing

/// The client's own failures are a typed `ControlClientError` a caller matches (a stress
/// campaign tells a hang by its case, not by a message's prefix), and `call` still gives the
/// replies `ctl` prints, word for word.
@Suite struct ControlClientErrorTests {
    let path: String

    init() {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "control-client-\(UUID().uuidString.prefix(8)).sock"
            ).path
    }

    /// A Unix stream socket bound at `path`, listening when `backlog` is given.
    /// A fake supervisor's side: the next connection, once its request line is read (or -1).
    private static func acceptReadingRequest(_ listener: Int32) -> Int32 {
        let client = accept(listener, nil, nil)
        var byte: UInt8 = 0
        while client >= 0, read(client, &byte, 1) == 1, byte != UInt8(ascii: "\n") {}
        return client
    }

    private func bound(listening backlog: Int32?) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        var address = try #require(UnixSocketAddress.make(FilePath(path)))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(result == 0 && (backlog.map { listen(fd, $0) == 0 } ?? true), "bind or listen: \(errno)")
        return fd
    }

    /// Connected (queued in the backlog), the request sent, and no reply ever: the reply's wait
    /// is what timed out.
    @Test(.timeLimit(.minutes(10))) func aReplyThatNeverComesIsATimeoutOfTheReply() throws {
        let fd = try bound(listening: 4)
        defer {
            close(fd)
            unlink(path)
        }
        let request = ControlRequest.status
        #expect {
            try ControlClient.exchange(request, socket: FilePath(path), timeout: 1)
        } throws: { error in
            guard case .timedOut(.reply("status"), seconds: 1, _)? = error as? ControlClientError else { return false }
            return true
        }
        let reply = ControlClient.call(request, socket: FilePath(path), timeout: 1)
        #expect(reply.code == .temporary)
        #expect(
            reply.error
                == "no reply to 'status' came within the 1 s timeout (--timeout): the supervisor at \(path) may be stopped or overloaded",
            "\(reply.error ?? "")")
    }

    @Test func aSocketNobodyListensAtIsNoSupervisor() throws {
        let fd = try bound(listening: nil)
        defer {
            close(fd)
            unlink(path)
        }
        let request = ControlRequest.status
        #expect(throws: ControlClientError.noSupervisor(FilePath(path), .connectionRefused)) {
            try ControlClient.exchange(request, socket: FilePath(path), timeout: 1)
        }
        let reply = ControlClient.call(request, socket: FilePath(path), timeout: 1)
        #expect(reply == .failure(.unavailable, "no supervisor at \(path): \(Errno.connectionRefused)"))
    }

    /// A supervisor that reads the request and hangs up without a word.
    @Test(.timeLimit(.minutes(10))) func aConnectionClosedWithoutAReplyIsNoReply() throws {
        let fd = try bound(listening: 4)
        defer {
            close(fd)
            unlink(path)
        }
        let served = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            for _ in 0..<2 {
                let client = Self.acceptReadingRequest(fd)
                if client >= 0 { close(client) }
            }
            served.signal()
        }
        let request = ControlRequest.status
        #expect(throws: ControlClientError.noReply) {
            try ControlClient.exchange(request, socket: FilePath(path), timeout: 10)
        }
        let reply = ControlClient.call(request, socket: FilePath(path), timeout: 10)
        #expect(reply == .failure(.unavailable, "the supervisor closed the connection without a reply"))
        served.wait()
    }

    /// A fake server that streams a reply line that never ends (until the client hangs up, or
    /// 64 KiB past the bound, so that a client without the bound still ends): the client stops at
    /// `maxReplyBytes` with a typed error well within its timeout, instead of holding all it is
    /// sent until the timeout passes.
    @Test(.timeLimit(.minutes(10))) func aReplyThatNeverEndsIsRefusedAtTheBound() throws {
        let fd = try bound(listening: 4)
        defer {
            close(fd)
            unlink(path)
        }
        let served = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let client = Self.acceptReadingRequest(fd)
            let endless = [UInt8](repeating: UInt8(ascii: "x"), count: 64 << 10)
            var sent = 0
            while client >= 0, sent < ControlClient.maxReplyBytes + endless.count {
                let count = endless.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { break }
                sent += count
            }
            if client >= 0 { close(client) }
            served.signal()
        }
        let timeout = 2
        let started = ContinuousClock.now
        #expect(throws: ControlClientError.replyTooLong(limit: ControlClient.maxReplyBytes)) {
            try ControlClient.exchange(.status, socket: FilePath(path), timeout: timeout)
        }
        #expect(ContinuousClock.now - started < .seconds(timeout + 1))
        served.wait()
        #expect(ControlClientError.replyTooLong(limit: ControlClient.maxReplyBytes).code == .software)
    }
}
