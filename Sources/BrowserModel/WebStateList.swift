import HostLimits

/// The tab that opened another one, and the navigation index it was at when it did.
public struct WebStateOpener: Hashable, Sendable {
    public let openerID: WebStateID
    public let navigationIndex: Int

    public init(openerID: WebStateID, navigationIndex: Int) {
        self.openerID = openerID
        self.navigationIndex = navigationIndex
    }
}

/// A tab as restore hands it to `WebStateList.restore`.
public struct RestoredTab {
    public let webState: WebState
    public let opener: WebStateOpener?

    public init(webState: WebState, opener: WebStateOpener?) {
        self.webState = webState
        self.opener = opener
    }
}

/// How a tab enters a list.
public struct InsertionParams: Sendable {
    /// Where it goes; nil: at the end of its region (pinned or not). Clamped into its region.
    public var index: Int?
    public var activate: Bool
    public var pinned: Bool
    public var opener: WebStateOpener?

    public init(index: Int? = nil, activate: Bool = false, pinned: Bool = false, opener: WebStateOpener? = nil) {
        self.index = index
        self.activate = activate
        self.pinned = pinned
        self.opener = opener
    }
}

/// A change to a list, with the positions it involved.
public enum WebStateListChange {
    case inserted(WebState, index: Int)
    case moved(WebState, from: Int, to: Int)
    /// `closing`: the tab was destroyed; otherwise it was detached and lives on elsewhere.
    case removed(WebState, index: Int, closing: Bool)
    case replaced(old: WebState, new: WebState, index: Int)
    case pinnedStateChanged(WebState, from: Int, to: Int, pinned: Bool)
    /// Only the active tab changed.
    case activation
}

/// The active tab before and after a change.
public struct WebStateListStatus {
    public let previousActiveIndex: Int?
    public let activeIndex: Int?
    public let previousActive: WebState?
    public let active: WebState?

    public var activeChanged: Bool { previousActive !== active }
}

/// Told of every change to a list, after it happened, with indices before and after; and of
/// every navigation its tabs commit while they are in it, after their own observers (one
/// registration watches a whole window's navigations: none per restored tab).
public protocol WebStateListObserver: AnyObject {
    func webStateList(_ list: WebStateList, didChange change: WebStateListChange, status: WebStateListStatus)
    func webStateListWillBeginBatch(_ list: WebStateList)
    func webStateListDidEndBatch(_ list: WebStateList)
    /// `index` is the entry's index once the history's bounds have dropped what they drop.
    func webStateList(_ list: WebStateList, webState: WebState, didCommitNavigationAt index: Int, newItem: Bool)
}

extension WebStateListObserver {
    public func webStateListWillBeginBatch(_ list: WebStateList) {}
    public func webStateListDidEndBatch(_ list: WebStateList) {}
    public func webStateList(_ list: WebStateList, webState: WebState, didCommitNavigationAt index: Int, newItem: Bool)
    {}
}

/// Called before a tab joins a list and after it left one (the seed's WebStateListDelegate):
/// attaches tab helpers and shuts them down. Not owned by the list.
public protocol WebStateListDelegate: AnyObject {
    func willAddWebState(_ webState: WebState, to list: WebStateList)
    func didRemoveWebState(_ webState: WebState, from list: WebStateList)
}

public enum WebStateListError: Error, Equatable, Sendable, CustomStringConvertible {
    case indexOutOfRange(Int, count: Int)
    case unknownWebState(WebStateID)
    case duplicateWebState(WebStateID)
    case openerNotInList(WebStateID)
    case webStateDestroyed(WebStateID)
    case pinnedCountOutOfRange(Int, count: Int)
    case listNotEmpty
    /// An insertion (or a restore) past `Limits.maxTabsPerBrowser`.
    case full(limit: Int)

    public var description: String {
        switch self {
        case .indexOutOfRange(let index, let count): "index \(index) out of range (\(count) tabs)"
        case .unknownWebState(let id): "no tab \(id) in this list"
        case .duplicateWebState(let id): "tab \(id) is already in this list"
        case .openerNotInList(let id): "opener \(id) is not in this list"
        case .webStateDestroyed(let id): "tab \(id) was closed"
        case .pinnedCountOutOfRange(let pinned, let count): "pinned count \(pinned) outside 0...\(count)"
        case .listNotEmpty: "restore needs an empty list"
        case .full(let limit):
            "the list already holds \(limit) tabs, the most a Browser holds (Limits.maxTabsPerBrowser)"
        }
    }
}

