import Foundation
import HostControl
import Hummingbird
import Logging
import Synchronization

/// Why `run --http` could not serve.
public enum StatusServerError: Error, CustomStringConvertible {
    /// `--http` names no `HOST:PORT` (or `PORT`) this server can bind.
    case badAddress(String)
    /// The address did not bind (in use, not this machine's, not allowed).
    case cannotBind(String, String)

    public var description: String {
        switch self {
        case .badAddress(let text):
            "--http \(text): expected HOST:PORT, [IPV6]:PORT or PORT, with a port within 0...65535"
        case .cannotBind(let address, let reason): "cannot serve HTTP on \(address): \(reason)"
        }
    }
}

/// Where `run --http` listens: `127.0.0.1` unless the user names another address.
public struct HTTPAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int

    /// `HOST:PORT`, `[IPV6]:PORT`, or a bare `PORT` (on 127.0.0.1).
    public init(parsing text: String) throws(StatusServerError) {
        let host: Substring
        let port: Substring
        if let close = text.lastIndex(of: "]"), text.hasPrefix("[") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw .badAddress(text) }
            port = rest.dropFirst()
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            guard !host.contains(":") else { throw .badAddress(text) }
        } else {
            host = "127.0.0.1"
            port = Substring(text)
        }
        guard !host.isEmpty, let number = Int(port), (0...65535).contains(number) else { throw .badAddress(text) }
        self.host = String(host)
        self.port = number
    }

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// As a URL's authority (an IPv6 host in brackets).
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// `run --http`: `/metrics`, `/api/status`, `/api/live` (server-sent events) and the dashboard
/// at `/`, served by Hummingbird on NIO's event loops, never on the supervisor's thread. It
/// reads only what the loop publishes (`HostObservation`) and shared memory, so no HTTP client,
/// however slow or hostile, delays a command: at worst it holds one of `maxConnections`.
public enum StatusServer {
    /// Connections at once; past it new ones wait in the backlog. Fewer when descriptors are
    /// short: the supervisor's come first (`DescriptorGuard`).
    public static let maxConnections = 32
    /// Live streams at once (`/api/live`): past it a page is answered 503, so open dashboards
    /// never hold every connection and `/metrics` keeps being served.
    static let maxLiveStreams = 8
    /// A live stream ends after this long; the page's EventSource reconnects by itself.
    static let streamLifetime: Duration = .seconds(3600)
    static let tickInterval: Duration = .seconds(1)

