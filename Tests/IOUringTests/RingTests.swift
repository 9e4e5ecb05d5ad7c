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

private func temporaryFile() throws -> (FileDescriptor, FilePath) {
    var template = Array("/tmp/windowhost-ring-XXXXXX".utf8CString)
    let fd = mkstemp(&template)
    #expect(fd >= 0)
    let path = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
    return (FileDescriptor(rawValue: fd), path)
}

@Suite struct RingTests {
    @Test func linkedWriteThenFdatasyncCompletesAndPersistsTheBytes() throws {
        guard let ring = try makeRing() else { return }
        try ring.require([.write, .fsync])
        let (fd, path) = try temporaryFile()
        defer {
            try? fd.close()
            _ = unlink(path.string)
        }
        let payload = Array("a durable session record".utf8)
        try payload.withUnsafeBytes { buffer in
            try ring.prepareWrite(fd: fd, buffer: buffer, offset: 0, userData: 1, flags: .link)
            try ring.prepareFsync(fd: fd, dataOnly: true, userData: 2)
            try ring.submit(waitFor: 2)
            var completions = ring.completions()
            while completions.count < 2 { completions += try ring.waitCompletions() }
            #expect(completions.sorted { $0.userData < $1.userData }
                == [Completion(userData: 1, result: Int32(payload.count)), Completion(userData: 2, result: 0)])
        }
        var readBack = [UInt8](repeating: 0, count: payload.count)
        let read = try readBack.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: 0, into: $0) }
        #expect(read == payload.count)
        #expect(readBack == payload)
    }

    @Test func dsyncWriteAtAnOffsetCompletesWithItsByteCount() throws {
        guard let ring = try makeRing() else { return }
        let (fd, path) = try temporaryFile()
        defer {
            try? fd.close()
            _ = unlink(path.string)
        }
        let payload = [UInt8](repeating: 0xAB, count: 256)
        try payload.withUnsafeBytes { buffer in
            try ring.prepareWrite(fd: fd, buffer: buffer, offset: 4096, userData: 7, dsync: true)
            try ring.submit(waitFor: 1)
            #expect(try ring.waitCompletions() == [Completion(userData: 7, result: 256)])
        }
        var stat = stat()
        #expect(fstat(fd.rawValue, &stat) == 0)
        #expect(stat.st_size == 4096 + 256)
    }

    @Test func moreEntriesThanTheQueueHoldsAreAllSubmitted() throws {
        guard let ring = try makeRing(entries: 4) else { return }
        let (fd, path) = try temporaryFile()
        defer {
            try? fd.close()
            _ = unlink(path.string)
        }
        let payload = [UInt8](repeating: 1, count: 64)
        try payload.withUnsafeBytes { buffer in
            for index in 0..<19 {
                try ring.prepareWrite(fd: fd, buffer: buffer, offset: UInt64(index * 64), userData: UInt64(index))
            }
            try ring.submit()
            var completions: [Completion] = []
            while completions.count < 19 { completions += try ring.waitCompletions() }
            #expect(Set(completions.map(\.userData)) == Set(0..<19))
            #expect(completions.allSatisfy { $0.result == 64 })
        }
    }

    @Test func aFailedLinkCancelsTheRestOfTheChain() throws {
        guard let ring = try makeRing() else { return }
        let payload = [UInt8](repeating: 1, count: 16)
        let (fd, path) = try temporaryFile()
        defer {
            try? fd.close()
            _ = unlink(path.string)
        }
        try payload.withUnsafeBytes { buffer in
            // A closed descriptor number fails the write; the linked fsync must not run.
            try ring.prepareWrite(fd: FileDescriptor(rawValue: 1_000_000), buffer: buffer, offset: 0, userData: 1, flags: .link)
            try ring.prepareFsync(fd: fd, userData: 2)
            try ring.submit(waitFor: 2)
            var completions: [Completion] = []
            while completions.count < 2 { completions += try ring.waitCompletions() }
            let byData = Dictionary(uniqueKeysWithValues: completions.map { ($0.userData, $0) })
            #expect(byData[1]?.error == .badFileDescriptor)
            #expect(byData[2]?.error == .canceled)
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
