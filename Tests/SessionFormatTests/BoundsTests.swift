import BrowserModel
import HostLimits
import Testing

@testable import SessionFormat

/// A file of any claimed size, holding `bytes` at the start and zeros after: what a sparse file
/// or a lying length field looks like. Records the largest read; refuses (instead of
/// allocating) a read above `refuseAbove`.
final class ClaimingSource: ByteSource {
    let bytes: [UInt8]
    let size: Int
    let refuseAbove: Int
    private(set) var largestRead = 0

    init(_ bytes: [UInt8], size: Int, refuseAbove: Int = 256 << 20) {
        self.bytes = bytes
        self.size = size
        self.refuseAbove = refuseAbove
    }

    func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
        try checkRange(offset: offset, count: count)
        largestRead = max(largestRead, count)
        guard count <= refuseAbove else { throw .readFailed(offset: offset, reason: "a read of \(count) bytes") }
        return (offset..<offset + count).map { $0 < bytes.count ? bytes[$0] : 0 }
    }
}

private func tab(_ id: Int64, url: String, title: String = "") -> WebState {
    var history = NavigationHistory()
    history.commit(NavigationItem(url: url, title: title, timestamp: Timestamp(microsecondsSinceEpoch: id)))
    return WebState(id: WebStateID(rawValue: id)!, creationTime: .zero, history: history)
}

