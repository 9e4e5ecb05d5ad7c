import BrowserModel
import HostLimits
import SwiftProtobuf

/// One journal record: a single WebStateList mutation, the command sequence number that caused
/// it, and the active tab after it.
public struct JournalRecord: Sendable, Equatable, CustomStringConvertible {
    let storage: MutationStorage

    init(_ storage: MutationStorage) { self.storage = storage }

    public var seq: UInt64 { storage.seq }

    /// The move between windows that brought in the tab this record inserts (nil: the record is
    /// no such insert).
    public var movedIn: ReceivedMove? {
        guard case .insert(let insert) = storage.mutation, let tab = WebStateID(rawValue: insert.webState.identifier)
        else { return nil }
        return ReceivedMove(move: insert.movedIn, tab: tab)
    }

    /// The record framed for a journal file. The model's bounds keep every record within
    /// `Limits.maxRecordPayloadBytes`; one that is not is refused, never written.
    public var frame: [UInt8] {
        get throws(SessionFormatError) { try Framing.record(.mutation, payload: payload) }
    }

    /// The record's payload, unframed, encoded again from the record read: what a recorder
    /// made it from (`JournalRecorder.takePayloads`), which a store stages until it knows where
    /// the record goes (`JournalFile.save`), since a sealed record is bound to its offset.
    public var payload: [UInt8] {
        do {
            return try storage.serializedBytes()
        } catch {
            preconditionFailure("serializing a record read back failed: \(error)")
        }
    }

    /// The records framed one after another from file offset `start` (`JournalFile.frames`).
    public static func frames(_ records: [JournalRecord], seal: RecordSeal?, from start: Int) throws(SessionFormatError)
        -> [[UInt8]]
    {
        try JournalFile.frames(records.map(\.payload), seal: seal, from: start)
    }

    public var description: String {
        let active = storage.activeIdentifier
        return switch storage.mutation {
        case .insert(let insert):
            "#\(seq) insert \(insert.webState.identifier) at \(insert.index)\(insert.pinned ? " pinned" : "") active=\(active)"
        case .move(let move): "#\(seq) move \(move.identifier) to \(move.toIndex) active=\(active)"
        case .remove(let remove): "#\(seq) \(remove.closing ? "close" : "detach") \(remove.identifier) active=\(active)"
        case .replace(let replace):
            "#\(seq) replace \(replace.replacedIdentifier) with \(replace.webState.identifier) active=\(active)"
        case .activate(let activate): "#\(seq) activate \(active) at \(activate.activatedAtUs)"
        case .navigation(let navigation):
            "#\(seq) \(navigation.hasItem ? "navigate" : "go to") \(navigation.identifier) item \(navigation.itemIndex)"
        case .pin(let pin): "#\(seq) \(pin.pinned ? "pin" : "unpin") \(pin.identifier) to \(pin.toIndex)"
        case nil: "#\(seq) (empty)"
        }
    }
}

/// Watches one list, and turns every mutation and every navigation its tabs commit (the list
/// passes those on: no registration per tab, so attaching a recorder to a restored window of
/// any size costs the same) into a journal record carrying `commandSeq`, the command being
/// applied, encoded at once from the model (`RecordWire`): what a store stages is its payload.
public final class JournalRecorder: WebStateListObserver {
    /// The sequence number of the command being applied; set before applying it.
    public var commandSeq: UInt64 = 0
    /// The move between windows the command makes (0: none): what its inserts carry as
    /// `moved_in` and its detaches as `moved_out`; set with `commandSeq`.
    public var move: UInt64 = 0
    private var pending: [[UInt8]] = []

    public init(list: WebStateList) {
        // Held weakly by the list: the store keeps the recorder.
        list.addObserver(self)
    }

    /// The payloads (`JournalRecord.payload`) of the records made since the last call, oldest
    /// first.
    public func takePayloads() -> [[UInt8]] {
        defer { pending.removeAll(keepingCapacity: true) }
        return pending
    }

