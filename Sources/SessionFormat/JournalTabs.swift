import BrowserModel

/// The tabs one journal replay made or navigated (`StoredTabs`), kept unrealized as snapshot
/// tabs are: per tab, its metadata and its latest history as the serialized `NavigationStorage`
/// a record carried or replay produced, so a restored window holds bytes, not decoded
/// histories, until a tab is realized. One entry per tab id: a later record of the same tab
/// replaces it.
///
/// A tab the replay navigates is decoded once, at its first navigation record, and held in
/// memory while the replay lasts (`keepReplaying`), each later record changing it in place;
/// `storeReplayed` encodes every such history once the replay ends. Decoding and encoding the
/// history again at each record made a tab's restore quadratic in its history's bytes.
///
/// Every tab's title, URL and history lie one after another in one buffer, not in three
/// allocations a tab (a window of 10,000 tabs held in its journal kept 30,000). A tab kept
/// again leaves its old bytes behind; once those outnumber the live ones, the live ones are
/// copied together again, so the buffer stays within twice what the tabs hold.
public final class JournalTabs: StoredTabs {
    private struct Entry {
        let id: WebStateID
        let creationTime: Timestamp
        let lastActiveTime: Timestamp
        var content: Content

        var byteCount: Int {
            guard case .stored(let stored) = content else { return 0 }
            return stored.title.count + stored.url.count + stored.history.count
        }
    }

    /// Where a tab's title, URL and history are.
    private enum Content {
        /// In `bytes`, the history encoded.
        case stored(StoredBytes)
        /// In memory, while the replay that navigates the tab lasts.
        case replaying(NavigationHistory)
    }

    private struct StoredBytes {
        let navigationItemCount: Int
        var title: Range<Int>
        var url: Range<Int>
        var history: Range<Int>
    }

    private var entries: [Entry] = []
    private var positions: [WebStateID: Int] = [:]
    private var bytes: [UInt8] = []
    /// The bytes of `bytes` some entry names.
    private var liveBytes = 0
    /// How many histories were decoded from, and encoded into, the buffer: what a replay's
    /// cost per tab is read by (a navigation record must not add to either).
    private(set) var historiesDecoded = 0
    private(set) var historiesEncoded = 0

    public init() {}

    /// Keeps `history` (checked by the caller) as tab `id`'s, encoded, its title, URL and item
    /// count taken from it as a realized tab's are; returns where it is kept.
    func keep(_ id: WebStateID, creationTime: Timestamp, lastActiveTime: Timestamp, history: NavigationHistory) -> Int {
        put(
            Entry(
                id: id, creationTime: creationTime, lastActiveTime: lastActiveTime,
                content: .stored(store(history, of: id))))
    }

    /// Keeps `payload`, tab `id`'s history encoded, which decodes to `history` (a history moved
    /// in from another window, carried as stored): its bytes are kept as they are.
    func keep(
        _ id: WebStateID, creationTime: Timestamp, lastActiveTime: Timestamp, payload: [UInt8],
        history: NavigationHistory
    ) -> Int {
        put(
            Entry(
                id: id, creationTime: creationTime, lastActiveTime: lastActiveTime,
                content: .stored(store(payload, of: history))))
    }

    /// Keeps `history` (checked by the caller) as tab `id`'s, in memory until `storeReplayed`:
    /// what a navigation record changes in place (`changeReplaying`). Returns where it is kept.
    func keepReplaying(_ id: WebStateID, creationTime: Timestamp, lastActiveTime: Timestamp, history: NavigationHistory)
        -> Int
    {
        put(Entry(id: id, creationTime: creationTime, lastActiveTime: lastActiveTime, content: .replaying(history)))
    }

    /// Whether the tab at `index` is held in memory (`keepReplaying`).
    func isReplaying(at index: Int) -> Bool {
        guard entries.indices.contains(index), case .replaying = entries[index].content else { return false }
        return true
    }

    /// Changes the history the tab at `index` holds in memory, in place: taken out of its entry
    /// first, so it is uniquely referenced and a commit appends instead of copying every item.
    func changeReplaying<Failure: Error>(at index: Int, _ body: (inout NavigationHistory) throws(Failure) -> Void)
        throws(Failure)
    {
        guard case .replaying(var history) = entries[index].content else {
            preconditionFailure("only a history held in memory is changed in place")
        }
        entries[index].content = .replaying(NavigationHistory())
        defer { entries[index].content = .replaying(history) }
        try body(&history)
    }

