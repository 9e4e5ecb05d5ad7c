import CLinuxShims
import Foundation
import Glibc
import HostControl
import HostCoordination
import Platform
import TestSupport
import Testing

/// The spare worker with real processes: a restart is the spare handed the window, a spare
/// killed while it waits is replaced with no window noticing, `--no-spare` spawns as before,
/// and a spare handed a malformed window exits with its code.
@Suite(.serialized) struct SpareProcessTests {
    /// The running children of `parent` started as `windowhost spare`.
    private func spares(of parent: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let stat = procText("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, !["Z", "X"].contains(fields[0]), Int32(fields[1]) == parent,
                let command = procText("/proc/\(pid)/cmdline")
            else { return false }
            return command.split(separator: "\0").dropFirst().first == Substring(SpareLaunch.subcommand)
        }
    }

    /// The spare waiting under `host`, once one is (at most 10 s), and not `previous`.
    private func waitingSpare(_ host: HostProcess, replacing previous: Int32? = nil) -> Int32? {
        var found: Int32?
        _ = waitFor(
            {
                let status = try? host.call(.status).decode(StatusReply.self)
                // A spare handed a window is its worker now, under the command line it started with.
                let workers = Set((status?.windows ?? []).map(\.pid))
                let pids = spares(of: host.process.processIdentifier).filter { !workers.contains($0) }
                guard status?.spare == .waiting, pids.count == 1, pids[0] != previous else { return false }
                found = pids[0]
                return true
            }, seconds: 10)
        return found
    }

    @Test func aKillIsAnsweredByARestartInTheSpareAndNothingAcknowledgedIsLost() throws {
        let root = temporaryRoot("spare-kill")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        var spare = try #require(waitingSpare(host), "a spare waits: \(host.log)")
        for round in 1...3 {
            let tab = try #require(host.open(window, "https://round\(round).example/"))
            #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
            let before = try #require(host.windows()[window])
            let killed = try host.ctl(["kill", "--window", window])
            #expect(killed.status == 0 && killed.output.contains("restored by"), "\(killed.output)")
            let after = try #require(host.windows()[window])
            #expect(after.pid == spare, "the restart is the former spare: \(after.pid), spare \(spare)")
            #expect(after.generation == before.generation + 1 && after.regularTabs == before.regularTabs)
            #expect(after.durableSeq == before.durableSeq)
            let dump = try #require(host.call(.dump, window: window).result)
            let urls = dump["regular"]?["tabs"]?.array?.compactMap { $0["url"]?.string } ?? []
            #expect(urls.contains("https://round\(round).example/"), "tab \(tab) is restored: \(urls)")
            spare = try #require(waitingSpare(host, replacing: spare), "a new spare waits after the hand-over")
        }
        #expect(host.windows()[window]?.restarts == 3)
        #expect(host.call(.shutdown).code == .ok)
        host.process.waitUntilExit()
        #expect(host.process.terminationStatus == 0)
        #expect(!isRunning(spare), "the spare goes with the supervisor")
    }

    @Test func aSpareKilledWhileWaitingIsReplacedAndNoWindowNotices() throws {
        let root = temporaryRoot("spare-replaced")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        let before = host.windows()
        try #require(before.count == 2)
        var spare = try #require(waitingSpare(host))
        for _ in 0..<3 {
            Glibc.kill(spare, SIGKILL)
            spare = try #require(waitingSpare(host, replacing: spare), "the spare is replaced: \(host.log)")
        }
        let after = host.windows()
        for (id, window) in before {
            #expect(after[id]?.pid == window.pid && after[id]?.generation == window.generation)
            #expect(after[id]?.restarts == 0 && after[id]?.state == "foreground")
        }
        let shown = try host.ctl(["status"])
        #expect(shown.status == 0 && shown.output.contains("spare worker: waiting"), "\(shown.output)")
        #expect(host.terminate() == 0)
    }