    public func webStateList(_ list: WebStateList, didChange change: WebStateListChange, status: WebStateListStatus) {
        let mutation: MutationWire
        switch change {
        case .inserted(let webState, let index):
            mutation = .insert(
                index: Int32(index), pinned: list.isPinned(at: index),
                tab: TabWire(webState, opener: try? list.opener(at: index)), movedIn: move)
        case .moved(let webState, _, let to): mutation = .move(id: webState.id.rawValue, toIndex: Int32(to))
        case .removed(let webState, _, let closing):
            mutation = .remove(id: webState.id.rawValue, closing: closing, movedOut: closing ? 0 : move)
        case .replaced(let old, let new, let index):
            mutation = .replace(replacedID: old.id.rawValue, tab: TabWire(new, opener: try? list.opener(at: index)))
        case .pinnedStateChanged(let webState, _, let to, let pinned):
            mutation = .pin(id: webState.id.rawValue, pinned: pinned, toIndex: Int32(to))
        case .activation:
            mutation = .activate(activatedAtUs: status.active?.lastActiveTime.microsecondsSinceEpoch ?? 0)
        }
        record(mutation, active: status.active)
    }

    public func webStateList(_ list: WebStateList, webState: WebState, didCommitNavigationAt index: Int, newItem: Bool)
    {
        var itemNumber: Int64 = 0
        var item: NavigationItem?
        if let history = webState.loadedHistory {
            // By number, which the oldest entries' drop does not change.
            itemNumber = history.itemNumber(at: index)
            if newItem { item = history.items[index] }
        }
        record(.navigation(id: webState.id.rawValue, itemNumber: itemNumber, item: item), active: list.activeWebState)
    }

    private func record(_ mutation: MutationWire, active: WebState?) {
        pending.append(
            encodeMessage(RecordWire(seq: commandSeq, activeIdentifier: active?.id.rawValue ?? 0, mutation: mutation)))
    }
}

/// Applies journal records to a list, checking each against it: a record that names a tab the
/// list lacks, an index it does not have, or a result other than the one recorded is refused
/// with a typed error and leaves the list as the previous record left it.
///
/// Replay keeps tabs unrealized, as a snapshot's are: a tab a record brings in keeps its
/// history in `stored` as bytes, and a navigation record against an unrealized tab is applied
/// to its stored history (decoded at the tab's first such record, then checked and changed in
/// memory, stored as bytes again by `JournalTabs.storeReplayed` once the replay ends), never by
/// realizing it. A tab realized before the record (a list the caller built) is navigated as a
/// realized one.
public enum JournalReplayer {
    /// Applies `record`. A navigation of a tab in `degraded` (its history lost in two
    /// generations) lands where it can instead of being refused.
    public static func apply(
        _ record: JournalRecord, to list: WebStateList, profile: Profile, keepingIn stored: JournalTabs,
        degraded: DegradedHistories? = nil
    ) throws(SessionFormatError.InvalidState) {
        let storage = record.storage
        switch storage.mutation {
        case .insert(let insert):
            // The list would refuse it too; named here, an insert past the bound is damage.
            guard list.count < Limits.maxTabsPerBrowser else {
                throw .tooManyTabs(list.count + 1, limit: Limits.maxTabsPerBrowser)
            }
            let (webState, opener) = try insert.webState.makeWebState(keepingIn: stored)
            try checkUniqueInFamily(webState.id, list: list, profile: profile)
            profile.reserveWebStateID(webState.id)
            let index = try listCall {
                try list.insert(
                    webState, InsertionParams(index: Int(insert.index), pinned: insert.pinned, opener: opener))
            }
            guard index == Int(insert.index) else {
                throw .replayMismatch("tab \(webState.id) landed at \(index), recorded at \(insert.index)")
            }
        case .move(let move):
            let from = try position(of: move.identifier, in: list)
            let to = try listCall { try list.move(from: from, to: Int(move.toIndex)) }
            guard to == Int(move.toIndex) else {
                throw .replayMismatch("tab \(move.identifier) moved to \(to), recorded at \(move.toIndex)")
            }
        case .remove(let remove):
            let index = try position(of: remove.identifier, in: list)
            if remove.closing {
                try listCall { try list.close(at: index) }
            } else {
                try listCall { _ = try list.detach(at: index) }
            }
        case .replace(let replace):
            let index = try position(of: replace.replacedIdentifier, in: list)
            let (webState, _) = try replace.webState.makeWebState(keepingIn: stored)
            try checkUniqueInFamily(webState.id, list: list, profile: profile)
            profile.reserveWebStateID(webState.id)
            try listCall { try list.replace(at: index, with: webState).destroy() }
        case .activate:
            // The stamp is applied below, once the record's active tab is active.
            break
        case .navigation(let navigation):
            let index = try position(of: navigation.identifier, in: list)
            let webState = try listCall { try list.webState(at: index) }
            try replayNavigation(navigation, on: webState, keepingIn: stored, degraded: degraded)
        case .pin(let pin):
            let index = try position(of: pin.identifier, in: list)
            let to = try listCall { try list.setPinned(at: index, pin.pinned) }
            guard to == Int(pin.toIndex) else {
                throw .replayMismatch("tab \(pin.identifier) pinned to \(to), recorded at \(pin.toIndex)")
            }
        case nil:
            throw .replayMismatch("record \(storage.seq) carries no mutation")
        }
        try listCall { try list.activate(at: try activePosition(storage.activeIdentifier, in: list)) }
        if case .activate(let activate) = storage.mutation, activate.activatedAtUs != 0 {
            list.activeWebState?.wasActivated(at: Timestamp(microsecondsSinceEpoch: activate.activatedAtUs))
        }
    }

