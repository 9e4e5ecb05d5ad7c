import BrowserModel
import Foundation
import HostControl
import HostCoordination
import HostLimits

/// The oracle's model of one window, independent of the code under test: both Browsers as
/// `ReferenceList`s and each tab's history of pages, fed the same commands the window was sent.
public struct OracleWindow: Equatable, Sendable {
    public var regular = ReferenceList()
    public var incognito = ReferenceList()
    public var pages: [Int64: PageHistory] = [:]

    /// One tab's back/forward list as docs/architecture.md states it: a navigation drops every
    /// entry after the current one, then the oldest past `Limits.maxNavigationEntries` (the
    /// campaign's URLs are too short to reach `Limits.maxHistoryTextBytes`).
    public struct PageHistory: Equatable, Sendable {
        public private(set) var urls: [String]
        public private(set) var current: Int
        /// False for a tab learned from a dump, which shows only its current page: the campaign
        /// sends it no back or forward, whose result the model could not know.
        public let complete: Bool

        public init(url: String, complete: Bool = true) { (urls, current, self.complete) = ([url], 0, complete) }

        public var url: String { urls[current] }

        mutating func commit(_ url: String) {
            urls.removeSubrange((current + 1)...)
            urls.append(url)
            urls.removeFirst(max(0, urls.count - Limits.maxNavigationEntries))
            current = urls.count - 1
        }

        /// One entry `direction`'s way, when there is one.
        mutating func go(_ direction: HistoryDirection) {
            let target = current + direction.offset
            if urls.indices.contains(target) { current = target }
        }
    }

    /// Each tab's current page.
    public var urls: [Int64: String] { pages.mapValues(\.url) }

    public init() {}

    /// What the host showed after a recovery the oracle could not explain: the campaign goes
    /// on from there.
    public init(dump: DumpReply) {
        func list(_ browser: DumpReply.BrowserContents) -> ReferenceList {
            var list = ReferenceList()
            for tab in browser.tabs {
                list.tabs.append(ReferenceList.Tab(id: tab.id, openerID: tab.opener, openerNavigationIndex: 0))
                pages[tab.id] = PageHistory(url: tab.url, complete: false)
            }
            list.pinnedCount = browser.tabs.filter(\.pinned).count
            list.activeID = browser.activeIndex.flatMap { index in
                list.tabs.indices.contains(Int(index)) ? list.tabs[Int(index)].id : nil
            }
            return list
        }
        regular = list(dump.regular)
        incognito = list(dump.incognito)
    }

    public var digest: UInt64 { WindowDigest.digest(regular: digestList(regular), incognito: digestList(incognito)) }

    private func digestList(_ list: ReferenceList) -> WindowDigest.List {
        WindowDigest.List(
            tabs: list.tabs.map {
                WindowDigest.Tab(id: $0.id, openerID: $0.openerID, url: pages[$0.id]?.url ?? "", title: "")
            },
            activeIndex: list.activeID.flatMap(list.index(of:)), pinnedCount: list.pinnedCount)
    }

    /// Whether every tab `dump` shows has the history the model has for it: as many entries, and
    /// (when realized) the same current one. The digest holds pages, not histories, and after
    /// a back two states show the same pages: the one before a navigation and the one after it
    /// and the back.
    public func hasHistories(of dump: DumpReply) -> Bool {
        (dump.regular.tabs + dump.incognito.tabs).allSatisfy { tab in
            guard let page = pages[tab.id], page.complete else { return true }
            return (tab.historyCount.map { Int($0) == page.urls.count } ?? true)
                && (tab.historyIndex.map { Int($0) == page.current } ?? true)
        }
    }

    /// Every tab id either Browser holds.
    public var tabIDs: Set<Int64> { Set(regular.tabs.map(\.id) + incognito.tabs.map(\.id)) }

