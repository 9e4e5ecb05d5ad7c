import BrowserModel
import HostLimits
import Testing

@testable import SessionFormat

@Suite struct CRC32CTests {
    @Test func matchesTheStandardCheckValues() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        // RFC 3720 B.4 vectors.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map(UInt8.init)) == 0x46DD_794E)
    }

    @Test func continuingOverPiecesEqualsTheWhole() {
        var random = SeededGenerator(seed: 9)
        let bytes = (0..<1000).map { _ in UInt8.random(in: 0...255, using: &random) }
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let first = CRC32C.checksum(bytes[..<split])
            #expect(CRC32C.checksum(bytes[split...], continuing: first) == CRC32C.checksum(bytes), "split \(split)")
        }
    }
}

@Suite struct RoundTripTests {
    @Test(arguments: [11, 12, 13, 14] as [UInt64])
    func journalReplayRebuildsEveryState(seed: UInt64) throws {
        var session = BrowsingSession(seed: seed)
        try session.run(commands: 600)
        let records = try JournalFile.decode(InMemoryBytes(try session.journalBytes))
        #expect(records == session.records)
        let rebuilt = try replay(records)
        #expect(try contents(rebuilt) == contents(session.list))
        #expect(rebuilt.invariantViolations().isEmpty)
    }

    @Test(arguments: [21, 22, 23] as [UInt64])
    func snapshotRestoresUnrealizedTabsEqualToTheList(seed: UInt64) throws {
        var session = BrowsingSession(seed: seed)
        try session.run(commands: 400)
        let bytes = try snapshotBytes(session.list, seq: 400)
        let reader = try SnapshotReader(InMemoryBytes(bytes))
        #expect(reader.lastCommandSeq == 400)
        let restored = WebStateList()
        let profile = Profile(stateDirectory: "/unused")
        try reader.restore(into: restored, profile: profile)
        #expect(restored.webStates.allSatisfy { !$0.isRealized })
        #expect(zip(restored.webStates, session.list.webStates).allSatisfy { $0.metadata == $1.metadata })
        #expect(try contents(restored) == contents(session.list))
        // New identifiers never collide with restored ones.
        let newID = profile.makeWebStateID()
        #expect(restored.webStates.allSatisfy { $0.id < newID })
    }

    /// The store's restore path: snapshot at some command, then the journal records after it.
    @Test func snapshotPlusJournalTailEqualsTheFinalState() throws {
        var session = BrowsingSession(seed: 31)
        try session.run(commands: 300)
        let snapshot = try snapshotBytes(session.list, seq: 300)
        try session.run(commands: 300, firstSeq: 301)
        let tail = session.records.filter { $0.seq > 300 }

        let reader = try SnapshotReader(InMemoryBytes(snapshot))
        let restored = WebStateList()
        let profile = Profile(stateDirectory: "/unused")
        try reader.restore(into: restored, profile: profile)
        _ = try replay(tail, onto: restored, profile: profile)
        #expect(try contents(restored) == contents(session.list))

        // A second snapshot copies the histories of tabs that stayed unrealized, unread.
        let second = try snapshotBytes(restored, seq: 600, previous: reader)
        let again = WebStateList()
        try SnapshotReader(InMemoryBytes(second)).restore(into: again, profile: Profile(stateDirectory: "/unused"))
        #expect(try contents(again) == contents(session.list))
    }

    /// A recorder attached after restore journals moves, closes, pins and activations of
    /// unrealized tabs by identifier, without realizing them.
    @Test func recordingMutationsOfUnrealizedTabsKeepsThemUnrealized() throws {
        var session = BrowsingSession(seed: 61)
        try session.run(commands: 300)
        let snapshot = try snapshotBytes(session.list, seq: 300)
        let restored = WebStateList()
        let profile = Profile(stateDirectory: "/unused")
        try SnapshotReader(InMemoryBytes(snapshot)).restore(into: restored, profile: profile)
        try #require(restored.count >= 6)

        let recorder = JournalRecorder(list: restored)
        recorder.commandSeq = 301
        try restored.move(from: 0, to: restored.count - 1)
        try restored.activate(at: 2)
        try restored.setPinned(at: 3, !restored.isPinned(at: 3))
        try restored.close(at: 1)
        try restored.detach(at: 0).destroy()
        let records = try recorder.takeRecords()
        #expect(records.count == 5)
        #expect(restored.webStates.allSatisfy { !$0.isRealized })

        let again = WebStateList()
        try SnapshotReader(InMemoryBytes(snapshot)).restore(into: again, profile: Profile(stateDirectory: "/unused"))
        _ = try replay(records, onto: again)
        #expect(try contents(again) == contents(restored))
    }