    /// Applies a navigation record to the tab's stored history (it stays unrealized), or to its
    /// history in memory when it is realized. A stored history is read once a replay, at the
    /// tab's first navigation record, and held in `stored` from then on (`keepReplaying`): the
    /// later records change it in place.
    private static func replayNavigation(
        _ navigation: Windowhost_Session_NavigationMutation, on webState: WebState, keepingIn stored: JournalTabs,
        degraded: DegradedHistories?
    ) throws(SessionFormatError.InvalidState) {
        let item = navigation.hasItem ? try navigation.item.model() : nil
        if let (tabs, index) = webState.storedContent, tabs === stored, stored.isReplaying(at: index) {
            try stored.changeReplaying(at: index) { (history) throws(SessionFormatError.InvalidState) in
                try apply(navigation, item: item, to: &history, of: webState.id, degraded: degraded)
            }
            // Its title and URL may have changed: the tab counts them again.
            webState.restoreStoredContent(in: stored, at: index)
            return
        }
        guard var history = try listCall({ try webState.storedHistory() }) else {
            // Realized: `loadedHistory` is there.
            let itemIndex = try entryIndex(navigation, in: webState.loadedHistory ?? NavigationHistory())
            if let item {
                try listCall { try webState.commitNavigation(to: item, at: itemIndex) }
            } else {
                try listCall { try webState.goToItem(at: itemIndex) }
            }
            return
        }
        try apply(navigation, item: item, to: &history, of: webState.id, degraded: degraded)
        let kept = stored.keepReplaying(
            webState.id, creationTime: webState.creationTime, lastActiveTime: webState.lastActiveTime, history: history)
        webState.restoreStoredContent(in: stored, at: kept)
    }

    /// Applies a navigation record to tab `id`'s stored history; changes nothing when it throws.
    private static func apply(
        _ navigation: Windowhost_Session_NavigationMutation, item: NavigationItem?,
        to history: inout NavigationHistory, of id: WebStateID, degraded: DegradedHistories?
    ) throws(SessionFormatError.InvalidState) {
        // Reading the stored history runs its fallbacks: a history lost in two generations
        // degrades there.
        if let degraded, degraded.tabs[id] != nil {
            degraded.replayNavigation(of: id, on: &history, item: item, number: navigation.itemIndex)
            return
        }
        let itemIndex = try entryIndex(navigation, in: history)
        // `entryIndex` is at most one past the end, where a commit always fits: only going to
        // an entry can fail, and it changes nothing when it does.
        let applied =
            if let item { history.commit(item, at: itemIndex) != nil } else { history.goToItem(at: itemIndex) }
        guard applied else {
            throw .replayMismatch(
                "tab \(navigation.identifier) has no entry \(navigation.itemIndex) to go to (\(history.items.count) items)"
            )
        }
    }

    /// The index the record's entry number has in `history`.
    private static func entryIndex(_ navigation: Windowhost_Session_NavigationMutation, in history: NavigationHistory)
        throws(SessionFormatError.InvalidState) -> Int
    {
        guard let itemIndex = history.index(ofItemNumber: navigation.itemIndex) else {
            throw .replayMismatch(
                "tab \(navigation.identifier) has no entry \(navigation.itemIndex) (entries \(history.droppedItemCount)..<\(history.itemNumber(at: history.items.count)))"
            )
        }
        return itemIndex
    }

