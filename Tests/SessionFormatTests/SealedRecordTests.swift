import BrowserModel
import Foundation
import HostLimits
import Testing

@testable import SessionFormat

/// Sealed files (issue 16): a snapshot and a journal whose records are AES-256-GCM boxes bound
/// to their window, Browser, file, generation, kind and offset. They read back exactly as the
/// clear ones do, hold no URL or title in the clear, and any change, move or other key is
/// refused as damage.
@Suite struct SealedRecordTests {
    static let window = UUID()
    static let key = (0..<32).map { UInt8($0 &* 7 &+ 3) }

    static func seal(
        _ kind: SessionFileKind, generation: UInt64 = 4, key: [UInt8] = key, window: UUID = window,
        browser: BrowserKind = .incognito
    )
        throws -> RecordSeal
    {
        RecordSeal(
            key: try RecordSeal.Key(key),
            file: RecordSeal.File(window: window, browser: browser, kind: kind, generation: generation))
    }

    /// Seeded browsing, every tab realized, as a snapshot in the clear and sealed.
    static func browsed(seed: UInt64 = 7) throws -> BrowsingSession {
        var session = BrowsingSession(seed: seed)
        try session.run(commands: 120)
        return session
    }

    static func urls(_ list: WebStateList) throws -> [String] {
        try TabListContents(list, realizing: true).tabs.flatMap { tab in (tab.history?.items ?? []).map(\.url) }.filter
        { $0.count > 8 }
    }

    static func contains(_ bytes: [UInt8], _ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard !needle.isEmpty, bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains {
            bytes[$0] == needle[0] && Array(bytes[$0..<($0 + needle.count)]) == needle
        }
    }

    @Test func aSealedSnapshotRestoresTheSameListAndHoldsNoURL() throws {
        let session = try Self.browsed()
        let seal = try Self.seal(.snapshot)
        let sealed = try SnapshotEncoder.encode(session.list, lastCommandSeq: 120, seal: seal) {
            _ throws(SessionFormatError) in []
        }
        let urls = try Self.urls(session.list)
        try #require(!urls.isEmpty)
        for url in urls { #expect(!Self.contains(sealed, url), "\(url) is in the clear") }
        let reader = try SnapshotReader(InMemoryBytes(sealed), seal: seal)
        #expect(reader.isSealed)
        let restored = WebStateList()
        try reader.restore(into: restored, profile: Profile(stateDirectory: "/unused"))
        #expect(try contents(restored) == contents(session.list))
        // Written again from what it restored, unrealized tabs' histories carried as payloads.
        let again = try SnapshotEncoder.encode(
            restored, lastCommandSeq: 121, seal: try Self.seal(.snapshot, generation: 5)
        ) {
            (tab) throws(SessionFormatError) in try reader.historyPayload(at: reader.index(of: tab.id) ?? -1)
        }
        let second = WebStateList()
        try SnapshotReader(InMemoryBytes(again), seal: try Self.seal(.snapshot, generation: 5)).restore(
            into: second, profile: Profile(stateDirectory: "/u"))
        #expect(try contents(second) == contents(session.list))
    }

    @Test func aSealedFileWithoutItsKeyIsSaidSo() throws {
        let session = try Self.browsed()
        let sealed = try SnapshotEncoder.encode(session.list, lastCommandSeq: 120, seal: try Self.seal(.snapshot)) {
            _ throws(SessionFormatError) in []
        }
        #expect(throws: SessionFormatError.sealedWithoutKey) { try SnapshotReader(InMemoryBytes(sealed)) }
        var journal = JournalFile.header(blockSize: 512, sealed: true)
        journal += try JournalRecord.frames(session.records, seal: try Self.seal(.journal), from: journal.count).flatMap
        { $0 }
        #expect(throws: SessionFormatError.sealedWithoutKey) { try JournalFile.scan(InMemoryBytes(journal)) }
    }

    /// Sessions written before sealing read as they are, key given or not: the upgrade path.
    @Test func aClearFileReadsWithAKeyGiven() throws {
        let session = try Self.browsed()
        let clear = try SnapshotEncoder.encode(session.list, lastCommandSeq: 120) { _ throws(SessionFormatError) in [] }
        let reader = try SnapshotReader(InMemoryBytes(clear), seal: try Self.seal(.snapshot))
        #expect(!reader.isSealed)
        let restored = WebStateList()
        try reader.restore(into: restored, profile: Profile(stateDirectory: "/unused"))
        #expect(try contents(restored) == contents(session.list))
        #expect(
            try JournalFile.decode(InMemoryBytes(session.journalBytes), seal: try Self.seal(.journal))
                == session.records)
    }

