import CLinuxShims
import Foundation
import Glibc
import HostControl
import HostLimits
import IOUring
import Logging
import Platform
import SystemPackage

/// Why the control socket could not be made at its path; `windowhost run` exits with the code
/// each case names.
public enum ControlSocketError: Error, CustomStringConvertible {
    /// Something that is not a socket is at the path: left untouched (73, EX_CANTCREAT).
    case notASocket(FilePath)
    /// A socket that answers a connect: another live supervisor's, left to it (75, EX_TEMPFAIL).
    case inUse(FilePath)
    case pathTooLong(FilePath)
    case failed(step: String, path: FilePath, Errno)

    public var description: String {
        switch self {
        case .notASocket(let path):
            "\(path) exists and is not a socket: not replaced; move it away or pass another --socket"
        case .inUse(let path): "another supervisor answers at \(path): it is left serving; pass another --socket"
        case .pathTooLong(let path): "socket path \(path) is too long for a Unix socket"
        case .failed(let step, let path, let errno): "\(step) \(path): \(errno)"
        }
    }
}

/// The control socket's side of the supervisor: the listening socket, the clients, their input
/// and output buffers, and the limits that keep clients from taking the loop or the descriptor
/// table. It never blocks: the loop polls what `pollDescriptors` lists and hands the result to
/// `service`, which returns the complete requests; replies come back through `answer`.
///
/// A connection carries one request and one reply. A client is *idle* while it has not sent a
/// complete request, and while a reply it does not read sits in its buffer; past `idleTimeout`
/// it is dropped, and at the cap the longest-idle client makes room for a new one. A client
/// whose request the supervisor is working on (a `kill --wait`, a `wait-durable`) is not idle.
final class ControlServer {
    typealias ClientID = UInt64

    enum Phase: Equatable {
        /// Reading its request.
        case reading
        /// The request is with the supervisor; no timeout runs.
        case awaiting
        /// The reply is (partly) in `output`; it goes out as the client reads.
        case writing
    }

    struct Client {
        let fd: Int32
        var phase = Phase.reading
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        /// When the client last sent or took bytes (or connected), CLOCK_MONOTONIC ns.
        var lastActivity: UInt64

        var isIdle: Bool { phase != .awaiting }
    }

    /// Control connections at once, unless the descriptor limit allows fewer (`cap`).
    let maxClients: Int
    /// Nanoseconds an idle client keeps its connection.
    let idleTimeout: UInt64
    /// How long the listener is not polled after `accept` failed for want of descriptors or
    /// memory: the loop sleeps instead of spinning on a connection it cannot take.
    static let acceptBackoff: UInt64 = 100_000_000

    private let path: FilePath
    private let listener: Int32
    /// The socket file as bound: removed at exit only if the path still names it.
    private let boundFile: (device: UInt64, inode: UInt64)
    /// Held so that, with the descriptor table full, one connection can still be accepted and
    /// told why it is refused.
    private var spare: Int32
    private var clients: [ClientID: Client] = [:]
    private var nextClient: ClientID = 1
    /// Clients in the order `pollDescriptors` listed them, after the listener.
    private var polled: [ClientID] = []
    private var acceptResumesAt: UInt64?
    /// Set while accepting fails for want of resources: the episode is logged at its start
    /// and its end, not on every attempt.
    private var exhaustion: Errno?
    private let logger: Logger

