import CLinuxShims
import CTestShims
import Glibc
import IOUring
import SystemPackage
import TestSupport
import Testing

@Suite struct EngineTests {
    /// Both real engines: chains run in order within one flush, several chains complete
    /// together, files are created 0600, and what was written durably reads back.
    @Test(arguments: ["uring", "sync"])
    func chainsOfOneFlushCompleteAndReadBack(name: String) throws {
        try withTemporaryDirectory { directory in
            let engine: any IOEngine = name == "uring" ? try UringEngine() : SyncEngine()
            let files = try (0..<8).map { try engine.open(directory.appending("file\($0)"), .create) }
            let tickets = files.enumerated().map { index, file in
                engine.submit([
                    .write(file, Array("first \(index) ".utf8), offset: 0, durable: false),
                    .write(file, Array("second".utf8), offset: 8, durable: true), .sync(file),
                ])
            }
            try engine.flush()
            var done: [IOTicket] = []
            while done.count < tickets.count {
                for completion in try engine.reap(waiting: true) {
                    try completion.result.get()
                    done.append(completion.ticket)
                }
            }
            #expect(Set(done) == Set(tickets))
            for (index, file) in files.enumerated() {
                #expect(try engine.read(file, offset: 0, count: 14) == Array("first \(index) second".utf8))
                var status = stat()
                #expect(stat(directory.appending("file\(index)").string, &status) == 0)
                #expect(status.st_mode & 0o777 == 0o600)
                engine.close(file)
            }
        }
    }

    /// A blocking call made while other chains are in flight (a directory sync inside a save)
    /// leaves their completions to the next `reap`, successes and failures alike; it took
    /// them, and a save waiting on one never finished.
    @Test(arguments: ["uring", "sync"])
    func aBlockingCallLeavesOtherChainsCompletionsToTheNextReap(name: String) throws {
        try withTemporaryDirectory { directory in
            let engine: any IOEngine = name == "uring" ? try UringEngine() : SyncEngine()
            let files = try (0..<4).map { try engine.open(directory.appending("file\($0)"), .create) }
            let directoryFile = try engine.openDirectory(directory)
            let writes = files.map { engine.submit([.write($0, Array("saved".utf8), offset: 0, durable: true)]) }
            let failing = engine.submit([.write(directoryFile, [1], offset: 0, durable: true)])
            try engine.perform([.sync(directoryFile)])
            var completions: [IOTicket: Bool] = [:]
            while completions.count < writes.count + 1, engine.hasCompletionsToReap || engine.inFlight > 0 {
                for completion in try engine.reap(waiting: true) {
                    completions[completion.ticket] = (try? completion.result.get()) != nil
                }
            }
            #expect(completions == Dictionary(uniqueKeysWithValues: writes.map { ($0, true) } + [(failing, false)]))
            #expect(!engine.hasCompletionsToReap && engine.inFlight == 0)
            for file in files { engine.close(file) }
            engine.close(directoryFile)
        }
    }

    /// A failing step stops its chain and comes back as a typed error naming the file.
    @Test(arguments: ["uring", "sync"])
    func aFailedStepEndsItsChainWithATypedError(name: String) throws {
        try withTemporaryDirectory { directory in
            let engine: any IOEngine = name == "uring" ? try UringEngine() : SyncEngine()
            // A directory descriptor cannot be written: EBADF or EISDIR, never a crash.
            let directoryFile = try engine.openDirectory(directory)
            let failure = try #require(
                performCapturing(
                    engine, [.write(directoryFile, [1, 2, 3], offset: 0, durable: true), .sync(directoryFile)]))
            #expect(failure.operation.contains("write") && failure.path == directory.string, "\(failure)")
            #expect(failure.errno == .badFileDescriptor || failure.errno == .isDirectory, "\(failure)")
            engine.close(directoryFile)
        }
    }

    /// `auto` in a sandbox that refuses io_uring (a seccomp filter on this thread) runs the
    /// blocking engine and says why; `uring` there is a clear error, not a crash.
    @Test func autoFallsBackToBlockingIOWhereIoUringIsRefused() {
        final class Outcome: @unchecked Sendable {
            var auto: (name: String, reason: IOUringError?)?
            var uring: IOEngineSelectionError?
        }
        let outcome = Outcome()
        onDedicatedThread {
            _ = wh_deny_io_uring_in_this_thread(EPERM)
            if let (engine, reason) = try? IOEngineChoice.auto.makeEngine() { outcome.auto = (engine.name, reason) }
            do throws(IOEngineSelectionError) {
                _ = try IOEngineChoice.uring.makeEngine()
            } catch {
                outcome.uring = error
            }
        }
        #expect(outcome.auto?.name == "sync")
        #expect(outcome.auto?.reason == .unavailable(.notPermitted))
        #expect(outcome.uring == .uringUnavailable(.unavailable(.notPermitted)))
    }

    @Test func theEnvironmentChoosesTheEngineAndRejectsUnknownNames() throws {
        #expect(try IOEngineChoice.fromEnvironment(nil) == .auto)
        #expect(try IOEngineChoice.fromEnvironment("sync") == .sync)
        #expect(throws: IOEngineSelectionError.unknownEngine("floppy")) { try IOEngineChoice.fromEnvironment("floppy") }
    }
}

/// Runs one chain and returns its error; nil (recorded as an issue) when it did not fail.
private func performCapturing(_ engine: any IOEngine, _ chain: [IOOperation]) -> IOEngineError? {
    do throws(IOEngineError) {
        try engine.perform(chain)
    } catch {
        return error
    }
    Issue.record("the chain did not fail")
    return nil
}
