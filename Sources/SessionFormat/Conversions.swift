import BrowserModel
import HostLimits
import SwiftProtobuf

// Model values ⇄ protobuf records. Decoding directions validate: a record that describes an
// impossible value gives `SessionFormatError.InvalidState`, never a trap.

typealias ListStorage = Windowhost_Session_WebStateListStorage
typealias ItemStorage = Windowhost_Session_WebStateListItemStorage
typealias MetadataStorage = Windowhost_Session_WebStateMetadataStorage
typealias NavigationStorage = Windowhost_Session_NavigationStorage
typealias NavigationItemStorage = Windowhost_Session_NavigationItemStorage
typealias WebStateStorage = Windowhost_Session_WebStateStorage
typealias MutationStorage = Windowhost_Session_MutationRecord

extension NavigationItemStorage {
    init(_ item: NavigationItem) {
        self.init()
        url = item.url
        title = item.title
        timestampUs = item.timestamp.microsecondsSinceEpoch
    }

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
    init(id: WebStateID, history: NavigationHistory) {
        self.init()
        identifier = id.rawValue
        // The history's bounds keep its index far inside Int32.
        lastCommittedItemIndex = Int32(history.currentIndex ?? -1)
        items = history.items.map(NavigationItemStorage.init)
        droppedItemCount = Int64(history.droppedItemCount)
    }

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
    init(_ metadata: WebStateMetadata) {
        self.init()
        creationTimeUs = metadata.creationTime.microsecondsSinceEpoch
        lastActiveTimeUs = metadata.lastActiveTime.microsecondsSinceEpoch
        activePage.title = metadata.activePageTitle
        activePage.url = metadata.activePageURL
        navigationItemCount = Int32(clamping: metadata.navigationItemCount)
    }

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
    /// A tab entering a list, history included. An unrealized tab is realized for this (a tab
    /// moved between lists); if its history cannot be read, its current page from the metadata
    /// stands in for it, so nothing that was known is dropped.
    init(_ webState: WebState, opener: WebStateOpener?) {
        self.init()
        identifier = webState.id.rawValue
        if let opener {
            openerIdentifier = opener.openerID.rawValue
            openerNavigationIndex = Int32(clamping: opener.navigationIndex)
        }
        let history: NavigationHistory
        if let loaded = try? webState.navigationHistory() {
            history = loaded
        } else {
            let metadata = webState.metadata
            var fallback = NavigationHistory()
            fallback.commit(
                NavigationItem(
                    url: metadata.activePageURL, title: metadata.activePageTitle, timestamp: metadata.lastActiveTime))
            history = fallback
        }
        metadata = MetadataStorage(webState.metadata)
        navigation = NavigationStorage(id: webState.id, history: history)
    }

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

/// Encodes a message this module built itself; such a message always serializes.
func encodeMessage(_ message: some SwiftProtobuf.Message) -> [UInt8] {
    do {
        return try message.serializedBytes()
    } catch {
        preconditionFailure("serializing an in-memory protobuf message failed: \(error)")
    }
}
