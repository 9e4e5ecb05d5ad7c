import BrowserModel
import HostLimits

/// A snapshot file: one Browser's whole tab list. The list metadata comes first, so restore
/// reads it alone; each tab's history follows in the history section, at an offset the metadata
/// names, and is read when the tab is realized. Metadata too big for one record (thousands of
/// tabs with long URLs) continues in as many continuation records as it needs.
///
///     file header · record(listMetadata) · record(listMetadataContinuation) × n
///       · record(navigation) for each tab …
public enum SnapshotEncoder {
    /// Encodes `list` as it stands after command `lastCommandSeq`. A realized tab's history is
    /// encoded from memory; an unrealized tab's is `storedHistory(webState)`, the frame restore
    /// read it from (unchanged since, or it would have been realized).
    public static func encode(
        _ list: WebStateList, lastCommandSeq: UInt64,
        storedHistory: (WebState) throws(SessionFormatError) -> [UInt8]
    ) throws(SessionFormatError) -> [UInt8] {
        var storage = ListStorage()
        storage.activeIndex = Int32(list.activeIndex ?? -1)
        storage.pinnedItemCount = Int32(list.pinnedCount)
        storage.lastCommandSeq = lastCommandSeq
        var section: [UInt8] = []
        let webStates = list.webStates
        let positions = Dictionary(uniqueKeysWithValues: webStates.enumerated().map { ($1.id, $0) })
        for (index, webState) in webStates.enumerated() {
            let frame: [UInt8]
            if let history = webState.loadedHistory {
                frame = try Framing.record(.navigation, payload: encodeMessage(NavigationStorage(id: webState.id, history: history)))
            } else {
                do {
                    frame = try storedHistory(webState)
                } catch {
                    // A stored history that no longer reads: the caller realizes the tab (its
                    // history rebuilt from an older generation, or degraded to its page), and
                    // the snapshot holds that. Failing instead made every compaction fail
                    // while the damaged frame was the only copy.
                    guard let history = webState.loadedHistory else { throw error }
                    frame = try Framing.record(.navigation, payload: encodeMessage(NavigationStorage(id: webState.id, history: history)))
                }
            }
            var item = ItemStorage()
            item.identifier = webState.id.rawValue
            // The list's invariants put every opener inside it.
            if let opener = try? list.opener(at: index), let openerIndex = positions[opener.openerID] {
                item.opener.index = Int32(openerIndex)
                item.opener.navigationIndex = Int32(clamping: opener.navigationIndex)
            }
            item.metadata = MetadataStorage(webState.metadata)
            item.historyOffset = UInt64(section.count)
            item.historyLength = UInt32(frame.count)
            item.realized = webState.isRealized
            storage.items.append(item)
            section += frame
        }
        storage.historySectionLength = UInt64(section.count)
        var bytes = Framing.fileHeader(.snapshot)
        for (kind, payload) in try metadataRecords(storage) { try Framing.appendRecord(kind, payload: payload, to: &bytes) }
        bytes += section
        return bytes
    }

    /// Room kept in the first record for the list's own fields (five varints and their tags).
    private static let listFieldsRoom = 64

    /// The list metadata as records of at most `recordLimit` bytes: the first holds the list's
    /// fields and as many items as fit, each continuation as many more. Each item is encoded
    /// once, as the repeated field's bytes: the concatenation is the message's encoding.
    static func metadataRecords(_ storage: ListStorage, recordLimit: Int = Limits.maxRecordPayloadBytes) throws(SessionFormatError)
        -> [(RecordKind, [UInt8])]
    {
        var chunks: [[UInt8]] = [[]]
        for item in storage.items {
            var field: [UInt8] = [0x0A]  // field 1 (items), length-delimited
            let encoded = encodeMessage(item)
            field.appendVarint(UInt64(encoded.count))
            field += encoded
            let room = recordLimit - (chunks.count == 1 ? listFieldsRoom : 0)
            if !chunks[chunks.count - 1].isEmpty, chunks[chunks.count - 1].count + field.count > room { chunks.append([]) }
            // An item alone over the limit stays in its chunk, and appendRecord refuses it.
            chunks[chunks.count - 1] += field
        }
        var head = storage
        head.items = []
        head.continuationRecords = UInt32(chunks.count - 1)
        var records = [(RecordKind.listMetadata, encodeMessage(head) + chunks[0])]
        for chunk in chunks.dropFirst() { records.append((.listMetadataContinuation, chunk)) }
        return records
    }
}

/// One tab as the snapshot's metadata describes it.
public struct SnapshotItem: Sendable, Equatable {
    public let id: WebStateID
    public let openerIndex: Int?
    public let openerNavigationIndex: Int
    public let metadata: WebStateMetadata
    public let realizedAtSave: Bool
    let historyOffset: Int
    let historyLength: Int
}

