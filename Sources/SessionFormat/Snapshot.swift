import BrowserModel
import HostLimits

/// A snapshot file: one Browser's whole tab list. Format 2, what this build writes:
///
///     file header (version 2) · record(listIndex) · record(strings) × n
///       · record(navigation) for each tab …
///
/// The index is fixed-width and little endian (`SnapshotIndex`): restore reads it in place, one
/// pass of checks and no decoding, and a tab's title and URL (in the string records) become
/// strings only when asked for. Histories stay protobuf, one navigation record per tab in the
/// history section, read when the tab is realized. Format 1 (protobuf list metadata) is still
/// read (`FormatOneMetadata`).
public enum SnapshotEncoder {
    /// Encodes `list` as it stands after command `lastCommandSeq`. A realized tab's history is
    /// encoded from memory; an unrealized tab's is `storedHistory(webState)`, the payload
    /// restore read it from (unchanged since, or it would have been realized). Titles and URLs
    /// go in string records of at most `stringRecordLimit` bytes, whole tabs each. With `seal`,
    /// the file is sealed: every record but the framing's own, each bound to its offset.
    /// `movesReceived`: the moves between windows the list's Browser remembers receiving.
    public static func encode(
        _ list: WebStateList, lastCommandSeq: UInt64, stringRecordLimit: Int = Limits.maxRecordPayloadBytes,
        seal: RecordSeal? = nil, movesReceived: ReceivedMoves = ReceivedMoves(),
        storedHistory: (WebState) throws(SessionFormatError) -> [UInt8]
    ) throws(SessionFormatError) -> [UInt8] {
        let webStates = list.webStates
        let sealed = seal != nil
        // Sealing lengthens every record by the same amount: the index knows each frame's length
        // (and so each offset) before any is sealed.
        let stringRecordLimit = stringRecordLimit - (sealed ? RecordSeal.overhead : 0)
        var index = SnapshotIndex.header(
            count: webStates.count, activeIndex: list.activeIndex, pinnedCount: list.pinnedCount,
            lastCommandSeq: lastCommandSeq, moves: movesReceived.moves.count)
        index.reserveCapacity(
            SnapshotIndex.headerSize + webStates.count * SnapshotIndex.entrySize
                + movesReceived.moves.count * SnapshotIndex.moveSize)
        var strings: [[UInt8]] = [[]]
        var stringOffset: UInt64 = 0
        var histories: [[UInt8]] = []
        histories.reserveCapacity(webStates.count)
        var sectionLength = 0
        let positions = Dictionary(uniqueKeysWithValues: webStates.enumerated().map { ($1.id, $0) })
        for (position, webState) in webStates.enumerated() {
            let history = try historyPayload(webState, storedHistory: storedHistory)
            let frameLength = Framing.frameSize(payload: history.count, kind: .navigation, sealed: sealed)
            let metadata = webState.metadata
            try checkActivePage(metadata)
            let title = metadata.activePageTitle.utf8
            let url = metadata.activePageURL.utf8
            // Within the limits checked above, a tab's strings fit one record.
            if strings[strings.count - 1].count + title.count + url.count > stringRecordLimit { strings.append([]) }
            strings[strings.count - 1] += title
            strings[strings.count - 1] += url
            // The list's invariants put every opener inside it.
            let opener = (try? list.opener(at: position)) ?? nil
            assert(opener.map { positions[$0.openerID] != nil } ?? true, "an opener is a tab of the list")
            SnapshotIndex.appendEntry(
                to: &index,
                SnapshotIndex.Entry(
                    id: webState.id, creationTime: metadata.creationTime, lastActiveTime: metadata.lastActiveTime,
                    historyOffset: UInt64(sectionLength), historyLength: UInt32(frameLength),
                    stringOffset: stringOffset, titleLength: UInt32(title.count), urlLength: UInt32(url.count),
                    navigationItemCount: Int32(clamping: metadata.navigationItemCount),
                    openerIndex: opener.flatMap { positions[$0.openerID] }.map(Int32.init) ?? -1,
                    openerNavigationIndex: Int32(clamping: opener?.navigationIndex ?? 0),
                    realizedAtSave: webState.isRealized))
            stringOffset += UInt64(title.count + url.count)
            sectionLength += frameLength
            histories.append(history)
        }
        assert(
            histories.count == webStates.count
                && index.count == SnapshotIndex.headerSize + webStates.count * SnapshotIndex.entrySize,
            "one index entry and one history per tab")
        for move in movesReceived.moves { SnapshotIndex.appendMove(to: &index, move) }
        assert(
            UInt64(strings.reduce(0) { $0 + $1.count }) == stringOffset, "the string area is every tab's title and URL")
        SnapshotIndex.finishHeader(
            &index, stringRecords: strings.count, stringAreaLength: stringOffset,
            historySectionLength: UInt64(sectionLength))
        var bytes = Framing.fileHeader(.snapshot, sealed: sealed)
        try Framing.appendRecord(.listIndex, payload: index, to: &bytes, seal: seal)
        for payload in strings { try Framing.appendRecord(.strings, payload: payload, to: &bytes, seal: seal) }
        let sectionStart = bytes.count
        bytes.reserveCapacity(sectionStart + sectionLength)
        for history in histories { try Framing.appendRecord(.navigation, payload: history, to: &bytes, seal: seal) }
        assert(bytes.count == sectionStart + sectionLength, "each history frame is as long as the index says")
        return bytes
    }

