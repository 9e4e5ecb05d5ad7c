import BrowserModel
import Foundation
import Glibc
import Histogram
import HostControl
import HostCoordination
import IOUring
import Platform
import SessionStore
import Stress
import SystemPackage

/// Round trips of one command: through a shared-memory ring with eventfd doorbells (how the
/// supervisor and its workers talk), through a Unix stream socket between the same two
/// processes, and as a `ctl` call through a running supervisor to a worker and back.
public struct CoordinationResult: Codable, Sendable, Equatable {
    public var shmRoundTripP50: Double
    public var shmRoundTripP99: Double
    public var socketRoundTripP50: Double
    public var socketRoundTripP99: Double
    public var ctlP50: Double
    public var ctlP99: Double

    enum CodingKeys: String, CodingKey {
        case shmRoundTripP50 = "shm_rtt_p50_us"
        case shmRoundTripP99 = "shm_rtt_p99_us"
        case socketRoundTripP50 = "socket_rtt_p50_us"
        case socketRoundTripP99 = "socket_rtt_p99_us"
        case ctlP50 = "ctl_p50_us"
        case ctlP99 = "ctl_p99_us"
    }
}

public enum CoordinationBench {
    /// The message both transports carry: a navigation, as the supervisor sends it.
    static func command() throws -> [UInt8] {
        let navigate = WindowCommand.tab(
            .navigate(tab: 42, url: "https://example.com/a/page/that/is/about/as/long/as/a/real/one?q=1"))
        return Array(try navigate.message(request: 1).serializedData())
    }

