import BrowserModel
import Foundation
import Testing

/// Second hostile round on issue 14's WebState changes (`ObserverList` with its first observer
/// inline, helpers told of realization by the tab): every observer told exactly once and in
/// order whatever joins, leaves or dies in between, even while being told; helpers replaced or
/// shut down before and after realization.
@Suite struct ObserverRoundTwoTests {
    final class Log { var lines: [String] = [] }

    /// Logs realizations, navigations and destruction under its name; `onRealized` runs after.
    final class Named: WebStateObserver {
        let name: String
        let log: Log
        var onRealized: ((WebState) -> Void)?
        var onCommit: ((WebState) -> Void)?
        init(_ name: String, _ log: Log) {
            self.name = name
            self.log = log
        }
        func webStateRealized(_ webState: WebState) {
            log.lines.append("\(name) realized")
            onRealized?(webState)
        }
        func webState(_ webState: WebState, didCommitNavigationAt index: Int, newItem: Bool) {
            log.lines.append("\(name) \(index)")
            onCommit?(webState)
        }
        func webStateDestroyed(_ webState: WebState) { log.lines.append("\(name) destroyed") }
    }

    private static let metadata = WebStateMetadata(
        creationTime: .zero, lastActiveTime: .zero, activePageTitle: "B", activePageURL: "https://b.example/",
        navigationItemCount: 1)

    private static func stored() -> NavigationHistory {
        var history = NavigationHistory()
        history.commit(NavigationItem(url: "https://b.example/", title: "B", timestamp: .zero))
        return history
    }

    private static func commit(_ webState: WebState, _ n: Int) throws {
        try webState.commitNavigation(to: NavigationItem(url: "https://\(n).example/", timestamp: .zero))
    }

    /// The inline first observer leaves while being told and adds another: this round tells
    /// the others once each (the newcomer not yet), the next round the newcomer last.
    @Test func theFirstObserverLeavingAndAddingWhileToldKeepsOrder() throws {
        let log = Log()
        let webState = unrealizedTab(5, Self.metadata) { Self.stored() }
        let a = Named("a", log)
        let b = Named("b", log)
        let c = Named("c", log)
        let d = Named("d", log)
        for observer in [a, b, c] { webState.addObserver(observer) }
        a.onRealized = { tab in
            tab.removeObserver(a)
            tab.addObserver(d)
        }
        try webState.forceRealized()
        #expect(log.lines == ["a realized", "b realized", "c realized"])
        log.lines = []
        try Self.commit(webState, 1)
        #expect(log.lines == ["b 1", "c 1", "d 1"])
        // b (now first, promoted from the array) re-adds itself: it moves to the end.
        log.lines = []
        b.onCommit = { tab in tab.addObserver(b) }
        try Self.commit(webState, 2)
        try Self.commit(webState, 3)
        #expect(log.lines == ["b 2", "c 2", "d 2", "c 3", "d 3", "b 3"])
    }

    /// A first observer released while registered leaves a dead inline slot: a later one is
    /// told, once, and the order of the others is kept.
    @Test func aReleasedFirstObserverIsSkippedAndReplacedInOrder() throws {
        let log = Log()
        let webState = WebState(id: WebStateID(rawValue: 7)!, creationTime: .zero, history: Self.stored())
        var first: Named? = Named("first", log)
        let b = Named("b", log)
        let late = Named("late", log)
        webState.addObserver(first!)
        webState.addObserver(b)
        first = nil
        webState.addObserver(late)
        try Self.commit(webState, 1)
        webState.removeObserver(b)
        var only: Named? = Named("only", log)
        webState.removeObserver(late)
        webState.addObserver(only!)
        try Self.commit(webState, 2)
        only = nil
        try Self.commit(webState, 3)
        webState.addObserver(b)
        try Self.commit(webState, 4)
        #expect(log.lines == ["b 1", "late 1", "only 2", "b 4"])
    }

    /// An observer that removes a later one while told: the later one is still told this
    /// round (the list is copied) and never again.
    @Test func anObserverRemovingALaterOneWhileTold() throws {
        let log = Log()
        let webState = WebState(id: WebStateID(rawValue: 8)!, creationTime: .zero, history: Self.stored())
        let a = Named("a", log)
        let b = Named("b", log)
        webState.addObserver(a)
        webState.addObserver(b)
        a.onCommit = { tab in tab.removeObserver(b) }
        try Self.commit(webState, 1)
        try Self.commit(webState, 2)
        #expect(log.lines == ["a 1", "b 1", "a 2"])
    }

    /// FindTabHelper replaced before realization: only the new one gets a controller, with the
    /// response delegate given to it; replaced after: the new one has one at once.
    @Test func findTabHelperReplacedBeforeAndAfterRealization() throws {
        final class Responses: FindInPageResponseDelegate {
            var results: [Int] = []
            func findInPage(didFind matchCount: Int, for query: String) { results.append(matchCount) }
        }
        let webState = unrealizedTab(11, Self.metadata) { Self.stored() }
        let old = FindTabHelper(webState: webState)
        webState.attach(old)
        let oldResponses = Responses()
        let newResponses = Responses()
        old.setResponseDelegate(oldResponses)
        let new = FindTabHelper(webState: webState)
        webState.attach(new)
        new.setResponseDelegate(newResponses)
        try webState.forceRealized()
        #expect(old.controller == nil && old.find("b") == nil)
        #expect(new.find("b") == 2)
        #expect(newResponses.results == [2] && oldResponses.results.isEmpty)
        let after = FindTabHelper(webState: webState)
        webState.attach(after)
        #expect(new.controller == nil)
        #expect(after.find("B") == 2)
        #expect(webState.helper(FindTabHelper.self) === after)
    }

    /// Destroyed while unrealized: helpers shut down without being told of a realization,
    /// observers told of the destruction once, and the tab cannot be realized afterwards.
    @Test func destroyedWhileUnrealized() throws {
        let log = Log()
        var loads = 0
        let webState = unrealizedTab(12, Self.metadata) {
            loads += 1
            return Self.stored()
        }
        let helper = FindTabHelper(webState: webState)
        webState.attach(helper)
        let a = Named("a", log)
        webState.addObserver(a)
        webState.destroy()
        webState.destroy()
        #expect(throws: WebStateError.self) { try webState.forceRealized() }
        #expect(helper.controller == nil && webState.helper(FindTabHelper.self) == nil)
        #expect(log.lines == ["a destroyed"] && loads == 0)
    }

    /// A failed realization tells no one; the next one tells helpers and observers once.
    @Test func aFailedRealizationTellsNoOneAndTheRetryOnce() throws {
        let log = Log()
        var fail = true
        let webState = unrealizedTab(13, Self.metadata) {
            if fail { throw LoaderFailure() }
            return Self.stored()
        }
        let helper = FindTabHelper(webState: webState)
        webState.attach(helper)
        webState.addObserver(Named("a", log))  // released at once: never told
        let b = Named("b", log)
        webState.addObserver(b)
        #expect(throws: WebStateError.self) { try webState.forceRealized() }
        #expect(helper.controller == nil && log.lines.isEmpty)
        fail = false
        try webState.forceRealized()
        try webState.forceRealized()
        #expect(helper.controller != nil && log.lines == ["b realized"])
    }
}
