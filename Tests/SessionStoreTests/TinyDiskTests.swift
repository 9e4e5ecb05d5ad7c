import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// A disk with room for the window's tabs but not for two preallocated journals (a 2 MiB tmpfs
/// and the default 1.1 MB preallocation): the second Browser's session could never be created,
/// and its saves failed forever while the first Browser's went on (hostile round). A journal the
/// disk has no room to preallocate is created with its header only and grows by its appends.
@Suite struct TinyDiskTests {
    static let options = StoreOptions(
        compactAfterRecords: 8, compactAfterBytes: 1 << 20, journalPreallocation: 16 << 10)

    @Test func bothBrowsersSaveOnADiskWithRoomForOnlyOnePreallocatedJournal() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        // Below two preallocated journals (32 KiB); 28 KiB until format 2, whose fixed-width
        // entries make a 12-tab snapshot about 300 bytes larger.
        engine.capacity = 30 << 10
        var seq: UInt64 = 0
        let live: WindowContents
        do {
            let (store, _) = try simulatedWindow(engine, options: Self.options)
            // Past a compaction threshold in each Browser: new generations on the tiny disk too.
            for page in 1...12 {
                for browser in [store.regular, store.incognito] {
                    seq += 1
                    try store.apply(seq: seq) {
                        try LeftOutSaveTests.open("https://tiny.example/\(browser.kind)/\(page)", in: browser)
                    }
                    try store.waitUntilDurable(seq)
                    #expect(store.durableSeq == seq)
                }
            }
            live = try WindowContents(store)
        }
        engine.processKilled()
        let (restored, recovery) = try simulatedWindow(engine, options: Self.options)
        #expect(recovery.seq == seq)
        #expect(try WindowContents(restored) == live)
    }

    /// A worker restarted on a disk that filled, with room back for its appends and less than a
    /// preallocation: its new store has forgotten that journals grow by append (that lasts for a
    /// store's life) and writes a spare, which takes the room the next append needs. The append
    /// refused goes again at once into the room the spare gives up: no save fails (before, one
    /// did at each restart, `ctl save --wait` answering 74). Chains run in order. (On a ring
    /// whose first compaction after the restart lands its new journal's zeros before the save's
    /// append, that save fails once per Browser and its retry lands: a known limit.)
    @Test func aRestartOnAFullDiskFailsNoSave() throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        engine.capacity = 30 << 10
        var seq: UInt64 = 0
        var failures: [String] = []
        func browse(_ store: WindowStore, pages: ClosedRange<Int>) throws {
            for page in pages {
                for browser in [store.regular, store.incognito] {
                    seq += 1
                    try store.apply(seq: seq) {
                        try LeftOutSaveTests.open("https://tiny.example/\(browser.kind)/\(page)", in: browser)
                    }
                    do {
                        try store.waitUntilDurable(seq)
                    } catch {
                        failures.append("save \(seq): \(error)")
                        try store.waitUntilDurable(seq)
                    }
                }
            }
        }
        do {
            let (store, _) = try simulatedWindow(engine, options: Self.options)
            try browse(store, pages: 1...12)
            try #require(!store.stores[0].preallocatesJournals, "the disk filled: journals grow by append")
        }
        engine.capacity = totalBytes(engine) + (8 << 10)
        engine.processKilled()
        let (restarted, _) = try simulatedWindow(engine, options: Self.options)
        #expect(restarted.stores[0].preallocatesJournals, "a new store preallocates again")
        try browse(restarted, pages: 13...20)
        #expect(failures.isEmpty, "\(failures)")
        let live = try WindowContents(restarted)
        engine.processKilled()
        let (restored, recovery) = try simulatedWindow(engine, options: Self.options)
        #expect(recovery.seq == seq)
        #expect(try WindowContents(restored) == live)
    }
}
