import BrowserModel

@testable import SessionFormat

// The model mapped to `session.proto`'s messages as SwiftProtobuf values: the reference the
// store's own encoder (`WireEncoding.swift`) is checked against, and how these tests build
// records and format-1 files by hand.

extension NavigationItemStorage {
    init(_ item: NavigationItem) {
        self.init()
        url = item.url
        title = item.title
        timestampUs = item.timestamp.microsecondsSinceEpoch
    }
}

extension NavigationStorage {
    init(id: WebStateID, history: NavigationHistory) {
        self.init()
        identifier = id.rawValue
        lastCommittedItemIndex = Int32(history.currentIndex ?? -1)
        items = history.items.map(NavigationItemStorage.init)
        droppedItemCount = Int64(history.droppedItemCount)
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
}

extension WebStateStorage {
    /// A tab entering a list, history included (`TabWire.history(of:)`).
    init(_ webState: WebState, opener: WebStateOpener?) {
        self.init()
        identifier = webState.id.rawValue
        if let opener {
            openerIdentifier = opener.openerID.rawValue
            openerNavigationIndex = Int32(clamping: opener.navigationIndex)
        }
        let history = TabWire.history(of: webState)
        metadata = MetadataStorage(webState.metadata)
        navigation = NavigationStorage(id: webState.id, history: history)
    }
}

extension JournalRecorder {
    /// The records made since the last call, read back from the payloads the recorder wrote.
    func takeRecords() throws -> [JournalRecord] {
        try takePayloads().enumerated().map { JournalRecord(try decodeMessage(MutationStorage.self, $1, at: $0)) }
    }
}