    /// `iterations` round trips each way, alternating rings and socket in blocks so both see
    /// the same machine; then `ctlCalls` navigations through a supervisor rooted in `directory`.
    public static func run(executable: String, iterations: Int, ctlCalls: Int, directory: FilePath) throws
        -> CoordinationResult
    {
        let message = try command()
        let region = try SharedRegion(slotCount: 1, supervisorPID: getpid())
        let toEcho = try Doorbell()
        let toUs = try Doorbell()
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw BenchError.system("socketpair", Errno(rawValue: errno))
        }
        defer {
            close(pair[0])
            toEcho.close()
            toUs.close()
        }
        let inherit = [
            region.descriptor(ofSlot: 0).rawValue, toEcho.descriptor.rawValue, toUs.descriptor.rawValue, pair[1],
        ]
        let pid: pid_t
        switch spawnProcess([executable, "bench-echo"], inheriting: inherit, ownProcessGroup: true) {
        case .success(let spawned): pid = spawned
        case .failure(let errno):
            close(pair[1])
            throw BenchError.system("posix_spawn", errno)
        }
        close(pair[1])
        defer {
            shutdown(pair[0], Int32(SHUT_RDWR))
            var status: Int32 = 0
            _ = retryingOnInterrupt { waitpid(pid, &status, 0) }
        }
        let slot = region.slot(0)
        var shm = nanosecondHistogram()
        var socket = nanosecondHistogram()
        let block = 100
        for _ in 0..<max(1, iterations / block) {
            for _ in 0..<block {
                _ = shm.record(try measure { try ringRoundTrip(message, slot: slot, bell: toEcho, reply: toUs) })
            }
            for _ in 0..<block {
                _ = socket.record(try measure { try socketRoundTrip(message, socket: pair[0]) })
            }
        }
        let ctl = try ctlRoundTrips(executable: executable, calls: ctlCalls, directory: directory)
        return CoordinationResult(
            shmRoundTripP50: Double(shm.valueAtPercentile(50)) / 1000,
            shmRoundTripP99: Double(shm.valueAtPercentile(99)) / 1000,
            socketRoundTripP50: Double(socket.valueAtPercentile(50)) / 1000,
            socketRoundTripP99: Double(socket.valueAtPercentile(99)) / 1000,
            ctlP50: Double(ctl.valueAtPercentile(50)) / 1000, ctlP99: Double(ctl.valueAtPercentile(99)) / 1000)
    }

    /// The echo process: answers every message on the ring (descriptors 3–5: region, its
    /// doorbell, ours) and on the socket (descriptor 6) with the same bytes, until the socket
    /// closes.
    public static func echo() throws {
        let memory = try SlotMemory(attaching: FileDescriptor(rawValue: 3))
        let bell = Doorbell(descriptor: FileDescriptor(rawValue: 4))
        let reply = Doorbell(descriptor: FileDescriptor(rawValue: 5))
        let socket: Int32 = 6
        let slot = memory.slot
        var fds = [
            pollfd(fd: bell.descriptor.rawValue, events: Int16(POLLIN), revents: 0),
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            guard retryingOnInterrupt({ poll(&fds, 2, -1) }) >= 0 else {
                throw BenchError.system("poll", Errno(rawValue: errno))
            }
            if fds[0].revents != 0 {
                bell.clear()
                while let message = try slot.commandRing.receive() { try slot.replyRing.send(message) }
                reply.ring()
            }
            if fds[1].revents != 0 {
                guard let message = try readFrame(socket) else { return }
                try writeFrame(message, to: socket)
            }
        }
    }

    private static func nanosecondHistogram() -> Histogram<UInt64> {
        // A round trip is tens of microseconds: nanoseconds keep three digits of it.
        Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
    }

    private static func measure(_ body: () throws -> Void) rethrows -> UInt64 {
        let start = monotonicNanoseconds()
        try body()
        return max(1, monotonicNanoseconds() - start)
    }

    private static func ringRoundTrip(_ message: [UInt8], slot: WindowSlot, bell: Doorbell, reply: Doorbell) throws {
        try slot.commandRing.send(message)
        bell.ring()
        while true {
            guard isReadable(reply.descriptor.rawValue) else {
                throw BenchError.worker("the echo process did not answer on the ring")
            }
            reply.clear()
            if let answer = try slot.replyRing.receive() {
                guard answer.count == message.count else {
                    throw BenchError.worker("the ring echoed \(answer.count) bytes")
                }
                return
            }
        }
    }

    /// Whether `descriptor` becomes readable within 10 s; a signal's interruption (one that
    /// asks the bench to stop, which it does after this step) waits on.
    private static func isReadable(_ descriptor: Int32) -> Bool {
        let deadline = monotonicNanoseconds() + 10_000_000_000
        while true {
            var fd = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let left = Int32(clamping: (deadline - min(deadline, monotonicNanoseconds())) / 1_000_000)
            let ready = poll(&fd, 1, left)
            if ready > 0 { return true }
            if ready < 0, errno == EINTR, left > 0 { continue }
            return false
        }
    }

    private static func socketRoundTrip(_ message: [UInt8], socket: Int32) throws {
        try writeFrame(message, to: socket)
        guard isReadable(socket), let answer = try readFrame(socket) else {
            throw BenchError.worker("the echo process did not answer on the socket")
        }
        guard answer.count == message.count else { throw BenchError.worker("the socket echoed \(answer.count) bytes") }
    }

    /// A 4-byte length, then the message, in one write: the same framing the rings use.
    private static func writeFrame(_ message: [UInt8], to socket: Int32) throws {
        var length = UInt32(message.count).littleEndian
        var frame = withUnsafeBytes(of: &length) { Array($0) }
        frame += message
        guard write(socket, frame, frame.count) == frame.count else {
            throw BenchError.system("write", Errno(rawValue: errno))
        }
    }

    private static func readFrame(_ socket: Int32) throws -> [UInt8]? {
        guard let header = try readExactly(socket, 4) else { return nil }
        let length = header.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))) }
        return try readExactly(socket, length)
    }

    private static func readExactly(_ socket: Int32, _ count: Int) throws -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = retryingOnInterrupt {
                bytes.withUnsafeMutableBytes { read(socket, $0.baseAddress! + done, count - done) }
            }
            if got == 0 { return nil }
            guard got > 0 else { throw BenchError.system("read", Errno(rawValue: errno)) }
            done += got
        }
        return bytes
    }

    /// `ctl navigate` calls through a supervisor with one scene: control socket, supervisor,
    /// command ring, worker applying the navigation, reply ring, and back.
    private static func ctlRoundTrips(executable: String, calls: Int, directory: FilePath) throws -> Histogram<UInt64> {
        let root = directory.appending("ctl-host")
        try FileManager.default.createDirectory(
            atPath: directory.string, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let supervisor = try SupervisorProcess(
            executable: executable, root: root, arguments: ["--scenes", "1"], environment: [:])
        defer { _ = supervisor.shutdown() }
        guard let shown = (try? supervisor.call(.status).decode(StatusReply.self))?.windows.first?.uuid,
            let window = UUID(exactly: shown)
        else {
            throw BenchError.worker("the supervisor for the ctl round trips reports no window")
        }
        let open = ControlRequest.window(
            window,
            .tab(.open(url: "https://example.com/", incognito: false, index: nil, opener: nil, background: false)))
        guard let tab = (try? supervisor.call(open).decode(CommandReply.self))?.tab else {
            throw BenchError.worker("ctl open gave no tab")
        }
        var histogram = nanosecondHistogram()
        for index in 0..<calls {
            let navigate = ControlRequest.window(window, .tab(.navigate(tab: tab, url: "https://example.com/\(index)")))
            let start = monotonicNanoseconds()
            let reply = supervisor.call(navigate)
            guard reply.code == .ok else { throw BenchError.worker("ctl navigate: \(reply.error ?? "\(reply.code)")") }
            _ = histogram.record(max(1, monotonicNanoseconds() - start))
        }
        return histogram
    }
}
