import BrowserModel
import Foundation
import Glibc
import Supervisor
import TestSupport
import Testing

/// `run --http` as a person uses it: Prometheus scrapes `/metrics` (checked by Debian's
/// `promtool`), scripts read `/api/status`, and the dashboard opens in a real browser
/// (headless Chromium). The counters move after saves, kills, crashes and a hung worker; no
/// HTTP client, however slow, delays a command.
@Suite(.serialized) struct HTTPStatusProcessTests {
    /// The package's root, for the browser script and the screenshot under `.build/`.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A supervisor serving HTTP on a port it picks: the host, and the address its `http` line printed.
    func hostServingHTTP(_ name: String, scenes: Int, arguments: [String] = []) throws -> (HostProcess, HTTPTarget) {
        let host = try HostProcess(
            root: temporaryRoot(name), scenes: scenes, arguments: ["--http", "127.0.0.1:0"] + arguments)
        #expect(waitFor({ host.output.contains("\nhttp ") }, seconds: 10), "no http line: \(host.output)")
        let lines = host.output.split(separator: "\n")
        // The http line follows the ready line, as scripts expect.
        try #require(
            lines.count == 2 && lines[0].hasPrefix("ready ") && lines[1].hasPrefix("http http://127.0.0.1:"),
            "\(host.output)")
        let port = try #require(Int(lines[1].split(separator: ":").last ?? ""), "\(lines[1])")
        #expect(port > 0)
        return (host, HTTPTarget(port: UInt16(port)))
    }

    @Test(.timeLimit(.minutes(3))) func metricsPassPromtoolAndMoveAfterSavesAndRestarts() throws {
        let (host, http) = try hostServingHTTP("http-metrics", scenes: 2, arguments: ["--watchdog", "400"])
        defer { removeHostFiles(host.root) }
        let windows = host.windowIDs()
        try #require(windows.count == 2)
        let (window, other) = (windows[0], windows[1])
        let before = try http.metrics()
        try checkWithPromtool(before.text)
        #expect(before.value("windowhost_windows", ["state": "foreground"]) == 2)
        #expect(before.value("windowhost_worker_restarts_total", ["reason": "kill"]) == 0)

        for index in 0..<5 { #expect(host.open(window, "https://metrics-\(index).example/") != nil) }
        #expect(try host.ctl(["wait-durable", "--window", window]).status == 0)
        // A kill asked for, a crash (the worker killed behind the supervisor's back) and a hang
        // the watchdog ends: one restart of each reason.
        #expect(try host.ctl(["kill", "--window", window]).status == 0)
        let crashed = try #require(host.windows()[other]?.pid)
        Glibc.kill(crashed, SIGKILL)
        #expect(
            waitFor(
                { (host.windows()[other].map { $0.pid != crashed && $0.state == "foreground" }) == true }, seconds: 20),
            "\(host.log)")
        let hung = try #require(host.windows()[other]?.pid)
        Glibc.kill(hung, SIGSTOP)
        #expect(
            waitFor(
                { (host.windows()[other].map { $0.pid != hung && $0.state == "foreground" }) == true }, seconds: 20),
            "\(host.log)")
        // The loop publishes its status every 100 ms.
        usleep(300_000)

        let after = try http.metrics()
        try checkWithPromtool(after.text)
        #expect(
            after.value("windowhost_commands_total", ["verb": "open"])
                == before.value("windowhost_commands_total", ["verb": "open"]).map { $0 + 5 })
        #expect(after.value("windowhost_commands_total", ["verb": "kill"]) == 1)
        let saves = try #require(after.value("windowhost_saves_total", ["window": window]))
        #expect(saves >= 1 && saves > (before.value("windowhost_saves_total", ["window": window]) ?? 0))
        // Every save counted is in the latency histogram, once.
        #expect(after.value("windowhost_save_duration_seconds_count", ["window": window]) == saves)
        #expect(after.value("windowhost_save_duration_seconds_bucket", ["window": window, "le": "+Inf"]) == saves)
        #expect(after.value("windowhost_tabs", ["window": window]) == 5)
        #expect(after.value("windowhost_durable_lag", ["window": window]) == 0)
        #expect(after.value("windowhost_worker_restarts_total", ["reason": "kill"]) == 1)
        #expect(after.value("windowhost_worker_restarts_total", ["reason": "crash"]) == 1)
        #expect(after.value("windowhost_worker_restarts_total", ["reason": "watchdog"]) == 1)
        #expect(after.value("windowhost_recovery_duration_seconds_count", [:]) == 3)
        #expect(after.value("windowhost_windows", ["state": "foreground"]) == 2)

        // A second scrape adds nothing that did not happen.
        let again = try http.metrics()
        #expect(again.value("windowhost_save_duration_seconds_count", ["window": window]) == saves)
        #expect(host.terminate() == 0)
    }

    @Test(.timeLimit(.minutes(2))) func apiStatusIsWhatCtlStatusPrints() throws {
        let (host, http) = try hostServingHTTP("http-status", scenes: 3)
        defer { removeHostFiles(host.root) }
        #expect(host.open(host.windowIDs()[0], "https://status.example/") != nil)
        usleep(300_000)
        let ctl = try host.ctl(["status", "--json"])
        let served = try http.get("/api/status")
        #expect(served.status == 200 && served.headers.lowercased().contains("content-type: application/json"))
        // The same document but for what moves by itself between two reads.
        func stable(_ text: String) throws -> NSDictionary {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            var copy = object
            copy["windows"] = (object["windows"] as? [[String: Any]])?.map { window in
                window.filter { $0.key != "heartbeat_age_ms" }
            }
            return copy as NSDictionary
        }
        #expect(try stable(ctl.output) == stable(served.body), "ctl: \(ctl.output)\nhttp: \(served.body)")
        #expect(host.terminate() == 0)
    }

    /// More clients than the server takes, some sending half a request, some opening the live
    /// stream and never reading it: commands are answered all the while, and the server takes
    /// new clients again once they are gone.
    @Test(.timeLimit(.minutes(3))) func slowAndHostileHTTPClientsDelayNoCommand() throws {
        let (host, http) = try hostServingHTTP("http-hostile", scenes: 1)
        defer { removeHostFiles(host.root) }
        let window = try #require(host.windowIDs().first)
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for index in 0..<48 {
            guard let fd = http.connect() else { continue }
            let bytes =
                index % 3 == 0
                ? "GET /api/live HTTP/1.1\r\nHost: x\r\n\r\n" : "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "
            _ = bytes.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            held.append(fd)
        }
        #expect(held.count >= 40)
        for round in 0..<5 {
            let open = try host.ctlBounded(
                ["open", "--window", window, "--url", "https://hostile-http-\(round).example/"], seconds: 10)
            #expect(open.status == 0, "round \(round): \(open.output)")
            let status = try host.ctlBounded(["status", "--json"], seconds: 10)
            #expect(status.status == 0 && status.output.contains(window), "round \(round): \(status.output)")
        }
        // Past the cap, a new client waits in the backlog unanswered…
        #expect((try? http.get("/metrics", timeout: 2)) == nil, "a connection past the cap was served")
        for fd in held { close(fd) }
        held = []
        // …and is served once the others are gone.
        #expect(waitFor({ (try? http.get("/metrics", timeout: 2))?.status == 200 }, seconds: 20))
        #expect(host.terminate() == 0)
    }

    /// Open pages hold at most 8 live streams: the 9th is answered 503 at once (and `/metrics`
    /// is served meanwhile); once one closes, a page gets its stream again.
    @Test(.timeLimit(.minutes(2))) func liveStreamsAreCapped() throws {
        let (host, http) = try hostServingHTTP("http-live-cap", scenes: 1)
        defer { removeHostFiles(host.root) }
        func openStream() throws -> (fd: Int32, head: String) {
            let fd = try #require(http.connect())
            _ = "GET /api/live HTTP/1.1\r\nHost: x\r\n\r\n".withCString {
                send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL))
            }
            var limit = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 512)
            let got = recv(fd, &buffer, buffer.count, 0)
            return (fd, got > 0 ? String(decoding: buffer[..<got], as: UTF8.self) : "")
        }
        var open: [Int32] = []
        defer { for fd in open { close(fd) } }
        for index in 0..<8 {
            let stream = try openStream()
            open.append(stream.fd)
            #expect(stream.head.hasPrefix("HTTP/1.1 200"), "stream \(index): \(stream.head)")
        }
        let refused = try openStream()
        close(refused.fd)
        #expect(refused.head.hasPrefix("HTTP/1.1 503"), "\(refused.head)")
        #expect(try http.get("/metrics", timeout: 5).status == 200)
        // The server sees a stream's client gone at its next tick (a second).
        close(open.removeFirst())
        var reopened = false
        for _ in 0..<20 where !reopened {
            usleep(500_000)
            let stream = try openStream()
            reopened = stream.head.hasPrefix("HTTP/1.1 200")
            if reopened { open.append(stream.fd) } else { close(stream.fd) }
        }
        #expect(reopened, "no stream after one closed")
        #expect(host.terminate() == 0)
    }

    @Test(.timeLimit(.minutes(2))) func anAddressThatDoesNotBindExits69BeforeAnyWindow() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in(
            sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: UInt32(0x7F00_0001).bigEndian),
            sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try #require(
            withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
            } == 0)
        try #require(listen(listener, 4) == 0)
        try #require(
            withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
            } == 0)
        let busy = UInt16(bigEndian: address.sin_port)
        for (argument, code) in [
            ("127.0.0.1:\(busy)", Int32(69)), ("192.0.2.1:8080", 69), ("127.0.0.1:70000", 64), ("nohost:", 64),
            ("[::1", 64),
        ] {
            let root = temporaryRoot("http-refused")
            defer { removeHostFiles(root) }
            let run = try runWindowhostBounded(
                ["run", "--root", root.path, "--scenes", "1", "--http", argument], seconds: 30)
            #expect(run.status == code, "--http \(argument): \(run.output)")
            #expect(
                !run.output.split(separator: "\n").contains { $0.hasPrefix("ready ") },
                "--http \(argument): \(run.output)")
            #expect(
                run.output.contains("--http") || run.output.contains("cannot serve HTTP"),
                "--http \(argument): \(run.output)")
        }
    }

    /// The dashboard in headless Chromium with 16 windows, one killed and recovered: after its
    /// script ran, every window has its card, the chart has points and the kill's marks. The
    /// screenshot is left at `.build/dashboard.png`.
    @Test(.timeLimit(.minutes(4))) func dashboardRendersEveryWindowInChromium() throws {
        let (host, http) = try hostServingHTTP("http-dashboard", scenes: 16)
        defer { removeHostFiles(host.root) }
        let windows = host.windowIDs()
        try #require(windows.count == 16)
        for (index, window) in windows.enumerated() {
            for tab in 0..<(1 + index % 3) {
                #expect(host.open(window, "https://dashboard-\(index)-\(tab).example/") != nil)
            }
        }
        #expect(try host.ctl(["kill", "--window", windows[3]]).status == 0)
        // A session set aside (a copy of a saved window, named as a crash loop would name it),
        // which `ctl set-aside` finds and summarizes: the page lists it.
        #expect(host.call(.waitDurable(seq: nil), window: windows[2]).code == .ok)
        let entry = "\(UUID().uuidString)-20261124T040000Z-crash-loop"
        try FileManager.default.createDirectory(
            at: host.root.appendingPathComponent(DiskLayout.setAside), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try FileManager.default.copyItem(
            atPath: host.root.appendingPathComponent("windows/\(windows[2])").path,
            toPath: host.root.appendingPathComponent("set-aside/\(entry)").path)
        let listed = try host.ctl(["set-aside"])
        #expect(listed.status == 0 && listed.output.contains("tabs 3+0"), "\(listed.output)")
        // One point of the chart per second: the saves above are in the next one.
        usleep(1_500_000)
        let screenshot = Self.packageRoot.appendingPathComponent(".build/dashboard.png")
        try? FileManager.default.removeItem(at: screenshot)
        let cards =
            "document.querySelectorAll('.card').length === 16 && document.querySelectorAll('#aside tr.entry').length === 1"
        let chart =
            "Number(document.getElementById('chart').dataset.points) > 0 && Number(document.getElementById('chart').dataset.marks) >= 2"
        let loaded = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "python3", Self.packageRoot.appendingPathComponent("Tests/windowhostTests/Browser/load-page.py").path,
                http.url("/"), "\(cards) && \(chart)", screenshot.path, "30",
            ])
        try #require(
            loaded.status == 0,
            "headless Chromium did not load the page (Debian's chromium package: scripts/test.sh installs it): \(loaded.output)"
        )
        let page = try #require(try JSONSerialization.jsonObject(with: Data(loaded.output.utf8)) as? [String: Any])
        let html = try #require(page["html"] as? String)
        #expect(page["ready"] as? Bool == true, "the page never showed 16 cards and a chart with points and marks")
        for window in windows { #expect(html.contains("id=\"window-\(window)\""), "no card for \(window)") }
        #expect(
            html.contains("id=\"aside-\(entry)\"") && html.contains("<td>crash_loop</td>")
                && html.contains("<td>3+0</td>"), "the set-aside entry is not listed")
        let points = html.firstMatch(of: /data-points="(\d+)"/).flatMap { Int($0.1) } ?? 0
        #expect(points > 0, "the chart has no points")
        #expect(
            html.contains("class=\"mark kill\"") && html.contains("class=\"mark recovered\""),
            "no kill or recovery marked")
        #expect(FileManager.default.fileExists(atPath: screenshot.path))
        #expect(host.terminate() == 0)
    }

    /// Runs Debian's `promtool check metrics` on an exposition: it must parse and lint clean.
    func checkWithPromtool(_ text: String) throws {
        let promtool = URL(fileURLWithPath: "/usr/bin/promtool")
        try #require(
            FileManager.default.isExecutableFile(atPath: promtool.path),
            "no /usr/bin/promtool (Debian's prometheus package: scripts/test.sh installs it)")
        let process = Process()
        process.executableURL = promtool
        process.arguments = ["check", "metrics"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "promtool: \(said)\n\(text)")
    }
}