    /// Applies `command` as the host answered it (`tab`: the id a new tab got). False when
    /// the model refuses it, which the host should have done too.
    public mutating func apply(_ command: TabCommand, tab: Int64?) -> Bool {
        switch command {
        case .open(let url, let incognito, let index, let opener, let background):
            guard let tab else { return false }
            let done = mutate(incognito) {
                $0.insert(id: tab, index: index, pinned: false, activate: !background, opener: opener.map { ($0, 0) })
                    != nil
            }
            if done { pages[tab] = PageHistory(url: url) }
            return done
        case .navigate(let id, let url):
            guard tabIDs.contains(id), pages[id] != nil else { return false }
            pages[id]?.commit(url)
            return true
        case .close(let id):
            return mutate(containing: id) { list, index in list.remove(at: index) }
        case .activate(let id):
            return mutate(containing: id) { list, index in list.activate(index) }
        case .move(let id, let to):
            return mutate(containing: id) { list, index in list.move(from: index, to: to) != nil }
        case .replace(let id, let url):
            guard let tab else { return false }
            let done = mutate(containing: id) { list, index in list.replace(at: index, with: tab) }
            if done { pages[tab] = PageHistory(url: url) }
            return done
        case .setPinned(let id, let pinned):
            return mutate(containing: id) { list, index in list.setPinned(at: index, pinned) != nil }
        case .go(let id, let direction):
            guard tabIDs.contains(id), pages[id]?.complete == true else { return false }
            pages[id]?.go(direction)
            return true
        case .closeAll(let incognito):
            _ = mutate(incognito) { list in
                list = ReferenceList()
                return true
            }
            return true
        }
    }

    private mutating func mutate(_ incognito: Bool, _ body: (inout ReferenceList) -> Bool) -> Bool {
        incognito ? body(&self.incognito) : body(&regular)
    }

    private mutating func mutate(containing id: Int64, _ body: (inout ReferenceList, Int) -> Bool) -> Bool {
        if let index = regular.index(of: id) { return body(&regular, index) }
        if let index = incognito.index(of: id) { return body(&incognito, index) }
        return false
    }
}

/// One decision of a campaign for one window, in the host's vocabulary.
public enum StressCommand: Equatable, Sendable, CustomStringConvertible {
    case tab(TabCommand)
    /// `background` or `foreground` (a disconnect is `reconnect`'s).
    case scene(SceneChange)
    /// `save --wait`: an explicit acknowledgement of durability.
    case saveAndWait
    /// Disconnect the scene, then connect one: the window reopens from disk.
    case reconnect

    /// Picks a command valid for `window` (seeded).
    public static func next(for window: OracleWindow, using random: inout SeededGenerator) -> StressCommand {
        let tabs = window.regular.tabs.map { ($0.id, false) } + window.incognito.tabs.map { ($0.id, true) }
        let site =
            "https://site\(Int.random(in: 0..<60, using: &random)).example/\(Int.random(in: 0..<1000, using: &random))"
        let roll = tabs.isEmpty ? 0 : Int.random(in: 0..<100, using: &random)
        // Tabs whose whole history the model saw made: the only ones back and forward are sent.
        let known = tabs.map(\.0).filter { window.pages[$0]?.complete == true }
        switch roll {
        case 0..<28 where tabs.count < 24, 0..<28 where tabs.isEmpty:
            let incognito = Int.random(in: 0..<4, using: &random) == 0
            let list = incognito ? window.incognito : window.regular
            let index = Bool.random(using: &random) ? Int.random(in: 0...list.tabs.count, using: &random) : nil
            let opener =
                !list.tabs.isEmpty && Bool.random(using: &random) ? list.tabs.randomElement(using: &random)?.id : nil
            return .tab(
                .open(
                    url: site, incognito: incognito, index: index, opener: opener,
                    background: Int.random(in: 0..<3, using: &random) == 0))
        case 28..<44:
            return .tab(.navigate(tab: tabs.randomElement(using: &random)!.0, url: site))
        case 44..<50 where !known.isEmpty:
            // Half the time forward on a tab with something ahead (else a navigation since the
            // back has dropped it); otherwise mostly back, on any tab (at its first entry: no change).
            let ahead = known.filter { window.pages[$0].map { $0.current < $0.urls.count - 1 } ?? false }
            if !ahead.isEmpty, Bool.random(using: &random) {
                return .tab(.go(tab: ahead.randomElement(using: &random)!, .forward))
            }
            let direction: HistoryDirection = Int.random(in: 0..<4, using: &random) == 0 ? .forward : .back
            return .tab(.go(tab: known.randomElement(using: &random)!, direction))
        case 50..<64:
            return .tab(.close(tab: tabs.randomElement(using: &random)!.0))
        case 64..<72:
            let (tab, incognito) = tabs.randomElement(using: &random)!
            let count = (incognito ? window.incognito : window.regular).tabs.count
            return .tab(.move(tab: tab, index: Int.random(in: 0..<count, using: &random)))
        case 72..<80:
            return .tab(.activate(tab: tabs.randomElement(using: &random)!.0))
        case 80..<85:
            return .tab(.replace(tab: tabs.randomElement(using: &random)!.0, url: site))
        case 85..<87 where !window.incognito.tabs.isEmpty:
            return .tab(.closeAll(incognito: true))
        case 87..<90:
            return .scene(Bool.random(using: &random) ? .background : .foreground)
        case 90..<91:
            return .reconnect
        case 91..<95:
            return .saveAndWait
        case 95..<100:
            // Mostly a change of state; now and then the state the tab has, which changes nothing.
            let (tab, incognito) = tabs.randomElement(using: &random)!
            let list = incognito ? window.incognito : window.regular
            let pinned = list.index(of: tab).map { $0 < list.pinnedCount } ?? false
            return .tab(.setPinned(tab: tab, pinned: Int.random(in: 0..<4, using: &random) == 0 ? pinned : !pinned))
        default:
            return .tab(.navigate(tab: tabs.randomElement(using: &random)!.0, url: site))
        }
    }

