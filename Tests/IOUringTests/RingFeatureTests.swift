import CLinuxShims
import CTestShims
import Glibc
import HostLimits
import Platform
import SystemPackage
import TestSupport
import Testing

@testable import IOUring

/// The ring as the io_uring maintainers advise it (`RingFeatures`), and the engine without each
/// part of it, as a kernel that refuses the part leaves it.
@Suite struct RingFeatureTests {
    static let featureSets: [RingFeatures] = [.all, .setup, [.cooperativeTaskRun], [.registeredBuffers], []]

    /// Whatever the ring runs with, durable writes of every size (a small save in a registered
    /// buffer, one larger than a buffer, more at once than there are buffers) land and read
    /// back, in a direct file and a buffered one, and every registered buffer comes back.
    @Test(arguments: featureSets)
    func writesLandWithEachFeatureSet(features: RingFeatures) throws {
        try withTemporaryDirectory { directory in
            let engine = try UringEngine(features: features)
            #expect(engine.features == features, "this kernel (6.1 or later) grants everything: \(engine.refusals)")
            #expect(engine.refusals.isEmpty)
            try expectWritesLand(engine, in: directory)
        }
    }

    /// A kernel that refuses to register the buffers (a seccomp filter on this thread answers
    /// ENOMEM, as the kernel does past RLIMIT_MEMLOCK): the engine says why once and writes
    /// from private copies.
    @Test func refusedBufferRegistrationFallsBackToCopies() throws {
        final class Outcome: @unchecked Sendable {
            var installed: Int32 = -1
            var features: RingFeatures?
            var refusals: [String] = []
            var error: String?
        }
        let outcome = Outcome()
        try withTemporaryDirectory { directory in
            onDedicatedThread {
                outcome.installed = wh_deny_io_uring_buffer_registration_in_this_thread(ENOMEM)
                do {
                    // Made, used and dropped on this thread: a single-issuer ring has one submitter.
                    let engine = try UringEngine()
                    outcome.features = engine.features
                    outcome.refusals = engine.refusals
                    try expectWritesLand(engine, in: directory)
                } catch {
                    outcome.error = "\(error)"
                }
            }
        }
        #expect(outcome.installed == 0)
        #expect(outcome.error == nil)
        #expect(outcome.features == .setup)
        #expect(outcome.refusals == ["registered buffers (io_uring_register: \(Errno.noMemory))"])
    }

    /// The worker loop sleeps in poll(2) on the ring's descriptor while a save is in flight: it
    /// must poll readable once the write completes (with IORING_SETUP_DEFER_TASKRUN it would
    /// not, and the loop would sleep to its heartbeat).
    @Test(arguments: featureSets)
    func theCompletionDescriptorWakesAPollerOnceAWriteCompletes(features: RingFeatures) throws {
        try withTemporaryDirectory { directory in
            let engine = try UringEngine(features: features)
            let file = try engine.open(directory.appending("journal"), .create)
            defer { engine.close(file) }
            let ticket = engine.submit([.write(file, [UInt8](repeating: 7, count: 512), offset: 0, durable: true)])
            try engine.flush()
            var descriptor = pollfd(fd: try #require(engine.completionDescriptor), events: Int16(POLLIN), revents: 0)
            let started = monotonicNanoseconds()
            let ready = poll(&descriptor, 1, 10_000)
            #expect(ready == 1 && descriptor.revents & Int16(POLLIN) != 0)
            #expect(monotonicNanoseconds() - started < 5_000_000_000, "woken by the completion, not the timeout")
            #expect(try engine.reap(waiting: false).map(\.ticket) == [ticket], "ready without another wait")
        }
    }
}

/// Writes through `engine` in `directory`: 20 small durable writes in flight at once (more than
/// the registered buffers), one larger than a buffer, to a direct file and a buffered one; all
/// read back, and the pool is whole again.
private func expectWritesLand(_ engine: UringEngine, in directory: FilePath) throws {
    for direct in [true, false] {
        let file = try engine.open(directory.appending(direct ? "direct" : "buffered"), .create)
        defer { engine.close(file) }
        var block = 512
        if direct, case .success(let alignment) = engine.enableDirectWrites(file) { block = alignment.block }
        let small = (0..<20).map { index in [UInt8](repeating: UInt8(index + 1), count: block) }
        let large = (0..<(Limits.ringRegisteredBufferBytes + 4 * block)).map { UInt8(truncatingIfNeeded: $0 * 31) }
        var chains = small.enumerated().map { index, bytes in
            [IOOperation.write(file, bytes, offset: index * block, durable: true)]
        }
        chains.append([.write(file, large, offset: small.count * block, durable: true)])
        let tickets = Set(chains.map { engine.submit($0) })
        try engine.flush()
        var done: Set<IOTicket> = []
        while done.count < tickets.count {
            for completion in try engine.reap(waiting: true) {
                try completion.result.get()
                done.insert(completion.ticket)
            }
        }
        #expect(done == tickets)
        // Read through a descriptor of its own: a direct file's reads need aligned memory.
        let reader = try engine.open(directory.appending(direct ? "direct" : "buffered"), .read)
        defer { engine.close(reader) }
        #expect(try engine.read(reader, offset: 0, count: small.count * block) == Array(small.joined()))
        #expect(try engine.read(reader, offset: small.count * block, count: large.count) == large)
        #expect(engine.pool.map { $0.freeCount == $0.count } ?? true, "every registered buffer given back")
    }
}