/// A server on 127.0.0.1, spoken to over a plain socket as any HTTP client would.
struct HTTPTarget {
    let port: UInt16

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// A connected socket (nil if the connection failed).
    func connect() -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in(
            sin_family: sa_family_t(AF_INET), sin_port: port.bigEndian,
            sin_addr: in_addr(s_addr: UInt32(0x7F00_0001).bigEndian), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    struct Response {
        let status: Int
        let headers: String
        let body: String
    }

    /// GET `path`, to the end of the reply (`Connection: close`); throws when no whole reply
    /// comes within `timeout` seconds.
    func get(_ path: String, timeout: Int = 10) throws -> Response {
        guard let fd = connect() else { throw HostFailure("cannot connect to \(url(path))") }
        defer { close(fd) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let got = recv(fd, &chunk, chunk.count, 0)
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else { throw HostFailure("no reply from \(url(path)) in \(timeout) s") }
            if got == 0 { break }
            bytes += chunk[..<got]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n"),
            let status = Int(text.split(separator: " ").dropFirst().first ?? "")
        else {
            throw HostFailure("not an HTTP reply from \(url(path)): \(text)")
        }
        var body = String(text[split.upperBound...])
        if text[..<split.lowerBound].lowercased().contains("transfer-encoding: chunked") { body = Self.unchunked(body) }
        return Response(status: status, headers: String(text[..<split.lowerBound]), body: body)
    }

    /// `/metrics`, which must answer 200.
    func metrics() throws -> PrometheusScrape {
        let response = try get("/metrics")
        guard response.status == 200 else {
            throw HostFailure("/metrics answered \(response.status): \(response.body)")
        }
        return PrometheusScrape(text: response.body)
    }

    /// A chunked body, joined.
    static func unchunked(_ body: String) -> String {
        var rest = Substring(body)
        var joined = ""
        while let end = rest.range(of: "\r\n"), let size = Int(rest[..<end.lowerBound], radix: 16), size > 0 {
            let start = rest.utf8.index(end.upperBound, offsetBy: 0)
            let chunkEnd = rest.utf8.index(start, offsetBy: size)
            joined += String(rest[start..<chunkEnd])
            rest = rest[chunkEnd...].dropFirst(2)
        }
        return joined
    }
}