@Suite struct WriterReaderLimitTests {
    /// The writer refuses what the reader refuses, from the same constant.
    @Test func aPayloadOverTheLimitIsRefusedOnBothSides() throws {
        let payload = [UInt8](repeating: 7, count: Limits.maxRecordPayloadBytes + 1)
        #expect(throws: SessionFormatError.recordTooLarge(offset: 0, length: payload.count)) {
            try Framing.record(.navigation, payload: payload)
        }
        var bytes = Framing.fileHeader(.journal)
        #expect(throws: SessionFormatError.recordTooLarge(offset: bytes.count, length: payload.count)) {
            try Framing.appendRecord(.mutation, payload: payload, to: &bytes)
        }
        #expect(bytes == Framing.fileHeader(.journal), "nothing appended")
        // The largest payload the writer takes, the reader takes.
        let largest = try Framing.record(.navigation, payload: [UInt8](payload.dropLast()))
        let read = try Framing.readRecord(InMemoryBytes(largest), at: 0, expecting: .navigation)
        #expect(read.payload.count == Limits.maxRecordPayloadBytes)
    }

    /// Metadata split over continuation records reads back whole (here at 4 KiB a record, so
    /// the test is fast; SessionStoreTests and the process test cross the real 64 MiB).
    @Test func listMetadataSplitOverRecordsReadsBack() throws {
        let list = WebStateList()
        for id in 1...300 as ClosedRange<Int64> {
            try list.insert(
                tab(
                    id, url: "https://tab\(id).example/" + String(repeating: "p", count: Int(id) * 7),
                    title: "tab \(id)"), InsertionParams())
        }
        try list.activate(at: 299)
        var storage = ListStorage()
        storage.activeIndex = 299
        storage.lastCommandSeq = 300
        var section: [UInt8] = []
        for webState in list.webStates {
            let frame = try Framing.record(
                .navigation,
                payload: protobufBytes(NavigationStorage(id: webState.id, history: try webState.navigationHistory())))
            var item = ItemStorage()
            item.identifier = webState.id.rawValue
            item.metadata = MetadataStorage(webState.metadata)
            item.historyOffset = UInt64(section.count)
            item.historyLength = UInt32(frame.count)
            storage.items.append(item)
            section += frame
        }
        storage.historySectionLength = UInt64(section.count)
        let records = FormatOneSnapshot.metadataRecords(storage, recordLimit: 4 << 10)
        #expect(records.count > 50)
        #expect(records.allSatisfy { $0.1.count <= 4 << 10 })
        #expect(records.dropFirst().allSatisfy { $0.0 == .listMetadataContinuation })
        var bytes = FormatOneSnapshot.header
        for (kind, payload) in records { try Framing.appendRecord(kind, payload: payload, to: &bytes) }
        bytes += section
        let reader = try SnapshotReader(InMemoryBytes(bytes))
        #expect((0..<reader.count).map(reader.metadata(at:)) == list.webStates.map(\.metadata))
        #expect((0..<reader.count).map(reader.id(at:)) == list.webStates.map(\.id))
        #expect(reader.activeIndex == 299 && reader.lastCommandSeq == 300)
        #expect(try reader.history(at: 299) == list.webStates[299].navigationHistory())
        // A continuation count the file cannot hold is refused before any read for it.
        var lying = storage
        lying.items = []
        lying.continuationRecords = 1000
        var short = FormatOneSnapshot.header
        try Framing.appendRecord(.listMetadata, payload: protobufBytes(lying), to: &short)
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize, reason: .continuationsOutOfRange(1000, bytesLeft: 0))
        ) {
            try SnapshotReader(InMemoryBytes(short))
        }
        // More continuations than a Browser has tabs (each holds at least one item), all there
        // and empty: refused before any is read.
        lying.continuationRecords = UInt32(Limits.maxTabsPerBrowser + 1)
        var empties = FormatOneSnapshot.header
        try Framing.appendRecord(.listMetadata, payload: protobufBytes(lying), to: &empties)
        let first = empties.count
        for _ in 0...Limits.maxTabsPerBrowser {
            try Framing.appendRecord(.listMetadataContinuation, payload: [], to: &empties)
        }
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize,
                reason: .continuationsOutOfRange(Limits.maxTabsPerBrowser + 1, bytesLeft: empties.count - first))
        ) {
            try SnapshotReader(InMemoryBytes(empties))
        }
    }

    /// A tab whose history fills the text budget with 2 MiB URLs: its snapshot frame and the
    /// journal record inserting it (history and metadata) both fit one record, and replay.
    @Test func aFullHistoryFitsItsFrameAndTheInsertRecord() throws {
        let source = WebState(id: WebStateID(rawValue: 1)!, creationTime: .zero)
        let longURL = String(repeating: "l", count: Limits.maxURLBytes - 2)
        for n in 0..<40 {
            try source.commitNavigation(
                to: NavigationItem(
                    url: longURL + "\(n % 10)/", title: String(repeating: "t", count: Limits.maxTitleBytes),
                    timestamp: .zero))
        }
        #expect(try source.navigationHistory().items.count > 20)
        let list = WebStateList()
        let recorder = JournalRecorder(list: list)
        recorder.commandSeq = 1
        try list.insert(source, InsertionParams(activate: true))
        // Framed (the writer's check) and read back as records (the reader's), checksums and
        // lengths; decoding 60 MB of strings is the store tests' part.
        for record in try recorder.takeRecords() {
            let frame = try record.frame
            #expect(frame.count <= Framing.recordHeaderSize + Limits.maxRecordPayloadBytes)
            _ = try Framing.readRecord(InMemoryBytes(frame), at: 0, expecting: .mutation)
        }
        let snapshot = try snapshotBytes(list, seq: 1)
        let reader = try SnapshotReader(InMemoryBytes(snapshot))
        _ = try reader.historyPayload(at: 0)
    }

    /// Entries are named by number in the journal: a snapshot taken before the cap, then
    /// navigations past it, back and forward, replay to the same history.
    @Test func replayPastTheCapFindsTheSameEntries() throws {
        let list = WebStateList()
        let recorder = JournalRecorder(list: list)
        let a = tab(1, url: "https://a.example/0")
        recorder.commandSeq = 1
        try list.insert(a, InsertionParams(activate: true))
        for n in 1..<70 { try a.commitNavigation(to: NavigationItem(url: "https://a.example/\(n)", timestamp: .zero)) }
        let snapshot = try snapshotBytes(list, seq: 1)
        _ = try recorder.takeRecords()
        recorder.commandSeq = 2
        for n in 70..<130 {
            try a.commitNavigation(to: NavigationItem(url: "https://a.example/\(n)", timestamp: .zero))
        }
        try a.goToItem(at: 3)
        try a.commitNavigation(to: NavigationItem(url: "https://a.example/branch", timestamp: .zero))
        for n in 0..<80 { try a.commitNavigation(to: NavigationItem(url: "https://a.example/b\(n)", timestamp: .zero)) }
        try a.goToItem(at: 40)
        let restored = WebStateList()
        let profile = Profile(stateDirectory: "/unused")
        try SnapshotReader(InMemoryBytes(snapshot)).restore(into: restored, profile: profile)
        let replayed = try replay(try recorder.takeRecords(), onto: restored, profile: profile)
        #expect(try contents(replayed) == contents(list))
        #expect(try a.navigationHistory().droppedItemCount > 0)
    }
}

