import BrowserModel
import HostLimits

/// One tab as the snapshot's metadata describes it.
public struct SnapshotItem: Sendable, Equatable {
    public let id: WebStateID
    public let openerIndex: Int?
    public let openerNavigationIndex: Int
    public let metadata: WebStateMetadata
    public let realizedAtSave: Bool
    let historyOffset: Int
    let historyLength: Int
}

/// Reads a snapshot of either format: the list at once, checked in full; titles and URLs
/// (format 2) when asked for; histories on demand.
public final class SnapshotReader {
    private let source: any ByteSource
    /// The file's layout version (`SessionFileKind.currentVersion` or older).
    public let version: Int
    private let index: Index
    public let activeIndex: Int?
    public let pinnedCount: Int
    public let lastCommandSeq: UInt64
    /// The moves between windows the Browser received (none in format 1, written before moves).
    public let movesReceived: ReceivedMoves
    /// Where the history section starts in the file.
    private let sectionStart: Int
    /// How the file's records open: nil for a file in the clear.
    private let seal: RecordSeal?
    /// Whether the file's records are sealed (its header says so).
    public var isSealed: Bool { seal != nil }
    /// The tabs' identifiers as reading a format-2 index collected them, checked unique: kept
    /// for the first restore, which takes them (nil after, and for format 1).
    private var identifiers: UniqueWebStateIDs?

    private enum Index {
        /// Format 1: the protobuf list metadata, decoded whole.
        case decoded([SnapshotItem])
        /// Format 2: the index record and the string area, read in place.
        case fixed(FixedIndex)
    }

    /// `seal`: how a sealed file's records open; a file in the clear is read in the clear
    /// whatever is given (sessions written before sealing), and a sealed one without it throws
    /// `.sealedWithoutKey`.
    public init(_ source: some ByteSource, seal: RecordSeal? = nil) throws(SessionFormatError) {
        self.source = source
        let (first, version, sealed) = try Framing.checkFileHeader(source, kind: .snapshot)
        self.version = version
        guard !sealed || seal != nil else { throw .sealedWithoutKey }
        self.seal = sealed ? seal : nil
        let list: ListFields
        if version == 1 {
            // Format 1 was never sealed.
            guard !sealed else { throw .unknownFileFlags(offset: 8, flags: Framing.sealedFlag) }
            let metadata = try FormatOneMetadata.read(source, at: first)
            index = .decoded(metadata.items)
            list = metadata.list
            movesReceived = ReceivedMoves()
        } else {
            let (fixed, identifiers) = try FixedIndex.read(source, at: first, seal: self.seal)
            index = .fixed(fixed)
            self.identifiers = identifiers
            list = fixed.list
            movesReceived = fixed.moves
        }
        activeIndex = list.activeIndex
        pinnedCount = list.pinnedCount
        lastCommandSeq = list.lastCommandSeq
        sectionStart = list.sectionStart
    }

    /// The list's own fields, as either format gives them, checked.
    struct ListFields {
        var activeIndex: Int?
        var pinnedCount: Int
        var lastCommandSeq: UInt64
        var sectionStart: Int
    }

    public var count: Int {
        switch index {
        case .decoded(let items): items.count
        case .fixed(let fixed): fixed.count
        }
    }

    public func id(at index: Int) -> WebStateID {
        switch self.index {
        case .decoded(let items): items[index].id
        case .fixed(let fixed): fixed.id(at: index)
        }
    }

    /// The tab's metadata; in format 2 its strings are made now.
    public func metadata(at index: Int) -> WebStateMetadata {
        switch self.index {
        case .decoded(let items): items[index].metadata
        case .fixed(let fixed): fixed.metadata(at: index)
        }
    }

    /// The UTF-8 bytes of the tab's title and URL; in format 2 read without making them.
    public func textBytes(at index: Int) -> Int {
        switch self.index {
        case .decoded(let items):
            items[index].metadata.activePageTitle.utf8.count + items[index].metadata.activePageURL.utf8.count
        case .fixed(let fixed): fixed.textBytes(at: index)
        }
    }

