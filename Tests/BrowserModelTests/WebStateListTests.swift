import BrowserModel
import HostLimits
import Stress
import Testing

/// Records every notification with the indices it carried.
final class ChangeLog: WebStateListObserver {
    var entries: [String] = []
    var batches = 0

    func webStateList(_ list: WebStateList, didChange change: WebStateListChange, status: WebStateListStatus) {
        let active =
            "\(status.previousActiveIndex.map(String.init) ?? "-")→\(status.activeIndex.map(String.init) ?? "-")"
        switch change {
        case .inserted(let webState, let index): entries.append("insert \(webState.id)@\(index) \(active)")
        case .moved(let webState, let from, let to): entries.append("move \(webState.id) \(from)→\(to) \(active)")
        case .removed(let webState, let index, let closing):
            entries.append("\(closing ? "close" : "detach") \(webState.id)@\(index) \(active)")
        case .replaced(let old, let new, let index): entries.append("replace \(old.id)→\(new.id)@\(index) \(active)")
        case .pinnedStateChanged(let webState, let from, let to, let pinned):
            entries.append("\(pinned ? "pin" : "unpin") \(webState.id) \(from)→\(to) \(active)")
        case .activation: entries.append("activate \(active)")
        }
    }

    func webStateListWillBeginBatch(_ list: WebStateList) { batches += 1 }
}

func makeTab(_ id: Int64, url: String = "https://example.org/") -> WebState {
    var history = NavigationHistory()
    history.commit(NavigationItem(url: url, title: "page \(id)", timestamp: Timestamp(microsecondsSinceEpoch: id)))
    return WebState(
        id: WebStateID(rawValue: id)!, creationTime: Timestamp(microsecondsSinceEpoch: id), history: history)
}

@Suite struct WebStateListTests {
    /// Thousands of seeded random operations, valid and invalid, each applied to the real list
    /// and to the reference; after each the two must agree and the invariants must hold.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func randomOperationsAgreeWithTheReferenceModel(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let list = WebStateList()
        var reference = ReferenceList()
        var nextID: Int64 = 1
        let log = ChangeLog()
        list.addObserver(log)