    /// The title and URL the index carries are held to a navigation item's bounds.
    private static func checkActivePage(_ metadata: WebStateMetadata) throws(SessionFormatError) {
        do {
            try NavigationItem(url: metadata.activePageURL, title: metadata.activePageTitle, timestamp: .zero).check()
        } catch {
            throw .invalidState(offset: Framing.fileHeaderSize, reason: .invalidNavigationItem(error))
        }
    }

    /// The tab's navigation payload: encoded from memory when realized, else the stored one.
    private static func historyPayload(
        _ webState: WebState, storedHistory: (WebState) throws(SessionFormatError) -> [UInt8]
    ) throws(SessionFormatError) -> [UInt8] {
        if let history = webState.loadedHistory {
            return encodeMessage(HistoryWire(id: webState.id, history: history))
        }
        do {
            return try storedHistory(webState)
        } catch {
            // A stored history that no longer reads: the caller realizes the tab (its history
            // rebuilt from an older generation, or degraded to its page), and the snapshot holds
            // that. Failing instead made every compaction fail while the damaged frame was the
            // only copy.
            guard let history = webState.loadedHistory else { throw error }
            return encodeMessage(HistoryWire(id: webState.id, history: history))
        }
    }
}

/// The fixed-width index of a format-2 snapshot, all little endian.
///
/// Header (48 bytes): tab count u32 · active index i32 (-1: none) · pinned count u32 ·
/// string records u32 · last command seq u64 · string area length u64 · history section
/// length u64 · moves received u32 · reserved u32 (0).
///
/// Entry (72 bytes per tab): id i64 · creation time i64 · last active time i64 (µs) · history
/// offset u64 · string offset u64 · history length u32 · title length u32 · URL length u32 ·
/// navigation item count i32 · opener index i32 (-1: none) · opener navigation index i32 ·
/// flags u32 (bit 0: realized at save) · reserved u32 (0). The title's bytes start at the
/// string offset, the URL's right after; the history offset counts from the history section.
///
/// Move received (16 bytes each, after the entries, oldest first, at most
/// `Limits.movesRemembered`): move id u64 (not 0) · the tab it made, id i64.
enum SnapshotIndex {
    static let headerSize = 48
    static let entrySize = 72
    static let moveSize = 16
    static let realizedFlag: UInt32 = 1

    /// Byte offsets of the header's fields.
    enum Header {
        static let count = 0, activeIndex = 4, pinnedCount = 8, stringRecords = 12
        static let lastCommandSeq = 16, stringAreaLength = 24, historySectionLength = 32, movesReceived = 40
        static let reserved = 44
    }

    /// Byte offsets of an entry's fields.
    enum Field {
        static let id = 0, creationTime = 8, lastActiveTime = 16, historyOffset = 24, stringOffset = 32
        static let historyLength = 40, titleLength = 44, urlLength = 48, navigationItemCount = 52
        static let openerIndex = 56, openerNavigationIndex = 60, flags = 64, reserved = 68
    }

