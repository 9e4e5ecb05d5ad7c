import Atomics
import CLinuxShims
import Foundation
import Glibc
import Supervisor
import Testing

@testable import HostCoordination

/// Plays a compromised worker (issue 12, isolation): from window B's worker's own descriptors,
/// as root, it writes random bytes over every memfd B holds, tries to shrink them, then crafts
/// ring and stats states, ringing the supervisor's doorbell between rounds. The supervisor
/// lives, windows A and C keep exactly their tabs and serve, and B comes back with every tab
/// that was durable.
@Suite(.serialized) struct CompromisedWorkerTests {
    @Test func aWorkerScribblingOverEverythingItCanMapReachesOnlyItsOwnWindow() throws {
        let root = temporaryRoot("scribble")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 3)
        defer { if host.process.isRunning { host.kill9() } }
        let ids = host.windowIDs()
        try #require(ids.count == 3)
        let (a, b, c) = (ids[0], ids[1], ids[2])
        for window in ids {
            for tab in 0..<3 { #expect(host.open(window, "https://\(window.prefix(8))-\(tab).example/") != nil) }
            #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        }
        var before: [String: [String]] = [:]
        for window in ids { before[window] = tabs(host, window) }
        try #require(before[b]?.count == 3)
        let firstPID = try #require(readyPID(host, b, not: 0))
        let othersMemory = Set([a, c].flatMap { memfds(of: readyPID(host, $0, not: 0) ?? 0).map { $0.inode } })
        #expect(othersMemory.count == 2, "A's and C's workers each hold their slot's memfd")

        // Round 1: seeded random bytes over all of every memfd B holds.
        var seed: UInt64 = 0x5EED_0012
        var attacked = try attack(host, b, after: 0) { memory, size in
            for offset in stride(from: 0, to: size, by: 8) {
                memory.storeBytes(of: splitMix(&seed), toByteOffset: offset, as: UInt64.self)
            }
        }
        // Then crafted states, each against the restarted worker's slot.
        let crafted: [(String, (WindowSlot) -> Void)] = [
            (
                "reply tail below head",
                { slot in
                    store(4096, at: slot.replyRing.base)
                    store(64, at: slot.replyRing.base + 64)
                }
            ),
            (
                "length past the capacity",
                { slot in
                    let ring = slot.replyRing
                    store(0, at: ring.base)
                    (ring.base + MessageRing.headerSize).storeBytes(
                        of: UInt32(ring.capacity + 1).littleEndian, as: UInt32.self)
                    store(UInt64(ring.capacity), at: ring.base + 64)
                }
            ),
            ("reply tail 2^64-1", { slot in store(.max, at: slot.replyRing.base + 64) }),
            (
                "seqs above 2^53",
                { slot in
                    var stats = WorkerStats()
                    stats.appliedSeq = (1 << 53) + 1
                    stats.durableSeq = (1 << 53) + 1
                    stats.regularTabs = .max
                    stats.incognitoTabs = .max
                    slot.publish(stats)
                }
            ),
            (
                "durable above applied",
                { slot in
                    var stats = WorkerStats()
                    stats.appliedSeq = 2
                    stats.durableSeq = 9
                    slot.publish(stats)
                }
            ),
        ]
        for (name, craft) in crafted {
            attacked = try attack(host, b, after: attacked) { memory, size in
                let slot = try #require(
                    SlotMemory.attachedView(memory, size: size), "B's slot header was written again: \(name)")
                craft(slot)
            }
            #expect(host.process.isRunning, "the supervisor lives after \(name): \(host.log)")
        }
        let restarted = try #require(readyPID(host, b, not: attacked, seconds: 30), "B comes back: \(host.log)")
        #expect(restarted != firstPID)
        // Each round got B's worker killed as misbehaving, logged with B's UUID; never A's or C's.
        let misbehaved = host.log.split(separator: "\n").filter { $0.contains("worker misbehaved") }
        #expect(misbehaved.filter { $0.contains("window=\(b)") }.count >= crafted.count, "\(misbehaved)")
        #expect(!misbehaved.contains { $0.contains(a) || $0.contains(c) }, "\(misbehaved)")

        // The supervisor's doorbell rung and cleared in a tight loop by B: one loop turn per
        // wake-up, every ready descriptor served in each, and wake-ups B swallows wait at most
        // the loop's 100 ms timer, so A and C still answer promptly.
        let bell = try #require(descriptor(.supervisorBell, of: restarted))
        let stop = ManagedAtomic(false)
        let ringing = DispatchGroup()
        DispatchQueue.global().async(group: ringing) {
            var count: UInt64 = 1
            while !stop.load(ordering: .relaxed) {
                _ = write(bell, &count, 8)
                _ = read(bell, &count, 8)
                count = 1
            }
        }
        var timings: [Double] = []
        for window in [a, c] {
            let opened = try host.ctlBounded([
                "open", "--window", window, "--url", "https://\(window.prefix(8))-after.example/",
            ])
            #expect(opened.status == 0 && opened.seconds < 5, "\(opened)")
            let durable = try host.ctlBounded(["wait-durable", "--window", window])
            #expect(durable.status == 0 && durable.seconds < 5, "\(durable)")
            timings += [opened.seconds, durable.seconds]
        }
        print("CompromisedWorkerTests: open and wait-durable under the doorbell storm answered in \(timings) s")
        stop.store(true, ordering: .relaxed)
        ringing.wait()
        close(bell)

        #expect(host.process.isRunning, "\(host.log)")
        #expect(try host.ctlBounded(["status"]).status == 0)
        for window in [a, c] {
            // Exactly their tabs, and the one opened during the storm.
            let after = tabs(host, window)
            #expect(Array(after.dropLast()) == before[window], "\(after)")
            #expect(after.last?.hasSuffix(" https://\(window.prefix(8))-after.example/") == true, "\(after)")
        }
        let bTabs = Set(tabs(host, b))
        #expect(Set(before[b] ?? []).isSubset(of: bTabs), "B has every durable tab: \(bTabs) \(host.log)")
        let bMemory = memfds(of: restarted)
        #expect(
            bMemory.count == 1 && othersMemory.isDisjoint(with: bMemory.map { $0.inode }),
            "B holds its own slot's memfd only: \(bMemory)")
        #expect(host.terminate() == 0, "\(host.log)")
    }
}