        for step in 0..<1500 {
            let count = reference.tabs.count
            // Indices range one past the list on either side so refusals are exercised too.
            let anyIndex = { (g: inout SeededGenerator) in Int.random(in: -1...(count + 1), using: &g) }
            let context = "seed \(seed) step \(step)"
            let notificationsBefore = log.entries.count
            var expectChange = true
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<35:
                let id = nextID
                nextID += 1
                let requested: Int? = Bool.random(using: &random) ? anyIndex(&random) : nil
                let pinned = Int.random(in: 0..<5, using: &random) == 0
                let activate = Bool.random(using: &random)
                let opener: (Int64, Int)? =
                    count > 0 && Bool.random(using: &random)
                    ? (
                        reference.tabs[Int.random(in: 0..<count, using: &random)].id,
                        Int.random(in: 0..<3, using: &random)
                    )
                    : nil
                let expected = reference.insert(
                    id: id, index: requested, pinned: pinned, activate: activate, opener: opener)
                let params = InsertionParams(
                    index: requested, activate: activate, pinned: pinned,
                    opener: opener.map { WebStateOpener(openerID: WebStateID(rawValue: $0.0)!, navigationIndex: $0.1) })
                let actual = try? list.insert(makeTab(id), params)
                #expect(actual == expected, "\(context): insert")
                expectChange = expected != nil
            case 35..<50:
                let from = anyIndex(&random)
                let to = anyIndex(&random)
                let expected = reference.move(from: from, to: to)
                #expect((try? list.move(from: from, to: to)) == expected, "\(context): move")
                expectChange = expected != nil && expected != from
            case 50..<65:
                let index = anyIndex(&random)
                let expected = reference.remove(at: index)
                let closing = Bool.random(using: &random)
                let succeeded: Bool
                if closing {
                    succeeded = (try? list.close(at: index)) != nil
                } else {
                    let detached = try? list.detach(at: index)
                    succeeded = detached != nil
                    #expect(detached?.isDestroyed != true, "\(context): detached tab destroyed")
                }
                #expect(succeeded == expected, "\(context): remove")
                expectChange = expected
            case 65..<72:
                let index = anyIndex(&random)
                let id = nextID
                nextID += 1
                let expected = reference.replace(at: index, with: id)
                let old = try? list.replace(at: index, with: makeTab(id))
                #expect((old != nil) == expected, "\(context): replace")
                expectChange = expected
            case 72..<87:
                let index: Int? = Int.random(in: 0..<6, using: &random) == 0 ? nil : anyIndex(&random)
                let before = reference.activeID
                let expected = reference.activate(index)
                #expect(((try? list.activate(at: index)) != nil) == expected, "\(context): activate")
                expectChange = expected && before != reference.activeID
            case 87..<97:
                let index = anyIndex(&random)
                let pinned = Bool.random(using: &random)
                let wasPinned = index < reference.pinnedCount
                let expected = reference.setPinned(at: index, pinned)
                #expect((try? list.setPinned(at: index, pinned)) == expected, "\(context): pin")
                expectChange = expected != nil && wasPinned != pinned
            default:
                let includingPinned = Bool.random(using: &random)
                let keep = includingPinned ? 0 : reference.pinnedCount
                while reference.tabs.count > keep { _ = reference.remove(at: reference.tabs.count - 1) }
                list.closeAll(includingPinned: includingPinned)
                expectChange = count > keep
            }
            #expect(ReferenceList(list) == reference, "\(context): states differ")
            #expect(list.invariantViolations().isEmpty, "\(context): \(list.invariantViolations())")
            #expect((log.entries.count > notificationsBefore) == expectChange, "\(context): notification")
        }
    }

    @Test func observersHearIndicesBeforeAndAfter() throws {
        let list = WebStateList()
        let log = ChangeLog()
        list.addObserver(log)
        try list.insert(makeTab(1), InsertionParams(activate: true))
        try list.insert(makeTab(2))
        try list.insert(makeTab(3), InsertionParams(index: 0, pinned: true))
        try list.move(from: 2, to: 1)
        try list.close(at: 2)
        try list.replace(at: 1, with: makeTab(4))
        try list.setPinned(at: 0, false)
        try list.activate(at: nil)
        #expect(
            log.entries == [
                "insert 1@0 -→0",
                "insert 2@1 0→0",
                "insert 3@0 0→1",
                "move 2 2→1 1→2",
                "close 1@2 2→1",
                "replace 2→4@1 1→1",
                "unpin 3 0→0 1→1",
                "activate 1→-",
            ])
    }

    @Test func closingTheActiveTabPrefersItsChildThenItsOpener() throws {
        let list = WebStateList()
        try list.insert(makeTab(1), InsertionParams(activate: true))
        try list.insert(makeTab(2))
        let opener = WebStateOpener(openerID: WebStateID(rawValue: 1)!, navigationIndex: 0)
        try list.insert(makeTab(3), InsertionParams(opener: opener))
        try list.close(at: 0)
        #expect(list.activeWebState?.id.rawValue == 3)
        #expect(try list.opener(at: 1) == nil)

        try list.insert(
            makeTab(5),
            InsertionParams(
                activate: true, opener: WebStateOpener(openerID: WebStateID(rawValue: 2)!, navigationIndex: 0)))
        try list.close(at: 2)
        #expect(list.activeWebState?.id.rawValue == 2)
    }

    /// The list is where the tab bound holds for every writer: one insertion or restore past
    /// `Limits.maxTabsPerBrowser` is refused, typed, and changes nothing.
    @Test func aListRefusesTabsPastTheBound() throws {
        let list = WebStateList()
        let limit = Limits.maxTabsPerBrowser
        try list.restore(
            (1...limit).map { RestoredTab(webState: makeTab(Int64($0)), opener: nil) }, activeIndex: 0, pinnedCount: 0)
        #expect(throws: WebStateListError.full(limit: limit)) { try list.insert(makeTab(Int64(limit + 1))) }
        #expect(list.count == limit)
        try list.close(at: 0)
        #expect(try list.insert(makeTab(Int64(limit + 1))) == limit - 1, "room again once a tab closes")
        #expect(throws: WebStateListError.full(limit: limit)) {
            try WebStateList().restore(
                (1...limit + 1).map { RestoredTab(webState: makeTab(Int64($0)), opener: nil) }, activeIndex: nil,
                pinnedCount: 0)
        }
    }

    @Test func refusalsLeaveTheListUntouched() throws {
        let list = WebStateList()
        try list.insert(makeTab(1), InsertionParams(activate: true))
        #expect(throws: WebStateListError.duplicateWebState(WebStateID(rawValue: 1)!)) { try list.insert(makeTab(1)) }
        #expect(throws: WebStateListError.indexOutOfRange(5, count: 1)) {
            try list.insert(makeTab(2), InsertionParams(index: 5))
        }
        #expect(throws: WebStateListError.openerNotInList(WebStateID(rawValue: 9)!)) {
            try list.insert(
                makeTab(2),
                InsertionParams(opener: WebStateOpener(openerID: WebStateID(rawValue: 9)!, navigationIndex: 0)))
        }
        #expect(throws: WebStateListError.indexOutOfRange(1, count: 1)) { try list.close(at: 1) }
        let closed = makeTab(7)
        closed.destroy()
        #expect(throws: WebStateListError.webStateDestroyed(closed.id)) { try list.insert(closed) }
        #expect(list.count == 1 && list.activeIndex == 0)
    }

    @Test func batchesNotifyOnceAroundTheirChanges() throws {
        let list = WebStateList()
        let log = ChangeLog()
        list.addObserver(log)
        for id in 1...4 { try list.insert(makeTab(Int64(id))) }
        list.closeAll()
        #expect(log.batches == 1)
        #expect(list.isEmpty)
        #expect(log.entries.suffix(4).allSatisfy { $0.hasPrefix("close") })
    }

    @Test func restoreAcceptsForwardOpenersAndRefusesBadInput() throws {
        let list = WebStateList()
        let one = makeTab(1)
        let two = makeTab(2)
        let forward = WebStateOpener(openerID: two.id, navigationIndex: 0)
        #expect(throws: WebStateListError.pinnedCountOutOfRange(3, count: 2)) {
            try list.restore(
                [RestoredTab(webState: one, opener: nil), RestoredTab(webState: two, opener: nil)], activeIndex: nil,
                pinnedCount: 3)
        }
        #expect(throws: WebStateListError.openerNotInList(one.id)) {
            try list.restore(
                [RestoredTab(webState: one, opener: WebStateOpener(openerID: one.id, navigationIndex: 0))],
                activeIndex: nil, pinnedCount: 0)
        }
        #expect(list.isEmpty)
        try list.restore(
            [RestoredTab(webState: one, opener: forward), RestoredTab(webState: two, opener: nil)], activeIndex: 1,
            pinnedCount: 1)
        #expect(list.activeWebState === two)
        #expect(try list.opener(at: 0) == forward)
        #expect(list.isPinned(at: 0) && !list.isPinned(at: 1))
        #expect(throws: WebStateListError.listNotEmpty) { try list.restore([], activeIndex: nil, pinnedCount: 0) }
    }
}

@Suite struct RandomBrowsingTests {
    @Test func theSameSeedMakesTheSameChoicesAndKeepsTheInvariants() throws {
        func browse(seed: UInt64) throws -> ([String], [Int64]) {
            let profile = Profile(stateDirectory: "/unused")
            let list = WebStateList()
            var browsing = RandomBrowsing(seed: seed)
            var steps: [String] = []
            for _ in 0..<2_000 {
                steps.append(try browsing.step(list, profile: profile))
                #expect(list.invariantViolations().isEmpty)
            }
            return (steps, list.webStates.map(\.id.rawValue))
        }
        let first = try browse(seed: 99)
        #expect(try browse(seed: 99) == first)
        #expect(try browse(seed: 100).0 != first.0)
        // Every kind of operation shows up in a long run.
        for kind in [
            "open", "navigates", "goes to", "move", "close tab", "detach", "replaces", "activate", "pin", "close all",
        ] {
            #expect(first.0.contains { $0.contains(kind) }, "\(kind) never happened")
        }
    }
}
