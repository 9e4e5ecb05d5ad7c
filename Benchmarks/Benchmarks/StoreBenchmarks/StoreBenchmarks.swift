import Benchmark
import BrowserModel
import Foundation
import IOUring
import SessionFormat
import SessionStore
import SystemPackage

// The write path, each contender measured in the same run on the same disk, so the figures
// read as ratios (docs/benchmarks.md):
// - floor: one 256-byte append with RWF_DSYNC into a preallocated file, the physical limit of a
//   durable save (one flush);
// - a durable save of a one-tab change (a navigation) through the store, on each engine;
// - rewrite: what both mobile browsers do, the whole session rewritten atomically on every save
//   (tmp, fdatasync, rename, directory fsync), blocking;
// - group commit: 16 save requests pending when the write starts, one write for all.
// Files go under $WINDOWHOST_BENCH_DIR, else the current directory: /tmp may be tmpfs elsewhere.

private let benchDirectory: FilePath = {
    let base = ProcessInfo.processInfo.environment["WINDOWHOST_BENCH_DIR"] ?? FileManager.default.currentDirectoryPath
    let path = "\(base)/.windowhost-bench-\(getpid())"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return FilePath(path)
}()

/// A new directory for one benchmark under the bench directory; `removeDirectory` drops it.
private func freshDirectory(_ name: String) -> FilePath {
    let path = benchDirectory.appending(name)
    try? FileManager.default.removeItem(atPath: path.string)
    try? FileManager.default.createDirectory(atPath: path.string, withIntermediateDirectories: true)
    return path
}

private func removeDirectory(_ path: FilePath) {
    try? FileManager.default.removeItem(atPath: path.string)
    _ = rmdir(benchDirectory.string)
}

/// A window with `tabs` tabs, saved, on `engine`: what each save benchmark appends to.
private func savedWindow(_ engine: any IOEngine, tabs: Int, in directory: FilePath) throws -> WindowStore {
    let store = WindowStore(root: directory, windowID: UUID(), engine: engine, saveDelayMilliseconds: 0)
    _ = try store.recover()
    let list = store.regular.webStateList
    try store.apply(seq: 1) {
        for index in 0..<tabs {
            var history = NavigationHistory()
            history.commit(NavigationItem(url: "https://site\(index).example/", title: "Site \(index)", timestamp: Timestamp(microsecondsSinceEpoch: 1)))
            _ = try list.insert(WebState(id: store.regular.profile.makeWebStateID(), creationTime: .zero, history: history))
        }
        try list.activate(at: 0)
    }
    try store.waitUntilDurable(1)
    return store
}

/// One navigation in the active tab, as command `seq`.
private func navigate(_ store: WindowStore, seq: UInt64) throws {
    try store.apply(seq: seq) {
        try store.regular.webStateList.activeWebState?.commitNavigation(
            to: NavigationItem(url: "https://example.com/\(seq)", title: "Page \(seq)", timestamp: Timestamp(microsecondsSinceEpoch: Int64(seq))))
    }
}

private func engine(_ name: String) throws -> any IOEngine {
    name == "uring" ? try UringEngine() : SyncEngine()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput], timeUnits: .microseconds, maxDuration: .seconds(4), maxIterations: 2_000)

    Benchmark("floor: 256 B append, RWF_DSYNC, preallocated") { benchmark in
        let engine = SyncEngine()
        let directory = freshDirectory("floor")
        let file = try engine.open(directory.appending("log"), creating: true)
        let size = 4 << 20
        _ = try engine.perform([.write(file, [UInt8](repeating: 0, count: size), offset: 0, durable: false), .sync(file)])
        let record = [UInt8](repeating: 0x5A, count: 256)
        var offset = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            _ = try engine.perform([.write(file, record, offset: offset, durable: true)])
            offset = (offset + 256) % size
        }
        benchmark.stopMeasurement()
        engine.close(file)
        removeDirectory(directory)
    }

    for name in ["uring", "sync"] {
        Benchmark("\(name): one durable save of a navigation (20-tab window)") { benchmark in
            let directory = freshDirectory("one-\(name)")
            defer { removeDirectory(directory) }
            let store = try savedWindow(try engine(name), tabs: 20, in: directory)
            var seq: UInt64 = 1
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                seq += 1
                try navigate(store, seq: seq)
                try store.waitUntilDurable(seq)
            }
            benchmark.stopMeasurement()
        }

        Benchmark("\(name): group commit, 16 saves per write (20-tab window)", configuration: .init(scalingFactor: .one)) {
            benchmark in
            let directory = freshDirectory("group-\(name)")
            defer { removeDirectory(directory) }
            let store = try savedWindow(try engine(name), tabs: 20, in: directory)
            var seq: UInt64 = 1
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                for _ in 0..<16 {
                    seq += 1
                    try navigate(store, seq: seq)
                }
                try store.waitUntilDurable(seq)
            }
            benchmark.stopMeasurement()
        }
    }

    Benchmark("rewrite: atomic rewrite of the 20-tab session per save (tmp, fdatasync, rename, dir fsync)") { benchmark in
        let engine = SyncEngine()
        let directory = freshDirectory("rewrite")
        defer { removeDirectory(directory) }
        let profile = Profile(stateDirectory: directory)
        let list = WebStateList()
        for index in 0..<20 {
            var history = NavigationHistory()
            history.commit(NavigationItem(url: "https://site\(index).example/", title: "Site \(index)", timestamp: Timestamp(microsecondsSinceEpoch: 1)))
            _ = try list.insert(WebState(id: profile.makeWebStateID(), creationTime: .zero, history: history), InsertionParams(activate: index == 0))
        }
        var seq: UInt64 = 1
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            seq += 1
            try list.activeWebState?.commitNavigation(
                to: NavigationItem(url: "https://example.com/\(seq)", title: "Page \(seq)", timestamp: Timestamp(microsecondsSinceEpoch: Int64(seq))))
            let bytes = try SnapshotEncoder.encode(list, lastCommandSeq: seq) { (_: WebState) throws(SessionFormatError) -> [UInt8] in [] }
            let temporary = directory.appending("session.tmp")
            let file = try engine.open(temporary, creating: true)
            _ = try engine.perform([.write(file, bytes, offset: 0, durable: false), .sync(file)])
            engine.close(file)
            try engine.rename(temporary, to: directory.appending("session"))
            try engine.syncDirectory(directory)
        }
        benchmark.stopMeasurement()
    }
}
