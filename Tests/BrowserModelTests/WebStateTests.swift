import BrowserModel
import Foundation
import HostLimits
import Testing

final class RealizationCounter: WebStateObserver {
    var realized = 0
    var navigations: [Int] = []
    func webStateRealized(_ webState: WebState) { realized += 1 }
    func webState(_ webState: WebState, didCommitNavigationAt index: Int, newItem: Bool) { navigations.append(index) }
}

struct LoaderFailure: Error {}

private func storedHistory() -> NavigationHistory {
    var history = NavigationHistory()
    history.commit(
        NavigationItem(url: "https://a.example/", title: "A", timestamp: Timestamp(microsecondsSinceEpoch: 10)))
    history.commit(
        NavigationItem(url: "https://b.example/", title: "B", timestamp: Timestamp(microsecondsSinceEpoch: 20)))
    return history
}

private let storedMetadata = WebStateMetadata(
    creationTime: Timestamp(microsecondsSinceEpoch: 5), lastActiveTime: Timestamp(microsecondsSinceEpoch: 30),
    activePageTitle: "B", activePageURL: "https://b.example/", navigationItemCount: 2)

/// One stored tab, as a snapshot restore keeps many: counts what is asked of it.
final class OneStoredTab: StoredTabs {
    let stored: WebStateMetadata
    let loader: () throws -> NavigationHistory
    var metadataReads = 0

    init(_ metadata: WebStateMetadata, loader: @escaping () throws -> NavigationHistory) {
        stored = metadata
        self.loader = loader
    }

    func metadata(at index: Int) -> WebStateMetadata {
        metadataReads += 1
        return stored
    }

    func history(at index: Int) throws -> NavigationHistory { try loader() }

    /// The lengths a stored index keeps: no string is read.
    func textBytes(at index: Int) -> Int { stored.activePageTitle.utf8.count + stored.activePageURL.utf8.count }
}

/// An unrealized tab whose history is `loader`'s.
func unrealizedTab(_ id: Int64, _ metadata: WebStateMetadata, loader: @escaping () throws -> NavigationHistory)
    -> WebState
{
    WebState(
        id: WebStateID(rawValue: id)!, creationTime: metadata.creationTime, lastActiveTime: metadata.lastActiveTime,
        storedIn: OneStoredTab(metadata, loader: loader), at: 0)
}

@Suite struct WebStateTests {
    @Test func constGettersAnswerFromMetadataWithoutRealizing() {
        var loads = 0
        let stored = OneStoredTab(storedMetadata) {
            loads += 1
            return storedHistory()
        }
        let webState = WebState(
            id: WebStateID(rawValue: 3)!, creationTime: storedMetadata.creationTime,
            lastActiveTime: storedMetadata.lastActiveTime,
            storedIn: stored, at: 0)
        // Restoring a tab reads none of its strings: they are made when first asked for.
        #expect(stored.metadataReads == 0)
        #expect(!webState.isRealized)
        #expect(webState.title == "B" && webState.url == "https://b.example/" && webState.navigationItemCount == 2)
        #expect(stored.metadataReads == 3)
        #expect(webState.metadata == storedMetadata)
        #expect(webState.loadedHistory == nil)
        #expect(loads == 0)
    }

    @Test func realizationIsLazyOneWayAndAnnouncedOnce() throws {
        var loads = 0
        let webState = unrealizedTab(3, storedMetadata) {
            loads += 1
            return storedHistory()
        }
        let counter = RealizationCounter()
        webState.addObserver(counter)
        #expect(try webState.navigationHistory() == storedHistory())
        try webState.forceRealized()
        _ = try webState.navigationHistory()
        #expect(webState.isRealized)
        #expect(loads == 1)
        #expect(counter.realized == 1)
        try webState.commitNavigation(
            to: NavigationItem(url: "https://c.example/", title: "C", timestamp: Timestamp(microsecondsSinceEpoch: 40)))
        #expect(webState.isRealized && counter.realized == 1)
        #expect(counter.navigations == [2])
    }

    @Test func aFailingLoaderLeavesTheTabUnrealizedWithItsMetadata() {
        let webState = unrealizedTab(4, storedMetadata) { throw LoaderFailure() }
        #expect(throws: WebStateError.self) { try webState.forceRealized() }
        #expect(!webState.isRealized)
        #expect(webState.url == "https://b.example/")
    }