/// An ordered list of tabs with an active tab, a pinned prefix and opener links (the seed's
/// WebStateList). Every mutation keeps the invariants that `invariantViolations()` checks, and
/// tells observers what changed.
public final class WebStateList {
    private struct Entry {
        let webState: WebState
        var opener: WebStateOpener?
    }

    private var entries: [Entry] = []
    /// The identifiers of the tabs in `entries`: an insert's duplicate check, and a lookup of a
    /// tab the list lacks, answer without walking the tabs (a journal replaying thousands of
    /// inserts walked the whole list at each one).
    private var memberIDs: Set<WebStateID> = []
    public private(set) var activeIndex: Int?
    /// Tabs at indices below this are pinned.
    public private(set) var pinnedCount = 0
    public private(set) var isBatchInProgress = false
    /// The UTF-8 bytes of the URLs and titles its tabs show (each tab's `textBytes`): kept as
    /// tabs come, go and navigate, so a window's bound (`Limits.maxWindowTextBytes`) is
    /// checked without walking its tabs.
    public private(set) var textBytes = 0
    public weak var delegate: (any WebStateListDelegate)?
    private var observers: [WeakBox<AnyObject>] = []

    public init(delegate: (any WebStateListDelegate)? = nil) {
        self.delegate = delegate
    }

    // MARK: Reading

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    public var webStates: [WebState] { entries.map(\.webState) }
    public var activeWebState: WebState? { activeIndex.map { entries[$0].webState } }

    public func webState(at index: Int) throws(WebStateListError) -> WebState {
        try checkIndex(index)
        return entries[index].webState
    }

    public func index(of id: WebStateID) -> Int? {
        guard memberIDs.contains(id) else { return nil }
        return entries.firstIndex { $0.webState.id == id }
    }

    public func opener(at index: Int) throws(WebStateListError) -> WebStateOpener? {
        try checkIndex(index)
        return entries[index].opener
    }

    public func isPinned(at index: Int) -> Bool { index < pinnedCount }

    // MARK: Mutations

    /// Inserts `webState`; returns the index it landed at.
    @discardableResult
    public func insert(_ webState: WebState, _ params: InsertionParams = InsertionParams()) throws(WebStateListError)
        -> Int
    {
        guard count < Limits.maxTabsPerBrowser else { throw .full(limit: Limits.maxTabsPerBrowser) }
        guard !webState.isDestroyed else { throw .webStateDestroyed(webState.id) }
        guard index(of: webState.id) == nil else { throw .duplicateWebState(webState.id) }
        if let opener = params.opener, index(of: opener.openerID) == nil {
            throw .openerNotInList(opener.openerID)
        }
        if let requested = params.index, requested < 0 || requested > count {
            throw .indexOutOfRange(requested, count: count)
        }
        let region = params.pinned ? 0...pinnedCount : pinnedCount...count
        let index = min(max(params.index ?? region.upperBound, region.lowerBound), region.upperBound)

        let before = statusBefore()
        delegate?.willAddWebState(webState, to: self)
        entries.insert(Entry(webState: webState, opener: params.opener), at: index)
        hold(webState)
        if params.pinned { pinnedCount += 1 }
        if let active = activeIndex, active >= index { activeIndex = active + 1 }
        if params.activate { activeIndex = index }
        finish(.inserted(webState, index: index), before)
        return index
    }

    /// Moves the tab at `from` to `to`, kept inside its region (pinned or not); returns where it
    /// landed.
    @discardableResult
    public func move(from: Int, to: Int) throws(WebStateListError) -> Int {
        try checkIndex(from)
        try checkIndex(to)
        let region = isPinned(at: from) ? 0...(pinnedCount - 1) : pinnedCount...(count - 1)
        let target = min(max(to, region.lowerBound), region.upperBound)
        guard target != from else { return from }
        let before = statusBefore()
        let entry = entries.remove(at: from)
        entries.insert(entry, at: target)
        activeIndex = activeIndex.map { Self.indexAfterMove($0, from: from, to: target) }
        finish(.moved(entry.webState, from: from, to: target), before)
        return target
    }