    @Test func withNoSpareEveryWorkerIsSpawnedForItsWindow() throws {
        let root = temporaryRoot("no-spare")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, arguments: ["--no-spare"])
        let window = try #require(host.windowIDs().first)
        #expect((try? host.call(.status).decode(StatusReply.self))?.spare == .off)
        _ = host.open(window, "https://kept.example/")
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        let killed = try host.ctl(["kill", "--window", window])
        #expect(killed.status == 0 && killed.output.contains("restored by"), "\(killed.output)")
        #expect(host.windows()[window]?.regularTabs == 1)
        usleep(300_000)
        #expect(spares(of: host.process.processIdentifier).isEmpty, "no spare is started")
        #expect(!host.log.contains("spare worker spawned"))
        #expect(host.terminate() == 0)
    }

    // MARK: a spare's hand-over, from a test standing in for the supervisor

    /// Starts `windowhost spare` with its hand-over socket and the descriptors every worker
    /// holds; waits for its ready byte. Its pid and the supervisor's end of the socket.
    private func startSpare(root: URL) throws -> (pid: Int32, socket: Int32) {
        var pair: [Int32] = [-1, -1]
        try #require(wh_seqpacket_pair(&pair) == 0)
        let bells = [wh_eventfd(), wh_eventfd()]
        let lock = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { for descriptor in bells + [lock, pair[1]] { close(descriptor) } }
        let launch = SpareLaunch(
            root: .init(root.path), saveDelayMilliseconds: 0, io: "sync", supervisorPID: getpid(),
            compactAfterRecords: nil)
        let pid = try spawnProcess(
            launch.arguments(executable: windowhostBinary.path), inheriting: [pair[1], bells[0], bells[1], lock]
        ).get()
        var ready: UInt8 = 0
        let received = recv(pair[0], &ready, 1, 0)
        try #require(received == 1 && ready == SpareLaunch.readyByte, "the spare says it is ready")
        return (pid, pair[0])
    }

    private func exitStatus(of pid: Int32) -> Int32? {
        var status: Int32 = 0
        guard waitpid(pid, &status, 0) == pid, status & 0x7f == 0 else { return nil }
        return (status >> 8) & 0xff
    }

    private static let assignment = WindowAssignment(
        slot: 0, generation: 1, window: UUID(), seqFloor: 0, tabFloor: 0, inBackground: false)

    /// What a hostile supervisor might send: each is refused with exit 65, never a trap.
    static let hostileHandOvers: [(name: String, bytes: [UInt8], descriptors: Int)] = [
        ("a short message, no memfd", [1, 2, 3], 0),
        ("a whole assignment with no memfd", assignment.bytes, 0),
        ("a longer message with a memfd", assignment.bytes + [0, 0], 1),
        ("a bad magic with a memfd", [0] + assignment.bytes.dropFirst(), 1),
        ("generation 0", Array(assignment.bytes.prefix(12)) + [0, 0, 0, 0] + assignment.bytes.dropFirst(16), 1),
        ("an empty message with a memfd", [], 1),
    ]

    @Test(arguments: 0..<hostileHandOvers.count) func aMalformedHandOverIsExit65(_ index: Int) throws {
        let hostile = Self.hostileHandOvers[index]
        let root = temporaryRoot("spare-hostile")
        defer { removeHostFiles(root) }
        let (pid, socket) = try startSpare(root: root)
        defer { close(socket) }
        let memory = wh_memfd_create_sealable("hostile")
        defer { close(memory) }
        let sent = wh_send_with_descriptor(
            socket, hostile.bytes, hostile.bytes.count, hostile.descriptors == 1 ? memory : -1)
        try #require(sent == hostile.bytes.count, "\(hostile.name): sent")
        #expect(exitStatus(of: pid) == WorkerExit.handOverRefused.status, "\(hostile.name)")
    }

    @Test func aSpareHandedMemoryOfNoSlotIsRefusedAndOneSentAwayExitsClean() throws {
        let root = temporaryRoot("spare-no-slot")
        defer { removeHostFiles(root) }
        let (pid, socket) = try startSpare(root: root)
        let memory = wh_memfd_create_sealable("not a slot")
        defer { close(memory) }
        let bytes = Self.assignment.bytes
        #expect(wh_send_with_descriptor(socket, bytes, bytes.count, memory) == bytes.count)
        close(socket)
        #expect(exitStatus(of: pid) == WorkerExit.refused.status, "a memfd of no slot's layout is refused")

        let (idle, idleSocket) = try startSpare(root: root)
        close(idleSocket)
        #expect(exitStatus(of: idle) == WorkerExit.disconnected.status, "sent away with no window")
    }
}
