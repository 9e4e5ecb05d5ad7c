/// Everything a save must keep of a tab list, as a plain comparable value: order, identity,
/// openers, pinned prefix, active tab and, when asked, every tab's history. Used to check that
/// a restored list equals the one that was saved.
public struct TabListContents: Equatable, Sendable, CustomStringConvertible {
    public struct Tab: Equatable, Sendable {
        public let id: WebStateID
        public let opener: WebStateOpener?
        /// Nil when read without realizing and the tab was unrealized.
        public let history: NavigationHistory?
    }

    public let tabs: [Tab]
    public let activeIndex: Int?
    public let pinnedCount: Int

    /// Reads `list`; with `realizing`, unrealized tabs are realized so their histories compare.
    public init(_ list: WebStateList, realizing: Bool) throws(WebStateError) {
        var tabs: [Tab] = []
        tabs.reserveCapacity(list.count)
        for (index, webState) in list.webStates.enumerated() {
            let history = realizing ? try webState.navigationHistory() : webState.loadedHistory
            // `index` comes from the list itself.
            tabs.append(Tab(id: webState.id, opener: try? list.opener(at: index), history: history))
        }
        self.tabs = tabs
        activeIndex = list.activeIndex
        pinnedCount = list.pinnedCount
    }

    public var description: String {
        "tabs \(tabs.map(\.id.rawValue)) active \(activeIndex.map(String.init) ?? "-") pinned \(pinnedCount)"
    }
}
