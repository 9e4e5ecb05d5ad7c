import HostLimits

/// A tab's identity: unique within a profile, stable across save and restore, in
/// 1...`Limits.maxWebStateID`.
public struct WebStateID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: Int64

    /// Nil unless `rawValue` is in 1...`Limits.maxWebStateID` (0 means "none" in session
    /// records; anything higher is damage, never a value to count up from).
    public init?(rawValue: Int64) {
        guard rawValue > 0, rawValue <= Limits.maxWebStateID else { return nil }
        self.rawValue = rawValue
    }

    public static func < (lhs: WebStateID, rhs: WebStateID) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "\(rawValue)" }
}

/// The identifiers of the tabs a list is restored with, each checked to appear once: what the
/// restore checks its openers and the profile's other lists against. Built without hashing
/// (sorted: a list's identifiers are mostly in the order they were handed out, so sorting
/// them costs about one pass) and searched by bisection.
public struct UniqueWebStateIDs: Sendable {
    private let sorted: [WebStateID]

    /// An identifier that appears more than once (the lowest such).
    public struct Duplicate: Error, Equatable, Sendable {
        public let id: WebStateID
    }

    public init(_ ids: [WebStateID]) throws(Duplicate) {
        let sorted = ids.sorted()
        for index in sorted.indices.dropFirst() where sorted[index] == sorted[index - 1] {
            throw Duplicate(id: sorted[index])
        }
        self.sorted = sorted
    }

    public var count: Int { sorted.count }
    public var isEmpty: Bool { sorted.isEmpty }

    public func contains(_ id: WebStateID) -> Bool {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = low + (high - low) / 2
            if sorted[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low < sorted.count && sorted[low] == id
    }
}

/// Hands out `WebStateID`s in increasing order; after a restore it is told the identifiers it
/// must never hand out again.
public struct WebStateIDGenerator: Sendable {
    private var last: Int64

    public init(after last: Int64 = 0) { self.last = max(0, last) }

    /// Whether every identifier up to `Limits.maxWebStateID` is taken: `next()` must not be
    /// called then (a window refuses to open tabs instead).
    public var isExhausted: Bool { last >= Limits.maxWebStateID }

    public mutating func next() -> WebStateID {
        precondition(!isExhausted, "callers check isExhausted before asking for an identifier")
        last += 1
        // `last` starts at 0 or above, only grows, and stays within the bound checked above.
        return WebStateID(rawValue: last)!
    }

    /// Makes sure `id` and everything below it are never handed out.
    public mutating func reserve(_ id: WebStateID) { last = max(last, id.rawValue) }
}

/// Told of a tab's one-way transitions and committed navigations. All methods are optional.
public protocol WebStateObserver: AnyObject {
    func webStateRealized(_ webState: WebState)
    /// `index` is the entry's index once the history's bounds have dropped what they drop.
    func webState(_ webState: WebState, didCommitNavigationAt index: Int, newItem: Bool)
    func webStateDestroyed(_ webState: WebState)
}

extension WebStateObserver {
    public func webStateRealized(_ webState: WebState) {}
    public func webState(_ webState: WebState, didCommitNavigationAt index: Int, newItem: Bool) {}
    public func webStateDestroyed(_ webState: WebState) {}
}

/// Something attached to a tab for the tab's lifetime (the seed's tab helpers). The tab owns
/// its helpers and tells them itself when it is realized: a helper needs no observer
/// registration (nor a reference back), so attaching one to each restored tab stays cheap.
public protocol TabHelper: AnyObject {
    /// The tab was realized (once, before its observers hear of it).
    func webStateRealized(_ webState: WebState)
    /// The tab leaves its list or is destroyed: let go of it.
    func shutdown()
}

extension TabHelper {
    public func webStateRealized(_ webState: WebState) {}
}

public enum WebStateError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The stored history of an unrealized tab could not be read; the tab stays unrealized and
    /// its metadata stays available.
    case historyUnavailable(WebStateID, reason: String)
    /// A navigation index that the tab's history does not have.
    case navigationIndexOutOfRange(WebStateID, index: Int, count: Int)
    /// The tab was destroyed (closed) and can no longer be used.
    case destroyed(WebStateID)
    /// An entry over the bounds a tab keeps (`Limits`): refused, nothing changed.
    case invalidItem(WebStateID, NavigationItemError)