    /// A tab id the other Browser of the window already holds: a record that brings it in
    /// does not fit, like any other (the Browser restored first keeps its tab).
    private static func checkUniqueInFamily(_ id: WebStateID, list: WebStateList, profile: Profile)
        throws(SessionFormatError.InvalidState)
    {
        guard !profile.holdsWebState(id, outside: list) else { throw .duplicateIdentifier(id.rawValue) }
    }

    /// Where the record's active tab is: most records keep the active tab, so it is looked for
    /// there first, not by walking the list (a replay of thousands of inserts did, at each one).
    private static func activePosition(_ identifier: Int64, in list: WebStateList)
        throws(SessionFormatError.InvalidState) -> Int?
    {
        guard identifier != 0 else { return nil }
        if let active = list.activeIndex, list.activeWebState?.id.rawValue == identifier { return active }
        return try position(of: identifier, in: list)
    }

    private static func position(of identifier: Int64, in list: WebStateList) throws(SessionFormatError.InvalidState)
        -> Int
    {
        guard let id = WebStateID(rawValue: identifier) else { throw .invalidIdentifier(identifier) }
        guard let index = list.index(of: id) else { throw .replayMismatch("no tab \(identifier) in the list") }
        return index
    }

    private static func listCall<T>(_ body: () throws -> T) throws(SessionFormatError.InvalidState)
        -> T
    {
        do {
            return try body()
        } catch {
            throw .replayMismatch("\(error)")
        }
    }
}

/// The frame that ends one save's write in a journal. Records count only once a commit follows
/// them, so a write torn anywhere is wholly absent. `browsers` names every Browser of the window
/// that wrote in the same save: recovery keeps the save only if all of them have it.
public struct JournalCommit: Sendable, Equatable {
    /// The last command sequence number the save covers.
    public let seq: UInt64
    /// Bit per Browser kind (`BrowserKind.commitBit`) that took part in the save, and
    /// `laggingBit` when another Browser of the window had changes this save does not hold.
    public let browsers: UInt8

    /// Set on a save made while another Browser's saves were failing: the window was not
    /// durable through it, and recovery leaves it out unless the other Browser's files reach
    /// its seq, so the window never comes back with one Browser ahead of a change the other lost.
    public static let laggingBit: UInt8 = 4

    /// Every bit a store writes in `browsers`: any other, or a commit naming no Browser, is damage.
    static let definedBits: UInt8 = BrowserKind.regular.commitBit | BrowserKind.incognito.commitBit | laggingBit

    /// Whether `browsers` is one a store writes: at least one Browser, no undefined bit.
    public var hasValidBrowsers: Bool {
        browsers & ~Self.definedBits == 0 && browsers & ~Self.laggingBit != 0
    }

    public init(seq: UInt64, browsers: UInt8) {
        self.seq = seq
        self.browsers = browsers
    }

    public var frame: [UInt8] {
        var payload: [UInt8] = []
        payload.appendLittleEndian(seq)
        payload.append(browsers)
        var frame: [UInt8] = []
        Framing.appendFrame(.commit, payload: payload, to: &frame)
        assert(frame.count == Self.frameSize, "a commit's frame has one length")
        return frame
    }

    /// A commit's frame is always this long: what a search for one looks for.
    static let frameSize = Framing.recordHeaderSize + 9

    init(payload: [UInt8], at offset: Int) throws(SessionFormatError) {
        guard payload.count == 9 else {
            throw .malformedPayload(offset: offset, reason: "a commit holds 9 bytes, this one \(payload.count)")
        }
        seq = payload.littleEndian(UInt64.self, at: 0)
        browsers = payload[8]
    }
}

extension BrowserKind {
    /// This kind's bit in `JournalCommit.browsers`.
    public var commitBit: UInt8 { self == .regular ? 1 : 2 }

    /// The kinds whose commit bits `bits` sets, regular first; bits no kind has are ignored.
    public static func having(commitBits bits: UInt64) -> [BrowserKind] {
        allCases.filter { bits & UInt64($0.commitBit) != 0 }
    }
}

