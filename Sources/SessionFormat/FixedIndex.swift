import BrowserModel
import HostLimits

/// A format-2 snapshot's index and string area as read (`SnapshotIndex` has the layout): both
/// checksums verified by the frames, then every field checked in one pass, so the accessors
/// read fields in place without checking again.
struct FixedIndex {
    private let index: [UInt8]
    private let strings: [UInt8]
    let count: Int
    /// The moves between windows the Browser received, as the index holds them.
    let moves: ReceivedMoves
    let list: SnapshotReader.ListFields

    private typealias Field = SnapshotIndex.Field

    /// Reads the index record at `first` and the string records after it; checks that the
    /// history section ends the file, and every entry (`firstProblem`).
    /// Returns the tabs' identifiers too, as the check collected them: a restore takes them
    /// (`WebStateList.restore`) instead of hashing every tab again.
    static func read(
        _ source: some ByteSource, at first: Int, seal: RecordSeal?
    ) throws(SessionFormatError) -> (index: FixedIndex, identifiers: UniqueWebStateIDs) {
        func invalid(_ reason: SessionFormatError.InvalidState) -> SessionFormatError {
            .invalidState(offset: first, reason: reason)
        }
        let (index, indexEnd) = try Framing.readRecord(source, at: first, expecting: .listIndex, seal: seal)
        guard index.count >= SnapshotIndex.headerSize else {
            throw invalid(.indexLengthMismatch(bytes: index.count, count: 0))
        }
        typealias Header = SnapshotIndex.Header
        let count = Int(index.littleEndian(UInt32.self, at: Header.count))
        guard count <= Limits.maxTabsPerBrowser else {
            throw invalid(.tooManyTabs(count, limit: Limits.maxTabsPerBrowser))
        }
        let moves: ReceivedMoves
        do throws(SessionFormatError.InvalidState) {
            moves = try readMoves(index, after: count)
        } catch {
            throw invalid(error)
        }
        // Each record takes at least a header, and holds at least one tab's strings (the encoder
        // starts a record only for a tab that does not fit the one before; a list without
        // strings has one empty record): a count the file or the tabs cannot fill is refused
        // before anything is read for it, so millions of empty records cost nothing.
        let stringRecords = Int(index.littleEndian(UInt32.self, at: Header.stringRecords))
        guard stringRecords <= max(1, count), stringRecords <= (source.size - indexEnd) / Framing.recordHeaderSize
        else {
            throw invalid(.continuationsOutOfRange(stringRecords, bytesLeft: source.size - indexEnd))
        }
        var strings: [UInt8] = []
        var end = indexEnd
        for _ in 0..<stringRecords {
            let (payload, next) = try Framing.readRecord(source, at: end, expecting: .strings, seal: seal)
            if strings.isEmpty { strings = payload } else { strings += payload }
            end = next
        }
        let stringAreaLength = index.littleEndian(UInt64.self, at: Header.stringAreaLength)
        guard stringAreaLength == UInt64(strings.count) else {
            throw .lengthMismatch(expected: Int(clamping: stringAreaLength), actual: strings.count)
        }
        let sectionLength = index.littleEndian(UInt64.self, at: Header.historySectionLength)
        let expectedSize = UInt64(end).addingReportingOverflow(sectionLength)
        guard !expectedSize.overflow, expectedSize.partialValue == UInt64(source.size) else {
            throw .lengthMismatch(expected: Int(clamping: expectedSize.partialValue), actual: source.size)
        }
        let activeIndex = Int(index.littleEndian(Int32.self, at: Header.activeIndex))
        guard activeIndex >= -1, activeIndex < count else {
            throw invalid(.activeIndexOutOfRange(activeIndex, count: count))
        }
        let pinnedCount = Int(index.littleEndian(UInt32.self, at: Header.pinnedCount))
        guard pinnedCount <= count else { throw invalid(.pinnedCountOutOfRange(pinnedCount, count: count)) }
        let seq = index.littleEndian(UInt64.self, at: Header.lastCommandSeq)
        guard Limits.isValidCommandSeq(seq) else { throw invalid(.seqOutOfRange(seq)) }
        let fixed = FixedIndex(
            index: index, strings: strings, count: count, moves: moves,
            list: SnapshotReader.ListFields(
                activeIndex: activeIndex == -1 ? nil : activeIndex, pinnedCount: pinnedCount, lastCommandSeq: seq,
                sectionStart: end))
        var ids: [WebStateID] = []
        ids.reserveCapacity(count)
        if let problem = fixed.firstProblem(sectionLength: sectionLength, ids: &ids) { throw invalid(problem) }
        // Unique after every other field is checked: a file with a duplicate and another
        // problem is refused for the other one.
        do throws(UniqueWebStateIDs.Duplicate) {
            return (fixed, try UniqueWebStateIDs(ids))
        } catch {
            throw invalid(.duplicateIdentifier(error.id.rawValue))
        }
    }