    public var description: String {
        switch self {
        case .historyUnavailable(let id, let reason): "tab \(id): history unavailable: \(reason)"
        case .navigationIndexOutOfRange(let id, let index, let count):
            "tab \(id): navigation index \(index) out of range (\(count) items)"
        case .destroyed(let id): "tab \(id) was closed"
        case .invalidItem(let id, let error): "tab \(id): \(error)"
        }
    }
}

/// Where unrealized tabs find their metadata and history until asked for them: one object per
/// restored snapshot, shared by all its tabs, so restoring a tab allocates the tab alone.
public protocol StoredTabs: AnyObject {
    /// The metadata of the tab stored at `index`; its strings are made now.
    func metadata(at index: Int) -> WebStateMetadata
    /// Reads the history of the tab stored at `index`.
    func history(at index: Int) throws -> NavigationHistory
    /// The UTF-8 bytes of the title and URL of the tab stored at `index`, without making
    /// them: what a restored tab counts toward its window's bound (`WebState.textBytes`).
    func textBytes(at index: Int) -> Int
}

/// A tab. It is either *realized* (its navigation history in memory) or *unrealized* (a place
/// in the stored tabs it was restored from, where its metadata and history wait). Const getters
/// work in both states; anything that needs the history realizes it first. Realization is
/// one-way and observers hear of it exactly once.
public final class WebState {
    private enum Content {
        case unrealized(any StoredTabs, index: Int)
        case realized(NavigationHistory)
    }

    public let id: WebStateID
    public let creationTime: Timestamp
    public private(set) var lastActiveTime: Timestamp
    public private(set) var isDestroyed = false
    private var content: Content {
        didSet { contentChanged() }
    }
    /// The UTF-8 bytes of the URL and title the tab shows (`url`, `title`): what it counts in
    /// its list's `textBytes`, kept as its content changes.
    public private(set) var textBytes: Int
    /// The list holding the tab, told when `textBytes` changes (`WebStateList` sets it).
    weak var list: WebStateList?
    private var observers = ObserverList()
    private var helpers = HelperList()

    /// A realized tab, as a new tab or a prerendered page is.
    public init(id: WebStateID, creationTime: Timestamp, history: NavigationHistory = NavigationHistory()) {
        self.id = id
        self.creationTime = creationTime
        self.lastActiveTime = creationTime
        self.content = .realized(history)
        self.textBytes = Self.textBytes(of: .realized(history))
    }

    /// An unrealized tab, as restore makes them: the tab stored at `index` of `stored`, read
    /// from there when asked for (its times are the only fields kept in the tab itself).
    public init(
        id: WebStateID, creationTime: Timestamp, lastActiveTime: Timestamp, storedIn stored: any StoredTabs,
        at index: Int
    ) {
        self.id = id
        self.creationTime = creationTime
        self.lastActiveTime = lastActiveTime
        self.content = .unrealized(stored, index: index)
        self.textBytes = stored.textBytes(at: index)
    }

    private static func textBytes(of content: Content) -> Int {
        switch content {
        case .unrealized(let stored, let index): stored.textBytes(at: index)
        case .realized(let history): history.currentItem.map { $0.url.utf8.count + $0.title.utf8.count } ?? 0
        }
    }

    /// Counts the text the tab shows now, and tells its list by how much it changed. Every
    /// change of `content` comes here, so the count is never stale (realizing a tab whose stored
    /// metadata disagrees with its history changes what it shows, too).
    private func contentChanged() {
        let now = Self.textBytes(of: content)
        guard now != textBytes else { return }
        let before = textBytes
        textBytes = now
        list?.tabTextChanged(from: before, to: now)
    }

    public var isRealized: Bool {
        if case .realized = content { return true }
        return false
    }

    // MARK: Const getters: answered in either state, never realize.

    public var metadata: WebStateMetadata {
        switch content {
        case .unrealized(let stored, let index):
            var metadata = stored.metadata(at: index)
            metadata.lastActiveTime = lastActiveTime
            return metadata
        case .realized(let history):
            return WebStateMetadata(
                creationTime: creationTime, lastActiveTime: lastActiveTime,
                activePageTitle: history.currentItem?.title ?? "",
                activePageURL: history.currentItem?.url ?? "",
                navigationItemCount: history.items.count)
        }
    }