/// A journal file: a header, then saves appended in order, each its records and a commit.
public enum JournalFile {
    /// The file header alone: what journals before block framing start with (and what a
    /// reader checks).
    public static var header: [UInt8] { Framing.fileHeader(.journal) }

    /// Mutation records (`JournalRecord.payload`) framed where they go: one after another from
    /// file offset `start`, each sealed with `seal` (if given) for its own offset.
    public static func frames(_ payloads: [[UInt8]], seal: RecordSeal?, from start: Int) throws(SessionFormatError)
        -> [[UInt8]]
    {
        var offset = start
        var frames: [[UInt8]] = []
        frames.reserveCapacity(payloads.count)
        for payload in payloads {
            var frame: [UInt8] = []
            try Framing.appendRecord(.mutation, payload: payload, to: &frame, seal: seal, start: offset)
            offset += frame.count
            frames.append(frame)
        }
        assert(frames.count == payloads.count && offset >= start, "one frame a payload, laid end to end")
        return frames
    }

    /// The file header followed by a padding record to the end of its block: a new journal's
    /// first bytes, so its first save starts on a block boundary. `sealed`: its mutation
    /// records will be (`RecordSeal`).
    public static func header(blockSize: Int, sealed: Bool = false) -> [UInt8] {
        var header = Framing.fileHeader(.journal, sealed: sealed)
        pad(&header, blockSize: blockSize, before: [])
        return header
    }

    /// One save as written at file offset `start`, a block boundary: its mutation records
    /// (`JournalRecord.payload`) framed one after another, each sealed with `seal` (if given)
    /// for its own offset, a padding record if needed, then its commit, ending on the next
    /// boundary at or past them. The commit stays the last bytes, so a torn write is still a
    /// prefix of one save whose commit comes last; and the next save starts on a fresh block,
    /// so no write touches a block holding an earlier save. `reaching`: the save is at least
    /// this long (padded), to cover bytes a save taken back left there
    /// (`BrowserStore.retractSave`). Built in one buffer, sized before the first record.
    public static func save(
        _ payloads: [[UInt8]], seal: RecordSeal?, from start: Int, commit: JournalCommit, blockSize: Int,
        reaching minimum: Int = 0
    ) throws(SessionFormatError) -> [UInt8] {
        let framed = payloads.reduce(0) {
            $0 + Framing.frameSize(payload: $1.count, kind: .mutation, sealed: seal != nil)
        }
        var bytes: [UInt8] = []
        // Padding adds less than two blocks past the records and the commit, or the minimum.
        bytes.reserveCapacity(max(framed + JournalCommit.frameSize, minimum) + 2 * blockSize)
        for payload in payloads {
            try Framing.appendRecord(.mutation, payload: payload, to: &bytes, seal: seal, start: start)
        }
        assert(bytes.count == framed, "the records are as long as measured")
        let commitFrame = commit.frame
        pad(&bytes, blockSize: blockSize, before: commitFrame, reaching: minimum)
        assert(
            bytes.count >= minimum && bytes.suffix(JournalCommit.frameSize) == ArraySlice(commitFrame),
            "a save ends with its commit")
        return bytes
    }

    /// Appends padding, then `last`, to `bytes`, ending on a multiple of `blockSize` (a power
    /// of two) at or past `minimum`: no padding when they end on one already, else at least a
    /// record header's worth (a whole block more when the gap is smaller than that), in as many
    /// padding records as a record's largest payload needs.
    static func pad(_ bytes: inout [UInt8], blockSize: Int, before last: [UInt8], reaching minimum: Int = 0) {
        precondition(blockSize > 0 && blockSize & (blockSize - 1) == 0, "a power-of-two block")
        let content = bytes.count + last.count
        var end = (max(content, minimum) + blockSize - 1) / blockSize * blockSize
        while end > content, end - content < Framing.recordHeaderSize { end += blockSize }
        bytes.reserveCapacity(end)
        while bytes.count + last.count < end {
            let gap = end - bytes.count - last.count
            // A largest record short of the gap leaves more than a header's worth for the next.
            let payload =
                gap - Framing.recordHeaderSize <= Limits.maxRecordPayloadBytes
                ? gap - Framing.recordHeaderSize : Limits.maxRecordPayloadBytes - Framing.recordHeaderSize
            Framing.appendFrame(.padding, payload: [UInt8](repeating: 0, count: payload), to: &bytes)
        }
        bytes += last
        assert(bytes.count == end && end % blockSize == 0)
    }

