import BrowserModel

@testable import SessionFormat

/// The comparable contents of a list, every history realized.
func contents(_ list: WebStateList) throws -> TabListContents { try TabListContents(list, realizing: true) }

/// Seeded random browsing on one list with a recorder attached: every operation a command with
/// its own sequence number.
struct BrowsingSession {
    let profile = Profile(stateDirectory: "/unused")
    let list = WebStateList()
    let recorder: JournalRecorder
    var records: [JournalRecord] = []
    private var browsing: RandomBrowsing

    init(seed: UInt64) {
        browsing = RandomBrowsing(seed: seed)
        recorder = JournalRecorder(list: list)
    }

    mutating func run(commands: Int, firstSeq: UInt64 = 1) throws {
        for seq in firstSeq..<firstSeq + UInt64(commands) {
            recorder.commandSeq = seq
            try browsing.step(list, profile: profile)
            records += try recorder.takeRecords()
        }
    }

    var journalBytes: [UInt8] { get throws { try JournalFile.header + records.flatMap { try $0.frame } } }
}

/// Replays `records` onto a new list (or `list`) and returns it.
func replay(
    _ records: [JournalRecord], onto list: WebStateList = WebStateList(),
    profile: Profile = Profile(stateDirectory: "/unused")
)
    throws -> WebStateList
{
    let stored = JournalTabs()
    for record in records { try JournalReplayer.apply(record, to: list, profile: profile, keepingIn: stored) }
    return list
}

/// A snapshot of `list`; unrealized tabs' histories are copied from `previous`.
func snapshotBytes(_ list: WebStateList, seq: UInt64, previous: SnapshotReader? = nil) throws -> [UInt8] {
    try SnapshotEncoder.encode(list, lastCommandSeq: seq) { (webState) throws(SessionFormatError) -> [UInt8] in
        guard let previous, let index = previous.index(of: webState.id) else {
            throw .readFailed(offset: 0, reason: "no stored history for \(webState.id)")
        }
        return try previous.historyPayload(at: index)
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