    /// Format 1 reads the header and its one metadata record; format 2 the header, its index
    /// record and its one string record.
    @Test(arguments: [(1, 3), (2, 5)]) func restoreReadsOnlyMetadataUntilATabIsRealized(
        version: Int, metadataReads: Int
    ) throws {
        let profile = Profile(stateDirectory: "/unused")
        let list = WebStateList()
        for index in 0..<2_000 {
            var history = NavigationHistory()
            for step in 0..<3 {
                history.commit(
                    NavigationItem(url: "https://e.example/\(index)/\(step)", title: "T\(index)", timestamp: .zero))
            }
            try list.insert(
                WebState(id: profile.makeWebStateID(), creationTime: .zero, history: history),
                InsertionParams(activate: index == 1234))
        }
        let source = CountingSource(
            version == 1 ? try FormatOneSnapshot.encode(list, lastCommandSeq: 1) : try snapshotBytes(list, seq: 1))
        let reader = try SnapshotReader(source)
        #expect(reader.version == version)
        let restored = WebStateList()
        try reader.restore(into: restored, profile: Profile(stateDirectory: "/unused"))
        let metadataEnd = source.reads.map(\.upperBound).max() ?? 0
        #expect(source.reads.count == metadataReads)  // header, then each record's header and payload
        #expect(restored.webStates.allSatisfy { !$0.isRealized })

        source.reads.removeAll()
        let active = try #require(restored.activeWebState)
        #expect(try active.navigationHistory().currentItem?.url == "https://e.example/1234/2")
        #expect(source.reads.count == 1 && source.reads[0].lowerBound >= metadataEnd)
        #expect(restored.webStates.filter(\.isRealized).count == 1)
    }
}

@Suite struct CorruptionTests {
    /// Its snapshot in the format `version` (each format is read, so each is damaged).
    private static func sample(version: Int = SessionFileKind.snapshot.currentVersion) throws
        -> (session: BrowsingSession, snapshot: [UInt8], journal: [UInt8])
    {
        var session = BrowsingSession(seed: 41)
        try session.run(commands: 25)
        // A sample worth damaging: several tabs, histories, openers and many record kinds.
        #expect(session.list.count >= 3 && session.records.count >= 20, "sample: \(session.list.count) tabs")
        let snapshot =
            version == 1
            ? try FormatOneSnapshot.encode(session.list, lastCommandSeq: 25) : try snapshotBytes(session.list, seq: 25)
        #expect(try SnapshotReader(InMemoryBytes(snapshot)).version == version)
        return (session, snapshot, try session.journalBytes)
    }

    /// Decodes a snapshot fully: metadata, then every tab's history.
    private static func decodeSnapshot(_ bytes: [UInt8]) throws -> TabListContents {
        let list = WebStateList()
        try SnapshotReader(InMemoryBytes(bytes)).restore(into: list, profile: Profile(stateDirectory: "/unused"))
        return try contents(list)
    }

    private static func isTyped(_ error: any Error) -> Bool {
        error is SessionFormatError || error is SessionFormatError.InvalidState || error is WebStateError
    }

    @Test(arguments: [1, 2]) func everyByteFlipOfASnapshotIsRejected(version: Int) throws {
        let (session, snapshot, _) = try Self.sample(version: version)
        let expected = try contents(session.list)
        #expect(try Self.decodeSnapshot(snapshot) == expected)
        for position in snapshot.indices {
            for mask in [0x01, 0xFF] as [UInt8] {
                var damaged = snapshot
                damaged[position] ^= mask
                do {
                    let state = try Self.decodeSnapshot(damaged)
                    #expect(state == expected, "flip at \(position) gave a different state")
                } catch {
                    #expect(Self.isTyped(error), "flip at \(position): \(error)")
                }
            }
        }
    }

