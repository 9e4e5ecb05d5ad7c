import HostLimits

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

/// Why an entry was refused before it reached a history: the model stores nothing it could not
/// save, and stores nothing truncated.
public enum NavigationItemError: Error, Equatable, Sendable, CustomStringConvertible {
    case urlTooLong(bytes: Int, limit: Int)
    case titleTooLong(bytes: Int, limit: Int)
    case forbiddenCharacter(ForbiddenCharacter)

    public var description: String {
        switch self {
        case .forbiddenCharacter(let forbidden): "\(forbidden)"
        case .urlTooLong(let bytes, let limit): "URL of \(bytes) bytes is longer than the \(limit) a tab keeps"
        case .titleTooLong(let bytes, let limit): "title of \(bytes) bytes is longer than the \(limit) a tab keeps"
        }
    }
}

extension NavigationItem {
    /// An entry a tab may take from outside (a command): its URL and title within `Limits`, and
    /// holding no character `ForbiddenCharacter` refuses.
    public static func checked(url: String, title: String = "", timestamp: Timestamp) throws(NavigationItemError)
        -> NavigationItem
    {
        let item = NavigationItem(url: url, title: title, timestamp: timestamp)
        try item.check()
        if let forbidden = ForbiddenCharacter.inURL(url) ?? ForbiddenCharacter.inTitle(title) {
            throw .forbiddenCharacter(forbidden)
        }
        return item
    }

    /// Throws unless the URL and title are within `Limits`: the stored bounds, which text read
    /// back from a session file is held to (one written before `ForbiddenCharacter` still reads).
    public func check() throws(NavigationItemError) {
        guard Limits.isValidURL(url) else { throw .urlTooLong(bytes: url.utf8.count, limit: Limits.maxURLBytes) }
        guard Limits.isValidTitle(title) else {
            throw .titleTooLong(bytes: title.utf8.count, limit: Limits.maxTitleBytes)
        }
    }

    /// What the entry counts against `Limits.maxHistoryTextBytes`.
    public var textBytes: Int { url.utf8.count + title.utf8.count }
}

/// A tab's navigation history: its items and which one is current. Bounded as a browser bounds
/// it: at most `Limits.maxNavigationEntries` entries and `Limits.maxHistoryTextBytes` of URLs
/// and titles; past either the oldest entries are dropped (see `enforceBounds`), so every
/// history fits one stored record.
public struct NavigationHistory: Hashable, Sendable {
    public private(set) var items: [NavigationItem]
    /// Index of the current item; nil only when there are no items.
    public private(set) var currentIndex: Int?
    /// Entries dropped from the front by the bounds over the tab's life. A journal record names
    /// an entry by its number, `droppedItemCount + index`, counted from the tab's first entry
    /// ever: a later drop does not change it, so replay finds the same entry.
    public private(set) var droppedItemCount: Int

    public init() {
        items = []
        currentIndex = nil
        droppedItemCount = 0
    }

    /// Nil when `currentIndex` does not fit `items`, or `droppedItemCount` is outside
    /// 0...`Limits.maxCommandSeq` (each drop takes a navigation, each navigation a command). A
    /// history over the bounds (one stored before they existed) is cut as a navigation would
    /// cut it.
    public init?(items: [NavigationItem], currentIndex: Int?, droppedItemCount: Int = 0) {
        if let currentIndex {
            guard items.indices.contains(currentIndex) else { return nil }
        } else {
            guard items.isEmpty else { return nil }
        }
        guard droppedItemCount >= 0, UInt64(droppedItemCount) <= Limits.maxCommandSeq else { return nil }
        self.items = items
        self.currentIndex = currentIndex
        self.droppedItemCount = droppedItemCount
        enforceBounds()
    }

    public var currentItem: NavigationItem? { currentIndex.map { items[$0] } }

    /// The index entry number `number` (see `droppedItemCount`) has now: nil when that entry was
    /// dropped or lies more than one past the end.
    public func index(ofItemNumber number: Int64) -> Int? {
        let index = number.subtractingReportingOverflow(Int64(droppedItemCount))
        guard !index.overflow, let local = Int(exactly: index.partialValue), local >= 0, local <= items.count else {
            return nil
        }
        return local
    }

    /// The number (see `droppedItemCount`) of the entry at `index`.
    public func itemNumber(at index: Int) -> Int64 { Int64(droppedItemCount) + Int64(index) }

    /// Commits a new entry after the current one, dropping the forward history as a browser
    /// does, then the oldest entries past the bounds; returns its index.
    @discardableResult
    public mutating func commit(_ item: NavigationItem) -> Int {
        // One past the current entry always fits.
        commit(item, at: (currentIndex ?? -1) + 1) ?? 0
    }

    /// Puts `item` at `index` (at most one past the end), drops every later entry and makes it
    /// current, then drops the oldest entries past the bounds. The new entry's index, or nil
    /// when `index` does not fit.
    @discardableResult
    public mutating func commit(_ item: NavigationItem, at index: Int) -> Int? {
        guard index >= 0, index <= items.count else { return nil }
        items.removeSubrange(index...)
        items.append(item)
        currentIndex = index
        enforceBounds()
        return currentIndex
    }

    /// Makes the existing item at `index` current (back/forward); false when there is none.
    @discardableResult
    public mutating func goToItem(at index: Int) -> Bool {
        guard items.indices.contains(index) else { return false }
        currentIndex = index
        return true
    }

    /// Drops entries until the history is within `Limits.maxNavigationEntries` and
    /// `Limits.maxHistoryTextBytes`, keeping the entries nearest the current one: the oldest go
    /// first (after a commit, the current entry is the newest), then forward entries from the
    /// far end. The current entry always stays.
    private mutating func enforceBounds() {
        guard var current = currentIndex else { return }
        var textBytes = items.reduce(0) { $0 + $1.textBytes }
        var dropFront = 0
        var end = items.count
        while end - dropFront > 1,
            end - dropFront > Limits.maxNavigationEntries || textBytes > Limits.maxHistoryTextBytes
        {
            if current > dropFront {
                textBytes -= items[dropFront].textBytes
                dropFront += 1
            } else {
                end -= 1
                textBytes -= items[end].textBytes
            }
        }
        guard dropFront > 0 || end < items.count else { return }
        items.removeSubrange(end...)
        items.removeSubrange(..<dropFront)
        current -= dropFront
        currentIndex = current
        droppedItemCount += dropFront
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