    /// One commit as found in a file: what it says, how many records precede it, where it ends.
    public struct FoundCommit: Sendable, Equatable {
        public let commit: JournalCommit
        public let recordCount: Int
        public let end: Int
    }

    /// What a scan found: the records and commits that read cleanly, where the clean part ends,
    /// and why reading stopped before the end of the bytes, if it did.
    public struct Scan: Sendable {
        public let records: [JournalRecord]
        /// Where each record starts in the file, in the order of `records`: what an error
        /// about one record names.
        public let recordOffsets: [Int]
        public let commits: [FoundCommit]
        public let validLength: Int
        public let stoppedBy: SessionFormatError?
        /// Where the first save starts: past the file header and the padding that fills its
        /// block (`header(blockSize:)`; none in journals from before block framing). Where
        /// appends continue when no save was committed.
        public let headerEnd: Int
        /// The file's layout version, from its header.
        public let version: Int
        /// Whether its header says its records are sealed.
        public let sealed: Bool

        /// The records a commit covers: what recovery may apply.
        public var committedRecords: ArraySlice<JournalRecord> { records[..<(commits.last?.recordCount ?? 0)] }
    }

    /// Reads records until the end or the first record that does not read cleanly (a sealed
    /// one that does not open among them). The header must be sound: a file that is not a
    /// journal gives no records, one larger than `Limits.maxJournalBytes` (which no store
    /// writes) is refused unread, and a sealed one without `seal` throws `.sealedWithoutKey`.
    /// A journal in the clear is read in the clear whatever `seal` is.
    public static func scan(_ source: some ByteSource, seal: RecordSeal? = nil) throws(SessionFormatError) -> Scan {
        guard source.size <= Limits.maxJournalBytes else {
            throw .fileTooLarge(size: source.size, limit: Limits.maxJournalBytes)
        }
        let source = ReadAhead(source)
        var (offset, version, sealed) = try Framing.checkFileHeader(source, kind: .journal)
        guard !sealed || seal != nil else { throw .sealedWithoutKey }
        let seal = sealed ? seal : nil
        var records: [JournalRecord] = []
        var recordOffsets: [Int] = []
        var commits: [FoundCommit] = []
        var headerEnd = offset
        while offset < source.size {
            do throws(SessionFormatError) {
                let (kind, payload, end) = try Framing.readRecord(
                    source, at: offset, expecting: [.mutation, .commit, .padding], seal: seal)
                assert(
                    end >= offset + Framing.recordHeaderSize && end <= source.size,
                    "a record read moves the scan forward, inside the file")
                if kind == .padding {
                    guard payload.allSatisfy({ $0 == 0 }) else {
                        throw SessionFormatError.malformedPayload(
                            offset: offset, reason: "a padding record holds zeros only")
                    }
                    if headerEnd == offset { headerEnd = end }
                } else if kind == .commit {
                    commits.append(
                        FoundCommit(
                            commit: try JournalCommit(payload: payload, at: offset), recordCount: records.count,
                            end: end))
                } else {
                    records.append(JournalRecord(try decodeMessage(MutationStorage.self, payload, at: offset)))
                    recordOffsets.append(offset)
                }
                offset = end
                assert(
                    records.count == recordOffsets.count && (commits.last?.recordCount ?? 0) <= records.count,
                    "each record has its offset, each commit counts records read")
            } catch {
                return Scan(
                    records: records, recordOffsets: recordOffsets, commits: commits, validLength: offset,
                    stoppedBy: error, headerEnd: headerEnd,
                    version: version, sealed: sealed)
            }
        }
        return Scan(
            records: records, recordOffsets: recordOffsets, commits: commits, validLength: offset, stoppedBy: nil,
            headerEnd: headerEnd,
            version: version, sealed: sealed)
    }

    /// Every record, or the error at the first that does not read cleanly.
    public static func decode(_ source: some ByteSource, seal: RecordSeal? = nil) throws(SessionFormatError)
        -> [JournalRecord]
    {
        let scan = try scan(source, seal: seal)
        if let error = scan.stoppedBy { throw error }
        return scan.records
    }