@Suite struct BoundedReadTests {
    /// A tab declaring a 1.5 GB history: refused from the metadata, nothing that size read.
    @Test func aHistoryLengthAboveOneRecordIsRefusedBeforeAnyRead() throws {
        let claimed: UInt32 = 0x6000_0000
        var storage = ListStorage()
        var item = ItemStorage()
        item.identifier = 1
        item.historyOffset = 0
        item.historyLength = claimed
        storage.items = [item]
        storage.historySectionLength = UInt64(claimed)
        var bytes = FormatOneSnapshot.header
        try Framing.appendRecord(.listMetadata, payload: protobufBytes(storage), to: &bytes)
        let source = ClaimingSource(bytes, size: bytes.count + Int(claimed))
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize,
                reason: .historyOutOfRange(item: 0, offset: 0, length: claimed, section: UInt64(claimed)))
        ) {
            let reader = try SnapshotReader(source)
            _ = try reader.history(at: 0)
        }
        #expect(source.largestRead <= Framing.recordHeaderSize + Limits.maxRecordPayloadBytes)
    }

    /// A 64 MiB list-metadata record of empty items (33 million of them) decoded into
    /// gigabytes of structs; its items are counted on the wire first and it is refused at once.
    @Test(.timeLimit(.minutes(10))) func aRecordOfMillionsOfEmptyItemsIsRefusedBeforeDecoding() throws {
        var payload = protobufBytes(ListStorage())
        let emptyItem: [UInt8] = [0x0A, 0x00]  // field 1, length 0
        payload.reserveCapacity(Limits.maxRecordPayloadBytes)
        while payload.count + emptyItem.count <= Limits.maxRecordPayloadBytes { payload += emptyItem }
        var bytes = FormatOneSnapshot.header
        try Framing.appendRecord(.listMetadata, payload: payload, to: &bytes)
        let start = ContinuousClock.now
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize,
                reason: .tooManyTabs(Limits.maxTabsPerBrowser + 1, limit: Limits.maxTabsPerBrowser))
        ) {
            _ = try SnapshotReader(InMemoryBytes(bytes))
        }
        let elapsed = ContinuousClock.now - start
        // One checksum and one count over 64 MiB; decoding 33 million items took minutes and GBs.
        #expect(elapsed < .seconds(20), "refused before decoding: \(elapsed)")
    }

    /// The bound holds across continuation records: the count carries from one to the next.
    @Test func itemsAreCountedAcrossContinuationRecords() throws {
        var head = ListStorage()
        head.continuationRecords = 1
        let item: [UInt8] = [0x0A, 0x02, 0x08, 0x01]  // field 1 holding an item with identifier 1
        let first = protobufBytes(head) + Array([[UInt8]](repeating: item, count: Limits.maxTabsPerBrowser).joined())
        #expect(try FormatOneMetadata.countItems(first, at: 0, before: 0) == Limits.maxTabsPerBrowser)
        var bytes = FormatOneSnapshot.header
        try Framing.appendRecord(.listMetadata, payload: first, to: &bytes)
        let continuation = bytes.count
        try Framing.appendRecord(.listMetadataContinuation, payload: item, to: &bytes)
        #expect(
            throws: SessionFormatError.invalidState(
                offset: continuation,
                reason: .tooManyTabs(Limits.maxTabsPerBrowser + 1, limit: Limits.maxTabsPerBrowser))
        ) {
            _ = try SnapshotReader(InMemoryBytes(bytes))
        }
        // A payload the wire format cannot hold is refused as the decoder would refuse it.
        #expect(throws: SessionFormatError.self) {
            try FormatOneMetadata.countItems([0x0A, 0x05, 0x00], at: 0, before: 0)
        }
        #expect(throws: SessionFormatError.self) { try FormatOneMetadata.countItems([0x0B], at: 0, before: 0) }
    }

    /// A journal replaying an insert past the bound is damage, typed.
    @Test func replayingAnInsertPastTheBoundIsDamage() throws {
        let profile = Profile(stateDirectory: "/nonexistent")
        let list = WebStateList()
        try list.restore(
            (1...Limits.maxTabsPerBrowser).map { _ in
                RestoredTab(webState: WebState(id: profile.makeWebStateID(), creationTime: .zero), opener: nil)
            },
            activeIndex: nil, pinnedCount: 0)
        var insert = Windowhost_Session_InsertMutation()
        insert.index = Int32(Limits.maxTabsPerBrowser)
        insert.webState = WebStateStorage(WebState(id: profile.makeWebStateID(), creationTime: .zero), opener: nil)
        var storage = MutationStorage()
        storage.seq = 1
        storage.insert = insert
        #expect(
            throws: SessionFormatError.InvalidState.tooManyTabs(
                Limits.maxTabsPerBrowser + 1, limit: Limits.maxTabsPerBrowser)
        ) {
            try JournalReplayer.apply(JournalRecord(storage), to: list, profile: profile, keepingIn: JournalTabs())
        }
        #expect(list.count == Limits.maxTabsPerBrowser)
    }

    /// A 1 TiB (sparse) journal is refused by its size, unread; zeros are scanned in chunks.
    @Test func aJournalAboveTheLimitIsRefusedUnread() throws {
        let huge = ClaimingSource(JournalFile.header, size: 1 << 40)
        #expect(throws: SessionFormatError.fileTooLarge(size: 1 << 40, limit: Limits.maxJournalBytes)) {
            try JournalFile.scan(huge)
        }
        #expect(huge.largestRead == 0)
        let zeros = ClaimingSource(JournalFile.header + [1], size: 64 << 20)
        #expect(try JournalFile.lastNonZeroEnd(zeros, from: Framing.fileHeaderSize) == Framing.fileHeaderSize + 1)
        #expect(zeros.largestRead <= JournalFile.chunkSize)
    }

    /// After damage, the search for a later save is linear: a tail of record headers each
    /// claiming megabytes costs one pass, not a read per claim.
    @Test(.timeLimit(.minutes(10))) func theSearchForASaveAfterDamageIsLinear() throws {
        var tail: [UInt8] = []
        var header: [UInt8] = [0x57, 0x52, RecordKind.mutation.rawValue, 1]
        header.appendLittleEndian(UInt32(4 << 20))
        header.appendLittleEndian(UInt32(0))
        while tail.count < 12 << 20 { tail += header }
        let bytes = JournalFile.header + [0xFF] + tail
        let start = ContinuousClock.now
        #expect(try !JournalFile.hasValidCommit(in: InMemoryBytes(bytes), after: Framing.fileHeaderSize + 1))
        let commit = JournalCommit(seq: 5, browsers: 1).frame
        #expect(try JournalFile.hasValidCommit(in: InMemoryBytes(bytes + commit), after: Framing.fileHeaderSize + 1))
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .seconds(20), "\(elapsed)")
    }

    /// A read that fails while looking for a save after damage is thrown: taken for "no save
    /// follows", it made the damage a torn tail, and recovery zeroed what it could not read.
    @Test func aReadErrorWhileSearchingForASaveIsThrownNotTakenForATornTail() {
        struct Unreadable: ByteSource {
            let size = 4096
            func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
                throw .readFailed(offset: offset, reason: "EIO")
            }
        }
        #expect(throws: SessionFormatError.readFailed(offset: Framing.fileHeaderSize + 1, reason: "EIO")) {
            try JournalFile.hasValidCommit(in: Unreadable(), after: Framing.fileHeaderSize + 1)
        }
    }
}