    /// Binds the socket at `path` (0600) and listens. An existing path is replaced only when it
    /// is a stale socket, one nobody answers at.
    init(path: FilePath, maxClients: Int, idleTimeout: UInt64, logger: Logger = Logger(label: "windowhost.control"))
        throws(ControlSocketError)
    {
        precondition(maxClients >= 1, "a control server takes at least one client")
        self.path = path
        self.maxClients = maxClients
        self.idleTimeout = idleTimeout
        self.logger = logger
        (listener, boundFile) = try Self.listen(at: path)
        spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    deinit {
        for client in clients.values { Glibc.close(client.fd) }
        Glibc.close(listener)
        if spare >= 0 { Glibc.close(spare) }
    }

    /// Drops every client and removes the socket file if it is still the one bound here (a
    /// later supervisor may have replaced a path it took for stale).
    func stop() {
        for id in Array(clients.keys) { drop(id) }
        var status = stat()
        if lstat(path.string, &status) == 0, UInt64(status.st_dev) == boundFile.device,
            UInt64(status.st_ino) == boundFile.inode
        {
            // A socket left behind (EACCES, EROFS) is a stale one: the next supervisor replaces it.
            _ = unlink(path.string)
        }
    }

    var clientCount: Int { clients.count }

    /// The cap in force: `maxClients`, and never more than half the descriptor limit, so that
    /// idle clients cannot take the descriptors spawning a worker needs.
    var cap: Int {
        var limit = rlimit()
        // RLIM_INFINITY is the largest rlim_t: clamped, it leaves maxClients in force.
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return maxClients }
        return max(1, min(maxClients, Int(clamping: limit.rlim_cur / 2)))
    }

    // MARK: polling

    /// The listener (polled for connections unless `accepting` is false or accepting backs
    /// off), then every client: for its request, for room for its reply, or for a hang-up.
    func pollDescriptors(accepting: Bool, now: UInt64) -> [pollfd] {
        if let at = acceptResumesAt, at <= now { acceptResumesAt = nil }
        let listen = accepting && acceptResumesAt == nil
        var descriptors = [pollfd(fd: listener, events: listen ? Int16(POLLIN) : 0, revents: 0)]
        polled = Array(clients.keys)
        for id in polled {
            let client = clients[id]!
            let events = client.phase == .writing ? POLLOUT : POLLIN
            descriptors.append(pollfd(fd: client.fd, events: Int16(events), revents: 0))
        }
        return descriptors
    }

    /// Nanoseconds until something here is due without an event: an idle client's timeout or
    /// the end of an accept backoff. Nil when nothing is.
    func nextDeadline(now: UInt64) -> UInt64? {
        var due = acceptResumesAt
        for client in clients.values where client.isIdle {
            let at = client.lastActivity &+ idleTimeout
            due = min(due ?? at, at)
        }
        return due.map { $0 > now ? $0 - now : 0 }
    }

    /// Takes what poll found (`revents`, in `pollDescriptors`' order), drops clients idle past
    /// the timeout, and returns the complete requests, for `answer`.
    func service(_ revents: [pollfd], now: UInt64) -> [(ClientID, ControlRequest)] {
        precondition(revents.count == polled.count + 1, "revents are for the descriptors pollDescriptors listed")
        var requests: [(ClientID, ControlRequest)] = []
        for (index, id) in polled.enumerated() where revents[index + 1].revents != 0 {
            guard let client = clients[id] else { continue }
            if client.phase == .writing {
                flush(id, now: now)
            } else if let request = read(id, now: now) {
                requests.append((id, request))
            }
        }
        if revents[0].revents != 0 { accept(now: now) }
        for (id, client) in clients
        where client.isIdle && now > client.lastActivity && now - client.lastActivity >= idleTimeout {
            logger.debug("control client idle past the timeout: dropped", metadata: ["phase": "\(client.phase)"])
            drop(id)
        }
        return requests
    }

    // MARK: clients

