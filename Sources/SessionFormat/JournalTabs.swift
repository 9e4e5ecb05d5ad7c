import BrowserModel

/// The tabs one journal replay made or navigated (`StoredTabs`), kept unrealized as snapshot
/// tabs are: per tab, its metadata and its latest history as the serialized `NavigationStorage`
/// a record carried or replay produced, so a restored window holds bytes, not decoded
/// histories, until a tab is realized. One entry per tab id: a later record of the same tab
/// replaces it.
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
        let navigationItemCount: Int
        var title: Range<Int>
        var url: Range<Int>
        var history: Range<Int>

        var byteCount: Int { title.count + url.count + history.count }
    }

    private var entries: [Entry] = []
    private var positions: [WebStateID: Int] = [:]
    private var bytes: [UInt8] = []
    /// The bytes of `bytes` some entry names.
    private var liveBytes = 0

    public init() {}

    /// Keeps `history` (checked by the caller) as tab `id`'s, its title, URL and item count
    /// taken from it as a realized tab's are; returns where it is kept.
    func keep(_ id: WebStateID, creationTime: Timestamp, lastActiveTime: Timestamp, history: NavigationHistory) -> Int {
        keep(
            id, creationTime: creationTime, lastActiveTime: lastActiveTime,
            payload: encodeMessage(HistoryWire(id: id, history: history)), history: history)
    }

    /// Keeps `payload`, tab `id`'s history encoded, which decodes to `history`.
    func keep(
        _ id: WebStateID, creationTime: Timestamp, lastActiveTime: Timestamp, payload: [UInt8],
        history: NavigationHistory
    ) -> Int {
        let current = history.currentItem
        let entry = Entry(
            id: id, creationTime: creationTime, lastActiveTime: lastActiveTime,
            navigationItemCount: history.items.count, title: append((current?.title ?? "").utf8),
            url: append((current?.url ?? "").utf8), history: append(payload))
        liveBytes += entry.byteCount
        if let position = positions[id] {
            liveBytes -= entries[position].byteCount
            entries[position] = entry
            dropLeftBytesIfMany()
            return position
        }
        entries.append(entry)
        positions[id] = entries.count - 1
        assert(positions.count == entries.count, "one entry a tab")
        return entries.count - 1
    }

    public func metadata(at index: Int) -> WebStateMetadata {
        let entry = entries[index]
        return WebStateMetadata(
            creationTime: entry.creationTime, lastActiveTime: entry.lastActiveTime,
            activePageTitle: String(decoding: bytes[entry.title], as: UTF8.self),
            activePageURL: String(decoding: bytes[entry.url], as: UTF8.self),
            navigationItemCount: entry.navigationItemCount)
    }

    public func textBytes(at index: Int) -> Int { entries[index].title.count + entries[index].url.count }

    /// Decodes the kept bytes; they were checked when kept, so this fails only on a bug.
    public func history(at index: Int) throws -> NavigationHistory {
        let entry = entries[index]
        let storage = try decodeMessage(NavigationStorage.self, Array(bytes[entry.history]), at: 0)
        assert(storage.identifier == entry.id.rawValue, "a kept history is its own tab's")
        return try storage.model()
    }

    /// The kept history payload of the tab at `index`: what a new snapshot carries for it.
    public func historyPayload(at index: Int) -> [UInt8] { Array(bytes[entries[index].history]) }

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
            entries[index].title = move(entries[index].title)
            entries[index].url = move(entries[index].url)
            entries[index].history = move(entries[index].history)
        }
        assert(packed.count == liveBytes, "the live bytes are what the entries name")
        bytes = packed
    }
}
