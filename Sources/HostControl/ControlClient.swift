import Foundation
import Glibc
import HostCoordination
import HostLimits
import IOUring
import Platform
import SystemPackage

/// The client side of the control socket: one request, one reply, one connection.
public enum ControlClient {
    /// What `ctl` waits by default for connecting, sending and the reply together.
    public static let defaultTimeoutSeconds = 30

    /// The longest reply line `exchange` reads: the longest the supervisor sends, the dump of a
    /// window at its bound (`Limits.maxControlReplyBytes` derives it). A longer reply is no
    /// supervisor's: it is refused (`.replyTooLong`) instead of read into memory without end.
    public static let maxReplyBytes = Limits.maxControlReplyBytes

    /// `exchange`, with the client's own failure as the reply `ctl` prints (`ControlClientError.reply`).
    public static func call(_ request: ControlRequest, socket path: FilePath, timeout: Int? = defaultTimeoutSeconds)
        -> ControlReply
    {
        do {
            return try exchange(request, socket: path, timeout: timeout)
        } catch {
            return error.reply
        }
    }

    /// Sends `request` and waits for the reply, all of it (connecting, sending, the reply)
    /// within `timeout` seconds: a supervisor that is stopped, or a socket nobody accepts on,
    /// throws `.timedOut` naming what was waited for, never a hang. A socket nobody listens at
    /// throws `.noSupervisor`. Nil waits as long as it takes (tests that time the wait themselves).
    public static func exchange(
        _ request: ControlRequest, socket path: FilePath, timeout: Int? = defaultTimeoutSeconds
    ) throws(ControlClientError) -> ControlReply {
        try send(request, socket: path, timeout: timeout).reply()
    }

    /// A request sent whose reply is read later (`Pending.reply`), within the same `timeout`
    /// from now: how a client has a second request under way while the first waits, as a
    /// stress campaign arms a kill aimed at a move and then asks for the move.
    public static func send(
        _ request: ControlRequest, socket path: FilePath, timeout: Int? = defaultTimeoutSeconds
    ) throws(ControlClientError) -> Pending {
        let deadline = timeout.map { monotonicNanoseconds() &+ UInt64(max($0, 0)) &* 1_000_000_000 } ?? .max
        let fd = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .noSocket(Errno(rawValue: errno)) }
        let pending = Pending(
            call: Call(
                fd: fd, deadline: deadline, timeoutSeconds: timeout ?? 0,
                likelyCause: likelyCause(request, socket: path)),
            verb: request.verb.rawValue)
        try pending.call.connect(to: path)
        guard var line = try? JSONEncoder().encode(request) else { throw .unencodableRequest }
        line.append(UInt8(ascii: "\n"))
        try pending.call.send(line)
        return pending
    }

    /// A request's connection until its reply is read; closed when it goes.
    public final class Pending {
        fileprivate let call: Call
        private let verb: String

        fileprivate init(call: Call, verb: String) { (self.call, self.verb) = (call, verb) }

        deinit { close(call.fd) }

        /// The reply, all of it, by the deadline `send` set.
        public func reply() throws(ControlClientError) -> ControlReply {
            let reply = try call.receiveLine(answering: verb)
            guard !reply.isEmpty else { throw .noReply }
            do {
                return try JSONDecoder().decode(ControlReply.self, from: Data(reply))
            } catch {
                throw .unreadableReply("\(error)")
            }
        }
    }

    /// What a timeout most likely means. A durable wait lasts until the window's next save,
    /// which may be later than the timeout (a --save-delay above it): that, not a stopped
    /// supervisor, is the likely cause.
    private static func likelyCause(_ request: ControlRequest, socket path: FilePath) -> String {
        switch request {
        case .window(_, .waitDurable), .window(_, .save(wait: true)):
            "the window may not save before then (it saves --save-delay after a change; `save --wait` saves now)"
        default:
            "the supervisor at \(path) may be stopped or overloaded"
        }
    }

    /// One call's nonblocking socket and its deadline: every step waits only until then.
    fileprivate struct Call {
        let fd: Int32
        let deadline: UInt64
        let timeoutSeconds: Int
        let likelyCause: String

        func late(_ waitedFor: ControlClientError.Wait) -> ControlClientError {
            .timedOut(waitedFor, seconds: timeoutSeconds, likelyCause: likelyCause)
        }

        /// Waits until the socket is ready for `events`; false when the deadline passes first.
        func wait(for events: Int32) -> Bool {
            while true {
                let now = monotonicNanoseconds()
                guard now < deadline else { return false }
                var descriptor = pollfd(fd: fd, events: Int16(events), revents: 0)
                let milliseconds = Int32(min((deadline - now + 999_999) / 1_000_000, UInt64(Int32.max)))
                let ready = poll(&descriptor, 1, milliseconds)
                if ready > 0 { return true }
                if ready < 0, errno != EINTR { return true }  // the next call says what is wrong
            }
        }

        func connect(to path: FilePath) throws(ControlClientError) {
            guard var address = UnixSocketAddress.make(path) else { throw .socketPathTooLong(path) }
            while true {
                let connected = retryingOnInterrupt {
                    withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                        }
                    }
                }
                if connected == 0 { return }
                let error = errno
                // A Unix socket whose backlog is full says EAGAIN and has no completion to poll
                // for: the connect is tried again until the deadline.
                guard error == EAGAIN else { throw .noSupervisor(path, Errno(rawValue: error)) }
                guard monotonicNanoseconds() < deadline else { throw late(.accept) }
                usleep(10_000)
            }
        }

        func send(_ line: Data) throws(ControlClientError) {
            var sent = 0
            while sent < line.count {
                let count = retryingOnInterrupt {
                    line[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
                if count > 0 {
                    sent += count
                } else if count < 0, errno == EAGAIN {
                    guard wait(for: Int32(POLLOUT)) else { throw late(.requestRead) }
                } else {
                    throw .hungUp(Errno(rawValue: errno))
                }
            }
        }

        /// The reply's bytes through its newline, or until the supervisor closes; at most
        /// `maxReplyBytes`.
        func receiveLine(answering verb: String) throws(ControlClientError) -> [UInt8] {
            var reply: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                // A server that streams without end never makes a read block: the deadline is
                // checked on every read, not only in `wait`.
                guard monotonicNanoseconds() < deadline else { throw late(.reply(verb)) }
                let count = retryingOnInterrupt { recv(fd, &chunk, chunk.count, 0) }
                if count < 0, errno == EAGAIN {
                    guard wait(for: Int32(POLLIN)) else { throw late(.reply(verb)) }
                    continue
                }
                guard count > 0 else { return reply }
                guard reply.count + count <= maxReplyBytes else { throw .replyTooLong(limit: maxReplyBytes) }
                reply += chunk[..<count]
                if reply.last == UInt8(ascii: "\n") { return reply }
            }
        }
    }
}