    /// The wrong key, window, Browser, generation or file kind: no record opens.
    @Test func anotherKeyOrFileOpensNothing() throws {
        let session = try Self.browsed()
        let sealed = try SnapshotEncoder.encode(session.list, lastCommandSeq: 120, seal: try Self.seal(.snapshot)) {
            _ throws(SessionFormatError) in []
        }
        let others = [
            try Self.seal(.snapshot, key: Self.key.map { $0 ^ 1 }), try Self.seal(.snapshot, window: UUID()),
            try Self.seal(.snapshot, browser: .regular), try Self.seal(.snapshot, generation: 5),
            try Self.seal(.journal),
        ]
        for other in others {
            #expect(throws: SessionFormatError.self) { try SnapshotReader(InMemoryBytes(sealed), seal: other) }
            do {
                _ = try SnapshotReader(InMemoryBytes(sealed), seal: other)
            } catch {
                guard case .unopenable = error else {
                    Issue.record("\(error)")
                    continue
                }
            }
        }
    }

    /// Every single-bit flip in a sealed snapshot, its frame's CRC made right again so only the
    /// seal can catch it: refused, or (in the framing's own bytes) caught as before.
    @Test func everyFlipInASealedRecordIsCaught() throws {
        var session = BrowsingSession(seed: 3)
        try session.run(commands: 12)
        let seal = try Self.seal(.snapshot)
        let sealed = try SnapshotEncoder.encode(session.list, lastCommandSeq: 12, seal: seal) {
            _ throws(SessionFormatError) in []
        }
        let expected = try contents(session.list)
        var offset = Framing.fileHeaderSize
        var payloads: [Range<Int>] = []
        while offset < sealed.count {
            let length = Int(sealed.littleEndian(UInt32.self, at: offset + 4))
            payloads.append((offset + Framing.recordHeaderSize)..<(offset + Framing.recordHeaderSize + length))
            offset += Framing.recordHeaderSize + length
        }
        var refused = 0
        for range in payloads {
            for position in range {
                var damaged = sealed
                damaged[position] ^= 0x01
                let frameStart = range.lowerBound - Framing.recordHeaderSize
                let crc = CRC32C.checksum(
                    damaged[range], continuing: CRC32C.checksum(damaged[frameStart..<(frameStart + 8)]))
                damaged.storeLittleEndian(crc, at: frameStart + 8)
                do {
                    let reader = try SnapshotReader(InMemoryBytes(damaged), seal: seal)
                    let list = WebStateList()
                    try reader.restore(into: list, profile: Profile(stateDirectory: "/unused"))
                    _ = try TabListContents(list, realizing: true)
                    Issue.record("a flip at byte \(position) went unnoticed")
                } catch let error as SessionFormatError {
                    guard case .unopenable = error else {
                        Issue.record("flip at \(position): \(error)")
                        continue
                    }
                    refused += 1
                } catch {
                    // Realizing a tab whose history did not open fails the same way.
                    refused += 1
                }
            }
        }
        #expect(refused == payloads.reduce(0) { $0 + $1.count })
        #expect(try contents(session.list) == expected)
    }