/// Reads a snapshot: the metadata at once, checked in full; histories on demand.
public final class SnapshotReader {
    private let source: any ByteSource
    public let items: [SnapshotItem]
    public let activeIndex: Int?
    public let pinnedCount: Int
    public let lastCommandSeq: UInt64
    /// Where the history section starts in the file.
    private let sectionStart: Int

    public init(_ source: some ByteSource) throws(SessionFormatError) {
        self.source = source
        let first = try Framing.checkFileHeader(source, kind: .snapshot)
        var (payload, end) = try Framing.readRecord(source, at: first, expecting: .listMetadata)
        // Items are counted on the wire before each record is decoded: a record of millions of
        // empty items costs one pass over its bytes, never their decoded structs.
        var itemCount = try Self.countItems(payload, at: first, before: 0)
        var storage = try decodeMessage(ListStorage.self, payload, at: first)
        // Each record takes at least a header: a count the file cannot hold is refused before
        // anything is read for it.
        guard Int(storage.continuationRecords) <= (source.size - end) / Framing.recordHeaderSize else {
            throw .invalidState(offset: first, reason: .continuationsOutOfRange(Int(storage.continuationRecords), bytesLeft: source.size - end))
        }
        for _ in 0..<storage.continuationRecords {
            let offset = end
            (payload, end) = try Framing.readRecord(source, at: offset, expecting: .listMetadataContinuation)
            itemCount = try Self.countItems(payload, at: offset, before: itemCount)
            storage.items += try decodeMessage(ListStorage.self, payload, at: offset).items
        }
        let expectedSize = UInt64(end).addingReportingOverflow(storage.historySectionLength)
        guard !expectedSize.overflow, expectedSize.partialValue == UInt64(source.size) else {
            throw .lengthMismatch(expected: Int(clamping: expectedSize.partialValue), actual: source.size)
        }
        do {
            items = try Self.validate(storage)
        } catch {
            throw .invalidState(offset: first, reason: error)
        }
        activeIndex = storage.activeIndex == -1 ? nil : Int(storage.activeIndex)
        pinnedCount = Int(storage.pinnedItemCount)
        lastCommandSeq = storage.lastCommandSeq
        sectionStart = end
    }