/// Why a control call got no reply from the supervisor: the client's own failures, apart from
/// the replies the supervisor gives. Callers match the case (a stress campaign tells a hang by
/// `.timedOut(.reply…)`); `ctl` prints `description` and exits with `code`.
public enum ControlClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What a call was waiting for when its timeout passed.
    public enum Wait: Equatable, Sendable {
        /// The supervisor to accept the connection (its backlog full).
        case accept
        /// The supervisor to read the request.
        case requestRead
        /// The reply to the verb named.
        case reply(String)
    }

    /// No socket to call from (the client's descriptors ran out).
    case noSocket(Errno)
    case socketPathTooLong(FilePath)
    /// Nobody listens at the path (no socket there, or a stale one).
    case noSupervisor(FilePath, Errno)
    case unencodableRequest
    /// The timeout (seconds) passed; `likelyCause` says what most likely kept the supervisor.
    case timedOut(Wait, seconds: Int, likelyCause: String)
    /// The connection broke while the request was being sent.
    case hungUp(Errno)
    /// The supervisor closed the connection without a reply.
    case noReply
    /// The reply was not a `ControlReply`; why it did not decode.
    case unreadableReply(String)
    /// The reply ran past `ControlClient.maxReplyBytes` (the bytes named) without ending.
    case replyTooLong(limit: Int)

    public var code: ControlCode {
        switch self {
        case .noSocket, .noSupervisor, .hungUp, .noReply: .unavailable
        case .socketPathTooLong, .unencodableRequest: .usage
        case .timedOut: .temporary
        case .unreadableReply, .replyTooLong: .software
        }
    }

    public var description: String {
        switch self {
        case .noSocket(let error): "socket: \(error)"
        case .socketPathTooLong(let path): "socket path too long: \(path)"
        case .noSupervisor(let path, let error): "no supervisor at \(path): \(error)"
        case .unencodableRequest: "unencodable request"
        case .timedOut(let waitedFor, let seconds, let likelyCause):
            "\(Self.describe(waitedFor)) within the \(seconds) s timeout (--timeout): \(likelyCause)"
        case .hungUp(let error): "the supervisor hung up: \(error)"
        case .noReply: "the supervisor closed the connection without a reply"
        case .unreadableReply(let error): "unreadable reply: \(error)"
        case .replyTooLong(let limit): "unreadable reply: longer than \(limit) bytes, more than any supervisor's reply"
        }
    }

    private static func describe(_ waitedFor: Wait) -> String {
        switch waitedFor {
        case .accept: "the supervisor did not accept the connection"
        case .requestRead: "the supervisor did not read the request"
        case .reply(let verb): "no reply to '\(verb)' came"
        }
    }

    /// The failure as a reply: what `ctl` prints and exits with, as it did before the client
    /// had its own type.
    public var reply: ControlReply { .failure(code, description) }
}

/// `sockaddr_un` for a path, or nil when the path does not fit.
public enum UnixSocketAddress {
    public static func make(_ path: FilePath) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.string.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }
}