/// The window's worker pid once it is ready with a pid other than `not`.
func readyPID(_ host: HostProcess, _ window: String, not previous: Int32, seconds: Double = 20) -> Int32? {
    var pid: Int32?
    _ = waitFor(
        {
            let entry = host.windows()[window]
            guard entry?.state == "foreground", let live = entry?.pid, live != 0, live != previous else { return false }
            pid = live
            return true
        }, seconds: seconds)
    return pid
}

/// The window's tabs as "id url", in order.
private func tabs(_ host: HostProcess, _ window: String) -> [String] {
    (host.call(.dump, window: window).result?["regular"]?["tabs"]?.array ?? []).map {
        "\($0["id"]?.int ?? -1) \($0["url"]?.string ?? "?")"
    }
}

/// The memfds `pid` holds: descriptor and inode.
private func memfds(of pid: Int32) -> [(fd: Int32, inode: UInt64)] {
    let directory = "/proc/\(pid)/fd"
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return entries.compactMap { name in
        guard let fd = Int32(name),
            let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(name)"),
            target.hasPrefix("/memfd:")
        else { return nil }
        var status = stat()
        guard stat("\(directory)/\(name)", &status) == 0 else { return nil }
        return (fd, UInt64(status.st_ino))
    }
}

/// One round against the window's worker once it is ready with a pid other than `previous` (0:
/// the worker now):
/// every memfd it holds is opened through /proc, mapped read-write and given to `scribble`;
/// then a shrink is tried (after the mapping is gone: it would fault whoever maps it) and the
/// supervisor's doorbell rung. The worker attacked, whose death the next round waits for.
private func attack(
    _ host: HostProcess, _ window: String, after previous: Int32,
    scribble: (UnsafeMutableRawPointer, Int) throws -> Void
) throws -> Int32 {
    let pid = try #require(readyPID(host, window, not: previous, seconds: 30), "the worker is back: \(host.log)")
    let held = memfds(of: pid)
    try #require(!held.isEmpty, "a worker holds its slot's memory")
    for (fd, _) in held {
        let memory = open("/proc/\(pid)/fd/\(fd)", O_RDWR | O_CLOEXEC)
        try #require(memory >= 0, "open: \(errno)")
        defer { close(memory) }
        var status = stat()
        try #require(fstat(memory, &status) == 0)
        let size = Int(status.st_size)
        let mapped = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, memory, 0), "mmap")
        try #require(mapped != MAP_FAILED)
        defer { munmap(mapped, size) }
        try scribble(mapped, size)
    }
    for (fd, _) in held {
        let memory = open("/proc/\(pid)/fd/\(fd)", O_RDWR | O_CLOEXEC)
        guard memory >= 0 else { continue }
        #expect(ftruncate(memory, 0) == -1 && errno == EPERM, "a slot's size is sealed")
        close(memory)
    }
    // A worker that already died of what it read (its own rings) cannot ring: its pidfd wakes
    // the supervisor instead.
    if let bell = descriptor(.supervisorBell, of: pid) {
        var one: UInt64 = 1
        _ = write(bell, &one, 8)
        close(bell)
    }
    return pid
}

extension SlotMemory {
    /// The slot in a mapping of a slot's memfd, if its header is this layout's.
    static func attachedView(_ memory: UnsafeMutableRawPointer, size: Int) -> WindowSlot? {
        guard size == Self.size, memory.load(fromByteOffset: HeaderOffset.magic, as: UInt64.self) == magic,
            memory.load(fromByteOffset: HeaderOffset.version, as: UInt32.self) == layoutVersion
        else { return nil }
        return WindowSlot(memory + headerSize, header: Header(index: 0, supervisorPID: 0))
    }
}

func splitMix(_ state: inout UInt64) -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

private func store(_ value: UInt64, at pointer: UnsafeMutableRawPointer) {
    UnsafeAtomic<UInt64>(at: pointer.assumingMemoryBound(to: UInt64.AtomicRepresentation.self)).store(
        value, ordering: .releasing)
}