    /// The first entry field that is out of range, in one pass: identifiers valid,
    /// openers inside the list, counts not negative, title and URL within `Limits` and UTF-8,
    /// no undefined bits. Each tab's strings and history frame start where the previous tab's
    /// end, and the last tab's end their area and the section, as the encoder lays them out:
    /// no two tabs share bytes, so a small file cannot name the same 2 MiB URL or 64 MiB frame
    /// for every tab and become gigabytes when its tabs are written again. Each valid
    /// identifier goes into `ids`, in the list's order; the caller checks them unique.
    private func firstProblem(sectionLength: UInt64, ids: inout [WebStateID]) -> SessionFormatError.InvalidState? {
        let area = UInt64(strings.count)
        var stringsEnd: UInt64 = 0
        var historiesEnd: UInt64 = 0
        return index.withUnsafeBytes { entries in
            strings.withUnsafeBytes { text -> SessionFormatError.InvalidState? in
                for item in 0..<count {
                    let base = SnapshotIndex.headerSize + item * SnapshotIndex.entrySize
                    func load<Value: FixedWidthInteger>(_ field: Int, as type: Value.Type) -> Value {
                        Value(littleEndian: entries.loadUnaligned(fromByteOffset: base + field, as: Value.self))
                    }
                    let id = load(Field.id, as: Int64.self)
                    guard let webStateID = WebStateID(rawValue: id) else { return .invalidIdentifier(id) }
                    ids.append(webStateID)
                    let opener = Int(load(Field.openerIndex, as: Int32.self))
                    guard opener == -1 || (opener >= 0 && opener < count && opener != item) else {
                        return .openerOutOfRange(item: item, opener: opener, count: count)
                    }
                    // A frame is one navigation record: its length bounds what restore reads for it.
                    let historyOffset = load(Field.historyOffset, as: UInt64.self)
                    let historyLength = load(Field.historyLength, as: UInt32.self)
                    let historyEnd = historyOffset.addingReportingOverflow(UInt64(historyLength))
                    guard historyLength >= UInt32(Framing.recordHeaderSize),
                        Int(historyLength) <= Framing.recordHeaderSize + Limits.maxRecordPayloadBytes,
                        historyOffset == historiesEnd,
                        !historyEnd.overflow, historyEnd.partialValue <= sectionLength
                    else {
                        return .historyOutOfRange(
                            item: item, offset: historyOffset, length: historyLength, section: sectionLength)
                    }
                    historiesEnd = historyEnd.partialValue
                    let navigationItemCount = load(Field.navigationItemCount, as: Int32.self)
                    guard navigationItemCount >= 0 else { return .negativeCount(Int(navigationItemCount)) }
                    let titleLength = Int(load(Field.titleLength, as: UInt32.self))
                    let urlLength = Int(load(Field.urlLength, as: UInt32.self))
                    if let problem = Self.lengthProblem(title: titleLength, url: urlLength) { return problem }
                    let stringOffset = load(Field.stringOffset, as: UInt64.self)
                    let stringEnd = stringOffset.addingReportingOverflow(UInt64(titleLength + urlLength))
                    guard stringOffset == stringsEnd, !stringEnd.overflow, stringEnd.partialValue <= area else {
                        return .stringsOutOfRange(
                            item: item, offset: stringOffset, length: UInt64(titleLength + urlLength), area: area)
                    }
                    stringsEnd = stringEnd.partialValue
                    let flags = load(Field.flags, as: UInt32.self)
                    let reserved = load(Field.reserved, as: UInt32.self)
                    guard flags & ~SnapshotIndex.realizedFlag == 0, reserved == 0 else {
                        return .undefinedBits(
                            item: item, UInt64(flags & ~SnapshotIndex.realizedFlag) | UInt64(reserved) << 32)
                    }
                    let start = Int(stringOffset)
                    guard isUTF8(UnsafeRawBufferPointer(rebasing: text[start..<start + titleLength])),
                        isUTF8(
                            UnsafeRawBufferPointer(
                                rebasing: text[start + titleLength..<start + titleLength + urlLength]))
                    else { return .notUTF8(item: item) }
                }
                guard stringsEnd == area else {
                    return .stringsOutOfRange(item: count, offset: stringsEnd, length: area - stringsEnd, area: area)
                }
                guard historiesEnd == sectionLength else {
                    return .historyOutOfRange(item: count, offset: historiesEnd, length: 0, section: sectionLength)
                }
                return nil
            }
        }
    }