    /// Removes the tab at `index` without destroying it; returns it.
    @discardableResult
    public func detach(at index: Int) throws(WebStateListError) -> WebState {
        try remove(at: index, closing: false)
    }

    /// Removes the tab at `index` and destroys it.
    public func close(at index: Int) throws(WebStateListError) {
        try remove(at: index, closing: true).destroy()
    }

    /// Puts `webState` in the place of the tab at `index` (a prerendered page taking over);
    /// returns the replaced tab, detached and not destroyed. The place keeps its opener.
    @discardableResult
    public func replace(at index: Int, with webState: WebState) throws(WebStateListError) -> WebState {
        try checkIndex(index)
        guard !webState.isDestroyed else { throw .webStateDestroyed(webState.id) }
        guard self.index(of: webState.id) == nil else { throw .duplicateWebState(webState.id) }
        let before = statusBefore()
        let old = entries[index].webState
        clearOpeners(referencing: old.id)
        delegate?.willAddWebState(webState, to: self)
        entries[index] = Entry(webState: webState, opener: entries[index].opener)
        release(old)
        hold(webState)
        delegate?.didRemoveWebState(old, from: self)
        finish(.replaced(old: old, new: webState, index: index), before)
        return old
    }

    /// Makes the tab at `index` active; nil: no active tab.
    public func activate(at index: Int?) throws(WebStateListError) {
        if let index { try checkIndex(index) }
        guard index != activeIndex else { return }
        let before = statusBefore()
        activeIndex = index
        finish(.activation, before)
    }

    /// The active tab was shown again at `time` (its scene came to the foreground): stamped, and
    /// observers told as an activation that keeps the active tab, so a journal records the time
    /// (Chrome's `WasShown`). Returns whether the stamp moved: a time not after the tab's own
    /// changes nothing and tells no one.
    @discardableResult
    public func activeWasShown(at time: Timestamp) -> Bool {
        guard let active = activeWebState, time > active.lastActiveTime else { return false }
        let before = statusBefore()
        active.wasActivated(at: time)
        assert(active.lastActiveTime == time, "a later stamp is the tab's time")
        finish(.activation, before)
        return true
    }

    /// Pins or unpins the tab at `index`. Pinning moves it to the end of the pinned tabs,
    /// unpinning to the start of the others; returns its new index.
    @discardableResult
    public func setPinned(at index: Int, _ pinned: Bool) throws(WebStateListError) -> Int {
        try checkIndex(index)
        guard isPinned(at: index) != pinned else { return index }
        let before = statusBefore()
        let target = pinned ? pinnedCount : pinnedCount - 1
        let entry = entries.remove(at: index)
        entries.insert(entry, at: target)
        pinnedCount += pinned ? 1 : -1
        activeIndex = activeIndex.map { Self.indexAfterMove($0, from: index, to: target) }
        finish(.pinnedStateChanged(entry.webState, from: index, to: target, pinned: pinned), before)
        return target
    }

    /// Runs `body` as one batch: observers hear `willBeginBatch` before and `didEndBatch` after,
    /// once, however many changes it makes. Batches do not nest.
    public func performBatch<Failure: Error>(_ body: (WebStateList) throws(Failure) -> Void) throws(Failure) {
        if isBatchInProgress {
            try body(self)
            return
        }
        isBatchInProgress = true
        forEachObserver { $0.webStateListWillBeginBatch(self) }
        defer {
            isBatchInProgress = false
            forEachObserver { $0.webStateListDidEndBatch(self) }
        }
        try body(self)
    }