    private func accept(now: UInt64) {
        /// Whether the last eviction for descriptors was followed by an accept: evicting again
        /// makes progress; otherwise the table is full for other reasons.
        var evictionHelped = true
        var exhaustedThisTurn = false
        while true {
            let fd = acceptConnection()
            if fd < 0 {
                let error = Errno(rawValue: errno)
                switch error {
                case .resourceTemporarilyUnavailable:
                    // The backlog is drained without want of descriptors: the episode is over.
                    if !exhaustedThisTurn, let error = exhaustion {
                        logger.notice("accepting control connections again", metadata: ["after": "\(error)"])
                        exhaustion = nil
                    }
                    return
                case .interrupted, .connectionAbort: continue
                case .tooManyOpenFiles, .tooManyOpenFilesInSystem, .noBufferSpace, .noMemory:
                    if exhaustion == nil {
                        logger.error(
                            "cannot accept control connections: \(error); idle clients are evicted and new ones refused until descriptors are free"
                        )
                    }
                    exhaustion = error
                    exhaustedThisTurn = true
                    // An idle client makes room, as long as that lets a connection in; if not
                    // (the system's table is full), the spare refuses one and the listener rests.
                    if evictionHelped, evictLongestIdle() {
                        evictionHelped = false
                        continue
                    }
                    refuseWithSpare()
                    acceptResumesAt = now + Self.acceptBackoff
                    return
                default:
                    logger.error("accept on the control socket: \(error)")
                    acceptResumesAt = now + Self.acceptBackoff
                    return
                }
            }
            evictionHelped = true
            var uid: uid_t = 0
            guard wh_peer_uid(fd, &uid) == 0, uid == getuid() else {
                logger.warning("refused a control connection from uid \(uid)")
                Glibc.close(fd)
                continue
            }
            if clients.count >= cap, !evictLongestIdle() {
                refuse(fd, "all \(clients.count) control connections are waiting for replies; retry")
                continue
            }
            clients[nextClient] = Client(fd: fd, lastActivity: now)
            nextClient += 1
        }
    }

