import BrowserModel

/// A plain model of a tab list, written from the rules in docs/architecture.md and nothing else:
/// arrays of identifiers, no observers, no helpers. The real list must agree with it after
/// every operation (BrowserModelTests), and the stress oracle models every window with it.
public struct ReferenceList: Equatable, Sendable {
    public struct Tab: Equatable, Sendable {
        public var id: Int64
        public var openerID: Int64?
        public var openerNavigationIndex: Int
    }

    public var tabs: [Tab] = []
    public var activeID: Int64?
    public var pinnedCount = 0

    public func index(of id: Int64) -> Int? { tabs.firstIndex { $0.id == id } }

    /// nil when the operation must be refused.
    public mutating func insert(id: Int64, index: Int?, pinned: Bool, activate: Bool, opener: (Int64, Int)?) -> Int? {
        if let index, index < 0 || index > tabs.count { return nil }
        if let opener, self.index(of: opener.0) == nil { return nil }
        let low = pinned ? 0 : pinnedCount
        let high = pinned ? pinnedCount : tabs.count
        let target = Swift.min(Swift.max(index ?? high, low), high)
        tabs.insert(Tab(id: id, openerID: opener?.0, openerNavigationIndex: opener?.1 ?? 0), at: target)
        if pinned { pinnedCount += 1 }
        if activate { activeID = id }
        return target
    }

    public mutating func move(from: Int, to: Int) -> Int? {
        guard tabs.indices.contains(from), tabs.indices.contains(to) else { return nil }
        let pinned = from < pinnedCount
        let low = pinned ? 0 : pinnedCount
        let high = pinned ? pinnedCount - 1 : tabs.count - 1
        let target = Swift.min(Swift.max(to, low), high)
        let tab = tabs.remove(at: from)
        tabs.insert(tab, at: target)
        return target
    }

    public mutating func remove(at index: Int) -> Bool {
        guard tabs.indices.contains(index) else { return false }
        let removed = tabs[index]
        if activeID == removed.id {
            // A tab it opened (nearest after it, else the last before it), its opener, its
            // right neighbour, its left neighbour.
            var next: Int64?
            let after = tabs[(index + 1)...].first { $0.openerID == removed.id }
            let before = tabs[..<index].last { $0.openerID == removed.id }
            if let child = after ?? before {
                next = child.id
            } else if let opener = removed.openerID {
                next = opener
            } else if index + 1 < tabs.count {
                next = tabs[index + 1].id
            } else if index > 0 {
                next = tabs[index - 1].id
            }
            activeID = next
        }
        tabs.remove(at: index)
        if index < pinnedCount { pinnedCount -= 1 }
        for position in tabs.indices where tabs[position].openerID == removed.id {
            tabs[position].openerID = nil
            tabs[position].openerNavigationIndex = 0
        }
        return true
    }

    public mutating func replace(at index: Int, with id: Int64) -> Bool {
        guard tabs.indices.contains(index) else { return false }
        let old = tabs[index].id
        for position in tabs.indices where tabs[position].openerID == old {
            tabs[position].openerID = nil
            tabs[position].openerNavigationIndex = 0
        }
        tabs[index].id = id
        if activeID == old { activeID = id }
        return true
    }

    public mutating func activate(_ index: Int?) -> Bool {
        if let index {
            guard tabs.indices.contains(index) else { return false }
            activeID = tabs[index].id
        } else {
            activeID = nil
        }
        return true
    }

    public mutating func setPinned(at index: Int, _ pinned: Bool) -> Int? {
        guard tabs.indices.contains(index) else { return nil }
        guard (index < pinnedCount) != pinned else { return index }
        let target = pinned ? pinnedCount : pinnedCount - 1
        let tab = tabs.remove(at: index)
        tabs.insert(tab, at: target)
        pinnedCount += pinned ? 1 : -1
        return target
    }

    /// The state of a real list, in the reference's terms.
    public init(_ list: WebStateList) {
        tabs = list.webStates.enumerated().map { index, webState in
            let opener = try? list.opener(at: index)
            return Tab(
                id: webState.id.rawValue, openerID: opener?.openerID.rawValue,
                openerNavigationIndex: opener?.navigationIndex ?? 0)
        }
        activeID = list.activeWebState?.id.rawValue
        pinnedCount = list.pinnedCount
    }

    public init() {}
}