    public var title: String { metadata.activePageTitle }
    public var url: String { metadata.activePageURL }
    public var navigationItemCount: Int { metadata.navigationItemCount }

    /// The history if the tab is realized; never triggers realization.
    public var loadedHistory: NavigationHistory? {
        if case .realized(let history) = content { return history }
        return nil
    }

    /// Where an unrealized tab's metadata and history wait (what a save copies them from, the
    /// seed's "retrieving saved state"); nil once realized.
    public var storedContent: (tabs: any StoredTabs, index: Int)? {
        if case .unrealized(let stored, let index) = content { return (stored, index) }
        return nil
    }

    /// The stored history of an unrealized tab, read without realizing it: what a journal
    /// replay applies a navigation record to. Nil when the tab is realized.
    public func storedHistory() throws(WebStateError) -> NavigationHistory? {
        guard case .unrealized(let stored, let index) = content else { return nil }
        do {
            return try stored.history(at: index)
        } catch {
            throw .historyUnavailable(id, reason: "\(error)")
        }
    }

    /// Journal replay moved an unrealized tab's content: a navigation record applied to its
    /// stored history left the result at `index` of `stored`. The tab stays unrealized; its
    /// observers hear of no navigation (replay restores, it does not browse).
    public func restoreStoredContent(in stored: any StoredTabs, at index: Int) {
        precondition(!isRealized && !isDestroyed, "only an unrealized tab's stored content moves")
        content = .unrealized(stored, index: index)
    }

    // MARK: Uses that need the history: realize first.

    /// Realizes the tab now (the seed's `ForceRealized`). No-op when already realized.
    public func forceRealized() throws(WebStateError) {
        guard case .unrealized(let stored, let index) = content else { return }
        guard !isDestroyed else { throw .destroyed(id) }
        let history: NavigationHistory
        do {
            history = try stored.history(at: index)
        } catch {
            throw .historyUnavailable(id, reason: "\(error)")
        }
        content = .realized(history)
        helpers.visit { $0.webStateRealized(self) }
        forEachObserver { $0.webStateRealized(self) }
    }

    /// The navigation history, realizing the tab if needed.
    public func navigationHistory() throws(WebStateError) -> NavigationHistory {
        try forceRealized()
        guard case .realized(let history) = content else { throw .destroyed(id) }
        return history
    }

    /// Commits a navigation to `item` after the current entry (the oldest entries past the
    /// history's bounds dropped); returns its index. An item over `Limits` is refused.
    @discardableResult
    public func commitNavigation(to item: NavigationItem) throws(WebStateError) -> Int {
        try check(item)
        let index = try mutateHistory { $0.commit(item) }
        didCommitNavigation(at: index, newItem: true)
        return index
    }

    /// Puts `item` at `index`, dropping later entries, then the oldest past the bounds (a
    /// journal replay of a new entry).
    public func commitNavigation(to item: NavigationItem, at index: Int) throws(WebStateError) {
        try check(item)
        let result = try mutateHistory { history in (history.commit(item, at: index), history.items.count) }
        guard let committed = result.0 else { throw .navigationIndexOutOfRange(id, index: index, count: result.1) }
        didCommitNavigation(at: committed, newItem: true)
    }

    private func check(_ item: NavigationItem) throws(WebStateError) {
        do {
            try item.check()
        } catch {
            throw .invalidItem(id, error)
        }
    }

    /// Back or forward to the existing entry at `index`.
    public func goToItem(at index: Int) throws(WebStateError) {
        let count = try mutateHistory { history in history.goToItem(at: index) ? nil : history.items.count }
        if let count { throw .navigationIndexOutOfRange(id, index: index, count: count) }
        didCommitNavigation(at: index, newItem: false)
    }

    /// Tells the tab's observers, then its list's (which hear of every tab's navigations
    /// without a registration per tab: a journal recorder).
    private func didCommitNavigation(at index: Int, newItem: Bool) {
        forEachObserver { $0.webState(self, didCommitNavigationAt: index, newItem: newItem) }
        list?.tabDidCommitNavigation(self, at: index, newItem: newItem)
    }

    /// Realizes, then changes the history in place. The history is taken out of `content`
    /// first, so it is uniquely referenced and a commit appends instead of copying every item.
    private func mutateHistory<T>(_ body: (inout NavigationHistory) -> T) throws(WebStateError) -> T {
        var history = try navigationHistory()
        content = .realized(NavigationHistory())
        defer { content = .realized(history) }
        return body(&history)
    }