    /// `before` plus the items (field 1) in one `ListStorage` payload, counted on the wire
    /// without decoding; past `Limits.maxTabsPerBrowser` it stops and throws. A payload the
    /// wire format cannot hold is refused as the decoder would refuse it.
    static func countItems(_ payload: [UInt8], at offset: Int, before: Int) throws(SessionFormatError) -> Int {
        func malformed(_ reason: String) -> SessionFormatError { .malformedPayload(offset: offset, reason: reason) }
        var count = before
        var index = 0
        func varint() throws(SessionFormatError) -> UInt64 {
            var value: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 7) {
                guard index < payload.count else { throw malformed("a varint runs past the end") }
                let byte = payload[index]
                index += 1
                value |= UInt64(byte & 0x7F) << UInt64(shift)
                if byte & 0x80 == 0 { return value }
            }
            throw malformed("a varint longer than 10 bytes")
        }
        func skip(_ length: UInt64) throws(SessionFormatError) {
            guard length <= UInt64(payload.count - index) else { throw malformed("a field runs past the end") }
            index += Int(length)
        }
        while index < payload.count {
            let tag = try varint()
            switch tag & 7 {
            case 0: _ = try varint()
            case 1: try skip(8)
            case 2:
                try skip(try varint())
                guard tag >> 3 == 1 else { continue }
                count += 1
                guard count <= Limits.maxTabsPerBrowser else {
                    throw .invalidState(offset: offset, reason: .tooManyTabs(count, limit: Limits.maxTabsPerBrowser))
                }
            case 5: try skip(4)
            default: throw malformed("wire type \(tag & 7) is not one this format writes")
            }
        }
        return count
    }

    /// The history of the tab at `index` of the stored list, read and checked now.
    public func history(at index: Int) throws(SessionFormatError) -> NavigationHistory {
        let (_, payload, offset) = try readHistory(at: index)
        let storage = try decodeMessage(NavigationStorage.self, payload, at: offset)
        guard storage.identifier == items[index].id.rawValue else {
            throw .invalidState(
                offset: offset,
                reason: .historyIdentifierMismatch(expected: items[index].id.rawValue, found: storage.identifier))
        }
        do {
            return try storage.model()
        } catch {
            throw .invalidState(offset: offset, reason: error)
        }
    }

    /// The raw, checksum-verified frame of the tab at `index`: what a new snapshot copies for a
    /// tab that was never realized.
    public func historyFrame(at index: Int) throws(SessionFormatError) -> [UInt8] {
        try readHistory(at: index).frame
    }

    /// One pread of the tab's frame, checked (magic, length, checksum, kind) to be exactly one
    /// navigation record.
    private func readHistory(at index: Int) throws(SessionFormatError) -> (frame: [UInt8], payload: [UInt8], offset: Int) {
        guard items.indices.contains(index) else {
            throw .invalidState(offset: sectionStart, reason: .navigationIndexOutOfRange(index, count: items.count))
        }
        let offset = sectionStart + items[index].historyOffset
        let frame = try source.read(offset: offset, count: items[index].historyLength)
        let (payload, end) = try Framing.readRecord(InMemoryBytes(frame, base: offset), at: offset, expecting: .navigation)
        guard end == offset + frame.count else {
            throw .invalidState(
                offset: offset,
                reason: .historyOutOfRange(
                    item: index, offset: UInt64(items[index].historyOffset), length: UInt32(frame.count),
                    section: UInt64(source.size - sectionStart)))
        }
        return (frame, payload, offset)
    }

    /// Fills the empty `list` with unrealized tabs; each reads its history from this snapshot
    /// when realized. Restored identifiers are reserved in `profile`. When a stored history
    /// does not read, `historyFallback` may supply the tab's history from elsewhere (the store
    /// looks in the generation before, and throws when that cannot be read: the tab then stays
    /// unrealized); when it has none, the tab degrades to the page its
    /// metadata names if `degraded` is given, and the read's error stands otherwise.
    public func restore(
        into list: WebStateList, profile: Profile, historyFallback: ((WebStateID) throws -> NavigationHistory?)? = nil,
        degraded: DegradedHistories? = nil
    ) throws(SessionFormatError) {
        var tabs: [RestoredTab] = []
        tabs.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            // Ids are unique across the window: one the other Browser holds is damage here,
            // as it is in a journal record (`JournalReplayer`).
            guard !profile.holdsWebState(item.id, outside: list) else {
                throw .invalidState(offset: Framing.fileHeaderSize, reason: .duplicateIdentifier(item.id.rawValue))
            }
            profile.reserveWebStateID(item.id)
            let webState = WebState(id: item.id, metadata: item.metadata) { [self] () throws -> NavigationHistory in
                do throws(SessionFormatError) {
                    return try self.history(at: index)
                } catch {
                    if let history = try historyFallback?(item.id) { return history }
                    guard let degraded else { throw error }
                    return degraded.degrade(item.id, metadata: item.metadata, reason: error)
                }
            }
            let opener = item.openerIndex.map {
                WebStateOpener(openerID: items[$0].id, navigationIndex: item.openerNavigationIndex)
            }
            tabs.append(RestoredTab(webState: webState, opener: opener))
        }
        do {
            try list.restore(tabs, activeIndex: activeIndex, pinnedCount: pinnedCount)
        } catch {
            // validate() has already ruled out everything restore() checks.
            throw .invalidState(offset: Framing.fileHeaderSize, reason: .replayMismatch("\(error)"))
        }
    }

    private static func validate(_ storage: ListStorage) throws(SessionFormatError.InvalidState) -> [SnapshotItem] {
        guard Limits.isValidCommandSeq(storage.lastCommandSeq) else { throw .seqOutOfRange(storage.lastCommandSeq) }
        let count = storage.items.count
        guard storage.activeIndex >= -1, storage.activeIndex < count else {
            throw .activeIndexOutOfRange(Int(storage.activeIndex), count: count)
        }
        guard storage.pinnedItemCount >= 0, storage.pinnedItemCount <= count else {
            throw .pinnedCountOutOfRange(Int(storage.pinnedItemCount), count: count)
        }
        var seen = Set<Int64>()
        var items: [SnapshotItem] = []
        items.reserveCapacity(count)
        for (index, item) in storage.items.enumerated() {
            guard let id = WebStateID(rawValue: item.identifier) else { throw .invalidIdentifier(item.identifier) }
            guard seen.insert(item.identifier).inserted else { throw .duplicateIdentifier(item.identifier) }
            var openerIndex: Int?
            if item.hasOpener {
                let opener = Int(item.opener.index)
                guard opener >= 0, opener < count, opener != index else {
                    throw .openerOutOfRange(item: index, opener: opener, count: count)
                }
                openerIndex = opener
            }
            // A frame is one navigation record: its length bounds what restore reads for it.
            let end = item.historyOffset.addingReportingOverflow(UInt64(item.historyLength))
            guard item.historyLength >= UInt32(Framing.recordHeaderSize),
                Int(item.historyLength) <= Framing.recordHeaderSize + Limits.maxRecordPayloadBytes, !end.overflow,
                end.partialValue <= storage.historySectionLength
            else {
                throw .historyOutOfRange(
                    item: index, offset: item.historyOffset, length: item.historyLength,
                    section: storage.historySectionLength)
            }
            items.append(
                SnapshotItem(
                    id: id, openerIndex: openerIndex, openerNavigationIndex: Int(item.opener.navigationIndex),
                    metadata: try item.metadata.model(), realizedAtSave: item.realized,
                    historyOffset: Int(item.historyOffset), historyLength: Int(item.historyLength)))
        }
        return items
    }
}