@Suite struct SeqCheckTests {
    private func journal(_ saves: [(records: [UInt64], commit: UInt64)]) throws -> JournalFile.Scan {
        var bytes = JournalFile.header
        for save in saves {
            for seq in save.records {
                var storage = MutationStorage()
                storage.seq = seq
                storage.activate = Windowhost_Session_ActivateMutation()
                bytes += try JournalRecord(storage).frame
            }
            bytes += JournalCommit(seq: save.commit, browsers: 1).frame
        }
        return try JournalFile.scan(InMemoryBytes(bytes))
    }

    @Test func seqsThatGoBackOrPassTheRangeAreDamage() throws {
        let good = try journal([([6, 7], 7), ([8], 9), ([], 10)])
        #expect(good.checkSeqs(snapshotSeq: 5, previousCommit: nil) == (3, nil))
        let huge = try journal([([6], 6), ([], UInt64.max), ([7], 7)])
        let hugeCheck = huge.checkSeqs(snapshotSeq: 5, previousCommit: nil)
        #expect(hugeCheck.validCommits == 1)
        #expect(hugeCheck.error == .invalidState(offset: huge.commits[1].end - 21, reason: .seqOutOfRange(UInt64.max)))
        let justAbove = try journal([([], Limits.maxCommandSeq + 1)])
        #expect(justAbove.checkSeqs(snapshotSeq: 0, previousCommit: nil).validCommits == 0)
        let maximal = try journal([([], Limits.maxCommandSeq)])
        #expect(maximal.checkSeqs(snapshotSeq: 0, previousCommit: nil).error == nil)
        // A commit below the one before, here or in the journal before; the same seq again is a
        // save that covers no new command, which the store writes (a hostile campaign set such
        // a journal aside, with 29 acknowledged commands after it).
        #expect(try journal([([], 8), ([], 7)]).checkSeqs(snapshotSeq: 5, previousCommit: nil).validCommits == 1)
        #expect(try journal([([], 7)]).checkSeqs(snapshotSeq: 5, previousCommit: 8).validCommits == 0)
        #expect(try journal([([], 8), ([8], 8), ([], 9)]).checkSeqs(snapshotSeq: 5, previousCommit: nil).error == nil)
        #expect(try journal([([], 8)]).checkSeqs(snapshotSeq: 5, previousCommit: 8).error == nil)
        // Below the snapshot, records going back, a record past its commit.
        #expect(try journal([([], 4)]).checkSeqs(snapshotSeq: 5, previousCommit: nil).validCommits == 0)
        #expect(try journal([([7], 7), ([6], 8)]).checkSeqs(snapshotSeq: 5, previousCommit: nil).validCommits == 1)
        #expect(try journal([([9], 8)]).checkSeqs(snapshotSeq: 5, previousCommit: nil).validCommits == 0)
    }

