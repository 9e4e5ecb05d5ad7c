import BrowserModel

/// The tabs one journal replay made or navigated (`StoredTabs`), kept unrealized as snapshot
/// tabs are: per tab, its metadata and its latest history as the serialized `NavigationStorage`
/// a record carried or replay produced, so a restored window holds bytes, not decoded
/// histories, until a tab is realized. One entry per tab id: a later record of the same tab
/// overwrites it in place.
public final class JournalTabs: StoredTabs {
    private struct Entry {
        let id: WebStateID
        var metadata: WebStateMetadata
        var history: [UInt8]
    }

    private var entries: [Entry] = []
    private var positions: [WebStateID: Int] = [:]

    public init() {}

    /// Keeps `history` (checked by the caller) as tab `id`'s, its title, URL and item count
    /// taken from it as a realized tab's are; returns where it is kept.
    func keep(_ id: WebStateID, creationTime: Timestamp, lastActiveTime: Timestamp, history: NavigationHistory) -> Int {
        let metadata = WebStateMetadata(
            creationTime: creationTime, lastActiveTime: lastActiveTime,
            activePageTitle: history.currentItem?.title ?? "",
            activePageURL: history.currentItem?.url ?? "", navigationItemCount: history.items.count)
        let entry = Entry(
            id: id, metadata: metadata, history: encodeMessage(NavigationStorage(id: id, history: history)))
        if let position = positions[id] {
            entries[position] = entry
            return position
        }
        entries.append(entry)
        positions[id] = entries.count - 1
        assert(positions.count == entries.count, "one entry a tab")
        return entries.count - 1
    }

    public func metadata(at index: Int) -> WebStateMetadata { entries[index].metadata }

    public func textBytes(at index: Int) -> Int {
        entries[index].metadata.activePageTitle.utf8.count + entries[index].metadata.activePageURL.utf8.count
    }

    /// Decodes the kept bytes; they were checked when kept, so this fails only on a bug.
    public func history(at index: Int) throws -> NavigationHistory {
        let entry = entries[index]
        let storage = try decodeMessage(NavigationStorage.self, entry.history, at: 0)
        assert(storage.identifier == entry.id.rawValue, "a kept history is its own tab's")
        return try storage.model()
    }

    /// The kept history payload of the tab at `index`: what a new snapshot carries for it.
    public func historyPayload(at index: Int) -> [UInt8] { entries[index].history }
}
