/// Receives the results of a find-in-page request.
public protocol FindInPageResponseDelegate: AnyObject {
    func findInPage(didFind matchCount: Int, for query: String)
}

/// Searches the current page of a realized tab. Only exists once the tab is realized, as the
/// seed's FindInPageController needs a live web view.
public final class FindInPageController {
    private unowned let webState: WebState
    public weak var responseDelegate: (any FindInPageResponseDelegate)?

    init(webState: WebState) {
        precondition(webState.isRealized, "FindInPageController needs a realized WebState")
        self.webState = webState
    }

    /// Whether the current page has anything to search.
    public var canFindInPage: Bool { webState.loadedHistory?.currentItem != nil }

    /// Counts case-insensitive occurrences of `query` in the current page's title and URL, and
    /// tells the response delegate.
    @discardableResult
    public func find(_ query: String) -> Int {
        guard !query.isEmpty, let page = webState.loadedHistory?.currentItem else {
            responseDelegate?.findInPage(didFind: 0, for: query)
            return 0
        }
        let needle = query.lowercased()
        let matches = [page.title, page.url].reduce(0) { total, text in
            total + text.lowercased().occurrences(of: needle)
        }
        responseDelegate?.findInPage(didFind: matches, for: query)
        return matches
    }
}

/// The seed's FindTabHelper: attached to every tab, creates its FindInPageController only when
/// the tab is realized (the tab tells it: `TabHelper.webStateRealized`), and keeps a response
/// delegate set meanwhile until then.
public final class FindTabHelper: TabHelper {
    public private(set) var controller: FindInPageController?
    private weak var pendingResponseDelegate: (any FindInPageResponseDelegate)?

    public init(webState: WebState) {
        if webState.isRealized { createController(for: webState) }
    }

    public func setResponseDelegate(_ delegate: (any FindInPageResponseDelegate)?) {
        if let controller {
            controller.responseDelegate = delegate
        } else {
            pendingResponseDelegate = delegate
        }
    }

    /// False while the tab is unrealized: searching never realizes a tab by itself.
    public var currentPageSupportsFindInPage: Bool { controller?.canFindInPage ?? false }

    /// The match count, or nil while the tab is unrealized.
    public func find(_ query: String) -> Int? { controller?.find(query) }

    public func webStateRealized(_ webState: WebState) { createController(for: webState) }

    public func shutdown() {
        controller = nil
        pendingResponseDelegate = nil
    }

    private func createController(for webState: WebState) {
        assert(controller == nil && webState.isRealized)
        let controller = FindInPageController(webState: webState)
        controller.responseDelegate = pendingResponseDelegate
        pendingResponseDelegate = nil
        self.controller = controller
    }
}

/// The delegate every Browser's list gets from its BrowserList: attaches the tab helpers when a
/// tab joins a list and shuts them down when it leaves.
public final class TabHelperAttacher: WebStateListDelegate {
    public init() {}

    public func willAddWebState(_ webState: WebState, to list: WebStateList) {
        if webState.helper(FindTabHelper.self) == nil {
            webState.attach(FindTabHelper(webState: webState))
        }
    }

    public func didRemoveWebState(_ webState: WebState, from list: WebStateList) {
        webState.detachHelpers()
    }
}

extension String {
    fileprivate func occurrences(of needle: String) -> Int {
        var count = 0
        var searchRange = startIndex..<endIndex
        while let found = range(of: needle, range: searchRange) {
            count += 1
            searchRange = found.upperBound..<endIndex
        }
        return count
    }
}