    /// A commit frame with a valid checksum whose Browser bits are undefined (above the lagging
    /// bit) or name no Browser: the frame reads, the commit rules refuse it with a typed error.
    @Test(arguments: [0, JournalCommit.laggingBit, 8, 0x10, 0xFF] as [UInt8])
    func aCommitWithUndefinedBitsIsDamage(bits: UInt8) throws {
        var bytes = JournalFile.header + JournalCommit(seq: 6, browsers: 1).frame
        let offset = bytes.count
        bytes += JournalCommit(seq: 7, browsers: bits).frame + JournalCommit(seq: 8, browsers: 3).frame
        let scan = try JournalFile.scan(InMemoryBytes(bytes))
        #expect(scan.stoppedBy == nil && scan.commits.count == 3, "the frame's checksum is valid")
        let check = scan.checkSeqs(snapshotSeq: 5, previousCommit: nil)
        #expect(check.validCommits == 1)
        #expect(check.error == .invalidState(offset: offset, reason: .undefinedCommitBits(bits)))
    }

    @Test func everyCommitAStoreWritesKeepsTheRules() throws {
        for bits: UInt8 in [
            1, 2, 3, 1 | JournalCommit.laggingBit, 2 | JournalCommit.laggingBit, 3 | JournalCommit.laggingBit,
        ] {
            let scan = try JournalFile.scan(
                InMemoryBytes(JournalFile.header + JournalCommit(seq: 6, browsers: bits).frame))
            #expect(scan.checkSeqs(snapshotSeq: 5, previousCommit: nil) == (1, nil), "bits \(bits)")
        }
    }

    @Test func aSnapshotSeqAboveTheRangeIsDamage() throws {
        var storage = ListStorage()
        storage.lastCommandSeq = Limits.maxCommandSeq + 1
        var bytes = FormatOneSnapshot.header
        try Framing.appendRecord(.listMetadata, payload: protobufBytes(storage), to: &bytes)
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize, reason: .seqOutOfRange(Limits.maxCommandSeq + 1))
        ) {
            try SnapshotReader(InMemoryBytes(bytes))
        }
    }
}