    /// Everything the snapshot says of the tab at `index` (inspection, tests).
    public func item(at index: Int) -> SnapshotItem {
        switch self.index {
        case .decoded(let items): items[index]
        case .fixed(let fixed): fixed.item(at: index)
        }
    }

    /// The position of tab `id` in the stored list, if it is there.
    public func index(of id: WebStateID) -> Int? {
        (0..<count).first { self.id(at: $0) == id }
    }

    private func historyRange(at index: Int) -> (offset: Int, length: Int) {
        switch self.index {
        case .decoded(let items): (items[index].historyOffset, items[index].historyLength)
        case .fixed(let fixed): fixed.historyRange(at: index)
        }
    }

    private func opener(at index: Int) -> WebStateOpener? {
        switch self.index {
        case .decoded(let items):
            items[index].openerIndex.map {
                WebStateOpener(openerID: items[$0].id, navigationIndex: items[index].openerNavigationIndex)
            }
        case .fixed(let fixed): fixed.opener(at: index)
        }
    }

    /// The history of the tab at `index` of the stored list, read and checked now.
    public func history(at index: Int) throws(SessionFormatError) -> NavigationHistory {
        try readCheckedHistory(at: index).history
    }

    /// The history payload of the tab at `index` (opened, when sealed), checked exactly as
    /// realizing the tab checks it (`history(at:)`): what a new snapshot carries for a tab that
    /// was never realized. One carried on a weaker check (another tab's history behind this
    /// tab's id, a history that does not realize) would outlive every generation that still
    /// held the right one.
    public func historyPayload(at index: Int) throws(SessionFormatError) -> [UInt8] {
        try readCheckedHistory(at: index).payload
    }

    /// Verifies the frame of the tab at `index`: its framing and checksum, and that it opens
    /// when sealed; its payload is not decoded. For reading back a snapshot just written from
    /// checked histories.
    public func verifyFrame(at index: Int) throws(SessionFormatError) {
        _ = try readHistory(at: index)
    }

    /// `verifyFrame` of every tab, in order; throws the first frame's error.
    public func verifyEveryFrame() throws(SessionFormatError) {
        for index in 0..<count { try verifyFrame(at: index) }
    }

    private func readCheckedHistory(at index: Int) throws(SessionFormatError) -> (
        payload: [UInt8], history: NavigationHistory
    ) {
        let (payload, offset) = try readHistory(at: index)
        return (payload, try decodeCheckedHistory(payload, of: id(at: index).rawValue, at: offset).history)
    }

    /// One pread of the tab's frame, checked (magic, length, checksum, kind, and opened when
    /// sealed) to be exactly one navigation record: its payload.
    private func readHistory(at index: Int) throws(SessionFormatError) -> (payload: [UInt8], offset: Int) {
        guard index >= 0, index < count else {
            throw .invalidState(offset: sectionStart, reason: .navigationIndexOutOfRange(index, count: count))
        }
        let range = historyRange(at: index)
        assert(range.offset >= 0 && range.length >= 0, "the index's history ranges were checked when it was read")
        let offset = sectionStart + range.offset
        let frame = try source.read(offset: offset, count: range.length)
        assert(frame.count == range.length, "a read returns exactly the bytes asked for")
        let (payload, end) = try Framing.readRecord(
            InMemoryBytes(frame, base: offset), at: offset, expecting: .navigation, seal: seal)
        guard end == offset + frame.count else {
            throw .invalidState(
                offset: offset,
                reason: .historyOutOfRange(
                    item: index, offset: UInt64(range.offset), length: UInt32(frame.count),
                    section: UInt64(source.size - sectionStart)))
        }
        return (payload, offset)
    }

