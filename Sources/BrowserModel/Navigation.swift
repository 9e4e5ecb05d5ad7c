/// A point in time, in microseconds since the Unix epoch: the unit session records store, so a
/// value survives a save and restore unchanged.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var microsecondsSinceEpoch: Int64

    public init(microsecondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = microsecondsSinceEpoch
    }

    public static let zero = Timestamp(microsecondsSinceEpoch: 0)

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }

    public var description: String { "\(microsecondsSinceEpoch)µs" }
}

/// One entry of a tab's back/forward list.
public struct NavigationItem: Hashable, Sendable {
    public var url: String
    public var title: String
    public var timestamp: Timestamp

    public init(url: String, title: String = "", timestamp: Timestamp) {
        self.url = url
        self.title = title
        self.timestamp = timestamp
    }
}

/// A tab's navigation history: its items and which one is current.
public struct NavigationHistory: Hashable, Sendable {
    public private(set) var items: [NavigationItem]
    /// Index of the current item; nil only when there are no items.
    public private(set) var currentIndex: Int?

    public init() {
        items = []
        currentIndex = nil
    }

    /// Nil when `currentIndex` does not fit `items`.
    public init?(items: [NavigationItem], currentIndex: Int?) {
        if let currentIndex {
            guard items.indices.contains(currentIndex) else { return nil }
        } else {
            guard items.isEmpty else { return nil }
        }
        self.items = items
        self.currentIndex = currentIndex
    }

    public var currentItem: NavigationItem? { currentIndex.map { items[$0] } }

    /// Commits a new entry after the current one, dropping the forward history as a browser
    /// does; returns its index.
    @discardableResult
    public mutating func commit(_ item: NavigationItem) -> Int {
        let index = (currentIndex ?? -1) + 1
        commit(item, at: index)
        return index
    }

    /// Puts `item` at `index` (at most one past the end), drops every later entry and makes it
    /// current. False when `index` does not fit.
    @discardableResult
    public mutating func commit(_ item: NavigationItem, at index: Int) -> Bool {
        guard index >= 0, index <= items.count else { return false }
        items.removeSubrange(index...)
        items.append(item)
        currentIndex = index
        return true
    }

    /// Makes the existing item at `index` current (back/forward); false when there is none.
    @discardableResult
    public mutating func goToItem(at index: Int) -> Bool {
        guard items.indices.contains(index) else { return false }
        currentIndex = index
        return true
    }
}

/// What a tab's const getters answer without its history: the part of a session that restore
/// reads for every tab.
public struct WebStateMetadata: Hashable, Sendable {
    public var creationTime: Timestamp
    public var lastActiveTime: Timestamp
    public var activePageTitle: String
    public var activePageURL: String
    public var navigationItemCount: Int

    public init(
        creationTime: Timestamp, lastActiveTime: Timestamp, activePageTitle: String = "",
        activePageURL: String = "", navigationItemCount: Int = 0
    ) {
        self.creationTime = creationTime
        self.lastActiveTime = lastActiveTime
        self.activePageTitle = activePageTitle
        self.activePageURL = activePageURL
        self.navigationItemCount = navigationItemCount
    }
}