    /// The moves received the header counts (its last field reserved, 0), after the index's
    /// `entries` tab entries: at most `Limits.movesRemembered`, ending the index, each checked.
    private static func readMoves(_ index: [UInt8], after entries: Int) throws(SessionFormatError.InvalidState)
        -> ReceivedMoves
    {
        let reserved = index.littleEndian(UInt32.self, at: SnapshotIndex.Header.reserved)
        guard reserved == 0 else { throw .undefinedBits(item: nil, UInt64(reserved)) }
        let count = Int(index.littleEndian(UInt32.self, at: SnapshotIndex.Header.movesReceived))
        guard count <= Limits.movesRemembered,
            index.count == SnapshotIndex.headerSize + entries * SnapshotIndex.entrySize + count * SnapshotIndex.moveSize
        else {
            throw .indexLengthMismatch(bytes: index.count, count: entries)
        }
        var moves = ReceivedMoves()
        for position in 0..<count {
            let base = SnapshotIndex.headerSize + entries * SnapshotIndex.entrySize + position * SnapshotIndex.moveSize
            let move = index.littleEndian(UInt64.self, at: base)
            let tab = index.littleEndian(Int64.self, at: base + 8)
            guard let id = WebStateID(rawValue: tab), let received = ReceivedMove(move: move, tab: id) else {
                throw .invalidMove(move: move, tab: tab)
            }
            moves.note(received)
        }
        assert(moves.moves.count == count, "no stored move is forgotten")
        return moves
    }

    /// A title or URL longer than a navigation item may hold.
    private static func lengthProblem(title: Int, url: Int) -> SessionFormatError.InvalidState? {
        guard title <= Limits.maxTitleBytes else {
            return .invalidNavigationItem(.titleTooLong(bytes: title, limit: Limits.maxTitleBytes))
        }
        guard url <= Limits.maxURLBytes else {
            return .invalidNavigationItem(.urlTooLong(bytes: url, limit: Limits.maxURLBytes))
        }
        return nil
    }

    // MARK: Fields, read in place (checked by `read`)

    private func load<Value: FixedWidthInteger>(_ field: Int, of item: Int, as type: Value.Type) -> Value {
        precondition(item >= 0 && item < count, "entry \(item) outside 0..<\(count)")
        return index.withUnsafeBytes {
            Value(
                littleEndian: $0.loadUnaligned(
                    fromByteOffset: SnapshotIndex.headerSize + item * SnapshotIndex.entrySize + field, as: Value.self))
        }
    }

