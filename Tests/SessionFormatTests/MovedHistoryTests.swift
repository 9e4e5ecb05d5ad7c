import BrowserModel
import Foundation
import HostLimits
import Testing

@testable import SessionFormat

/// Issue 32, the format's half of a move between windows: a moved history is checked as a
/// stored one is, and made into a tab with its bytes as carried (only the identifier spliced);
/// journal records carry the move; a snapshot's index holds the moves its Browser received.
@Suite struct MovedHistoryTests {
    static func history(entries: Int, current: Int) -> NavigationHistory {
        var history = NavigationHistory()
        for index in 0..<entries {
            history.commit(
                NavigationItem(
                    url: "https://moved.example/\(index)", title: "page \(index)",
                    timestamp: Timestamp(microsecondsSinceEpoch: Int64(index))))
        }
        _ = history.goToItem(at: current)
        return history
    }

    static func bytes(_ history: NavigationHistory, id: Int64) throws -> [UInt8] {
        history.storageBytes(as: try #require(WebStateID(rawValue: id)))
    }

    @Test func aHistoryIsCheckedAsAStoredOneIs() throws {
        let good = try Self.bytes(Self.history(entries: 3, current: 1), id: 7)
        let checked = try MovedHistory(checking: good, tab: 7)
        #expect(checked.itemCount == 3 && checked.currentIndex == 1)
        #expect(
            throws: SessionFormatError.invalidState(
                offset: 0, reason: .historyIdentifierMismatch(expected: 8, found: 7))
        ) {
            try MovedHistory(checking: good, tab: 8)
        }
        #expect(throws: SessionFormatError.invalidState(offset: 0, reason: .invalidIdentifier(0))) {
            try MovedHistory(checking: good, tab: 0)
        }
        let tooLarge = [UInt8](repeating: 0, count: Limits.maxMovedTabBytes + 1)
        #expect(throws: SessionFormatError.movedTabTooLarge(bytes: tooLarge.count, limit: Limits.maxMovedTabBytes)) {
            try MovedHistory(checking: tooLarge, tab: 7)
        }
        #expect(throws: SessionFormatError.self) { try MovedHistory(checking: [0x0A, 0x7F], tab: 7) }
        // Index 9 of 3 entries, written after the index the history had (the last one counts).
        #expect(throws: SessionFormatError.invalidState(offset: 0, reason: .navigationIndexOutOfRange(9, count: 3))) {
            try MovedHistory(checking: good + [0x10, 0x09], tab: 7)
        }
        // More entries than a tab keeps: the bytes would say more than the tab made of them.
        var items = NavigationStorage()
        items.identifier = 7
        items.lastCommittedItemIndex = 0
        items.items = (0...Limits.maxNavigationEntries).map { _ in NavigationItemStorage() }
        let long: [UInt8] = try items.serializedBytes()
        #expect(
            throws: SessionFormatError.invalidState(
                offset: 0, reason: .tooManyEntries(Limits.maxNavigationEntries + 1, limit: Limits.maxNavigationEntries))
        ) { try MovedHistory(checking: long, tab: 7) }
    }

    /// Fields in an order no encoder of ours writes (entries, then the index, then the
    /// identifier) stay in that order: only the identifier changes, and goes first.
    @Test func anUnrealizedTabKeepsTheBytesCarriedWithItsNewIdentifier() throws {
        let canonical = try Self.bytes(Self.history(entries: 2, current: 0), id: 300)
        // 300 is two varint bytes: [0x08, 0xAC, 0x02]; then field 2 ([0x10, 0x00] is not
        // written for index 0), the entries.
        #expect(Array(canonical.prefix(3)) == [0x08, 0xAC, 0x02])
        let entries = Array(canonical.dropFirst(3))
        let reordered = entries + [0x10, 0x01] + [0x08, 0xAC, 0x02]
        let checked = try MovedHistory(checking: reordered, tab: 300)
        #expect(checked.currentIndex == 1)
        let id = try #require(WebStateID(rawValue: 5))
        let tab = try checked.makeTab(
            as: id, creationTime: Timestamp(microsecondsSinceEpoch: 10),
            lastActiveTime: Timestamp(microsecondsSinceEpoch: 20),
            realized: false)
        #expect(!tab.isRealized && tab.id == id && tab.lastActiveTime.microsecondsSinceEpoch == 20)
        let stored = try #require(tab.storedContent?.tabs as? JournalTabs)
        let index = try #require(tab.storedContent?.index)
        let payload = stored.historyPayload(at: index)
        #expect(payload == [0x08, 0x05] + entries + [0x10, 0x01])
        #expect(tab.url == "https://moved.example/1" && tab.navigationItemCount == 2)
        #expect(try tab.navigationHistory() == Self.history(entries: 2, current: 1))
        let realized = try checked.makeTab(
            as: id, creationTime: Timestamp(microsecondsSinceEpoch: 10),
            lastActiveTime: Timestamp(microsecondsSinceEpoch: 20),
            realized: true)
        #expect(realized.isRealized && realized.loadedHistory == Self.history(entries: 2, current: 1))
    }

    /// An inserted tab kept as bytes goes into its journal record as those bytes, with the
    /// move; replay gives the move back.
    @Test func anInsertRecordCarriesTheMoveAndTheBytes() throws {
        let list = WebStateList()
        let recorder = JournalRecorder(list: list)
        let bytes = try Self.bytes(Self.history(entries: 2, current: 0), id: 4)
        let tab = try MovedHistory(checking: bytes, tab: 4).makeTab(
            as: try #require(WebStateID(rawValue: 4)), creationTime: .zero, lastActiveTime: .zero, realized: false)
        recorder.move = 0xABCD
        try list.insert(tab)
        try list.detach(at: 0).destroy()
        let records = try recorder.takePayloads().map { try MutationStorage(serializedBytes: $0) }
        #expect(records.count == 2 && records[0].insert.movedIn == 0xABCD && records[1].remove.movedOut == 0xABCD)
        #expect(try records[0].insert.webState.navigation.serializedBytes() == bytes)
        #expect(!tab.isRealized || tab.isDestroyed, "recording did not realize the tab")
        #expect(JournalRecord(records[0]).movedIn == ReceivedMove(move: 0xABCD, tab: tab.id))
        #expect(JournalRecord(records[1]).movedIn == nil)
    }

    @Test func aSnapshotHoldsTheLatestMovesReceived() throws {
        let list = WebStateList()
        try list.insert(WebState(id: try #require(WebStateID(rawValue: 1)), creationTime: .zero))
        var moves = ReceivedMoves()
        for move in 1...UInt64(Limits.movesRemembered + 3) {
            let tab = try #require(WebStateID(rawValue: Int64(move)))
            moves.note(try #require(ReceivedMove(move: move, tab: tab)))
        }
        #expect(moves.moves.map(\.move) == Array(4...UInt64(Limits.movesRemembered + 3)), "the latest, oldest first")
        #expect(moves.tab(madeBy: 3) == nil && moves.tab(madeBy: 4)?.rawValue == 4)
        let bytes = try SnapshotEncoder.encode(list, lastCommandSeq: 3, movesReceived: moves) {
            _ throws(SessionFormatError) in []
        }
        #expect(try SnapshotReader(InMemoryBytes(bytes)).movesReceived == moves)
        let none = try SnapshotEncoder.encode(list, lastCommandSeq: 3) { _ throws(SessionFormatError) in [] }
        #expect(try SnapshotReader(InMemoryBytes(none)).movesReceived == ReceivedMoves())
        // A move entry naming no move is refused with the index.
        let moveStart =
            Framing.fileHeaderSize + Framing.recordHeaderSize + SnapshotIndex.headerSize + SnapshotIndex.entrySize
        var zeroed = bytes
        zeroed.storeLittleEndian(UInt64(0), at: moveStart)
        let length = Int(zeroed.littleEndian(UInt32.self, at: Framing.fileHeaderSize + 4))
        let payloadStart = Framing.fileHeaderSize + Framing.recordHeaderSize
        let crc = CRC32C.checksum(
            zeroed[payloadStart..<payloadStart + length],
            continuing: CRC32C.checksum(zeroed[Framing.fileHeaderSize..<Framing.fileHeaderSize + 8]))
        zeroed.storeLittleEndian(crc, at: Framing.fileHeaderSize + 8)
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize, reason: .invalidMove(move: 0, tab: 4))
        ) { try SnapshotReader(InMemoryBytes(zeroed)) }
    }
}