    /// Observers are told in the order they came, whichever left in between (the first is kept
    /// inline, the rest in an array), a removed or released one no more; the tab's helpers hear
    /// of realization first, without registering.
    @Test func observersAreToldInOrderAndHelpersFirst() throws {
        final class Log { var lines: [String] = [] }
        final class Named: WebStateObserver {
            let name: String
            let log: Log
            init(_ name: String, _ log: Log) {
                self.name = name
                self.log = log
            }
            func webStateRealized(_ webState: WebState) { log.lines.append(name) }
        }
        final class Helper: TabHelper {
            let log: Log
            init(_ log: Log) { self.log = log }
            func webStateRealized(_ webState: WebState) { log.lines.append("helper") }
            func shutdown() { log.lines.append("shutdown") }
        }
        let log = Log()
        let webState = unrealizedTab(9, storedMetadata) { storedHistory() }
        let a = Named("a", log)
        let b = Named("b", log)
        let c = Named("c", log)
        var released: Named? = Named("released", log)
        for observer in [a, b, c] { webState.addObserver(observer) }
        webState.addObserver(released!)
        webState.removeObserver(a)
        webState.addObserver(a)
        webState.addObserver(b)  // again: moves to the end, told once
        released = nil
        webState.attach(Helper(log))
        try webState.forceRealized()
        #expect(log.lines == ["helper", "c", "a", "b"])
        webState.destroy()
        #expect(log.lines.last == "shutdown")
    }

    @Test func navigationDropsForwardHistoryButGoingBackKeepsIt() throws {
        let webState = WebState(id: WebStateID(rawValue: 1)!, creationTime: .zero, history: storedHistory())
        try webState.goToItem(at: 0)
        #expect(webState.url == "https://a.example/" && webState.navigationItemCount == 2)
        try webState.commitNavigation(to: NavigationItem(url: "https://d.example/", timestamp: .zero))
        #expect(try webState.navigationHistory().items.map(\.url) == ["https://a.example/", "https://d.example/"])
        #expect(throws: WebStateError.navigationIndexOutOfRange(webState.id, index: 5, count: 2)) {
            try webState.goToItem(at: 5)
        }
        #expect(NavigationHistory(items: [], currentIndex: 0) == nil)
        #expect(NavigationHistory(items: storedHistory().items, currentIndex: nil) == nil)
    }

    @Test func findTabHelperWaitsForRealization() throws {
        let webState = unrealizedTab(3, storedMetadata) { storedHistory() }
        let list = WebStateList(delegate: TabHelperAttacher())
        let attacher = TabHelperAttacher()
        list.delegate = attacher
        try list.insert(webState)
        let helper = try #require(webState.helper(FindTabHelper.self))
        final class Responses: FindInPageResponseDelegate {
            var results: [Int] = []
            func findInPage(didFind matchCount: Int, for query: String) { results.append(matchCount) }
        }
        let responses = Responses()
        helper.setResponseDelegate(responses)
        #expect(helper.controller == nil)
        #expect(helper.find("example") == nil)
        #expect(!helper.currentPageSupportsFindInPage)
        #expect(!webState.isRealized)

        try webState.forceRealized()
        #expect(helper.controller != nil)
        #expect(helper.currentPageSupportsFindInPage)
        #expect(helper.find("B") == 2)  // title "B" and the "b" of b.example
        #expect(responses.results == [2])

        try list.detach(at: 0)
        #expect(webState.helper(FindTabHelper.self) == nil)
        #expect(helper.controller == nil)
    }

    @Test func profilesShareIdentifiersAndPlaceSessionsPerWindow() throws {
        let profile = Profile(stateDirectory: "/state")
        let window = UUID(uuidString: "D9D9D9D9-D9D9-D9D9-D9D9-CD68A019860B")!
        let incognito = profile.offTheRecordProfile
        #expect(incognito.isOffTheRecord && incognito.originalProfile === profile)
        #expect(profile.offTheRecordProfile === incognito)
        #expect(
            profile.browserList.browser(for: window).sessionDirectory
                == "/state/windows/D9D9D9D9-D9D9-D9D9-D9D9-CD68A019860B/regular")
        #expect(
            incognito.browserList.browser(for: window).sessionDirectory
                == "/state/windows/D9D9D9D9-D9D9-D9D9-D9D9-CD68A019860B/incognito")
        profile.reserveWebStateID(WebStateID(rawValue: 41)!)
        #expect(incognito.makeWebStateID().rawValue == 42)
        #expect(profile.makeWebStateID().rawValue == 43)

        let tab = WebState(id: incognito.makeWebStateID(), creationTime: .zero)
        try incognito.browserList.browser(for: window).webStateList.insert(tab)
        profile.destroyOffTheRecordProfile()
        #expect(!profile.hasOffTheRecordProfile)
        #expect(tab.isDestroyed)
    }
}

@Suite struct WebStateIDBoundsTests {
    @Test func identifiersLiveIn1ToTheJSONExactBound() {
        #expect(WebStateID(rawValue: 0) == nil)
        #expect(WebStateID(rawValue: Limits.maxWebStateID)?.rawValue == Limits.maxWebStateID)
        #expect(WebStateID(rawValue: Limits.maxWebStateID + 1) == nil)
        #expect(WebStateID(rawValue: .max) == nil)
    }

    @Test func aGeneratorAtTheBoundSaysItIsExhausted() throws {
        var generator = WebStateIDGenerator(after: Limits.maxWebStateID - 1)
        #expect(!generator.isExhausted)
        #expect(generator.next().rawValue == Limits.maxWebStateID)
        #expect(generator.isExhausted)
    }
}
