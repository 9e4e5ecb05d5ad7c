import CLinuxShims
import CTestShims
import Glibc
import IOUring
import SystemPackage
import Testing

/// A ring, or the kernel's refusal checked to be the typed `.unavailable`; nil when refused.
private func makeRing(entries: UInt32 = 8) throws -> Ring? {
    do {
        return try Ring(entries: entries)
    } catch .unavailable(let errno) {
        // The sandbox or kernel refuses io_uring: say so, and check the refusal is typed.
        print("io_uring refused here (\(errno)); checked that the refusal is reported as .unavailable")
        #expect(errno == .notPermitted || errno == .noFunction)
        return nil
    }
}

/// Runs `body` with a ring (unless io_uring is refused) and a new temporary file, removed after.
private func withRingAndFile(entries: UInt32 = 8, _ body: (Ring, FileDescriptor) throws -> Void) throws {
    guard let ring = try makeRing(entries: entries) else { return }
    var template = Array("/tmp/windowhost-ring-XXXXXX".utf8CString)
    let fd = FileDescriptor(rawValue: mkstemp(&template))
    try #require(fd.rawValue >= 0)
    defer {
        try? fd.close()
        _ = unlink(template)
    }
    try body(ring, fd)
}

/// Waits until `count` completions have arrived.
private func collect(_ count: Int, from ring: Ring) throws -> [Completion] {
    var completions = ring.completions()
    while completions.count < count { completions += try ring.submitAndWait() }
    return completions.sorted { $0.userData < $1.userData }
}

@Suite struct RingTests {
    @Test func writeAndFdatasyncCompleteAndTheBytesReadBack() throws {
        try withRingAndFile { ring, fd in
            try ring.require([.write, .fsync])
            let payload = Array("a durable session record".utf8)
            try payload.withUnsafeBytes { buffer in
                try ring.prepareWrite(fd: fd, buffer: buffer, offset: 0, userData: 1)
                try ring.prepareFsync(fd: fd, dataOnly: true, userData: 2)
                try ring.submit(waitFor: 2)
                #expect(
                    try collect(2, from: ring)
                        == [Completion(userData: 1, result: Int32(payload.count)), Completion(userData: 2, result: 0)])
            }
            var readBack = [UInt8](repeating: 0, count: payload.count)
            let read = try readBack.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: 0, into: $0) }
            #expect(read == payload.count)
            #expect(readBack == payload)
        }
    }

    @Test func dsyncWriteAtAnOffsetCompletesWithItsByteCount() throws {
        try withRingAndFile { ring, fd in
            let payload = [UInt8](repeating: 0xAB, count: 256)
            try payload.withUnsafeBytes { buffer in
                try ring.prepareWrite(fd: fd, buffer: buffer, offset: 4096, userData: 7, dsync: true)
                try ring.submit(waitFor: 1)
                #expect(try collect(1, from: ring) == [Completion(userData: 7, result: 256)])
            }
            #expect(try fd.seek(offset: 0, from: .end) == 4096 + 256)
        }
    }

    @Test func moreEntriesThanTheQueueHoldsAreAllSubmitted() throws {
        try withRingAndFile(entries: 4) { ring, fd in
            let payload = [UInt8](repeating: 1, count: 64)
            try payload.withUnsafeBytes { buffer in
                for index in 0..<19 {
                    try ring.prepareWrite(fd: fd, buffer: buffer, offset: UInt64(index * 64), userData: UInt64(index))
                }
                try ring.submit()
                let completions = try collect(19, from: ring)
                #expect(completions.map(\.userData) == Array(0..<19))
                #expect(completions.allSatisfy { $0.result == 64 })
            }
        }
    }

    @Test func setupErrorsAreTypedRefusalsOrFailures() {
        #expect(IOUringError(setupErrno: .notPermitted) == .unavailable(.notPermitted))
        #expect(IOUringError(setupErrno: .noFunction) == .unavailable(.noFunction))
        #expect(IOUringError(setupErrno: .invalidArgument) == .setupFailed(.invalidArgument))
        // A ring of zero entries is refused by the kernel (or io_uring is refused altogether).
        do {
            _ = try Ring(entries: 0)
            Issue.record("a ring of 0 entries was accepted")
        } catch {
            switch error {
            case .setupFailed(let errno): #expect(errno == .invalidArgument)
            case .unavailable: break
            default: Issue.record("unexpected error \(error)")
            }
        }
    }
}

/// Runs `body` on a thread of its own and waits for it: a seccomp filter installed there binds
/// that thread only, never the test runner's shared threads.
func onDedicatedThread(_ body: @escaping @Sendable () -> Void) {
    final class Work {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let work = Unmanaged.passRetained(Work(body)).toOpaque()
    let created = pthread_create(
        &thread, nil,
        { argument in
            Unmanaged<Work>.fromOpaque(argument!).takeRetainedValue().body()
            return nil
        }, work)
    #expect(created == 0)
    pthread_join(thread, nil)
}

@Suite struct RefusalTests {
    /// A sandbox that refuses io_uring, made real with a seccomp filter on one thread: the ring
    /// reports the refusal as `.unavailable` with the errno the sandbox chose.
    @Test(arguments: [EPERM, ENOSYS])
    func aSandboxRefusalIsReportedAsUnavailable(errnoValue: Int32) {
        final class Outcome: @unchecked Sendable {
            var error: IOUringError?
            var installed: Int32 = -1
        }
        let outcome = Outcome()
        onDedicatedThread {
            outcome.installed = wh_deny_io_uring_in_this_thread(errnoValue)
            do throws(IOUringError) {
                _ = try Ring(entries: 8)
            } catch {
                outcome.error = error
            }
        }
        #expect(outcome.installed == 0)
        #expect(outcome.error == .unavailable(Errno(rawValue: errnoValue)))
    }
}