    func id(at item: Int) -> WebStateID {
        // `read` refused an entry whose identifier is not one.
        WebStateID(rawValue: load(Field.id, of: item, as: Int64.self))!
    }

    func creationTime(at item: Int) -> Timestamp {
        Timestamp(microsecondsSinceEpoch: load(Field.creationTime, of: item, as: Int64.self))
    }

    func lastActiveTime(at item: Int) -> Timestamp {
        Timestamp(microsecondsSinceEpoch: load(Field.lastActiveTime, of: item, as: Int64.self))
    }

    func opener(at item: Int) -> WebStateOpener? {
        let opener = Int(load(Field.openerIndex, of: item, as: Int32.self))
        guard opener >= 0 else { return nil }
        assert(opener < count, "read refused an opener outside the list")
        return WebStateOpener(
            openerID: id(at: opener), navigationIndex: Int(load(Field.openerNavigationIndex, of: item, as: Int32.self)))
    }

    func historyRange(at item: Int) -> (offset: Int, length: Int) {
        // Both inside the history section, itself inside the file.
        (
            Int(load(Field.historyOffset, of: item, as: UInt64.self)),
            Int(load(Field.historyLength, of: item, as: UInt32.self))
        )
    }

    /// The title and URL, made into strings now from bytes `read` found to be UTF-8.
    func metadata(at item: Int) -> WebStateMetadata {
        let start = Int(load(Field.stringOffset, of: item, as: UInt64.self))
        let titleEnd = start + Int(load(Field.titleLength, of: item, as: UInt32.self))
        let urlEnd = titleEnd + Int(load(Field.urlLength, of: item, as: UInt32.self))
        assert(
            start <= titleEnd && titleEnd <= urlEnd && urlEnd <= strings.count,
            "read checked every tab's strings lie in the string area")
        return strings.withUnsafeBytes { text in
            WebStateMetadata(
                creationTime: creationTime(at: item), lastActiveTime: lastActiveTime(at: item),
                activePageTitle: String(
                    decoding: UnsafeRawBufferPointer(rebasing: text[start..<titleEnd]), as: UTF8.self),
                activePageURL: String(
                    decoding: UnsafeRawBufferPointer(rebasing: text[titleEnd..<urlEnd]), as: UTF8.self),
                navigationItemCount: Int(load(Field.navigationItemCount, of: item, as: Int32.self)))
        }
    }

    /// The title's and URL's lengths: bytes `read` found to be UTF-8, so what the strings
    /// `metadata` makes count.
    func textBytes(at item: Int) -> Int {
        Int(load(Field.titleLength, of: item, as: UInt32.self)) + Int(load(Field.urlLength, of: item, as: UInt32.self))
    }

    func item(at item: Int) -> SnapshotItem {
        let opener = Int(load(Field.openerIndex, of: item, as: Int32.self))
        let history = historyRange(at: item)
        return SnapshotItem(
            id: id(at: item), openerIndex: opener >= 0 ? opener : nil,
            openerNavigationIndex: Int(load(Field.openerNavigationIndex, of: item, as: Int32.self)),
            metadata: metadata(at: item),
            realizedAtSave: load(Field.flags, of: item, as: UInt32.self) & SnapshotIndex.realizedFlag != 0,
            historyOffset: history.offset, historyLength: history.length)
    }
}

/// Whether `bytes` are UTF-8: eight at a time while they are ASCII, then the standard library's
/// decoder for the rest.
func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var index = 0
    while bytes.count - index >= 8,
        bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
    {
        index += 8
    }
    while index < bytes.count, bytes[index] < 0x80 { index += 1 }
    guard index < bytes.count else { return true }
    let rest = UnsafeRawBufferPointer(rebasing: bytes[index...])
    let failed = transcode(rest.makeIterator(), from: UTF8.self, to: UTF32.self, stoppingOnError: true) { _ in }
    return !failed
}
