import ArgumentParser
import BrowserModel
import Foundation
import Histogram
import IOUring
import Platform
import SessionFormat
import SessionStore
import SystemPackage

/// Shows the session store at work: seeded browsing in one window's regular and incognito
/// Browsers saved after the seed's policy (a delayed save, then background), a lazy restore
/// checked against the live window, and a damaged snapshot recovered from the generation
/// before without losing a save.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Browse at random, save after the seed's policy, restore lazily, survive a damaged file.")

    @Option(help: "Directory to keep the sessions in (default: a temporary one, removed afterwards).")
    var root: String?

    @Option(help: "Seed of the random browsing; the same seed gives the same run.")
    var seed: UInt64 = 1

    @Option(help: "Commands to apply.")
    var commands: UInt64 = 300

    @Option(help: "Delay of the delayed save (cases 3 and 4), in milliseconds; 0 saves every change at once.")
    var saveDelay: UInt64 = 500

    @OptionGroup var io: IOOptions

    func validate() throws {
        guard commands >= 2 else { throw ValidationError("--commands must be at least 2") }
    }

    func run() throws {
        StopSignals.install()
        let rootPath =
            try root.map { try PrivateFiles.checkedRootOrExit(FilePath($0)) }
            ?? PrivateFiles.makeTemporaryDirectory(prefix: "windowhost-demo")
        defer {
            if root == nil {
                PrivateFiles.forgetTemporaryRootKeys(rootPath)
                try? FileManager.default.removeItem(atPath: rootPath.string)
            }
        }
        let engine = try io.makeEngine()
        let window = UUID()
        print(
            "windowhost demo (seed \(seed), engine \(engine.name), save delay \(saveDelay) ms): window \(window.uuidString) under \(rootPath)"
        )

        // Small thresholds, so a short demo compacts and keeps a generation to fall back to.
        let options = StoreOptions(compactAfterRecords: max(8, Int(commands) / 6))
        let store = WindowStore(
            root: rootPath, windowID: window, engine: engine, options: options, saveDelayMilliseconds: saveDelay)
        _ = try store.recover()
        var regular = RandomBrowsing(seed: seed, maxTabs: 25)
        var incognito = RandomBrowsing(seed: seed &+ 1, maxTabs: 8)
        var random = SeededGenerator(seed: seed &+ 2)
        let start = monotonicNanoseconds()
        var saves: [String] = []
        for seq in 1...commands {
            let useIncognito = Int.random(in: 0..<5, using: &random) == 0
            let browser = useIncognito ? store.incognito : store.regular
            let did = try store.apply(seq: seq) {
                useIncognito
                    ? try incognito.step(browser.webStateList, profile: browser.profile)
                    : try regular.step(browser.webStateList, profile: browser.profile)
            }
            if seq <= 5 { print("  #\(seq) \(browser.kind): \(did)") }
            saves += try store.poll().map { describe($0, since: start) }
            usleep(5_000)
            try StopSignals.stopIfAsked("demo")
        }
        print("  …")
        for line in saves { print(line) }
        print("background (case 1): save now, the pending delayed save cancelled")
        try store.background()
        try store.waitUntilDurable(commands)
        try store.settle()
        print("  durable through command \(store.durableSeq)")
        let live = try contents(store)
        print(
            "live: regular \(live.regular.tabs.count) tabs, incognito \(live.incognito.tabs.count) tabs; "
                + "\(store.savesCompleted) saves, latency request → durable p50 \(store.saveLatency.valueAtPercentile(50)) µs, "
                + "p99 \(store.saveLatency.valueAtPercentile(99)) µs, max \(store.saveLatency.max) µs")

        let restored = WindowStore(root: rootPath, windowID: window, engine: engine)
        let recovery = try restored.recover()
        let unrealized = restored.regular.webStateList.webStates.filter { !$0.isRealized }.count
        let equal = try contents(restored) == live
        print(
            "restored: \(restored.regular.webStateList.count) regular tabs, \(unrealized) unrealized; "
                + "generation \(recovery.regular.generation) + \(recovery.regular.replayedRecords) journal records; "
                + "restored == live, every history compared: \(equal ? "yes" : "NO")")

        let damagedEqual = try damageNewestSnapshot(rootPath, window: window, engine: engine, live: live)
        guard equal, damagedEqual else {
            print("FAILED: a restored window differs from the live one")
            throw ExitCode(.checkFailed)
        }
        print("nothing acknowledged was lost")
    }

    /// Flips a byte in the regular Browser's newest snapshot and recovers: the file is set aside
    /// and the generation before plus both journals give the same window.
    private func damageNewestSnapshot(_ root: FilePath, window: UUID, engine: any IOEngine, live: Contents) throws
        -> Bool
    {
        let directory = DiskLayout.browserDirectory(root: root, id: window, kind: .regular)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.string).filter {
            $0.hasPrefix(DiskLayout.snapshotPrefix)
        }.sorted()
        guard names.count >= 2, let newest = names.last else {
            print("damage: only one snapshot generation so far; run more --commands to see the fallback")
            return true
        }
        let path = directory.appending(newest).string
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[Framing.fileHeaderSize + 20] ^= 0x40
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let store = WindowStore(root: root, windowID: window, engine: engine)
        let recovery = try store.recover()
        for damaged in recovery.regular.damaged { print("damage: \(damaged)") }
        let equal = try contents(store) == live
        print("  fell back to generation \(recovery.regular.generation): restored == live: \(equal ? "yes" : "NO")")
        return equal && recovery.regular.fellBack
    }

    private func describe(_ event: SaveEvent, since start: UInt64) -> String {
        let at = (monotonicNanoseconds() - start) / 1_000_000
        return switch event {
        case .durable(let seq): "  +\(at) ms: durable through command \(seq)"
        case .failed(let error): "  +\(at) ms: save failed: \(error)"
        case .recovered(let browser, let attempts):
            "  +\(at) ms: \(browser.rawValue) saves work again after \(attempts) failures"
        case .compactionFailed(let error): "  +\(at) ms: compaction failed: \(error)"
        case .compactionRecovered(let browser): "  +\(at) ms: \(browser.rawValue) compaction works again"
        case .deletedIncognito: "  +\(at) ms: last incognito tab closed: its session deleted, its key revoked"
        case .discardedIncognito(let reason): "  +\(at) ms: the incognito session on disk was deleted: \(reason)"
        case .incognitoInMemoryOnly(let reason): "  +\(at) ms: incognito kept in memory only: \(reason)"
        case .incognitoKeyNotRevoked(let reason): "  +\(at) ms: the incognito key was not revoked: \(reason)"
        case .degradedTab(let browser, let tab, let reason):
            "  +\(at) ms: \(browser.rawValue) tab \(tab) kept its current page only: \(reason)"
        case .damagedFallback(let browser, let damaged):
            "  +\(at) ms: \(browser.rawValue) fallback generation held a damaged file: \(damaged)"
        }
    }

    private struct Contents: Equatable {
        let regular: TabListContents
        let incognito: TabListContents
    }

    private func contents(_ store: WindowStore) throws -> Contents {
        Contents(
            regular: try TabListContents(store.regular.webStateList, realizing: true),
            incognito: try TabListContents(store.incognito.webStateList, realizing: true))
    }
}
