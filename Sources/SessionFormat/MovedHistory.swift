import BrowserModel
import HostLimits

/// Placeholder of the worker branch's checked decoder (replaced by it at the merge).
public struct MovedHistory: Sendable, Equatable {
    public let itemCount: Int
    public let currentIndex: Int?

    public init(checking bytes: [UInt8], tab: Int64) throws(SessionFormatError) {
        guard bytes.count <= Limits.maxMovedTabBytes else { throw .recordTooLarge(offset: 0, length: bytes.count) }
        let storage = try decodeMessage(NavigationStorage.self, bytes, at: 0)
        guard storage.identifier == tab else {
            throw .invalidState(offset: 0, reason: .historyIdentifierMismatch(expected: tab, found: storage.identifier))
        }
        do {
            let history = try storage.model()
            (itemCount, currentIndex) = (history.items.count, history.currentIndex)
        } catch {
            throw .invalidState(offset: 0, reason: error)
        }
    }
}