    /// A record moved to another place (two tabs' history frames swapped) does not open there,
    /// though each is a whole, valid box.
    @Test func swappedRecordsDoNotOpen() throws {
        // Two tabs whose history frames are the same length, so the swap keeps the layout.
        let profile = Profile(stateDirectory: "/unused")
        let tabs = ["https://a.example/", "https://b.example/"].map { url in
            var history = NavigationHistory()
            history.commit(NavigationItem(url: url, title: "t", timestamp: Timestamp(microsecondsSinceEpoch: 9)))
            return WebState(
                id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 1), history: history)
        }
        let list = WebStateList()
        try list.restore(tabs.map { RestoredTab(webState: $0, opener: nil) }, activeIndex: 0, pinnedCount: 0)
        let seal = try Self.seal(.snapshot)
        let sealed = try SnapshotEncoder.encode(list, lastCommandSeq: 40, seal: seal) { _ throws(SessionFormatError) in
            []
        }
        let reader = try SnapshotReader(InMemoryBytes(sealed), seal: seal)
        let first = reader.item(at: 0)
        let second = reader.item(at: 1)
        try #require(first.historyLength == second.historyLength)
        #expect(throws: Never.self) { try reader.history(at: 0) }
        let sectionStart = sealed.count - (0..<reader.count).reduce(0) { $0 + reader.item(at: $1).historyLength }
        var swapped = sealed
        let a = (sectionStart + first.historyOffset)..<(sectionStart + first.historyOffset + first.historyLength)
        let b = (sectionStart + second.historyOffset)..<(sectionStart + second.historyOffset + second.historyLength)
        swapped.replaceSubrange(a, with: sealed[b])
        swapped.replaceSubrange(b, with: sealed[a])
        let damaged = try SnapshotReader(InMemoryBytes(swapped), seal: seal)
        for index in 0..<2 {
            #expect(throws: SessionFormatError.self) { try damaged.history(at: index) }
        }
    }

    /// A journal's mutation records are sealed where they land; commits and padding stay in
    /// the clear; a record copied from another journal (another generation) stops the scan.
    @Test func aSealedJournalReplaysAndRefusesARecordFromAnotherFile() throws {
        let session = try Self.browsed()
        let seal = try Self.seal(.journal)
        var journal = JournalFile.header(blockSize: 512, sealed: true)
        let frames = try JournalRecord.frames(session.records, seal: seal, from: journal.count)
        journal += frames.flatMap { $0 }
        journal += JournalCommit(seq: 120, browsers: BrowserKind.incognito.commitBit).frame
        for url in try Self.urls(session.list) { #expect(!Self.contains(journal, url), "\(url) is in the clear") }
        let scan = try JournalFile.scan(InMemoryBytes(journal), seal: seal)
        #expect(scan.sealed && scan.stoppedBy == nil)
        #expect(scan.records == session.records && scan.commits.count == 1)
        #expect(try contents(replay(scan.records)) == contents(session.list))

        // The same records sealed for generation 5, at the same offsets: each one is a valid
        // box, but not this file's.
        let elsewhere = try JournalRecord.frames(
            session.records, seal: try Self.seal(.journal, generation: 5),
            from: JournalFile.header(blockSize: 512, sealed: true).count)
        var mixed = JournalFile.header(blockSize: 512, sealed: true)
        mixed += frames[0]
        mixed += elsewhere[1]
        let stopped = try JournalFile.scan(InMemoryBytes(mixed), seal: seal)
        #expect(stopped.records.count == 1)
        guard case .unopenable(let offset, _)? = stopped.stoppedBy else {
            Issue.record("expected the foreign record refused: \(String(describing: stopped.stoppedBy))")
            return
        }
        #expect(offset == JournalFile.header(blockSize: 512, sealed: true).count + frames[0].count)
    }

    @Test func unknownHeaderFlagsAreRefused() throws {
        var header = Framing.fileHeader(.snapshot)
        header.storeLittleEndian(UInt32(2), at: 8)
        header.storeLittleEndian(CRC32C.checksum(header[0..<12]), at: 12)
        #expect(throws: SessionFormatError.unknownFileFlags(offset: 8, flags: 2)) {
            try SnapshotReader(InMemoryBytes(header))
        }
    }

    @Test func aKeyThatIsNot32BytesIsRefused() {
        for count in [0, 16, 31, 33, 64] {
            #expect(throws: SessionFormatError.self) { try RecordSeal.Key([UInt8](repeating: 1, count: count)) }
        }
    }
}