    /// Binds `address` and serves from then on, in the background; returns the address bound
    /// (the port chosen when 0 was asked) once it listens. Call after the supervisor is made:
    /// its threads must start with the termination signals blocked.
    /// `capacity`: the windows the supervisor may open at once, whose workers' descriptors no
    /// HTTP client may take.
    public static func start(
        _ address: HTTPAddress, exporter: MetricsExporter, capacity: Int, logger: Logger
    ) throws(StatusServerError) -> HTTPAddress {
        let observation = exporter.hostObservation
        let feed = LiveFeed(observation: observation)
        let bound = BindOutcome()
        let budget = DescriptorBudget(observation: observation, capacity: capacity)
        let app = Application(
            router: router(exporter: exporter, observation: observation, feed: feed),
            // A connection with no request in progress for 30 s is closed.
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [DescriptorGuard(budget: budget)], idleTimeout: .seconds(30))),
            configuration: ApplicationConfiguration(
                address: .hostname(address.host, port: address.port), serverName: "windowhost",
                availableConnectionsDelegate: .maximum(maxConnections, logger: logger)),
            onServerRunning: { channel in
                bound.settle(
                    .success(
                        HTTPAddress(
                            host: channel.localAddress?.ipAddress ?? address.host,
                            port: channel.localAddress?.port ?? address.port)))
            },
            logger: logger)
        // The feed advances every interval, watched or not, so a page opened late has the past.
        Task.detached {
            while true {
                feed.advance()
                try await Task.sleep(for: tickInterval)
            }
        }
        Task.detached {
            do {
                // No signal handlers: the supervisor takes SIGTERM, SIGINT and SIGHUP (signalfd).
                try await app.runService(gracefulShutdownSignals: [])
                if !bound.settle(.failure(.cannotBind(address.description, "the server stopped"))) {
                    logger.error("the HTTP server stopped")
                }
            } catch {
                // Before it bound, the caller says why; after, the log does.
                if !bound.settle(.failure(.cannotBind(address.description, "\(error)"))) {
                    logger.error("the HTTP server stopped", metadata: ["error": "\(error)"])
                }
            }
        }
        return try bound.wait()
    }

    /// Scrapes run here, one at a time, off the threads every other request is served on: a
    /// slow one (workers claiming huge counts) delays only other scrapes.
    static let scrapes = DispatchQueue(label: "windowhost.metrics")

    static func router(exporter: MetricsExporter, observation: HostObservation, feed: LiveFeed) -> Router<
        BasicRequestContext
    > {
        let router = Router()
        let streams = LiveStreams()
        router.get("/metrics") { _, _ in
            let text = await withCheckedContinuation { done in
                scrapes.async { done.resume(returning: exporter.render()) }
            }
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        }
        router.get("/api/status") { _, _ in
            guard let status = observation.status(), let line = try? JSONValue(reply: status).line else {
                return Response(
                    status: .serviceUnavailable, headers: [.contentType: "application/json"],
                    body: ResponseBody(byteBuffer: ByteBuffer(string: "{\"error\":\"no status published yet\"}\n")))
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: line + "\n")))
        }
        router.get("/api/live") { _, _ in
            guard let place = streams.open() else {
                return Response(
                    status: .serviceUnavailable, headers: [.contentType: "text/plain", .retryAfter: "5"],
                    body: ResponseBody(
                        byteBuffer: ByteBuffer(string: "\(maxLiveStreams) live pages are open already\n")))
            }
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: ResponseBody { writer in
                    // The place goes with the response, written or not (a client gone first).
                    defer { withExtendedLifetime(place) {} }
                    try await stream(to: &writer, observation: observation, feed: feed)
                })
        }
        router.get("/") { _, _ in
            Response(
                status: .ok,
                headers: [
                    .contentType: "text/html; charset=utf-8",
                    // The page fetches nothing but this server's own API, and runs only its own script.
                    .contentSecurityPolicy:
                        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
                ],
                body: ResponseBody(byteBuffer: ByteBuffer(string: DashboardPage.html)))
        }
        return router
    }

    /// One page's live stream: first `history` (the points kept and the events held), then
    /// each interval a `tick` with the points since the last sent and the status, and `events`
    /// when something happened.
    static func stream(to writer: inout any ResponseBodyWriter, observation: HostObservation, feed: LiveFeed)
        async throws
    {
        // The status inside is a typed reply: the same keys as `/api/status`.
        let encoder = ReplyCoding.encoder()
        func message(_ name: String, _ value: some Encodable) throws -> ByteBuffer {
            ByteBuffer(
                string: "event: \(name)\ndata: \(String(decoding: try encoder.encode(value), as: UTF8.self))\n\n")
        }
        var (current, points) = feed.current()
        let held = observation.events(after: 0)
        var lastEvent = held.last
        var lastPoint = points.last?.seconds ?? -1
        try await writer.write(message("history", LiveHistory(points: points, events: held.events, tick: current)))
        let end = ContinuousClock.now + streamLifetime
        while ContinuousClock.now < end {
            try await Task.sleep(for: tickInterval)
            (current, points) = feed.current()
            let fresh = points.filter { $0.seconds > lastPoint }
            lastPoint = points.last?.seconds ?? lastPoint
            if let current {
                try await writer.write(
                    message("tick", LiveUpdate(points: fresh, status: current.status, latency: current.latency)))
            }
            let happened = observation.events(after: lastEvent)
            lastEvent = happened.last
            if !happened.events.isEmpty { try await writer.write(message("events", happened.events)) }
        }
        try await writer.finish(nil)
    }

    struct LiveHistory: Encodable {
        let points: [LivePoint]
        let events: [HostEvent]
        let tick: LiveTick?
    }

    struct LiveUpdate: Encodable {
        let points: [LivePoint]
        let status: StatusReply?
        let latency: [String: WindowLatency]
    }
}

/// The live streams open now, at most `StatusServer.maxLiveStreams`.
final class LiveStreams: Sendable {
    private let count = Mutex(0)

    /// A place for one more stream, if there is one: given back when the place goes.
    func open() -> Place? {
        let taken = count.withLock { count in
            guard count < StatusServer.maxLiveStreams else { return false }
            count += 1
            return true
        }
        return taken ? Place(streams: self) : nil
    }

    /// One stream's place, held by its response for as long as the response lives.
    final class Place: Sendable {
        let streams: LiveStreams
        init(streams: LiveStreams) { self.streams = streams }
        deinit { streams.count.withLock { $0 -= 1 } }
    }
}

/// The server's first word: bound (and where), or why not. Waited for by the thread that
/// started it, at most `timeout`.
final class BindOutcome: Sendable {
    private let outcome = Mutex<Result<HTTPAddress, StatusServerError>?>(nil)
    private let settled = DispatchSemaphore(value: 0)

    static let timeout: DispatchTimeInterval = .seconds(30)

    /// Only the first outcome counts: whether this one was it.
    @discardableResult
    func settle(_ result: Result<HTTPAddress, StatusServerError>) -> Bool {
        let first = outcome.withLock { outcome in
            guard outcome == nil else { return false }
            outcome = result
            return true
        }
        if first { settled.signal() }
        return first
    }

    func wait() throws(StatusServerError) -> HTTPAddress {
        guard settled.wait(timeout: .now() + Self.timeout) == .success, let result = outcome.withLock({ $0 }) else {
            throw .cannotBind("?", "no answer from the server in \(Self.timeout)")
        }
        return try result.get()
    }
}
