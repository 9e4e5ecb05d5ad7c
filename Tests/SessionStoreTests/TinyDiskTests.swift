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
}