    /// What the window is asked: `reconnect`'s first half is the disconnect.
    public var request: WindowRequest {
        switch self {
        case .tab(let command): .tab(command)
        case .scene(let change): .scene(change)
        case .saveAndWait: .save(wait: true)
        case .reconnect: .scene(.disconnect)
        }
    }

    /// Whether the reply waits for a save (`save --wait`; a disconnect saves what is unsaved):
    /// on a full disk it may say the save failed (74), and the change stays applied.
    public var waitsForDurability: Bool { self == .saveAndWait || self == .reconnect }

    public var description: String {
        switch self {
        case .tab(.open(let url, let incognito, let index, let opener, let background)):
            "open \(url)\(incognito ? " incognito" : "")\(index.map { " at \($0)" } ?? "")\(opener.map { " from \($0)" } ?? "")\(background ? " in the background" : "")"
        case .tab(.navigate(let tab, let url)): "navigate \(tab) to \(url)"
        case .tab(.close(let tab)): "close \(tab)"
        case .tab(.activate(let tab)): "activate \(tab)"
        case .tab(.move(let tab, let index)): "move \(tab) to \(index)"
        case .tab(.replace(let tab, let url)): "replace \(tab) with \(url)"
        case .tab(.closeAll(let incognito)): incognito ? "close all incognito" : "close all regular"
        case .tab(.setPinned(let tab, let pinned)): "\(pinned ? "pin" : "unpin") \(tab)"
        case .tab(.go(let tab, let direction)): "\(direction == .back ? "back" : "forward") \(tab)"
        case .scene(.background): "background"
        case .scene(.foreground): "foreground"
        case .scene(.disconnect): "disconnect"
        case .saveAndWait: "save --wait"
        case .reconnect: "disconnect and reconnect"
        }
    }
}

extension OracleWindow {
    /// What `dump` shows that this model does not, field by field (tabs, active, pinned,
    /// openers, pages, histories): what a failure's line names, so a torn window can be
    /// explained without its files, which a campaign's tmpfs takes with it.
    public func differences(from dump: DumpReply) -> [String] {
        differences(regular, dump.regular, "regular") + differences(incognito, dump.incognito, "incognito")
    }

    private func differences(_ list: ReferenceList, _ shown: DumpReply.BrowserContents, _ name: String) -> [String] {
        var found: [String] = []
        let shownIDs = shown.tabs.map(\.id)
        if shownIDs != list.tabs.map(\.id) {
            found.append("\(name) tabs \(shownIDs), the model \(list.tabs.map(\.id))")
        }
        let shownActive = shown.activeIndex.flatMap {
            shown.tabs.indices.contains(Int($0)) ? shown.tabs[Int($0)].id : nil
        }
        if shownActive != list.activeID {
            found.append(
                "\(name) active \(shownActive.map(String.init) ?? "-"), the model \(list.activeID.map(String.init) ?? "-")"
            )
        }
        let shownPinned = shown.tabs.filter(\.pinned).count
        if shownPinned != list.pinnedCount {
            found.append("\(name) pinned \(shownPinned), the model \(list.pinnedCount)")
        }
        for tab in shown.tabs {
            guard let modelTab = list.tabs.first(where: { $0.id == tab.id }) else { continue }
            if tab.opener != modelTab.openerID {
                found.append(
                    "tab \(tab.id) opener \(tab.opener.map(String.init) ?? "-"), the model \(modelTab.openerID.map(String.init) ?? "-")"
                )
            }
            guard let page = pages[tab.id] else { continue }
            if tab.url != page.url { found.append("tab \(tab.id) shows \(tab.url), the model \(page.url)") }
            if page.complete, let count = tab.historyCount, Int(count) != page.urls.count {
                found.append("tab \(tab.id) history of \(count), the model \(page.urls.count)")
            }
            if page.complete, let index = tab.historyIndex, Int(index) != page.current {
                found.append("tab \(tab.id) at entry \(index), the model \(page.current)")
            }
        }
        return found
    }
}
