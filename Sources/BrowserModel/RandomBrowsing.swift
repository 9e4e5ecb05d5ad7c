/// Seeded random browsing on one tab list: open (sometimes pinned, sometimes from an opener),
/// navigate, go back, move, close, detach, replace with a prerendered tab, activate, pin,
/// close all. The same seed makes the same choices, so a run can be replayed exactly; every
/// operation it picks is valid for the list as it stands.
public struct RandomBrowsing: Sendable {
    private var random: SeededGenerator
    private var clock: Int64
    /// Above this many tabs it stops opening new ones.
    public var maxTabs: Int

    public init(
        seed: UInt64, startTime: Timestamp = Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000), maxTabs: Int = 40
    ) {
        random = SeededGenerator(seed: seed)
        clock = startTime.microsecondsSinceEpoch
        self.maxTabs = maxTabs
    }

    /// Command `seq` of the seeded run `seed`, applied to `list`: a function of the seed, the
    /// sequence number and the list as it stands only (a new tab takes the id after the
    /// highest open one), so a run restarted from any saved state goes on exactly as the
    /// uninterrupted run would. What crash tests and their reference model both run.
    @discardableResult
    public static func command(seed: UInt64, seq: UInt64, list: WebStateList, profile: Profile) throws -> String {
        var browsing = RandomBrowsing(
            seed: seed ^ (seq &* 0x9E37_79B9_7F4A_7C15),
            startTime: Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000 + Int64(seq) * 10_000_000), maxTabs: 12)
        return try browsing.step(list) {
            let id = WebStateID(rawValue: (list.webStates.map(\.id.rawValue).max() ?? 0) + 1)!
            profile.reserveWebStateID(id)
            return id
        }
    }

    /// Applies one operation to `list`; returns what it did, for logs and demos.
    @discardableResult
    public mutating func step(_ list: WebStateList, profile: Profile) throws -> String {
        try step(list, makeID: profile.makeWebStateID)
    }

    /// One operation, new tabs taking their ids from `makeID`.
    public mutating func step(_ list: WebStateList, makeID: () -> WebStateID) throws -> String {
        let count = list.count
        let index = count == 0 ? 0 : Int.random(in: 0..<count, using: &random)
        let roll = count == 0 ? 0 : Int.random(in: 0..<100, using: &random)
        switch roll {
        case 0..<30 where count < maxTabs, 0..<100 where count == 0:
            var params = InsertionParams(
                index: Bool.random(using: &random) ? Int.random(in: 0...count, using: &random) : nil,
                activate: Bool.random(using: &random), pinned: Int.random(in: 0..<6, using: &random) == 0)
            if count > 0, Bool.random(using: &random) {
                let opener = try list.webState(at: index)
                params.opener = WebStateOpener(
                    openerID: opener.id, navigationIndex: try opener.navigationHistory().currentIndex ?? 0)
            }
            let tab = newTab(makeID)
            let at = try list.insert(tab, params)
            return "open \(tab.url) as tab \(tab.id) at \(at)\(params.pinned ? " (pinned)" : "")"
        case 30..<55:
            let webState = try list.webState(at: index)
            if Int.random(in: 0..<4, using: &random) == 0, webState.navigationItemCount > 1 {
                let target = Int.random(in: 0..<webState.navigationItemCount, using: &random)
                try webState.goToItem(at: target)
                return "tab \(webState.id) goes to history item \(target)"
            }
            let time = tick()
            let site = Int.random(in: 0..<50, using: &random)
            try webState.commitNavigation(
                to: NavigationItem(
                    url: "https://site\(site).example/\(time.microsecondsSinceEpoch)", title: "Page \(site)",
                    timestamp: time))
            return "tab \(webState.id) navigates to \(webState.url)"
        case 55..<65:
            let to = try list.move(from: index, to: Int.random(in: 0..<count, using: &random))
            return "move tab at \(index) to \(to)"
        case 65..<78 where Int.random(in: 0..<4, using: &random) == 0:
            let detached = try list.detach(at: index)
            detached.destroy()
            return "detach tab \(detached.id)"
        case 78..<83:
            let tab = newTab(makeID)
            let replaced = try list.replace(at: index, with: tab)
            replaced.destroy()
            return "prerendered tab \(tab.id) replaces tab \(replaced.id)"
        case 83..<93:
            let target: Int? = Int.random(in: 0..<8, using: &random) == 0 ? nil : index
            if let target {
                // Stamped before activating, so the activation's journal record carries the time;
                // the tab already active is not activated again.
                let time = tick()
                if target != list.activeIndex { try list.webState(at: target).wasActivated(at: time) }
            }
            try list.activate(at: target)
            return target.map { "activate tab at \($0)" } ?? "deactivate"
        case 93..<98:
            let pinned = !list.isPinned(at: index)
            let to = try list.setPinned(at: index, pinned)
            return "\(pinned ? "pin" : "unpin") tab at \(index), now at \(to)"
        case 98..<100 where Int.random(in: 0..<5, using: &random) == 0:
            let includingPinned = Bool.random(using: &random)
            list.closeAll(includingPinned: includingPinned)
            return includingPinned ? "close all tabs" : "close all unpinned tabs"
        default:
            let id = try list.webState(at: index).id
            try list.close(at: index)
            return "close tab \(id)"
        }
    }

    private mutating func tick() -> Timestamp {
        clock += Int64.random(in: 1...5_000_000, using: &random)
        return Timestamp(microsecondsSinceEpoch: clock)
    }

    private mutating func newTab(_ makeID: () -> WebStateID) -> WebState {
        let time = tick()
        var history = NavigationHistory()
        let site = Int.random(in: 0..<50, using: &random)
        history.commit(NavigationItem(url: "https://site\(site).example/", title: "Site \(site)", timestamp: time))
        return WebState(id: makeID(), creationTime: time, history: history)
    }
}
