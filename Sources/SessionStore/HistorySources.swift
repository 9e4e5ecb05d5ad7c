import BrowserModel
import SessionFormat

/// Where an unrealized tab's history frame is stored: what a new snapshot copies.
struct HistorySources {
    /// The snapshot the list was restored from. A tab still stored there finds its frame
    /// through its own stored content (`SnapshotReader.storedIndex`): no entry per tab, so a
    /// restore neither hashes nor allocates for its tabs here.
    var restored: SnapshotReader?
    /// After a compaction, the snapshot it proved, by tab (its order need not be the list's).
    private var proven: [WebStateID: (reader: SnapshotReader, index: Int)] = [:]

    /// Tab `id`'s frame is at `index` of `reader`, a compaction's proven snapshot.
    mutating func prove(_ id: WebStateID, at index: Int, in reader: SnapshotReader) {
        assert(index >= 0 && index < reader.count && reader.id(at: index) == id, "a tab's frame is its own")
        proven[id] = (reader, index)
    }

    /// Where `webState`'s frame is, if this store knows.
    func source(of webState: WebState) -> (reader: SnapshotReader, index: Int)? {
        if let source = proven[webState.id] { return source }
        guard let reader = restored, let stored = webState.storedContent, let index = reader.storedIndex(of: stored)
        else {
            return nil
        }
        return (reader, index)
    }

    mutating func removeAll(keepingCapacity: Bool = false) {
        restored = nil
        proven.removeAll(keepingCapacity: keepingCapacity)
    }
}