    /// Bytes read or zeroed at a time in a journal's tail: memory stays bounded whatever the file's size.
    public static let chunkSize = 1 << 20

    /// Whether a valid commit starts anywhere in `start..<source.size`: after a record that does
    /// not read, this tells damage in the middle (a save follows it) from a torn tail (a torn
    /// write is a prefix of one save, whose commit comes last). Looks for commit frames only,
    /// which have one fixed length, so the search is linear in the bytes, in bounded chunks.
    /// A read that fails is thrown: an unknown tail is no torn one, and must never be zeroed.
    public static func hasValidCommit(in source: some ByteSource, after start: Int) throws(SessionFormatError) -> Bool {
        try validCommitCount(in: source, after: start, upTo: 1) > 0
    }

    /// How many valid commits start in `start..<source.size`, counted up to `limit`: the saves
    /// found past a record that does not read. Pipelined saves land in any order, so a cut can
    /// leave a hole (a save that never landed, or landed torn) with up to
    /// `Limits.maxSavesInFlight` saves' commits after it; more than that is damage.
    public static func validCommitCount(in source: some ByteSource, after start: Int, upTo limit: Int)
        throws(SessionFormatError) -> Int
    {
        var chunkStart = max(start, 0)
        var found = 0
        while chunkStart < source.size, found < limit {
            let count = min(chunkSize + JournalCommit.frameSize - 1, source.size - chunkStart)
            guard count >= JournalCommit.frameSize else { break }
            let bytes = try source.read(offset: chunkStart, count: count)
            bytes.withUnsafeBytes { raw in
                var index = 0
                while index + JournalCommit.frameSize <= raw.count, found < limit {
                    if raw[index] == Framing.recordMagic[0], raw[index + 1] == Framing.recordMagic[1],
                        raw[index + 2] == RecordKind.commit.rawValue,
                        (try? Framing.readRecord(
                            InMemoryBytes(Array(raw[index..<index + JournalCommit.frameSize]), base: 0), at: 0,
                            expecting: .commit))
                            != nil
                    {
                        found += 1
                    }
                    index += 1
                }
            }
            // The next chunk starts where a frame not wholly in this one could start.
            chunkStart += count - JournalCommit.frameSize + 1
        }
        return found
    }

    /// Whether a whole aligned `sectorSize` sector in `start..<end` is all zeros. A save never
    /// holds one (its last sector ends with its commit, and its padding is shorter than a
    /// sector past its header), so after a record that does not read, a zero sector marks a
    /// save that never landed or landed torn: a hole pipelined saves left, not damage in the
    /// middle (a flipped byte in an acknowledged save).
    public static func hasZeroSector(in source: some ByteSource, from start: Int, to end: Int, sectorSize: Int = 512)
        throws(SessionFormatError) -> Bool
    {
        var sector = (max(start, 0) + sectorSize - 1) / sectorSize * sectorSize
        let limit = min(end, source.size)
        while sector + sectorSize <= limit {
            let count = min(chunkSize, (limit - sector) / sectorSize * sectorSize)
            let bytes = try source.read(offset: sector, count: count)
            let found = bytes.withUnsafeBytes { raw -> Bool in
                var offset = 0
                while offset + sectorSize <= raw.count {
                    var zero = true
                    var index = offset
                    while index < offset + sectorSize {
                        if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) != 0 {
                            zero = false
                            break
                        }
                        index += 8
                    }
                    if zero { return true }
                    offset += sectorSize
                }
                return false
            }
            if found { return true }
            sector += count
        }
        return false
    }

    /// One past the last non-zero byte at or after `start`, or `start` when all are zero: where
    /// the preallocated zeros after the last write begin. Read backwards in bounded chunks.
    public static func lastNonZeroEnd(_ source: some ByteSource, from start: Int) throws(SessionFormatError) -> Int {
        var end = source.size
        while end > start {
            let chunkStart = max(start, end - chunkSize)
            let bytes = try source.read(offset: chunkStart, count: end - chunkStart)
            // Eight bytes at a time: the zeroed room after the last save is most of a journal.
            let last = bytes.withUnsafeBytes { raw -> Int? in
                var index = raw.count
                while index >= 8, raw.loadUnaligned(fromByteOffset: index - 8, as: UInt64.self) == 0 { index -= 8 }
                while index > 0, raw[index - 1] == 0 { index -= 1 }
                return index == 0 ? nil : index
            }
            if let last { return chunkStart + last }
            end = chunkStart
        }
        return start
    }
}