    /// A connection from the listener, close-on-exec and non-blocking; -1 and errno as accept.
    /// (Glibc's `accept4` is not imported; workers are spawned only from this thread and close
    /// every descriptor they are not given, so nothing can inherit it in between.)
    private func acceptConnection() -> Int32 {
        let fd = Glibc.accept(listener, nil, nil)
        guard fd >= 0 else { return fd }
        // A blocking client socket would let a slow reader stall the loop: never served.
        let flags = fcntl(fd, F_GETFL)
        guard fcntl(fd, F_SETFD, FD_CLOEXEC) == 0, flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            let error = errno
            Glibc.close(fd)
            errno = error
            return -1
        }
        return fd
    }

    /// Drops the idle client that has been idle longest. False when none is idle.
    private func evictLongestIdle() -> Bool {
        guard
            let (id, _) = clients.filter({ $0.value.isIdle }).min(by: { $0.value.lastActivity < $1.value.lastActivity })
        else {
            return false
        }
        logger.debug("control client evicted: longest idle at the cap")
        drop(id)
        return true
    }

    /// Frees the spare descriptor to accept one connection and tell it why it is refused.
    private func refuseWithSpare() {
        guard spare >= 0 else { return }
        Glibc.close(spare)
        let fd = acceptConnection()
        if fd >= 0 { refuse(fd, "the supervisor is out of descriptors; retry") }
        spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    /// One best-effort, non-blocking reply, then the connection is closed.
    private func refuse(_ fd: Int32, _ message: String) {
        let bytes = Self.encode(.failure(.temporary, message))
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        Glibc.close(fd)
    }

    /// Reads what the client sent; the request once its line is complete. A client whose
    /// request is with the supervisor is only watched for hanging up.
    private func read(_ id: ClientID, now: UInt64) -> ControlRequest? {
        guard var client = clients[id] else { return nil }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        // Bounded, so a client that keeps writing past its request cannot hold the loop.
        for _ in 0..<64 {
            let count = recv(client.fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) {
                drop(id)
                return nil
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            guard client.phase == .reading else { continue }
            client.lastActivity = now
            client.input += chunk[..<count]
            assert(
                client.input.count <= Limits.maxControlRequestBytes + chunk.count,
                "a line past the bound is refused before more is read")
            if client.input.contains(UInt8(ascii: "\n")) || client.input.count > Limits.maxControlRequestBytes { break }
        }
        guard client.phase == .reading else { return nil }
        // The bound is on the line without its newline, as `ctl` counts it: a newline that
        // arrives in the read crossing the bound does not make a longer line acceptable.
        if let newline = client.input.firstIndex(of: UInt8(ascii: "\n")), newline <= Limits.maxControlRequestBytes {
            let line = Data(client.input[..<newline])
            client.input = []
            client.phase = .awaiting
            clients[id] = client
            return decode(line, from: id)
        }
        clients[id] = client
        if client.input.count > Limits.maxControlRequestBytes {
            answer(
                id,
                .failure(
                    .usage,
                    "request longer than the control plane's \(Limits.maxControlRequestBytes) bytes (Limits.maxControlRequestBytes)"
                ))
        }
        return nil
    }

    /// The request a complete line holds, or nil once `id` was answered with its refusal.
    private func decode(_ line: Data, from id: ClientID) -> ControlRequest? {
        assert(clients[id]?.phase == .awaiting, "a line is decoded once its client awaits the answer")
        // Text is refused, not mended: a decoder that replaced bad bytes with U+FFFD would
        // have a URL stored and acknowledged that the client never sent (65, bad data).
        guard String(validating: line, as: UTF8.self) != nil else {
            answer(id, .failure(.badData, "request is not valid UTF-8: refused, nothing was done"))
            return nil
        }
        // Well-formed JSON whose text is no text: the data is bad, not the request's shape.
        if let offset = Self.loneSurrogateEscape(in: Array(line)) {
            answer(
                id,
                .failure(
                    .badData,
                    "request escapes half a surrogate pair alone at byte \(offset), which is no character: refused, nothing was done"
                ))
            return nil
        }
        if let key = ControlRequest.repeatedKey(in: Array(line)) {
            answer(
                id,
                .failure(
                    .usage,
                    "request names the key \"\(key)\" twice, which parsers read differently: refused, nothing was done"
                ))
            return nil
        }
        do {
            return try JSONDecoder().decode(ControlRequest.self, from: line)
        } catch let refusal as ControlFailure {
            // Valid JSON the supervisor refuses before reaching a window: an unknown verb,
            // a field missing or out of range (`ControlRequest`'s decoding).
            answer(id, .failure(refusal))
            return nil
        } catch {
            answer(id, .failure(.usage, "malformed request: \(error)"))
            return nil
        }
    }

    /// Where a JSON string in `line` escapes half of a UTF-16 surrogate pair alone (`\ud800` not
    /// followed by a `\udc00`–`\udfff` escape, or a low half first): no Unicode scalar, so no
    /// `String` holds it, and JSONDecoder refuses it as if the JSON were malformed. Nil when there
    /// is none; an escape malformed otherwise is left to the decoder (64).
    static func loneSurrogateEscape(in line: [UInt8]) -> Int? {
        let quote = UInt8(ascii: "\"")
        let backslash = UInt8(ascii: "\\")
        let u = UInt8(ascii: "u")
        func unit(at start: Int) -> UInt32? {
            guard start + 6 <= line.count, line[start] == backslash, line[start + 1] == u else { return nil }
            var value: UInt32 = 0
            for byte in line[(start + 2)..<(start + 6)] {
                guard let digit = Character(Unicode.Scalar(byte)).hexDigitValue else { return nil }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
        var index = 0
        var inString = false
        while index < line.count {
            let byte = line[index]
            guard inString else {
                inString = byte == quote
                index += 1
                continue
            }
            if byte == quote { inString = false }
            guard byte == backslash else {
                index += 1
                continue
            }
            switch unit(at: index) {
            case (0xD800...0xDBFF)?:
                guard let low = unit(at: index + 6), (0xDC00...0xDFFF).contains(low) else { return index }
                index += 12
            case (0xDC00...0xDFFF)?:
                return index
            case _?:
                index += 6
            case nil:
                // Any other escape: the backslash and the character it escapes.
                index += 2
            }
        }
        return nil
    }

    /// Whether `id` is still connected: a reply for one gone need not be made.
    func isConnected(_ id: ClientID) -> Bool { clients[id] != nil }

    /// Queues the reply and sends what the client takes now; the rest goes out as poll says
    /// it has room. The connection closes once the reply is out: one request per connection.
    /// A client that has gone away is no longer here, and its reply is dropped.
    func answer(_ id: ClientID, _ reply: ControlReply) {
        guard var client = clients[id] else { return }
        assert(client.phase != .writing, "one reply per connection")
        client.input = []
        client.output = Self.encode(reply)
        client.written = 0
        client.phase = .writing
        client.lastActivity = monotonicNanoseconds()
        clients[id] = client
        flush(id, now: client.lastActivity)
    }

    private func flush(_ id: ClientID, now: UInt64) {
        guard var client = clients[id] else { return }
        while client.written < client.output.count {
            let count = client.output[client.written...].withUnsafeBytes {
                send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                clients[id] = client
                return
            }
            guard count > 0 else { break }
            client.written += count
            assert(client.written <= client.output.count, "a send never passes the reply")
            client.lastActivity = now
        }
        drop(id)
    }

    private func drop(_ id: ClientID) {
        guard let client = clients.removeValue(forKey: id) else { return }
        assert(client.fd >= 0, "a client holds its descriptor until it is dropped")
        Glibc.close(client.fd)
    }

    /// The reply as the line a client reads. Every reply the supervisor builds is within
    /// `Limits.maxControlReplyBytes`, which clients read whole (`ControlClient.maxReplyBytes`); one
    /// past it would be a bug, answered as one (70) rather than as a line no client reads.
    static func encode(_ reply: ControlReply) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var bytes = Array((try? encoder.encode(reply)) ?? Data(#"{"code":70,"error":"unencodable reply"}"#.utf8))
        if bytes.count >= Limits.maxControlReplyBytes {
            assertionFailure("a reply of \(bytes.count) bytes, past Limits.maxControlReplyBytes")
            bytes = Array(
                #"{"code":70,"error":"the reply is longer than Limits.maxControlReplyBytes: a supervisor bug"}"#.utf8)
        }
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    // MARK: the socket file

    /// Binds and listens at `path`. Nothing there: bound. A socket nobody answers at (connect
    /// gives ECONNREFUSED): a dead supervisor's, replaced. Anything else is refused and left.
    private static func listen(at path: FilePath) throws(ControlSocketError) -> (Int32, (device: UInt64, inode: UInt64))
    {
        guard var address = UnixSocketAddress.make(path) else { throw .pathTooLong(path) }
        var existing = stat()
        if lstat(path.string, &existing) == 0 {
            guard existing.st_mode & S_IFMT == S_IFSOCK else { throw .notASocket(path) }
            try checkStale(path, &address)
            guard unlink(path.string) == 0 || errno == ENOENT else {
                throw .failed(step: "unlink stale socket", path: path, Errno(rawValue: errno))
            }
        } else if errno != ENOENT {
            throw .failed(step: "lstat", path: path, Errno(rawValue: errno))
        }
        let fd = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .failed(step: "socket", path: path, Errno(rawValue: errno)) }
        // The socket is created 0600: only this user can connect (SO_PEERCRED checks again).
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        let bindError = errno
        umask(previous)
        guard bound == 0 else {
            close(fd)
            // Someone bound it between the check and here: theirs, left alone.
            if bindError == EADDRINUSE { throw .inUse(path) }
            throw .failed(step: "bind", path: path, Errno(rawValue: bindError))
        }
        var made = stat()
        guard lstat(path.string, &made) == 0, Glibc.listen(fd, 64) == 0 else {
            let error = Errno(rawValue: errno)
            close(fd)
            throw .failed(step: "listen", path: path, error)
        }
        return (fd, (UInt64(made.st_dev), UInt64(made.st_ino)))
    }

    /// Throws unless a connect to the socket at `path` is refused. A non-blocking connect, so
    /// a live supervisor with a full backlog (EAGAIN) counts as live, never waited for.
    private static func checkStale(_ path: FilePath, _ address: inout sockaddr_un) throws(ControlSocketError) {
        let probe = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard probe >= 0 else { throw .failed(step: "socket", path: path, Errno(rawValue: errno)) }
        defer { close(probe) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected == 0 || errno == EAGAIN || errno == EINPROGRESS { throw .inUse(path) }
        guard errno == ECONNREFUSED else {
            throw .failed(step: "connect to the socket", path: path, Errno(rawValue: errno))
        }
    }
}
