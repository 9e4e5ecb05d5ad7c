import Atomics
import CLinuxShims
import Foundation
import Glibc
import Supervisor
import TestSupport
import Testing

@testable import HostCoordination

/// What a compromised worker did to the supervisor in hostile round 7, each against one window
/// A: junk replies that held up every window, a heartbeat written once and left, and strays
/// (what a worker leaves behind, reparented to the supervisor) that piled up as zombies or kept
/// scribbling into the slot of A's next worker. Each costs A's worker only; A comes back with
/// its durable tabs, and window B answers promptly throughout.
@Suite(.serialized) struct HostileWorkerTests {
    @Test func junkRepliesGetTheWorkerKilledAndLeaveOtherWindowsServing() throws {
        let root = temporaryRoot("junk-replies")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        defer { if host.process.isRunning { host.kill9() } }
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        let (a, b) = (ids[0], ids[1])
        #expect(host.open(a, "https://a.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: a).code == .ok)
        let pid = try #require(host.windows()[a]?.pid)
        let (memory, size) = try mapSlot(of: pid)
        defer { munmap(memory, size) }
        let slot = try #require(SlotMemory.attachedView(memory, size: size))
        let generation = slot.generation

        // A reply to a request never sent, ~700 KB of tabs to decode, kept in A's ring until A's
        // worker is replaced (not into its successor's ring: one window's start would fail).
        let junk = junkReply(request: 999_999_999, tabs: 80_000)
        let bell = try #require(descriptor(.supervisorBell, of: pid))
        let stop = ManagedAtomic(false)
        let writing = DispatchGroup()
        DispatchQueue.global().async(group: writing) {
            var one: UInt64 = 1
            while !stop.load(ordering: .relaxed), slot.generation == generation {
                if (try? slot.replyRing.send(junk)) != nil { _ = write(bell, &one, 8) } else { usleep(200) }
            }
        }
        defer {
            stop.store(true, ordering: .relaxed)
            writing.wait()
            close(bell)
        }
        let opened = try host.ctlBounded(["open", "--window", b, "--url", "https://b-during.example/"])
        #expect(opened.status == 0 && opened.seconds < 3, "\(opened)")
        #expect(waitFor({ host.log.contains("worker misbehaved") }, seconds: 5), "\(host.log)")
        let misbehaved = host.log.split(separator: "\n").filter { $0.contains("worker misbehaved") }
        #expect(misbehaved.allSatisfy { $0.contains("window=\(a)") && $0.contains("not sent") }, "\(misbehaved)")
        stop.store(true, ordering: .relaxed)
        #expect(
            waitFor(
                { host.windows()[a].map { $0.state == "foreground" && $0.pid != pid && $0.tabs == 1 } == true },
                seconds: 10), "\(host.log)")
        #expect(!host.log.contains("set aside"), "\(host.log)")
        #expect(host.terminate() == 0, "\(host.log)")
    }

    @Test(arguments: [UInt64(0), .max])
    func aHeartbeatWrittenOnceAndLeftIsKilledByTheWatchdog(_ value: UInt64) throws {
        let root = temporaryRoot("frozen-heartbeat")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, arguments: ["--watchdog", "400"])
        defer { if host.process.isRunning { host.kill9() } }
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://frozen.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        let pid = try #require(host.windows()[window]?.pid)
        let (memory, size) = try mapSlot(of: pid)
        defer { munmap(memory, size) }
        let slot = try #require(SlotMemory.attachedView(memory, size: size))
        // Silent from now on, its last word `value`.
        #expect(kill(pid, SIGSTOP) == 0)
        #expect(waitFor({ processState(pid) == "T" }, seconds: 2))
        slot.heartbeat = value
        #expect(
            waitFor(
                { host.windows()[window].map { $0.state == "foreground" && $0.pid != pid && $0.tabs == 1 } == true },
                seconds: 5),
            "\(host.log)")
        #expect(host.log.contains("worker hung"), "\(host.log)")
        #expect(host.terminate() == 0, "\(host.log)")
    }

    /// The worker is made to run a shell (through gdb: nothing in an honest worker forks) that
    /// leaves two short-lived processes and one that keeps writing impossible stats into the
    /// window's slot, which gets the worker killed. What it left is killed and reaped, and the
    /// window comes back with its durable tabs instead of failing to start and being set aside.
    @Test func whatADeadWorkerLeavesIsKilledAndReaped() throws {
        for tool in [gdb, "/usr/bin/python3"] {
            try #require(
                FileManager.default.isExecutableFile(atPath: tool),
                "\(tool) is needed to make a worker leave processes behind (scripts/test.sh installs it)")
        }
        let root = temporaryRoot("strays")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2, arguments: ["--watchdog", "20000"])
        defer { if host.process.isRunning { host.kill9() } }
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        let (a, b) = (ids[0], ids[1])
        for tab in 0..<2 { #expect(host.open(a, "https://a-\(tab).example/") != nil) }
        #expect(host.call(.waitDurable(seq: nil), window: a).code == .ok)
        let pid = try #require(host.windows()[a]?.pid)
        let (memory, size) = try mapSlot(of: pid)
        defer { munmap(memory, size) }

        let stats = SlotMemory.headerSize + SlotLayout.statsVersion.offset
        let scribbled = root.appendingPathComponent("scribbled")
        let scribbler = """
            import mmap, struct, time
            f = open('/proc/\(pid)/fd/\(WorkerLaunch.Descriptor.slotMemory.rawValue)', 'r+b')
            m = mmap.mmap(f.fileno(), 0)
            while True:
                v = struct.unpack_from('<Q', m, \(stats))[0]
                v += 2 + (v & 1)
                struct.pack_into('<QQQ', m, \(stats), v - 1, 2, 9)
                struct.pack_into('<Q', m, \(stats), v)
                open('\(scribbled.path)', 'w').close()
                time.sleep(0.001)
            """
        let script = root.appendingPathComponent("scribbler.py")
        try scribbler.write(to: script, atomically: true, encoding: .utf8)
        // The shell the worker runs waits (at most 5 s) until the scribbler has scribbled:
        // only then does it end and leave its children to the supervisor, whose 1 Hz scan for
        // strays took the scribbler first now and then (python3 starts slowly on a busy machine).
        let command = """
            (sleep 0.1 &); (sleep 0.2 &); (python3 \(script.path) & sleep 2) & \
            i=0; while [ ! -e \(scribbled.path) ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done\0
            """
        // In the header page's unused end, where the worker maps it too.
        let commandOffset = 3000
        for (offset, byte) in command.utf8.enumerated() {
            memory.storeBytes(of: byte, toByteOffset: commandOffset + offset, as: UInt8.self)
        }
        // The worker has answered through its slot: it maps libc and the slot already.
        let system = try #require(addressOfSystem(in: pid), "\(mappingLookups(worker: pid)) \(host.log)")
        let mapped = try #require(slotMapping(in: pid), "\(mappingLookups(worker: pid)) \(host.log)")
        let gdbRun = try runGDB([
            "-nx", "-batch", "--readnever", "-iex", "set auto-solib-add off", "-iex", "set debuginfod enabled off",
            "-p", "\(pid)", "-ex",
            "call ((int(*)(const char*))\(system))((const char*)\(mapped + UInt(commandOffset)))",
        ])
        // The scribbling may get the worker killed before the call returns: what shows that
        // the call ran is the scribbler's mark, not gdb's `$1 = 0`.
        #expect(FileManager.default.fileExists(atPath: scribbled.path), "the scribbler ran: \(gdbRun)")
        // The scribbler gets A's worker killed, and what the worker left goes with it.
        #expect(
            waitFor({ host.log.contains("durable seq 9 above applied seq 2") }, seconds: 5),
            "the scribbler ran: \(host.log)")
        #expect(
            waitFor(
                { host.windows()[a].map { $0.state == "foreground" && $0.pid != pid && $0.tabs == 2 } == true },
                seconds: 10),
            "A comes back with its durable tabs: \(host.log)")
        let workers = Set(host.windows().values.map(\.pid))
        // The spare worker the supervisor keeps is its child too, and no stray: alive, a spare.
        let spare = " \(SpareLaunch.subcommand) --root "
        #expect(
            waitFor(
                {
                    children(of: host.process.processIdentifier).allSatisfy {
                        workers.contains($0.pid) || (!$0.command.hasPrefix("Z") && $0.command.contains(spare))
                    }
                }, seconds: 1.5),
            "no stray and no zombie is left: \(children(of: host.process.processIdentifier)) \(host.log)")
        #expect(host.log.contains("a stray child of the supervisor"), "\(host.log)")
        #expect(!host.log.contains("set aside"), "\(host.log)")
        let opened = try host.ctlBounded(["open", "--window", b, "--url", "https://b.example/"])
        #expect(opened.status == 0 && opened.seconds < 3, "\(opened)")
        #expect(host.terminate() == 0, "\(host.log)")
    }
}

