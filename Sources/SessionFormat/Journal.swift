import BrowserModel

/// One journal record: a single WebStateList mutation, the command sequence number that caused
/// it, and the active tab after it.
public struct JournalRecord: Sendable, Equatable, CustomStringConvertible {
    let storage: MutationStorage

    init(_ storage: MutationStorage) { self.storage = storage }

    public var seq: UInt64 { storage.seq }

    /// The record framed for a journal file.
    public var frame: [UInt8] { Framing.record(.mutation, payload: encodeMessage(storage)) }

    public var description: String {
        let active = storage.activeIdentifier
        return switch storage.mutation {
        case .insert(let insert):
            "#\(seq) insert \(insert.webState.identifier) at \(insert.index)\(insert.pinned ? " pinned" : "") active=\(active)"
        case .move(let move): "#\(seq) move \(move.identifier) to \(move.toIndex) active=\(active)"
        case .remove(let remove): "#\(seq) \(remove.closing ? "close" : "detach") \(remove.identifier) active=\(active)"
        case .replace(let replace):
            "#\(seq) replace \(replace.replacedIdentifier) with \(replace.webState.identifier) active=\(active)"
        case .activate: "#\(seq) activate \(active)"
        case .navigation(let navigation):
            "#\(seq) \(navigation.hasItem ? "navigate" : "go to") \(navigation.identifier) item \(navigation.itemIndex)"
        case .pin(let pin): "#\(seq) \(pin.pinned ? "pin" : "unpin") \(pin.identifier) to \(pin.toIndex)"
        case nil: "#\(seq) (empty)"
        }
    }
}

/// Watches one list and its tabs, and turns every mutation and committed navigation into a
/// journal record carrying `commandSeq`, the command being applied.
public final class JournalRecorder: WebStateListObserver, WebStateObserver {
    /// Observers are held weakly on both sides, so neither outlives the other by accident.
    private weak var list: WebStateList?
    /// The sequence number of the command being applied; set before applying it.
    public var commandSeq: UInt64 = 0
    private var pending: [JournalRecord] = []

    public init(list: WebStateList) {
        self.list = list
        list.addObserver(self)
        for webState in list.webStates { webState.addObserver(self) }
    }

    /// The records made since the last call, oldest first.
    public func takeRecords() -> [JournalRecord] {
        defer { pending.removeAll(keepingCapacity: true) }
        return pending
    }

    public func webStateList(_ list: WebStateList, didChange change: WebStateListChange, status: WebStateListStatus) {
        var record = MutationStorage()
        record.seq = commandSeq
        record.activeIdentifier = status.active?.id.rawValue ?? 0
        switch change {
        case .inserted(let webState, let index):
            webState.addObserver(self)
            var insert = Windowhost_Session_InsertMutation()
            insert.index = Int32(index)
            insert.pinned = list.isPinned(at: index)
            insert.webState = WebStateStorage(webState, opener: try? list.opener(at: index))
            record.insert = insert
        case .moved(let webState, _, let to):
            var move = Windowhost_Session_MoveMutation()
            move.identifier = webState.id.rawValue
            move.toIndex = Int32(to)
            record.move = move
        case .removed(let webState, _, let closing):
            webState.removeObserver(self)
            var remove = Windowhost_Session_RemoveMutation()
            remove.identifier = webState.id.rawValue
            remove.closing = closing
            record.remove = remove
        case .replaced(let old, let new, let index):
            old.removeObserver(self)
            new.addObserver(self)
            var replace = Windowhost_Session_ReplaceMutation()
            replace.replacedIdentifier = old.id.rawValue
            replace.webState = WebStateStorage(new, opener: try? list.opener(at: index))
            record.replace = replace
        case .pinnedStateChanged(let webState, _, let to, let pinned):
            var pin = Windowhost_Session_PinMutation()
            pin.identifier = webState.id.rawValue
            pin.pinned = pinned
            pin.toIndex = Int32(to)
            record.pin = pin
        case .activation:
            record.activate = Windowhost_Session_ActivateMutation()
        }
        pending.append(JournalRecord(record))
    }

    public func webState(_ webState: WebState, didCommitNavigationAt index: Int, newItem: Bool) {
        var record = MutationStorage()
        record.seq = commandSeq
        record.activeIdentifier = list?.activeWebState?.id.rawValue ?? 0
        var navigation = Windowhost_Session_NavigationMutation()
        navigation.identifier = webState.id.rawValue
        navigation.itemIndex = Int32(index)
        if newItem, let item = webState.loadedHistory?.items[index] {
            navigation.item = NavigationItemStorage(item)
        }
        record.navigation = navigation
        pending.append(JournalRecord(record))
    }
}