    struct Entry {
        var id: WebStateID
        var creationTime: Timestamp
        var lastActiveTime: Timestamp
        var historyOffset: UInt64
        var historyLength: UInt32
        var stringOffset: UInt64
        var titleLength: UInt32
        var urlLength: UInt32
        var navigationItemCount: Int32
        var openerIndex: Int32
        var openerNavigationIndex: Int32
        var realizedAtSave: Bool
    }

    /// The header with the fields known before the tabs are; `finishHeader` sets the rest.
    /// Fields go where `Header` says, the one statement of the layout the reader also reads by.
    static func header(count: Int, activeIndex: Int?, pinnedCount: Int, lastCommandSeq: UInt64, moves: Int = 0)
        -> [UInt8]
    {
        assert(
            pinnedCount <= count && (activeIndex.map { (0..<count).contains($0) } ?? true),
            "the pinned tabs and the active one are in the list")
        var bytes = [UInt8](repeating: 0, count: headerSize)
        // A list never holds more than `Limits.maxTabsPerBrowser` tabs.
        bytes.storeLittleEndian(UInt32(count), at: Header.count)
        bytes.storeLittleEndian(Int32(activeIndex ?? -1), at: Header.activeIndex)
        bytes.storeLittleEndian(UInt32(pinnedCount), at: Header.pinnedCount)
        bytes.storeLittleEndian(lastCommandSeq, at: Header.lastCommandSeq)
        // A Browser remembers at most `Limits.movesRemembered`.
        bytes.storeLittleEndian(UInt32(moves), at: Header.movesReceived)
        return bytes
    }

    static func finishHeader(
        _ bytes: inout [UInt8], stringRecords: Int, stringAreaLength: UInt64, historySectionLength: UInt64
    ) {
        assert(
            bytes.count >= headerSize && stringRecords >= 1,
            "a header written, and at least one string record (maybe empty)")
        bytes.storeLittleEndian(UInt32(stringRecords), at: Header.stringRecords)
        bytes.storeLittleEndian(stringAreaLength, at: Header.stringAreaLength)
        bytes.storeLittleEndian(historySectionLength, at: Header.historySectionLength)
    }

    /// Appends `entry`, each field where `Field` says (reserved bytes stay 0).
    static func appendEntry(to bytes: inout [UInt8], _ entry: Entry) {
        let start = bytes.count
        assert(start >= headerSize && (start - headerSize) % entrySize == 0, "entries follow the header back to back")
        bytes += repeatElement(0, count: entrySize)
        bytes.storeLittleEndian(entry.id.rawValue, at: start + Field.id)
        bytes.storeLittleEndian(entry.creationTime.microsecondsSinceEpoch, at: start + Field.creationTime)
        bytes.storeLittleEndian(entry.lastActiveTime.microsecondsSinceEpoch, at: start + Field.lastActiveTime)
        bytes.storeLittleEndian(entry.historyOffset, at: start + Field.historyOffset)
        bytes.storeLittleEndian(entry.stringOffset, at: start + Field.stringOffset)
        bytes.storeLittleEndian(entry.historyLength, at: start + Field.historyLength)
        bytes.storeLittleEndian(entry.titleLength, at: start + Field.titleLength)
        bytes.storeLittleEndian(entry.urlLength, at: start + Field.urlLength)
        bytes.storeLittleEndian(entry.navigationItemCount, at: start + Field.navigationItemCount)
        bytes.storeLittleEndian(entry.openerIndex, at: start + Field.openerIndex)
        bytes.storeLittleEndian(entry.openerNavigationIndex, at: start + Field.openerNavigationIndex)
        bytes.storeLittleEndian(entry.realizedAtSave ? realizedFlag : 0, at: start + Field.flags)
        assert(bytes.count == start + entrySize, "an entry is its fixed size")
    }

    /// Appends `move` after the entries.
    static func appendMove(to bytes: inout [UInt8], _ move: ReceivedMove) {
        bytes.appendLittleEndian(move.move)
        bytes.appendLittleEndian(move.tab.rawValue)
    }
}

extension Array where Element == UInt8 {
    mutating func storeLittleEndian<Value: FixedWidthInteger>(_ value: Value, at offset: Int) {
        Swift.withUnsafeBytes(of: value.littleEndian) { replaceSubrange(offset..<offset + $0.count, with: $0) }
    }
}