private let gdb = "/usr/bin/gdb"

/// gdb's output; its input is /dev/null (on a pipe that stays open it waits for more).
private func runGDB(_ arguments: [String]) throws -> String {
    let process = Process()
    // Through python3, which unblocks every signal first: gdb inherits the test process's
    // signal mask, and with SIGCHLD blocked it never hears that its call returned.
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments =
        [
            "-c",
            "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
            gdb,
        ] + arguments
    process.standardInput = FileHandle.nullDevice
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("windowhost-gdb-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: output.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: output) }
    let handle = try FileHandle(forWritingTo: output)
    defer { try? handle.close() }
    process.standardOutput = handle
    process.standardError = handle
    try process.run()
    if !waitFor({ !process.isRunning }, seconds: 20) { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    return (try? String(contentsOf: output, encoding: .utf8)) ?? ""
}

/// The worker's slot memfd, mapped read-write here as the worker maps it.
func mapSlot(of pid: Int32) throws -> (UnsafeMutableRawPointer, Int) {
    let fd = open("/proc/\(pid)/fd/\(WorkerLaunch.Descriptor.slotMemory.rawValue)", O_RDWR | O_CLOEXEC)
    try #require(fd >= 0, "open: \(errno)")
    defer { close(fd) }
    var status = stat()
    try #require(fstat(fd, &status) == 0)
    let size = Int(status.st_size)
    let memory = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))
    try #require(memory != MAP_FAILED)
    return (memory, size)
}