/// Applies journal records to a list, checking each against it: a record that names a tab the
/// list lacks, an index it does not have, or a result other than the one recorded is refused
/// with a typed error and leaves the list as the previous record left it.
public enum JournalReplayer {
    /// Applies `record`. A navigation of a tab in `degraded` (its history lost in two
    /// generations) lands where it can instead of being refused.
    public static func apply(
        _ record: JournalRecord, to list: WebStateList, profile: Profile, degraded: DegradedHistories? = nil
    ) throws(SessionFormatError.InvalidState) {
        let storage = record.storage
        switch storage.mutation {
        case .insert(let insert):
            let (webState, opener) = try insert.webState.makeWebState()
            profile.reserveWebStateID(webState.id)
            let index = try listCall {
                try list.insert(webState, InsertionParams(index: Int(insert.index), pinned: insert.pinned, opener: opener))
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
            let (webState, _) = try replace.webState.makeWebState()
            profile.reserveWebStateID(webState.id)
            try listCall { try list.replace(at: index, with: webState).destroy() }
        case .activate:
            break
        case .navigation(let navigation):
            let index = try position(of: navigation.identifier, in: list)
            let webState = try listCall { try list.webState(at: index) }
            do {
                if degraded != nil {
                    // Realizing runs the tab's loader, which is what finds a history lost.
                    try? webState.forceRealized()
                }
                if let degraded, degraded.tabs[webState.id] != nil {
                    try degraded.replayNavigation(
                        on: webState, item: navigation.hasItem ? navigation.item.model : nil, at: Int(navigation.itemIndex))
                } else if navigation.hasItem {
                    try webState.commitNavigation(to: navigation.item.model, at: Int(navigation.itemIndex))
                } else {
                    try webState.goToItem(at: Int(navigation.itemIndex))
                }
            } catch {
                throw .replayMismatch("\(error)")
            }
        case .pin(let pin):
            let index = try position(of: pin.identifier, in: list)
            let to = try listCall { try list.setPinned(at: index, pin.pinned) }
            guard to == Int(pin.toIndex) else {
                throw .replayMismatch("tab \(pin.identifier) pinned to \(to), recorded at \(pin.toIndex)")
            }
        case nil:
            throw .replayMismatch("record \(storage.seq) carries no mutation")
        }
        let active = storage.activeIdentifier == 0 ? nil : try position(of: storage.activeIdentifier, in: list)
        try listCall { try list.activate(at: active) }
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
    /// Bit per Browser kind (`BrowserKind.commitBit`) that took part in the save.
    public let browsers: UInt8

    public init(seq: UInt64, browsers: UInt8) {
        self.seq = seq
        self.browsers = browsers
    }

    public var frame: [UInt8] {
        var payload: [UInt8] = []
        payload.appendLittleEndian(seq)
        payload.append(browsers)
        return Framing.record(.commit, payload: payload)
    }

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
}

/// A journal file: a header, then saves appended in order, each its records and a commit.
public enum JournalFile {
    public static var header: [UInt8] { Framing.fileHeader(.journal) }

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
        public let commits: [FoundCommit]
        public let validLength: Int
        public let stoppedBy: SessionFormatError?

        /// The records a commit covers: what recovery may apply.
        public var committedRecords: ArraySlice<JournalRecord> { records[..<(commits.last?.recordCount ?? 0)] }
    }

    /// Reads records until the end or the first record that does not read cleanly. The header
    /// must be sound: a file that is not a journal gives no records.
    public static func scan(_ source: some ByteSource) throws(SessionFormatError) -> Scan {
        var offset = try Framing.checkFileHeader(source, kind: .journal)
        var records: [JournalRecord] = []
        var commits: [FoundCommit] = []
        while offset < source.size {
            do {
                let (kind, payload, end) = try Framing.readRecord(source, at: offset, expecting: [.mutation, .commit])
                if kind == .commit {
                    commits.append(FoundCommit(commit: try JournalCommit(payload: payload, at: offset), recordCount: records.count, end: end))
                } else {
                    records.append(JournalRecord(try decodeMessage(MutationStorage.self, payload, at: offset)))
                }
                offset = end
            } catch {
                return Scan(records: records, commits: commits, validLength: offset, stoppedBy: error)
            }
        }
        return Scan(records: records, commits: commits, validLength: offset, stoppedBy: nil)
    }

    /// Every record, or the error at the first that does not read cleanly.
    public static func decode(_ source: some ByteSource) throws(SessionFormatError) -> [JournalRecord] {
        let scan = try scan(source)
        if let error = scan.stoppedBy { throw error }
        return scan.records
    }

    /// Whether a valid record starts anywhere in `start..<source.size`: after a record that does
    /// not read, this tells damage in the middle (something valid follows) from a torn tail.
    public static func hasValidRecord(in source: some ByteSource, after start: Int) -> Bool {
        guard start < source.size, let bytes = try? source.read(offset: start, count: source.size - start) else { return false }
        let tail = InMemoryBytes(bytes, base: start)
        var index = 0
        while index + Framing.recordHeaderSize <= bytes.count {
            if bytes[index] == Framing.recordMagic[0], bytes[index + 1] == Framing.recordMagic[1],
                (try? Framing.readRecord(tail, at: start + index, expecting: [.mutation, .commit])) != nil
            {
                return true
            }
            index += 1
        }
        return false
    }
}
