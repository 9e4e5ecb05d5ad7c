import BrowserModel

/// Tabs whose stored history no longer reads anywhere: not in their snapshot, and not rebuilt
/// from the generation before (two damaged generations in a row). Such a tab keeps the page its
/// metadata names (URL and title) as a one-entry history, and journal replay goes on over it
/// instead of setting the journal, and every acknowledged save in it, aside.
///
/// The journal's navigation records name entries of the lost history by number (its dropped
/// count plus the index). The degraded history's one entry stands where the metadata's current
/// page stood, taken as the last of its `navigationItemCount` items with nothing dropped (the
/// common case; back/forward leaves the current entry elsewhere, and the docs say what that
/// costs). `base` is the lost history's number of the degraded history's first entry, so a
/// replayed record lands where it can.
public final class DegradedHistories {
    public struct Tab: Sendable, Equatable {
        public let id: WebStateID
        /// Why the stored history did not read.
        public let reason: SessionFormatError
        /// The lost history's number of the degraded history's first entry.
        var base: Int64
    }

    public private(set) var tabs: [WebStateID: Tab] = [:]
    /// Told when a tab degrades: the store then writes a new snapshot from memory at its next
    /// save, so the journal stops indexing a history no file holds, and reports the tab.
    private let onDegrade: (Tab) -> Void

    public init(onDegrade: @escaping (Tab) -> Void = { _ in }) { self.onDegrade = onDegrade }

    public var isEmpty: Bool { tabs.isEmpty }

    /// The one-entry history `metadata` gives, recorded as degraded.
    func degrade(_ id: WebStateID, metadata: WebStateMetadata, reason: SessionFormatError) -> NavigationHistory {
        defer { if let tab = tabs[id] { onDegrade(tab) } }
        guard metadata.navigationItemCount > 0 else {
            tabs[id] = Tab(id: id, reason: reason, base: 0)
            return NavigationHistory()
        }
        let page = NavigationItem(
            url: metadata.activePageURL, title: metadata.activePageTitle, timestamp: metadata.lastActiveTime)
        tabs[id] = Tab(id: id, reason: reason, base: Int64(metadata.navigationItemCount) - 1)
        assert(tabs[id]?.base ?? -1 >= 0, "a degraded tab's entry numbers start at its current item")
        // One item and index 0 always fit.
        return NavigationHistory(items: [page], currentIndex: 0) ?? NavigationHistory()
    }

    /// Replays a navigation recorded as entry `number` of the lost history onto `history`, the
    /// degraded history of tab `id`. A new item lands after the known entries it follows (or
    /// alone, when it was committed into the lost part); going to an entry that was lost keeps
    /// the current one. Positions are entry numbers of the degraded history
    /// (`droppedItemCount` + index), which stay put when its bounds drop the oldest entries.
    func replayNavigation(of id: WebStateID, on history: inout NavigationHistory, item: NavigationItem?, number: Int64)
    {
        guard var tab = tabs[id] else { return }
        let dropped = Int64(history.droppedItemCount)
        let end = dropped + Int64(history.items.count)
        let local = number.subtractingReportingOverflow(tab.base)
        if let item {
            // Each index below is in 0...items.count, where a commit always fits.
            if local.overflow || local.partialValue < dropped {
                // Committed into the lost part: the new entry stands alone, numbered as recorded.
                history.commit(item, at: 0)
                tab.base = number &- dropped
            } else if local.partialValue > end {
                // Past entries nobody recorded: it follows the known ones.
                history.commit(item, at: history.items.count)
                tab.base = number &- end
            } else {
                history.commit(item, at: Int(local.partialValue - dropped))
            }
            tabs[id] = tab
        } else if !local.overflow, let index = history.index(ofItemNumber: local.partialValue),
            index < history.items.count
        {
            history.goToItem(at: index)
        }
    }
}