    @Test(arguments: [1, 2]) func everyTruncationOfASnapshotIsRejected(version: Int) throws {
        let (_, snapshot, _) = try Self.sample(version: version)
        for length in 0..<snapshot.count {
            #expect(throws: (any Error).self, "truncated to \(length)") {
                try Self.decodeSnapshot(Array(snapshot[..<length]))
            }
        }
    }

    @Test func everyByteFlipOfAJournalIsRejectedOrHarmless() throws {
        let (session, _, journal) = try Self.sample()
        let expected = try contents(session.list)
        for position in journal.indices {
            var damaged = journal
            damaged[position] ^= 0x5A
            do {
                let rebuilt = try replay(try JournalFile.decode(InMemoryBytes(damaged)))
                #expect(try contents(rebuilt) == expected, "flip at \(position) gave a different state")
            } catch {
                #expect(Self.isTyped(error), "flip at \(position): \(error)")
            }
        }
    }

    /// A journal cut anywhere reads as a clean prefix of its records up to the cut, and the
    /// scan says where it stopped and why.
    @Test func everyTruncationOfAJournalYieldsAPrefix() throws {
        let (session, _, journal) = try Self.sample()
        var boundaries = [Framing.fileHeaderSize]
        for record in session.records { boundaries.append(boundaries.last! + (try record.frame).count) }
        for length in 0..<journal.count {
            let source = InMemoryBytes(Array(journal[..<length]))
            guard length >= Framing.fileHeaderSize else {
                #expect(throws: SessionFormatError.self) { try JournalFile.scan(source) }
                continue
            }
            let scan = try JournalFile.scan(source)
            let complete = boundaries.lastIndex { $0 <= length }!
            #expect(scan.records == Array(session.records[..<complete]), "cut at \(length)")
            #expect(scan.validLength == boundaries[complete])
            #expect((scan.stoppedBy == nil) == (length == boundaries[complete]))
            if case .truncated = scan.stoppedBy {
            } else if scan.stoppedBy != nil {
                Issue.record("cut at \(length) stopped by \(String(describing: scan.stoppedBy))")
            }
        }
    }

    /// Seeded multi-byte damage beyond single flips: runs of random bytes, bytes inserted or
    /// removed, a length field set to something large. Each damaged file is refused with a typed
    /// error or reads as the original.
    @Test(arguments: [1, 2]) func seededRandomDamageIsRefusedOrHarmless(version: Int) throws {
        let (session, snapshot, journal) = try Self.sample(version: version)
        let expected = try contents(session.list)
        var random = SeededGenerator(seed: 71)
        func damage(_ bytes: [UInt8]) -> [UInt8] {
            var damaged = bytes
            let position = Int.random(in: 0..<damaged.count, using: &random)
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                let end = min(damaged.count, position + Int.random(in: 1...32, using: &random))
                for index in position..<end { damaged[index] = UInt8.random(in: 0...255, using: &random) }
            case 1:
                damaged.insert(
                    contentsOf: (0..<Int.random(in: 1...8, using: &random)).map { _ in
                        UInt8.random(in: 0...255, using: &random)
                    }, at: position)
            case 2:
                damaged.removeSubrange(position..<min(damaged.count, position + Int.random(in: 1...8, using: &random)))
            default:
                // A plausible-looking huge length where a record length may sit.
                let at = min(position, damaged.count - 4)
                damaged.replaceSubrange(at..<at + 4, with: [0xFF, 0xFF, 0xFF, 0x7F])
            }
            return damaged
        }
        for round in 0..<1_500 {
            do {
                #expect(try Self.decodeSnapshot(damage(snapshot)) == expected, "snapshot round \(round)")
            } catch {
                #expect(Self.isTyped(error), "snapshot round \(round): \(error)")
            }
            do {
                let rebuilt = try replay(try JournalFile.decode(InMemoryBytes(damage(journal))))
                #expect(try contents(rebuilt) == expected, "journal round \(round)")
            } catch {
                #expect(Self.isTyped(error), "journal round \(round): \(error)")
            }
        }
    }

    @Test func unknownVersionsAreNamed() throws {
        // A snapshot of a format after 2, or of none (0); a journal of a format after 1.
        for (kind, version) in [(SessionFileKind.snapshot, 3), (.snapshot, 0), (.snapshot, 0xFFFF), (.journal, 2)] {
            let header = Framing.fileHeader(kind, version: version)
            #expect(
                throws: SessionFormatError.unsupportedVersion(offset: 4, found: version, supported: kind.currentVersion)
            ) {
                if kind == .snapshot {
                    _ = try SnapshotReader(InMemoryBytes(header + [UInt8](repeating: 0, count: 64)))
                } else {
                    _ = try JournalFile.decode(InMemoryBytes(header))
                }
            }
        }
        // A record of a future version, checksum intact.
        var record = try Framing.record(.mutation, payload: [])
        record[3] = 9
        let recordCRC = CRC32C.checksum(record[0..<8])
        record.replaceSubrange(8..<12, with: withUnsafeBytes(of: recordCRC.littleEndian, Array.init))
        #expect(throws: SessionFormatError.unsupportedVersion(offset: 16 + 3, found: 9, supported: 1)) {
            try JournalFile.decode(InMemoryBytes(JournalFile.header + record))
        }
        #expect(throws: SessionFormatError.badMagic(offset: 0)) {
            try JournalFile.decode(InMemoryBytes(Framing.fileHeader(.snapshot)))
        }
    }

    /// Lists whose checksums are right but whose contents are impossible.
    @Test func impossibleIndicesAreTypedErrors() throws {
        func snapshot(_ edit: (inout ListStorage) -> Void) throws -> [UInt8] {
            var storage = ListStorage()
            var section: [UInt8] = []
            for id in [1, 2, 3] as [Int64] {
                let frame = try Framing.record(
                    .navigation,
                    payload: protobufBytes(
                        NavigationStorage(id: WebStateID(rawValue: id)!, history: NavigationHistory())))
                var item = ItemStorage()
                item.identifier = id
                item.historyOffset = UInt64(section.count)
                item.historyLength = UInt32(frame.count)
                storage.items.append(item)
                section += frame
            }
            storage.historySectionLength = UInt64(section.count)
            edit(&storage)
            var bytes = FormatOneSnapshot.header
            try Framing.appendRecord(.listMetadata, payload: protobufBytes(storage), to: &bytes)
            return bytes + section
        }
        let at = Framing.fileHeaderSize
        #expect(throws: Never.self) { try SnapshotReader(InMemoryBytes(try snapshot { _ in })) }
        #expect(throws: SessionFormatError.invalidState(offset: at, reason: .activeIndexOutOfRange(3, count: 3))) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.activeIndex = 3 }))
        }
        #expect(throws: SessionFormatError.invalidState(offset: at, reason: .activeIndexOutOfRange(-2, count: 3))) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.activeIndex = -2 }))
        }
        #expect(
            throws: SessionFormatError.invalidState(offset: at, reason: .openerOutOfRange(item: 1, opener: 7, count: 3))
        ) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.items[1].opener.index = 7 }))
        }
        #expect(
            throws: SessionFormatError.invalidState(offset: at, reason: .openerOutOfRange(item: 2, opener: 2, count: 3))
        ) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.items[2].opener.index = 2 }))
        }
        #expect(throws: SessionFormatError.invalidState(offset: at, reason: .duplicateIdentifier(1))) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.items[2].identifier = 1 }))
        }
        #expect(throws: SessionFormatError.invalidState(offset: at, reason: .invalidIdentifier(0))) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.items[0].identifier = 0 }))
        }
        // Above 2⁵³ − 1 an identifier is damage: counting up from it would trap or leave JSON's range.
        for identifier in [Int64.max, Limits.maxWebStateID + 1] {
            #expect(throws: SessionFormatError.invalidState(offset: at, reason: .invalidIdentifier(identifier))) {
                try SnapshotReader(InMemoryBytes(try snapshot { $0.items[0].identifier = identifier }))
            }
        }
        #expect(throws: SessionFormatError.invalidState(offset: at, reason: .pinnedCountOutOfRange(4, count: 3))) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.pinnedItemCount = 4 }))
        }
        #expect(throws: SessionFormatError.self) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.items[0].historyOffset = 1 << 40 }))
        }
        // Damage inside a history is reported at its offset in the file.
        let bytes = try snapshot { _ in }
        let reader = try SnapshotReader(InMemoryBytes(bytes))
        let lastFrameStart = bytes.count - Framing.recordHeaderSize - (try reader.historyPayload(at: 2)).count
        var damaged = bytes
        damaged[damaged.count - 1] ^= 0x10
        #expect(throws: Never.self) { try reader.history(at: 2) }
        do {
            _ = try SnapshotReader(InMemoryBytes(damaged)).history(at: 2)
            Issue.record("damaged history read without error")
        } catch {
            #expect(error.offset == lastFrameStart, "\(error)")
        }
        // Two tabs naming one frame: refused when the file opens (each frame follows the one
        // before), so no frame is copied forward for every tab that names it.
        let shared = try snapshot { _ in }
        let frame = UInt64(
            Framing.recordHeaderSize + (try SnapshotReader(InMemoryBytes(shared)).historyPayload(at: 0).count))
        #expect(
            throws: SessionFormatError.invalidState(
                offset: at, reason: .historyOutOfRange(item: 1, offset: 0, length: UInt32(frame), section: 3 * frame))
        ) {
            try SnapshotReader(InMemoryBytes(try snapshot { $0.items[1].historyOffset = $0.items[0].historyOffset }))
        }
    }

    @Test func replayRefusesRecordsThatDoNotFitTheList() throws {
        var session = BrowsingSession(seed: 51)
        try session.run(commands: 40)
        // Dropping the first record leaves later records naming tabs that never arrived.
        #expect(throws: SessionFormatError.InvalidState.self) { try replay(Array(session.records.dropFirst())) }
    }
}