    /// Fills an empty list with restored tabs in one batch, openers and all (they may point
    /// forward, so they cannot go through `insert`). Checks everything before changing anything.
    /// `identifiers`: the tabs' identifiers, already checked unique by the caller (a snapshot's
    /// reader checks them while reading its index): taken as they are, so no tab is hashed
    /// again. Nil: the list builds the set, refusing a duplicate.
    public func restore(
        _ tabs: [RestoredTab], identifiers: UniqueWebStateIDs? = nil, activeIndex: Int?, pinnedCount: Int
    ) throws(WebStateListError) {
        guard isEmpty else { throw .listNotEmpty }
        guard tabs.count <= Limits.maxTabsPerBrowser else { throw .full(limit: Limits.maxTabsPerBrowser) }
        if let activeIndex, !tabs.indices.contains(activeIndex) {
            throw .indexOutOfRange(activeIndex, count: tabs.count)
        }
        guard pinnedCount >= 0, pinnedCount <= tabs.count else {
            throw .pinnedCountOutOfRange(pinnedCount, count: tabs.count)
        }
        for tab in tabs where tab.webState.isDestroyed { throw .webStateDestroyed(tab.webState.id) }
        let checked: UniqueWebStateIDs
        if let identifiers {
            checked = identifiers
        } else {
            do throws(UniqueWebStateIDs.Duplicate) {
                checked = try UniqueWebStateIDs(tabs.map(\.webState.id))
            } catch {
                throw .duplicateWebState(error.id)
            }
        }
        precondition(checked.count == tabs.count, "a restore's identifier set holds its tabs' identifiers, each once")
        assert(tabs.allSatisfy { checked.contains($0.webState.id) }, "a restore's identifier set is its tabs'")
        for tab in tabs {
            if let opener = tab.opener, opener.openerID == tab.webState.id || !checked.contains(opener.openerID) {
                throw .openerNotInList(opener.openerID)
            }
        }
        performBatch { list in
            // Loaded once: the delegate is held weakly.
            let delegate = list.delegate
            for tab in tabs { delegate?.willAddWebState(tab.webState, to: list) }
            list.entries = tabs.map { Entry(webState: $0.webState, opener: $0.opener) }
            list.memberIDs.reserveCapacity(tabs.count)
            for tab in tabs { list.hold(tab.webState) }
            list.pinnedCount = pinnedCount
            list.activeIndex = activeIndex
            assert(list.invariantViolations().isEmpty, "restore broke invariants: \(list.invariantViolations())")
            for (index, tab) in tabs.enumerated() {
                list.notify(.inserted(tab.webState, index: index), before: (nil, nil))
            }
        }
    }

    /// Closes every tab (pinned ones too when `includingPinned`), as one batch.
    public func closeAll(includingPinned: Bool = true) {
        performBatch { list in
            let keep = includingPinned ? 0 : list.pinnedCount
            while list.count > keep {
                // Closing from the end keeps the remaining indices stable; the index is valid.
                try? list.close(at: list.count - 1)
            }
        }
    }

    // MARK: Observers

    public func addObserver(_ observer: any WebStateListObserver) {
        observers.removeAll { $0.value == nil || $0.value === observer }
        observers.append(WeakBox(observer))
    }

    public func removeObserver(_ observer: any WebStateListObserver) {
        observers.removeAll { $0.value == nil || $0.value === observer }
    }

    // MARK: Invariants

    /// Every way the list breaks its invariants; empty when it holds them. Checked after each
    /// mutation in debug builds, and by tests and decoders.
    public func invariantViolations() -> [String] {
        var violations: [String] = []
        if let activeIndex, !entries.indices.contains(activeIndex) {
            violations.append("active index \(activeIndex) outside 0..<\(count)")
        }
        if pinnedCount < 0 || pinnedCount > count {
            violations.append("pinned count \(pinnedCount) outside 0...\(count)")
        }
        let counted = entries.reduce(0) { $0 + $1.webState.textBytes }
        if counted != textBytes {
            violations.append("text bytes \(textBytes), while its tabs show \(counted)")
        }
        var seen = Set<WebStateID>()
        let present = Set(entries.map(\.webState.id))
        if present != memberIDs { violations.append("member identifiers \(memberIDs.count) are not its tabs'") }
        for (index, entry) in entries.enumerated() {
            if !seen.insert(entry.webState.id).inserted {
                violations.append("tab \(entry.webState.id) appears twice")
            }
            if entry.webState.isDestroyed {
                violations.append("tab \(entry.webState.id) at \(index) is destroyed")
            }
            if let opener = entry.opener {
                if opener.openerID == entry.webState.id {
                    violations.append("tab \(entry.webState.id) is its own opener")
                } else if !present.contains(opener.openerID) {
                    violations.append("tab \(entry.webState.id) has opener \(opener.openerID) outside the list")
                }
            }
        }
        return violations
    }

    // MARK: Private

