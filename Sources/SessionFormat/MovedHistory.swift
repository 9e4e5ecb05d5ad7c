import BrowserModel
import HostLimits

/// A tab's history as another window carried it (`MovedTab.navigation`), checked as untrusted:
/// by the supervisor before it passes a move on, and by the window the tab moves to.
public struct MovedHistory: Sendable, Equatable {
    public let itemCount: Int
    public let currentIndex: Int?
    /// The bytes checked, and the history they hold, as realizing the tab would make it.
    private let bytes: [UInt8]
    private let history: NavigationHistory

    /// Decodes `bytes`, a NavigationStorage, with every check a stored history gets (the same
    /// code path, no second copy of the checks); its identifier must be `tab`. Bytes past
    /// Limits.maxMovedTabBytes are refused unread.
    public init(checking bytes: [UInt8], tab: Int64) throws(SessionFormatError) {
        guard bytes.count <= Limits.maxMovedTabBytes else {
            throw .movedTabTooLarge(bytes: bytes.count, limit: Limits.maxMovedTabBytes)
        }
        guard WebStateID(rawValue: tab) != nil else { throw .invalidState(offset: 0, reason: .invalidIdentifier(tab)) }
        let (storage, history) = try decodeCheckedHistory(bytes, of: tab, at: 0)
        // A history past today's bounds reads back cut: carried as stored, the bytes would then
        // say more than the tab they are made into holds.
        guard history.items.count == storage.items.count else {
            throw .invalidState(
                offset: 0, reason: .tooManyEntries(storage.items.count, limit: Limits.maxNavigationEntries))
        }
        self.bytes = bytes
        self.history = history
        itemCount = history.items.count
        currentIndex = history.currentIndex
    }
}

extension MovedHistory {
    /// The tab made from this history as tab `id` of the window it moved to, with the times it
    /// carried. Unrealized, its stored history is the bytes carried with only the identifier
    /// changed (spliced: the entries are neither decoded nor encoded again, so the history
    /// arrives as its window stored it); realized, the history in memory.
    public func makeTab(as id: WebStateID, creationTime: Timestamp, lastActiveTime: Timestamp, realized: Bool)
        throws(SessionFormatError) -> WebState
    {
        guard !realized else {
            let tab = WebState(id: id, creationTime: creationTime, history: history)
            tab.wasActivated(at: lastActiveTime)
            return tab
        }
        guard let payload = Self.splice(bytes, identifier: id.rawValue) else {
            throw .malformedPayload(offset: 0, reason: "a moved history holds a field this format never writes")
        }
        let stored = JournalTabs()
        let index = stored.keep(
            id, creationTime: creationTime, lastActiveTime: lastActiveTime, payload: payload, history: history)
        return WebState(
            id: id, creationTime: creationTime, lastActiveTime: lastActiveTime, storedIn: stored, at: index)
    }

    /// `bytes`, a NavigationStorage, with its identifier (field 1) `identifier`, first as an
    /// encoder writes it; every other field as it was. Nil for bytes whose top-level fields do
    /// not parse (groups, which no writer of this format makes, among them).
    static func splice(_ bytes: [UInt8], identifier: Int64) -> [UInt8]? {
        var spliced: [UInt8] = []
        spliced.reserveCapacity(bytes.count + 10)
        appendVarint(1 << 3, to: &spliced)
        appendVarint(UInt64(bitPattern: identifier), to: &spliced)
        var offset = 0
        while offset < bytes.count {
            let start = offset
            guard let tag = readVarint(bytes, &offset) else { return nil }
            switch tag & 7 {
            case 0: guard readVarint(bytes, &offset) != nil else { return nil }
            case 1: offset += 8
            case 5: offset += 4
            case 2:
                guard let length = readVarint(bytes, &offset), length <= UInt64(bytes.count - offset) else {
                    return nil
                }
                offset += Int(length)
            default: return nil
            }
            guard offset <= bytes.count else { return nil }
            if tag >> 3 != 1 { spliced += bytes[start..<offset] }
        }
        return spliced
    }

    private static func readVarint(_ bytes: [UInt8], _ offset: inout Int) -> UInt64? {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 7) {
            guard offset < bytes.count else { return nil }
            let byte = bytes[offset]
            offset += 1
            value |= UInt64(byte & 0x7F) << UInt64(shift)
            if byte & 0x80 == 0 { return value }
        }
        return nil
    }

    private static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value > 0x7F {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
}

/// `payload` decoded as the history of tab `id`, checked as every stored history is (its
/// identifier, its entries, its index); `offset` names where it was read.
func decodeCheckedHistory(_ payload: [UInt8], of id: Int64, at offset: Int) throws(SessionFormatError) -> (
    storage: NavigationStorage, history: NavigationHistory
) {
    let storage = try decodeMessage(NavigationStorage.self, payload, at: offset)
    guard storage.identifier == id else {
        throw .invalidState(offset: offset, reason: .historyIdentifierMismatch(expected: id, found: storage.identifier))
    }
    do {
        return (storage, try storage.model())
    } catch {
        throw .invalidState(offset: offset, reason: error)
    }
}

extension NavigationHistory {
    /// The history as tab `id`'s `NavigationStorage`, what a snapshot stores for a realized tab.
    public func storageBytes(as id: WebStateID) -> [UInt8] { encodeMessage(HistoryWire(id: id, history: self)) }
}
