import BrowserModel
import HostControl

/// A move of a tab between two windows as the oracle follows it (`ctl move-to-window`): what
/// was asked, and what the two windows must hold once it is over, whatever was killed.
struct MoveInFlight: Equatable {
    let source: String
    let destination: String
    let tab: Int64
    let incognito: Bool
    let pinned: Bool
    let index: Int?
    /// The tab's history as the source's model has it: what the destination's copy shows.
    let page: OracleWindow.PageHistory?
    /// Whether the source's acknowledged state holds the tab: a kill of it cannot lose it then.
    let durableInSource: Bool

    /// A move of a tab of `source` (seeded), to `destination`; nil when `source` has no tab.
    static func pick(
        from source: (id: String, history: WindowHistory), to destination: (id: String, window: OracleWindow),
        using random: inout SeededGenerator
    ) -> MoveInFlight? {
        let window = source.history.current
        let tabs = window.regular.tabs.map { ($0.id, false) } + window.incognito.tabs.map { ($0.id, true) }
        guard let (tab, incognito) = tabs.randomElement(using: &random) else { return nil }
        let list = incognito ? window.incognito : window.regular
        let landing = incognito ? destination.window.incognito : destination.window.regular
        let index = Bool.random(using: &random) ? Int.random(in: 0...landing.tabs.count, using: &random) : nil
        return MoveInFlight(
            source: source.id, destination: destination.id, tab: tab, incognito: incognito,
            pinned: list.index(of: tab).map { $0 < list.pinnedCount } ?? false, index: index, page: window.pages[tab],
            durableInSource: source.history.acknowledgedState.tabIDs.contains(tab))
    }

    var description: String {
        "tab \(tab) of \(source) to \(destination)\(index.map { " at \($0)" } ?? "")"
    }
}

/// Where a move left its tab, as the two windows show it once it is over.
public enum MoveOutcome: String, Codable, Sendable, CaseIterable {
    /// In the destination, gone from the source.
    case committed
    /// Still in the source (or in neither, when the source lost it unacknowledged).
    case undone
}

extension OracleWindow {
    /// The source once the move's drop applied: the tab detached as a close detaches it.
    func droppingMoved(_ tab: Int64) -> OracleWindow {
        var window = self
        _ = window.apply(.close(tab: tab), tab: nil)
        return window
    }

    /// The destination once the move's import applied: the tab as `id`, at the index asked
    /// (clamped into its region, as every insert is), not activated, with no opener (one across
    /// windows is dropped), its history as the source had it. Nil when the list refuses it.
    func receivingMoved(_ move: MoveInFlight, as id: Int64) -> (window: OracleWindow, index: Int)? {
        var window = self
        var list = move.incognito ? window.incognito : window.regular
        guard let index = list.insert(id: id, index: move.index, pinned: move.pinned, activate: false, opener: nil)
        else { return nil }
        if move.incognito { window.incognito = list } else { window.regular = list }
        window.pages[id] = move.page
        return (window, index)
    }

    /// Whether `dump` is this model: the same digest, and the same histories.
    func isShown(by dump: DumpReply) -> Bool {
        UInt64(dump.digest, radix: 16) == digest && hasHistories(of: dump)
    }
}

/// What a move's two windows showed once it was over, and the verdict on it.
struct MoveObservation: Equatable {
    let outcome: MoveOutcome
    /// The destination's model with the tab received, when it holds it.
    let received: OracleWindow?
    let verdict: CampaignEvent.Verdict

    /// Judges `move` from the dumps of its two windows. `destination` is the destination's
    /// model before the move; `acknowledged` and `refused`: what the move's reply said, if one
    /// came (ok; a refusal or an undo); `sourceKilled`: whether the source's worker died during
    /// it (it may then have lost the tab, if the tab was never acknowledged there).
    init(
        _ move: MoveInFlight, source: DumpReply, destination: DumpReply, destinationModel: OracleWindow,
        acknowledged: Bool, refused: Bool, sourceKilled: Bool
    ) {
        let inSource = (move.incognito ? source.incognito : source.regular).tabs.contains { $0.id == move.tab }
        received = Self.received(move, shown: destination, model: destinationModel)
        outcome = received == nil ? .undone : .committed
        // The tab was owed to one of them: acknowledged moved, or held by a source that cannot
        // have lost it.
        let owed = acknowledged || !sourceKilled || move.durableInSource
        verdict =
            switch (inSource, received != nil) {
            case (true, true): .duplicated
            case (false, false) where owed: .lostInMove
            // An acknowledged move undone: the destination lost what it acknowledged.
            case (_, false) where acknowledged: .lost
            // A move answered as refused or undone, yet made.
            case (_, true) where refused: .unexpected
            default: .intact
            }
    }

    /// The destination's model with the tab received, if `shown` is it: the tab the dump has
    /// where the import puts it, with the history the source had.
    private static func received(_ move: MoveInFlight, shown: DumpReply, model: OracleWindow) -> OracleWindow? {
        // Where it lands does not depend on its id.
        guard let landing = model.receivingMoved(move, as: Int64.min)?.index else { return nil }
        let tabs = (move.incognito ? shown.incognito : shown.regular).tabs
        guard tabs.indices.contains(landing), !model.tabIDs.contains(tabs[landing].id),
            let candidate = model.receivingMoved(move, as: tabs[landing].id)?.window, candidate.isShown(by: shown)
        else { return nil }
        return candidate
    }
}