extension JournalFile.Scan {
    /// How many of the commits (counted from the first) keep the seq rules, and the error at
    /// the first that breaks one: each commit names at least one Browser and no undefined bit
    /// (`JournalCommit.hasValidBrowsers`; a commit is checked here, not when its frame is read,
    /// so one with a valid checksum is damage in the middle, never taken for a torn tail and
    /// zeroed), every seq is at most `Limits.maxCommandSeq` and not below
    /// `snapshotSeq` (the snapshot the chain starts from), records' seqs never go back and
    /// never pass the commit that covers them, and each commit is at or above the one before
    /// it (`previousCommit`, the last of the journal before this one in the chain). An error
    /// about a record names that record's seq and offset, not its commit's.
    public func checkSeqs(snapshotSeq: UInt64, previousCommit: UInt64?) -> (
        validCommits: Int, error: SessionFormatError?
    ) {
        var lastRecordSeq = snapshotSeq
        var lastCommit = previousCommit
        var recordIndex = 0
        for (index, found) in commits.enumerated() {
            let offset = found.end - JournalCommit.frameSize
            assert(
                found.recordCount <= records.count && found.recordCount >= recordIndex,
                "commits count the records in order")
            func refuse(_ reason: SessionFormatError.InvalidState, at offset: Int = offset) -> (
                Int, SessionFormatError?
            ) {
                (index, .invalidState(offset: offset, reason: reason))
            }
            guard found.commit.hasValidBrowsers else { return refuse(.undefinedCommitBits(found.commit.browsers)) }
            let seq = found.commit.seq
            guard Limits.isValidCommandSeq(seq) else { return refuse(.seqOutOfRange(seq)) }
            guard seq >= snapshotSeq else { return refuse(.seqOutOfOrder(seq, previous: snapshotSeq)) }
            // Equal is a save that covers no new command: the store writes one at the seq of the
            // save before it (a hostile campaign's full disk around an incognito deletion did).
            if let lastCommit, seq < lastCommit { return refuse(.seqOutOfOrder(seq, previous: lastCommit)) }
            while recordIndex < found.recordCount {
                let recordSeq = records[recordIndex].seq
                let recordOffset = recordOffsets[recordIndex]
                guard Limits.isValidCommandSeq(recordSeq) else {
                    return refuse(.seqOutOfRange(recordSeq), at: recordOffset)
                }
                guard recordSeq >= lastRecordSeq else {
                    return refuse(.seqOutOfOrder(recordSeq, previous: lastRecordSeq), at: recordOffset)
                }
                guard recordSeq <= seq else {
                    return refuse(.recordPastItsCommit(recordSeq, commit: seq), at: recordOffset)
                }
                lastRecordSeq = recordSeq
                recordIndex += 1
            }
            lastCommit = seq
        }
        return (commits.count, nil)
    }
}

/// A source read forward a chunk (`JournalFile.chunkSize`) at a time: a journal's scan asks for
/// each record's header and payload apart, which cost two reads of the file a record (20,000
/// for a window of 10,000 tabs held in its journal). A chunk that does not read leaves the read
/// asked for to the source alone, so a failing read is met where it was, at the record it is in.
final class ReadAhead<Source: ByteSource>: ByteSource {
    private let source: Source
    private var chunk = InMemoryBytes([])

    init(_ source: Source) { self.source = source }

    var size: Int { source.size }

    func read(offset: Int, count: Int) throws(SessionFormatError) -> [UInt8] {
        if offset >= chunk.base, count >= 0, count <= chunk.size - offset {
            return try chunk.read(offset: offset, count: count)
        }
        try checkRange(offset: offset, count: count)
        let length = min(JournalFile.chunkSize, size - offset)
        guard count <= length, let bytes = try? source.read(offset: offset, count: length) else {
            return try source.read(offset: offset, count: count)
        }
        chunk = InMemoryBytes(bytes, base: offset)
        return try chunk.read(offset: offset, count: count)
    }
}
