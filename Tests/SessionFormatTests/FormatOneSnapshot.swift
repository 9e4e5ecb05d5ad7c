import BrowserModel
import HostLimits
import SwiftProtobuf

@testable import SessionFormat

/// The format-1 snapshot writer as it was before format 2 (protobuf list metadata, split into
/// continuation records past `recordLimit`): kept here so the tests write format-1 files the way
/// every release before format 2 did, and prove they still read.
enum FormatOneSnapshot {
    static var header: [UInt8] { Framing.fileHeader(.snapshot, version: 1) }

    /// `list` after `lastCommandSeq` as format 1; unrealized tabs' frames from `storedHistory`.
    static func encode(
        _ list: WebStateList, lastCommandSeq: UInt64, recordLimit: Int = Limits.maxRecordPayloadBytes,
        storedHistory: (WebState) throws -> [UInt8] = {
            throw SessionFormatError.readFailed(offset: 0, reason: "no stored history for \($0.id)")
        }
    ) throws -> [UInt8] {
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
                frame = try Framing.record(
                    .navigation, payload: protobufBytes(NavigationStorage(id: webState.id, history: history)))
            } else {
                frame = try storedHistory(webState)
            }
            var item = ItemStorage()
            item.identifier = webState.id.rawValue
            if let opener = try list.opener(at: index), let openerIndex = positions[opener.openerID] {
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
        var bytes = header
        for (kind, payload) in metadataRecords(storage, recordLimit: recordLimit) {
            try Framing.appendRecord(kind, payload: payload, to: &bytes)
        }
        return bytes + section
    }

    /// Room kept in the first record for the list's own fields (five varints and their tags).
    private static let listFieldsRoom = 64

    /// The list metadata as records of at most `recordLimit` bytes: the first holds the list's
    /// fields and as many items as fit, each continuation as many more.
    static func metadataRecords(_ storage: ListStorage, recordLimit: Int = Limits.maxRecordPayloadBytes) -> [(
        RecordKind, [UInt8]
    )] {
        var chunks: [[UInt8]] = [[]]
        for item in storage.items {
            var field: [UInt8] = [0x0A]  // field 1 (items), length-delimited
            let encoded = protobufBytes(item)
            field.appendVarint(UInt64(encoded.count))
            field += encoded
            let room = recordLimit - (chunks.count == 1 ? listFieldsRoom : 0)
            if !chunks[chunks.count - 1].isEmpty, chunks[chunks.count - 1].count + field.count > room {
                chunks.append([])
            }
            chunks[chunks.count - 1] += field
        }
        var head = storage
        head.items = []
        head.continuationRecords = UInt32(chunks.count - 1)
        var records = [(RecordKind.listMetadata, protobufBytes(head) + chunks[0])]
        for chunk in chunks.dropFirst() { records.append((.listMetadataContinuation, chunk)) }
        return records
    }
}

/// A format-1 message (list metadata, which only these tests still write) in protobuf's wire
/// format, by SwiftProtobuf: the store's own encoder (`WireMessage`) covers what it writes today.
func protobufBytes(_ message: some SwiftProtobuf.Message) -> [UInt8] {
    do {
        return try message.serializedBytes()
    } catch {
        preconditionFailure("serializing an in-memory protobuf message failed: \(error)")
    }
}
