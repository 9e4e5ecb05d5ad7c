import BrowserModel
import HostLimits
import SwiftProtobuf

// Protobuf records → model values, validated: a record that describes an impossible value gives
// `SessionFormatError.InvalidState`, never a trap. The other way, the model is encoded straight
// to the wire (`WireEncoding.swift`).

typealias ListStorage = Windowhost_Session_WebStateListStorage
typealias ItemStorage = Windowhost_Session_WebStateListItemStorage
typealias MetadataStorage = Windowhost_Session_WebStateMetadataStorage
typealias NavigationStorage = Windowhost_Session_NavigationStorage
typealias NavigationItemStorage = Windowhost_Session_NavigationItemStorage
typealias WebStateStorage = Windowhost_Session_WebStateStorage
typealias MutationStorage = Windowhost_Session_MutationRecord

extension NavigationItemStorage {
    /// The entry, refused when over the bounds a tab keeps: a record holds nothing the model
    /// would not take.
    func model() throws(SessionFormatError.InvalidState) -> NavigationItem {
        let item = NavigationItem(url: url, title: title, timestamp: Timestamp(microsecondsSinceEpoch: timestampUs))
        do {
            try item.check()
        } catch {
            throw .invalidNavigationItem(error)
        }
        return item
    }
}

extension NavigationStorage {
    /// The history; one stored over today's bounds (before they existed) comes back cut as a
    /// navigation would cut it.
    func model() throws(SessionFormatError.InvalidState) -> NavigationHistory {
        let index = Int(lastCommittedItemIndex)
        var models: [NavigationItem] = []
        models.reserveCapacity(items.count)
        for item in items { models.append(try item.model()) }
        // Each dropped entry took a navigation, each navigation a command.
        guard droppedItemCount >= 0, UInt64(droppedItemCount) <= Limits.maxCommandSeq else {
            throw .droppedCountOutOfRange(droppedItemCount)
        }
        guard
            let history = NavigationHistory(
                items: models, currentIndex: index == -1 ? nil : index, droppedItemCount: Int(droppedItemCount))
        else { throw .navigationIndexOutOfRange(index, count: items.count) }
        return history
    }
}

extension MetadataStorage {
    func model() throws(SessionFormatError.InvalidState) -> WebStateMetadata {
        guard navigationItemCount >= 0 else { throw .negativeCount(Int(navigationItemCount)) }
        do {
            try NavigationItem(url: activePage.url, title: activePage.title, timestamp: .zero).check()
        } catch {
            throw .invalidNavigationItem(error)
        }
        return WebStateMetadata(
            creationTime: Timestamp(microsecondsSinceEpoch: creationTimeUs),
            lastActiveTime: Timestamp(microsecondsSinceEpoch: lastActiveTimeUs),
            activePageTitle: activePage.title, activePageURL: activePage.url,
            navigationItemCount: Int(navigationItemCount))
    }
}

extension WebStateStorage {
    /// An unrealized tab made from the record, its history checked and kept in `stored` as
    /// bytes (a restored tab is realized when used, whether a snapshot or a journal held it).
    func makeWebState(keepingIn stored: JournalTabs) throws(SessionFormatError.InvalidState) -> (
        WebState, opener: WebStateOpener?
    ) {
        guard let id = WebStateID(rawValue: identifier) else { throw .invalidIdentifier(identifier) }
        guard navigation.identifier == identifier else {
            throw .historyIdentifierMismatch(expected: identifier, found: navigation.identifier)
        }
        let times = try metadata.model()
        let index = stored.keep(
            id, creationTime: times.creationTime, lastActiveTime: times.lastActiveTime, history: try navigation.model())
        let webState = WebState(
            id: id, creationTime: times.creationTime, lastActiveTime: times.lastActiveTime, storedIn: stored, at: index)
        var opener: WebStateOpener?
        if openerIdentifier != 0 {
            guard let openerID = WebStateID(rawValue: openerIdentifier) else {
                throw .invalidIdentifier(openerIdentifier)
            }
            opener = WebStateOpener(openerID: openerID, navigationIndex: Int(openerNavigationIndex))
        }
        return (webState, opener)
    }
}

/// Decodes a protobuf payload, turning its error into a typed one that names the offset.
func decodeMessage<M: SwiftProtobuf.Message>(_ type: M.Type, _ payload: [UInt8], at offset: Int)
    throws(SessionFormatError) -> M
{
    do {
        return try M(serializedBytes: payload)
    } catch {
        throw .malformedPayload(offset: offset, reason: "\(error)")
    }
}

/// Encodes a message this module built itself, in protobuf's wire format (`WireMessage`).
func encodeMessage(_ message: some WireMessage) -> [UInt8] { Wire.encode(message) }