    private func checkIndex(_ index: Int) throws(WebStateListError) {
        guard entries.indices.contains(index) else { throw .indexOutOfRange(index, count: count) }
    }

    private func remove(at index: Int, closing: Bool) throws(WebStateListError) -> WebState {
        try checkIndex(index)
        let before = statusBefore()
        let removed = entries[index]
        let newActiveID = activeIndex == index ? successorForActive(removing: index) : activeWebState?.id
        entries.remove(at: index)
        release(removed.webState)
        if index < pinnedCount { pinnedCount -= 1 }
        clearOpeners(referencing: removed.webState.id)
        activeIndex = newActiveID.flatMap { self.index(of: $0) }
        delegate?.didRemoveWebState(removed.webState, from: self)
        finish(.removed(removed.webState, index: index, closing: closing), before)
        return removed.webState
    }

    /// Which tab becomes active when the active tab at `index` goes, as Chrome's order
    /// controller picks it: a tab it opened (the nearest after it, then before it), else its
    /// opener, else its right neighbour, else its left one. `index` is in the list.
    public func successorForActive(removing index: Int) -> WebStateID? {
        precondition(entries.indices.contains(index), "tab index \(index) outside 0..<\(count)")
        let removedID = entries[index].webState.id
        let children = entries.indices.filter { entries[$0].opener?.openerID == removedID }
        if let child = children.first(where: { $0 > index }) ?? children.last {
            return entries[child].webState.id
        }
        if let openerID = entries[index].opener?.openerID { return openerID }
        if index + 1 < count { return entries[index + 1].webState.id }
        if index > 0 { return entries[index - 1].webState.id }
        return nil
    }

    /// A tab joined the list: its text counts here, and it tells the list when that changes.
    private func hold(_ webState: WebState) {
        assert(webState.list == nil, "tab \(webState.id) is in another list")
        webState.list = self
        textBytes += webState.textBytes
        let added = memberIDs.insert(webState.id).inserted
        assert(added, "tab \(webState.id) joins the list once")
    }

    /// A tab left the list.
    private func release(_ webState: WebState) {
        assert(webState.list === self, "tab \(webState.id) is not this list's")
        webState.list = nil
        textBytes -= webState.textBytes
        let removed = memberIDs.remove(webState.id)
        assert(removed != nil, "tab \(webState.id) leaves the list it was in")
        assert(textBytes >= 0, "a list's text never counts below zero")
    }

    /// A tab of the list committed a navigation (`WebState` tells its list, as it tells its
    /// own observers).
    func tabDidCommitNavigation(_ webState: WebState, at index: Int, newItem: Bool) {
        assert(webState.list === self, "only a tab in the list tells it")
        forEachObserver { $0.webStateList(self, webState: webState, didCommitNavigationAt: index, newItem: newItem) }
    }

    /// A tab of the list shows other text now (a navigation, a step, realizing it).
    func tabTextChanged(from before: Int, to now: Int) {
        textBytes += now - before
        assert(textBytes >= 0, "a list's text never counts below zero")
    }

    private func clearOpeners(referencing id: WebStateID) {
        for index in entries.indices where entries[index].opener?.openerID == id {
            entries[index].opener = nil
        }
    }

    private static func indexAfterMove(_ index: Int, from: Int, to: Int) -> Int {
        if index == from { return to }
        if from < index, index <= to { return index - 1 }
        if to <= index, index < from { return index + 1 }
        return index
    }

    private func statusBefore() -> (index: Int?, webState: WebState?) {
        (activeIndex, activeWebState)
    }

    private func finish(_ change: WebStateListChange, _ before: (index: Int?, webState: WebState?)) {
        assert(invariantViolations().isEmpty, "WebStateList invariants broken: \(invariantViolations())")
        notify(change, before: before)
    }

    private func notify(_ change: WebStateListChange, before: (index: Int?, webState: WebState?)) {
        let status = WebStateListStatus(
            previousActiveIndex: before.index, activeIndex: activeIndex,
            previousActive: before.webState, active: activeWebState)
        forEachObserver { $0.webStateList(self, didChange: change, status: status) }
    }

    private func forEachObserver(_ body: (any WebStateListObserver) -> Void) {
        for box in observers {
            if let observer = box.value as? any WebStateListObserver { body(observer) }
        }
    }
}