/// A `WorkerReply` (protobuf, by hand) answering `request` with a dump of `tabs` tabs.
private func junkReply(request: UInt64, tabs: Int) -> [UInt8] {
    func varint(_ value: UInt64) -> [UInt8] {
        var (value, bytes) = (value, [UInt8]())
        repeat {
            bytes.append(UInt8(value & 0x7F) | (value > 0x7F ? 0x80 : 0))
            value >>= 7
        } while value > 0
        return bytes
    }
    func field(_ number: UInt64, _ payload: [UInt8]) -> [UInt8] {
        varint(number << 3 | 2) + varint(UInt64(payload.count)) + payload
    }
    var browser: [UInt8] = []
    for id in 1...tabs { browser += field(1, [0x08] + varint(UInt64(id)) + [0x12, 0x01, UInt8(ascii: "u")]) }
    return [0x08] + varint(request) + field(12, field(1, browser))
}

/// The address of libc's `system` in `pid`: where libc is loaded there, plus the symbol's
/// offset from where the same file is loaded here.
private func addressOfSystem(in pid: Int32) -> UInt? {
    guard let symbol = dlsym(nil, "system"), let here = firstMapping(in: getpid(), where: isLibc),
        let there = firstMapping(in: pid, where: isLibc)
    else { return nil }
    return there + (UInt(bitPattern: symbol) - here)
}

private func isLibc(_ line: Substring) -> Bool { line.hasSuffix("/libc.so.6") }

/// Where `pid` maps its slot memfd.
private func slotMapping(in pid: Int32) -> UInt? { firstMapping(in: pid, where: isSlot) }

private func isSlot(_ line: Substring) -> Bool { line.contains("/memfd:windowhost-slot") }

private func firstMapping(in pid: Int32, where matches: (Substring) -> Bool) -> UInt? {
    guard let maps = procText("/proc/\(pid)/maps"), let line = maps.split(separator: "\n").first(where: matches),
        let start = line.split(separator: "-").first
    else { return nil }
    return UInt(start, radix: 16)
}

/// What each lookup behind `addressOfSystem` and `slotMapping` found, for a failure message.
private func mappingLookups(worker pid: Int32) -> String {
    func found(_ address: UInt?) -> String { address.map { "0x" + String($0, radix: 16) } ?? "none" }
    func lines(_ pid: Int32) -> String {
        procText("/proc/\(pid)/maps").map { "\($0.split(separator: "\n").count) lines" } ?? "unreadable"
    }
    return "dlsym system: \(dlsym(nil, "system") == nil ? "none" : "found"); "
        + "libc here (\(lines(getpid())) of maps): \(found(firstMapping(in: getpid(), where: isLibc))); "
        + "in worker \(pid) (\(lines(pid)) of maps, state \(processState(pid).map(String.init) ?? "gone")): "
        + "libc \(found(firstMapping(in: pid, where: isLibc))), slot \(found(firstMapping(in: pid, where: isSlot)))"
}

/// The process state letter in /proc/<pid>/stat (after the last ')').
private func processState(_ pid: Int32) -> Character? {
    guard let stat = procText("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
    return stat[close...].dropFirst(2).first
}

/// The children of `parent` now: pid and the name or command line.
private func children(of parent: Int32) -> [(pid: Int32, command: String)] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { name in
        guard let pid = Int32(name), let stat = procText("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 1, Int32(fields[1]) == parent else { return nil }
        let commandLine = procText("/proc/\(pid)/cmdline")?.replacingOccurrences(of: "\0", with: " ") ?? ""
        return (pid, "\(fields[0]) \(stat[..<close]) \(commandLine)")
    }
}
