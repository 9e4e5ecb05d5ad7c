import BrowserModel
import HostLimits

/// A format-1 snapshot's list metadata: protobuf (`WebStateListStorage`), decoded whole and
/// checked in full. Still read, so every session written before format 2 restores; the next
/// compaction rewrites it as format 2.
///
///     file header (version 1) · record(listMetadata) · record(listMetadataContinuation) × n
///       · record(navigation) for each tab …
enum FormatOneMetadata {
    /// Reads the metadata records at `first`; checks that the history section ends the file.
    static func read(_ source: some ByteSource, at first: Int) throws(SessionFormatError)
        -> (items: [SnapshotItem], list: SnapshotReader.ListFields)
    {
        var (payload, end) = try Framing.readRecord(source, at: first, expecting: .listMetadata)
        // Items are counted on the wire before each record is decoded: a record of millions of
        // empty items costs one pass over its bytes, never their decoded structs.
        var itemCount = try countItems(payload, at: first, before: 0)
        var storage = try decodeMessage(ListStorage.self, payload, at: first)
        // Each record takes at least a header, and each continuation at least one item (the
        // writer starts one only for an item that does not fit): a count the file or the
        // bound on tabs cannot fill is refused before anything is read for it.
        guard Int(storage.continuationRecords) <= Limits.maxTabsPerBrowser,
            Int(storage.continuationRecords) <= (source.size - end) / Framing.recordHeaderSize
        else {
            throw .invalidState(
                offset: first,
                reason: .continuationsOutOfRange(Int(storage.continuationRecords), bytesLeft: source.size - end))
        }
        for _ in 0..<storage.continuationRecords {
            let offset = end
            (payload, end) = try Framing.readRecord(source, at: offset, expecting: .listMetadataContinuation)
            itemCount = try countItems(payload, at: offset, before: itemCount)
            storage.items += try decodeMessage(ListStorage.self, payload, at: offset).items
        }
        let expectedSize = UInt64(end).addingReportingOverflow(storage.historySectionLength)
        guard !expectedSize.overflow, expectedSize.partialValue == UInt64(source.size) else {
            throw .lengthMismatch(expected: Int(clamping: expectedSize.partialValue), actual: source.size)
        }
        let items: [SnapshotItem]
        do {
            items = try validate(storage)
        } catch {
            throw .invalidState(offset: first, reason: error)
        }
        return (
            items,
            SnapshotReader.ListFields(
                activeIndex: storage.activeIndex == -1 ? nil : Int(storage.activeIndex),
                pinnedCount: Int(storage.pinnedItemCount),
                lastCommandSeq: storage.lastCommandSeq, sectionStart: end)
        )
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
        // Frames follow each other as every format-1 writer laid them out: no two tabs share
        // one, so a small file cannot grow to gigabytes when its tabs are written again.
        var historiesEnd: UInt64 = 0
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
                Int(item.historyLength) <= Framing.recordHeaderSize + Limits.maxRecordPayloadBytes,
                item.historyOffset == historiesEnd,
                !end.overflow, end.partialValue <= storage.historySectionLength
            else {
                throw .historyOutOfRange(
                    item: index, offset: item.historyOffset, length: item.historyLength,
                    section: storage.historySectionLength)
            }
            historiesEnd = end.partialValue
            items.append(
                SnapshotItem(
                    id: id, openerIndex: openerIndex, openerNavigationIndex: Int(item.opener.navigationIndex),
                    metadata: try item.metadata.model(), realizedAtSave: item.realized,
                    historyOffset: Int(item.historyOffset), historyLength: Int(item.historyLength)))
        }
        guard historiesEnd == storage.historySectionLength else {
            throw .historyOutOfRange(
                item: count, offset: historiesEnd, length: 0, section: storage.historySectionLength)
        }
        return items
    }
}
