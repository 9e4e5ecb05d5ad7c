import Foundation
import IOUring
import Platform
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// What the save loop asks of the file system, counted: load-independent, unlike a timing.
@Suite struct SaveCostTests {
    /// Placing the session directory before a new generation looks it up (one `fstatat` walk)
    /// instead of listing it, and the one listing a compaction needs (the old generations to
    /// remove) takes names as strings: a listing by `FilePath.Component` costs about a
    /// millisecond an entry in a debug build, and placing the directory twice per compaction
    /// by listing it made the debug save loop about 50% slower.
    @Test func compactionsListTheSessionDirectoryOnceAndNeverByComponent() throws {
        try withTemporaryDirectory { directory in
            let engine = CountingEngine(SyncEngine())
            let store = WindowStore(
                root: directory, windowID: windowID, engine: engine, options: StoreOptions(compactAfterRecords: 8),
                saveDelayMilliseconds: 0)
            _ = try store.recover()
            var browsing = WindowBrowsing(seed: 11)
            // The first save creates the session; counted from the second on.
            try browsing.step(store, seq: 1, incognito: false)
            try store.waitUntilDurable(1)
            engine.counts = [:]
            for seq in 2...80 as ClosedRange<UInt64> {
                // Regular only: deleting an empty incognito session lists it by component, rightly.
                try browsing.step(store, seq: seq, incognito: false)
                try store.waitUntilDurable(seq)
            }
            // Each compaction renames its snapshot into place once.
            let compactions = engine.counts["rename", default: 0]
            #expect(compactions >= 8, "79 saves with an 8-record threshold compact")
            #expect(engine.counts["listDirectory", default: 0] == 0)
            #expect(engine.counts["directoryEntries", default: 0] <= compactions)
        }
    }
}

/// An engine that counts the namespace calls made through it and passes everything on.
private final class CountingEngine: IOEngine {
    private let inner: any IOEngine
    var counts: [String: Int] = [:]

    init(_ inner: any IOEngine) { self.inner = inner }

    private func count(_ call: String) { counts[call, default: 0] += 1 }

    var name: String { inner.name }
    func submit(_ chain: [IOOperation]) -> IOTicket { inner.submit(chain) }
    func flush() throws(IOEngineError) { try inner.flush() }
    func reap(waiting: Bool) throws(IOEngineError) -> [IOCompletion] { try inner.reap(waiting: waiting) }
    func returnToReap(_ completions: [IOCompletion]) { inner.returnToReap(completions) }
    var hasCompletionsToReap: Bool { inner.hasCompletionsToReap }
    var inFlight: Int { inner.inFlight }
    var completionDescriptor: Int32? { inner.completionDescriptor }
    func open(_ path: FilePath, _ mode: OpenMode) throws(IOEngineError) -> EngineFile { try inner.open(path, mode) }
    func openDirectory(_ path: FilePath) throws(IOEngineError) -> EngineFile { try inner.openDirectory(path) }
    func close(_ file: EngineFile) { inner.close(file) }
    func enableDirectWrites(_ file: EngineFile) -> Result<DirectIO.Alignment, DirectIO.Refusal> {
        inner.enableDirectWrites(file)
    }
    func size(of file: EngineFile) throws(IOEngineError) -> Int { try inner.size(of: file) }
    func read(_ file: EngineFile, offset: Int, count: Int) throws(IOEngineError) -> [UInt8] {
        try inner.read(file, offset: offset, count: count)
    }
    func kind(_ path: FilePath) throws(IOEngineError) -> EntryKind? {
        count("kind")
        return try inner.kind(path)
    }
    func makeDirectory(_ path: FilePath) throws(IOEngineError) { try inner.makeDirectory(path) }
    func rename(_ source: FilePath, to destination: FilePath) throws(IOEngineError) {
        count("rename")
        try inner.rename(source, to: destination)
    }
    func removeFile(_ path: FilePath) throws(IOEngineError) { try inner.removeFile(path) }
    func removeDirectory(_ path: FilePath) throws(IOEngineError) { try inner.removeDirectory(path) }
    func listDirectory(_ path: FilePath) throws(IOEngineError) -> [(name: FilePath.Component, kind: EntryKind)]? {
        count("listDirectory")
        return try inner.listDirectory(path)
    }
    func directoryEntries(_ path: FilePath) throws(IOEngineError) -> [String]? {
        count("directoryEntries")
        return try inner.directoryEntries(path)
    }
    func removeTree(_ path: FilePath) throws(IOEngineError) { try inner.removeTree(path) }
    func isAt(_ file: EngineFile, _ path: FilePath) throws(IOEngineError) -> Bool { try inner.isAt(file, path) }
}