    /// The tab was shown to the user at `time`.
    public func wasActivated(at time: Timestamp) {
        lastActiveTime = max(lastActiveTime, time)
    }

    // MARK: Observers and tab helpers (both work while unrealized).

    public func addObserver(_ observer: any WebStateObserver) {
        observers.remove(observer)
        observers.add(observer)
    }

    public func removeObserver(_ observer: any WebStateObserver) {
        observers.remove(observer)
    }

    private func forEachObserver(_ body: (any WebStateObserver) -> Void) {
        // A copy: an observer may add or remove observers while told (reading the property
        // for the whole loop would be an access that overlaps their changes).
        let current = observers
        current.visit { object in
            if let observer = object as? any WebStateObserver { body(observer) }
        }
    }

    /// Attaches `helper`, replacing one of the same type.
    public func attach<Helper: TabHelper>(_ helper: Helper) {
        helpers.put(helper, as: ObjectIdentifier(Helper.self))?.shutdown()
    }

    public func helper<Helper: TabHelper>(_ type: Helper.Type) -> Helper? {
        helpers.helper(as: ObjectIdentifier(type)) as? Helper
    }

    /// Shuts every helper down and forgets it.
    public func detachHelpers() {
        let detached = helpers
        helpers = HelperList()
        detached.visit { $0.shutdown() }
    }

    /// Closes the tab for good: helpers shut down, observers told, nothing works afterwards.
    public func destroy() {
        guard !isDestroyed else { return }
        detachHelpers()
        isDestroyed = true
        forEachObserver { $0.webStateDestroyed(self) }
        observers = ObserverList()
    }
}

/// A tab's helpers, one per type, in the order they came: the first one inline, so a restored
/// tab with its one helper (`FindTabHelper`) allocates no table for it.
private struct HelperList {
    private typealias Slot = (type: ObjectIdentifier, helper: any TabHelper)
    private var first: Slot?
    private var rest: [Slot] = []

    /// Puts `helper` in as the helper of `type`; returns the one it replaced.
    mutating func put(_ helper: any TabHelper, as type: ObjectIdentifier) -> (any TabHelper)? {
        if let slot = first, slot.type == type {
            first = (type, helper)
            return slot.helper
        }
        if let index = rest.firstIndex(where: { $0.type == type }) {
            defer { rest[index] = (type, helper) }
            return rest[index].helper
        }
        if first == nil {
            first = (type, helper)
        } else {
            rest.append((type, helper))
        }
        return nil
    }

    func helper(as type: ObjectIdentifier) -> (any TabHelper)? {
        if let first, first.type == type { return first.helper }
        return rest.first { $0.type == type }?.helper
    }

    /// Each helper, in the order attached.
    func visit(_ body: (any TabHelper) -> Void) {
        if let first { body(first.helper) }
        for slot in rest { body(slot.helper) }
    }
}

/// A tab's observers, held weakly, in the order they came: the first one inline, so a
/// restored tab observed by its list's journal recorder alone allocates nothing for it.
private struct ObserverList {
    private var first: WeakBox<AnyObject>?
    private var rest: [WeakBox<AnyObject>] = []

    mutating func add(_ observer: AnyObject) {
        if first == nil, rest.isEmpty {
            first = WeakBox(observer)
        } else {
            rest.append(WeakBox(observer))
        }
    }

    /// Forgets `observer`, and any observer gone since.
    mutating func remove(_ observer: AnyObject) {
        if let box = first, box.value == nil || box.value === observer { first = nil }
        // Not even looked at when empty: a restored tab's only observer costs no array.
        if !rest.isEmpty { rest.removeAll { $0.value == nil || $0.value === observer } }
        if first == nil, !rest.isEmpty { first = rest.removeFirst() }
    }

    /// Each observer still there, in order; allocates nothing (a navigation tells them all).
    func visit(_ body: (AnyObject) -> Void) {
        if let object = first?.value { body(object) }
        for box in rest {
            if let object = box.value { body(object) }
        }
    }
}

struct WeakBox<Value: AnyObject> {
    weak var value: Value?
    init(_ value: Value) { self.value = value }
}