    /// Fills the empty `list` with unrealized tabs; each reads its metadata and history from
    /// this snapshot when asked for (`RestoredSnapshot`, shared by all of them: a restored tab
    /// costs one allocation, itself). Restored identifiers are reserved in `profile`. When a
    /// stored history does not read, `historyFallback` may supply the tab's history from
    /// elsewhere (the store looks in the generation before, and throws when that cannot be
    /// read: the tab then stays unrealized); when it has none, the tab degrades to the page its
    /// metadata names if `degraded` is given, and the read's error stands otherwise.
    public func restore(
        into list: WebStateList, profile: Profile, historyFallback: ((WebStateID) throws -> NavigationHistory?)? = nil,
        degraded: DegradedHistories? = nil
    ) throws(SessionFormatError) {
        let identifiers = try takeIdentifiers()
        // Ids are unique across the window: one the other Browser holds is damage here, as it
        // is in a journal record (`JournalReplayer`).
        if let held = profile.firstWebStateHeld(among: identifiers, outside: list) {
            throw .invalidState(offset: Framing.fileHeaderSize, reason: .duplicateIdentifier(held.rawValue))
        }
        let stored = RestoredSnapshot(reader: self, historyFallback: historyFallback, degraded: degraded)
        var tabs: [RestoredTab] = []
        tabs.reserveCapacity(count)
        for index in 0..<count {
            let id = id(at: index)
            profile.reserveWebStateID(id)
            let times = creationAndLastActiveTime(at: index)
            let webState = WebState(
                id: id, creationTime: times.creation, lastActiveTime: times.lastActive, storedIn: stored, at: index)
            tabs.append(RestoredTab(webState: webState, opener: opener(at: index)))
        }
        assert(tabs.count == count && identifiers.count == count, "one restored tab and one identifier a stored tab")
        do {
            try list.restore(tabs, identifiers: identifiers, activeIndex: activeIndex, pinnedCount: pinnedCount)
            assert(list.count == count, "the list holds every stored tab")
        } catch {
            // The reader's checks have already ruled out everything restore() checks.
            throw .invalidState(offset: Framing.fileHeaderSize, reason: .replayMismatch("\(error)"))
        }
    }

    /// Where in this snapshot a tab restored from it is stored (`WebState.storedContent`);
    /// nil for a tab stored anywhere else.
    public func storedIndex(of stored: (tabs: any StoredTabs, index: Int)) -> Int? {
        guard let restored = stored.tabs as? RestoredSnapshot, restored.reader === self else { return nil }
        return stored.index
    }

    /// The identifiers checked unique when the index was read, taken once: a second restore of
    /// the same reader (a replay after a failed one), or a format-1 file, sorts them again.
    private func takeIdentifiers() throws(SessionFormatError) -> UniqueWebStateIDs {
        defer { identifiers = nil }
        if let identifiers { return identifiers }
        do throws(UniqueWebStateIDs.Duplicate) {
            return try UniqueWebStateIDs((0..<count).map(id(at:)))
        } catch {
            throw .invalidState(offset: Framing.fileHeaderSize, reason: .duplicateIdentifier(error.id.rawValue))
        }
    }

    private func creationAndLastActiveTime(at index: Int) -> (creation: Timestamp, lastActive: Timestamp) {
        switch self.index {
        case .decoded(let items): (items[index].metadata.creationTime, items[index].metadata.lastActiveTime)
        case .fixed(let fixed): (fixed.creationTime(at: index), fixed.lastActiveTime(at: index))
        }
    }
}

/// The tabs one restore made from a snapshot (`StoredTabs`): their metadata from the reader,
/// and their histories too, falling back as the restore was told.
final class RestoredSnapshot: StoredTabs {
    let reader: SnapshotReader
    private let historyFallback: ((WebStateID) throws -> NavigationHistory?)?
    private let degraded: DegradedHistories?

    init(
        reader: SnapshotReader, historyFallback: ((WebStateID) throws -> NavigationHistory?)?,
        degraded: DegradedHistories?
    ) {
        self.reader = reader
        self.historyFallback = historyFallback
        self.degraded = degraded
    }

    func metadata(at index: Int) -> WebStateMetadata { reader.metadata(at: index) }

    func textBytes(at index: Int) -> Int { reader.textBytes(at: index) }

    func history(at index: Int) throws -> NavigationHistory {
        do throws(SessionFormatError) {
            return try reader.history(at: index)
        } catch {
            let id = reader.id(at: index)
            if let history = try historyFallback?(id) { return history }
            guard let degraded else { throw error }
            return degraded.degrade(id, metadata: reader.metadata(at: index), reason: error)
        }
    }
}
