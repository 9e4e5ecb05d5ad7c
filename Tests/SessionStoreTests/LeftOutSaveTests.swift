import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// A save recovery leaves out (never acknowledged: the other Browser did not make it durable)
/// stays committed in its journal. When that recovery also rebuilds the files from memory (the
/// newest snapshot was damaged), the new snapshot does not hold it, and the commands after it
/// reuse its seqs. If the new snapshot is damaged in turn, recovery falls back to the
/// generation before and replays the journals in between: the left-out save must not come
/// back there, or the window returns torn, or below what was acknowledged since (found by
/// `windowhost stress`: "came back … in a state that matches no prefix of its commands").
@Suite struct LeftOutSaveTests {
    static let regularDirectory = simulatedRoot.appending(DiskLayout.windows).appending(windowID.uuidString).appending(
        BrowserKind.regular.rawValue)

    static func page(_ url: String) -> NavigationItem {
        NavigationItem(url: url, title: url, timestamp: Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000))
    }

    static func open(_ url: String, in browser: Browser) throws {
        let tab = WebState(id: browser.profile.makeWebStateID(), creationTime: .zero)
        try tab.commitNavigation(to: page(url))
        try browser.webStateList.insert(tab, InsertionParams(activate: true))
    }

    static func snapshots(_ engine: FaultEngine) throws -> [UInt64] {
        try (engine.directoryEntries(regularDirectory) ?? []).compactMap {
            DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix)
        }.sorted()
    }

    /// The newest regular snapshot's metadata no longer reads: recovery sets it aside and
    /// falls back to the generation before.
    static func damageNewestSnapshot(_ engine: FaultEngine) throws {
        let newest = try #require(try snapshots(engine).last)
        let path = regularDirectory.appending(DiskLayout.snapshotName(newest))
        var bytes = try #require(engine.contents(of: path))
        bytes[Framing.fileHeaderSize + Framing.recordHeaderSize + 2] ^= 0x5A
        engine.overwrite(path, with: bytes)
    }

    @Test func aSaveLeftOutByARebuildingRecoveryNeverComesBack() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        let options = StoreOptions(compactAfterRecords: 4, compactAfterBytes: 1 << 20, journalPreallocation: 4 << 10)
        var seq: UInt64 = 0
        var live: WindowContents?
        do {
            let (store, _) = try simulatedWindow(engine, options: options)
            func command(_ body: () throws -> Void) throws {
                seq += 1
                try store.apply(seq: seq, body)
                try store.waitUntilDurable(seq)
            }
            try command { try Self.open("https://incognito.example/0", in: store.incognito) }
            // Until a compaction has just happened: two regular generations, the newest
            // journal empty, so the next save is an append.
            var page = 0
            while try Self.snapshots(engine).count < 2 || store.stores[0].journalRecords > 0 {
                page += 1
                try command { try Self.open("https://regular.example/\(page)", in: store.regular) }
            }
            // One save for two commands, one per Browser: the regular append lands with a commit
            // naming both, the incognito one fails. Never acknowledged.
            engine.failures[engine.operationCount + 2] = .ioError
            seq += 1
            store.apply(seq: seq) { try? Self.open("https://left-out.example/regular", in: store.regular) }
            seq += 1
            store.apply(seq: seq) { try? Self.open("https://left-out.example/incognito", in: store.incognito) }
            #expect(throws: StoreError.self) { try store.waitUntilDurable(seq) }
            #expect(store.durableSeq == seq - 2 && store.failingBrowsers == [.incognito])
        }
        // The worker is killed with the save on disk in the regular journal only, and the newest
        // regular snapshot damaged.
        try Self.damageNewestSnapshot(engine)
        seq -= 2
        do {
            let (store, recovery) = try simulatedWindow(engine, options: options)
            #expect(recovery.seq == seq)
            #expect(recovery.regular.damaged.count == 1, "\(recovery.regular)")
            #expect(!store.regular.webStateList.webStates.contains { $0.url.contains("left-out") })
            // The seqs left out name new commands now, acknowledged.
            seq += 1
            try store.apply(seq: seq) { try Self.open("https://acknowledged.example/1", in: store.regular) }
            try store.waitUntilDurable(seq)
            live = try WindowContents(store)
        }
        try Self.damageNewestSnapshot(engine)

        let (restored, recovery) = try simulatedWindow(engine, options: options)
        #expect(recovery.seq == seq, "\(recovery.regular)")
        #expect(try WindowContents(restored) == live)
        #expect(!restored.regular.webStateList.webStates.contains { $0.url.contains("left-out") })
    }
}
