import BrowserModel
import IOUring
import SessionFormat
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// A session's first generation says its list was empty through the window's seq then. It was
/// written once, so a damaged copy left recovery nothing to start the journal after it from.
/// Generation 1 was taken for empty, but an incognito session created again (its last tab
/// closed, then a new one opened) starts above 1, and its acknowledged tabs were lost with one
/// flipped byte (hostile round 5: `wait-durable` said 5, the incognito Browser came back empty).
/// The first generation now goes down twice, like every snapshot no older generation reaches.
@Suite struct FirstGenerationTests {
    static let incognitoDirectory = LeftOutSaveTests.regularDirectory.removingLastComponent().appending(
        BrowserKind.incognito.rawValue)

    enum Session: CaseIterable {
        /// The window's first incognito session.
        case first
        /// An incognito session created again after its last tab closed.
        case createdAgain
    }

    @Test(arguments: Session.allCases)
    func aDamagedFirstSnapshotLosesNoAcknowledgedTab(session: Session) throws {
        let engine = FaultEngine(directories: [simulatedRoot])
        var seq: UInt64 = 0
        let live: WindowContents
        do {
            let (store, _) = try simulatedWindow(engine, options: RepairFromMemoryTests.options)
            func command(_ body: () throws -> Void) throws { try RepairFromMemoryTests.command(store, &seq, body) }
            try command { try LeftOutSaveTests.open("https://regular.example/", in: store.regular) }
            if session == .createdAgain {
                for page in 1...2 {
                    try command {
                        try LeftOutSaveTests.open("https://incognito.example/old/\(page)", in: store.incognito)
                    }
                }
                try command { store.incognito.webStateList.closeAll() }
                #expect(try engine.kind(Self.incognitoDirectory) == nil, "the emptied session is deleted")
            }
            try command { try LeftOutSaveTests.open("https://incognito.example/acknowledged", in: store.incognito) }
            #expect(store.durableSeq == seq)
            live = try WindowContents(store)
        }
        let snapshots = try (engine.directoryEntries(Self.incognitoDirectory) ?? []).compactMap {
            DiskLayout.generation(of: $0, prefix: DiskLayout.snapshotPrefix)
        }.sorted()
        let newest = try #require(snapshots.last)
        if session == .createdAgain { #expect(newest > 1, "a session created again starts above generation 1") }
        let path = Self.incognitoDirectory.appending(DiskLayout.snapshotName(newest))
        var bytes = try #require(engine.contents(of: path))
        bytes[Framing.fileHeaderSize + 4] ^= 0x5A
        engine.overwrite(path, with: bytes)
        engine.processKilled()

        let (restored, recovery) = try simulatedWindow(engine, options: RepairFromMemoryTests.options)
        #expect(recovery.seq == seq, "\(recovery.incognito)")
        #expect(try WindowContents(restored) == live, "\(recovery.incognito)")
        #expect(!recovery.incognito.damaged.isEmpty, "the damaged snapshot is reported")
    }
}
