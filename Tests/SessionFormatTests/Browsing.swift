import BrowserModel
@testable import SessionFormat

/// Everything restore must bring back, in comparable form: order, identity, openers, pinned
/// prefix, active tab and every tab's history.
struct ListState: Equatable, CustomStringConvertible {
    struct Tab: Equatable {
        let id: Int64
        let opener: WebStateOpener?
        let history: NavigationHistory?
    }

    let tabs: [Tab]
    let activeIndex: Int?
    let pinnedCount: Int

    /// Reads `list`; with `realizing`, unrealized tabs are realized to compare their histories.
    init(_ list: WebStateList, realizing: Bool = true) throws {
        tabs = try list.webStates.enumerated().map { index, webState in
            Tab(
                id: webState.id.rawValue, opener: try list.opener(at: index),
                history: realizing ? try webState.navigationHistory() : webState.loadedHistory)
        }
        activeIndex = list.activeIndex
        pinnedCount = list.pinnedCount
    }

    var description: String {
        "tabs \(tabs.map(\.id)) active \(activeIndex.map(String.init) ?? "-") pinned \(pinnedCount)"
    }
}

/// Seeded random browsing on one list with a recorder attached: every operation a command with
/// its own sequence number. Keeps the state after each command so tests can compare prefixes.
struct BrowsingSession {
    let profile = Profile(stateDirectory: "/unused")
    let list = WebStateList()
    let recorder: JournalRecorder
    var records: [JournalRecord] = []
    var statesBySeq: [UInt64: ListState] = [:]
    private var random: SeededGenerator
    private var clock: Int64 = 1_700_000_000_000_000

    init(seed: UInt64) {
        random = SeededGenerator(seed: seed)
        recorder = JournalRecorder(list: list)
    }

    mutating func run(commands: Int, firstSeq: UInt64 = 1) throws {
        for seq in firstSeq..<firstSeq + UInt64(commands) {
            recorder.commandSeq = seq
            try step()
            records += recorder.takeRecords()
            statesBySeq[seq] = try ListState(list, realizing: false)
        }
    }

    private mutating func tick() -> Timestamp {
        clock += Int64.random(in: 1...5_000_000, using: &random)
        return Timestamp(microsecondsSinceEpoch: clock)
    }

    private mutating func newTab() -> WebState {
        let time = tick()
        var history = NavigationHistory()
        history.commit(NavigationItem(url: "https://site\(Int.random(in: 0..<50, using: &random)).example/", title: "New", timestamp: time))
        return WebState(id: profile.makeWebStateID(), creationTime: time, history: history)
    }

    private mutating func step() throws {
        let count = list.count
        let index = count == 0 ? 0 : Int.random(in: 0..<count, using: &random)
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<30 where count < 40, 0..<100 where count == 0:
            var params = InsertionParams(
                index: Bool.random(using: &random) ? Int.random(in: 0...count, using: &random) : nil,
                activate: Bool.random(using: &random), pinned: Int.random(in: 0..<6, using: &random) == 0)
            if count > 0, Bool.random(using: &random) {
                let opener = try list.webState(at: index)
                params.opener = WebStateOpener(openerID: opener.id, navigationIndex: (try opener.navigationHistory().currentIndex) ?? 0)
            }
            try list.insert(newTab(), params)
        case 30..<55:
            let webState = try list.webState(at: index)
            let time = tick()
            if Int.random(in: 0..<4, using: &random) == 0, webState.navigationItemCount > 1 {
                try webState.goToItem(at: Int.random(in: 0..<webState.navigationItemCount, using: &random))
            } else {
                try webState.commitNavigation(to: NavigationItem(
                    url: "https://site\(Int.random(in: 0..<50, using: &random)).example/\(clock)",
                    title: "Page \(clock)", timestamp: time))
            }
        case 55..<65: try list.move(from: index, to: Int.random(in: 0..<count, using: &random))
        case 65..<75: try list.close(at: index)
        case 75..<78: try list.detach(at: index)
        case 78..<83: try list.replace(at: index, with: newTab()).destroy()
        case 83..<93:
            try list.activate(at: Int.random(in: 0..<8, using: &random) == 0 ? nil : index)
            list.activeWebState?.wasActivated(at: tick())
        case 93..<98: try list.setPinned(at: index, !list.isPinned(at: index))
        default: list.closeAll(includingPinned: Bool.random(using: &random))
        }
    }

    var journalBytes: [UInt8] { JournalFile.header + records.flatMap(\.frame) }
}

/// Replays `records` onto a new list (or `list`) and returns it.
func replay(_ records: [JournalRecord], onto list: WebStateList = WebStateList(), profile: Profile = Profile(stateDirectory: "/unused"))
    throws -> WebStateList
{
    for record in records { try JournalReplayer.apply(record, to: list, profile: profile) }
    return list
}

/// A snapshot of `list`; unrealized tabs' histories are copied from `previous`.
func snapshotBytes(_ list: WebStateList, seq: UInt64, previous: SnapshotReader? = nil) throws -> [UInt8] {
    try SnapshotEncoder.encode(list, lastCommandSeq: seq) { (webState) throws(SessionFormatError) -> [UInt8] in
        guard let previous, let index = previous.items.firstIndex(where: { $0.id == webState.id }) else {
            throw .readFailed(offset: 0, reason: "no stored history for \(webState.id)")
        }
        return try previous.historyFrame(at: index)
    }
}

/// Counts what is read, to prove restore reads no history it does not need.
final class CountingSource: ByteSource {
    let inner: InMemoryBytes
    var reads: [Range<Int>] = []
    init(_ bytes: [UInt8]) { inner = InMemoryBytes(bytes) }
    var size: Int { inner.size }
    func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
        reads.append(offset..<offset + count)
        return try inner.read(offset: offset, count: count)
    }
}