    /// Encodes every history held in memory into the buffer: what the replay that navigated
    /// them calls once it has applied its last record.
    public func storeReplayed() {
        for index in entries.indices {
            guard case .replaying(let history) = entries[index].content else { continue }
            entries[index].content = .stored(store(history, of: entries[index].id))
            liveBytes += entries[index].byteCount
        }
        assert(entries.indices.allSatisfy { !isReplaying(at: $0) }, "every history is stored")
        dropLeftBytesIfMany()
    }

    public func metadata(at index: Int) -> WebStateMetadata {
        let entry = entries[index]
        let (title, url, count) =
            switch entry.content {
            case .stored(let stored):
                (
                    String(decoding: bytes[stored.title], as: UTF8.self),
                    String(decoding: bytes[stored.url], as: UTF8.self), stored.navigationItemCount
                )
            case .replaying(let history):
                (history.currentItem?.title ?? "", history.currentItem?.url ?? "", history.items.count)
            }
        return WebStateMetadata(
            creationTime: entry.creationTime, lastActiveTime: entry.lastActiveTime, activePageTitle: title,
            activePageURL: url, navigationItemCount: count)
    }

    public func textBytes(at index: Int) -> Int {
        switch entries[index].content {
        case .stored(let stored): stored.title.count + stored.url.count
        case .replaying(let history): history.currentItem?.textBytes ?? 0
        }
    }

    /// The tab's history: decoded from the kept bytes (checked when kept, so this fails only on
    /// a bug), or the one held in memory.
    public func history(at index: Int) throws -> NavigationHistory {
        let entry = entries[index]
        switch entry.content {
        case .stored(let stored):
            historiesDecoded += 1
            let storage = try decodeMessage(NavigationStorage.self, Array(bytes[stored.history]), at: 0)
            assert(storage.identifier == entry.id.rawValue, "a kept history is its own tab's")
            return try storage.model()
        case .replaying(let history):
            return history
        }
    }

    /// The kept history payload of the tab at `index`: what a new snapshot carries for it.
    public func historyPayload(at index: Int) -> [UInt8] {
        let entry = entries[index]
        switch entry.content {
        case .stored(let stored): return Array(bytes[stored.history])
        case .replaying(let history): return encodeMessage(HistoryWire(id: entry.id, history: history))
        }
    }

    /// Puts `entry` in its tab's place, or a new one; returns where.
    private func put(_ entry: Entry) -> Int {
        liveBytes += entry.byteCount
        if let position = positions[entry.id] {
            liveBytes -= entries[position].byteCount
            entries[position] = entry
            dropLeftBytesIfMany()
            return position
        }
        entries.append(entry)
        positions[entry.id] = entries.count - 1
        assert(positions.count == entries.count, "one entry a tab")
        return entries.count - 1
    }

    /// Appends the title, URL and encoded history of tab `id`'s `history` to the buffer.
    private func store(_ history: NavigationHistory, of id: WebStateID) -> StoredBytes {
        historiesEncoded += 1
        return store(encodeMessage(HistoryWire(id: id, history: history)), of: history)
    }

    /// Appends the title and URL of `history`'s current entry and `payload`, its encoding.
    private func store(_ payload: [UInt8], of history: NavigationHistory) -> StoredBytes {
        let current = history.currentItem
        return StoredBytes(
            navigationItemCount: history.items.count, title: append((current?.title ?? "").utf8),
            url: append((current?.url ?? "").utf8), history: append(payload))
    }

    private func append(_ piece: some Collection<UInt8>) -> Range<Int> {
        let start = bytes.count
        bytes.append(contentsOf: piece)
        return start..<bytes.count
    }

    /// Copies the live bytes together once the left ones outnumber them (and a page's worth).
    private func dropLeftBytesIfMany() {
        guard bytes.count - liveBytes > max(liveBytes, 1 << 12) else { return }
        var packed: [UInt8] = []
        packed.reserveCapacity(liveBytes)
        func move(_ range: Range<Int>) -> Range<Int> {
            let start = packed.count
            packed.append(contentsOf: bytes[range])
            return start..<packed.count
        }
        for index in entries.indices {
            guard case .stored(var stored) = entries[index].content else { continue }
            stored.title = move(stored.title)
            stored.url = move(stored.url)
            stored.history = move(stored.history)
            entries[index].content = .stored(stored)
        }
        assert(packed.count == liveBytes, "the live bytes are what the entries name")
        bytes = packed
    }
}
