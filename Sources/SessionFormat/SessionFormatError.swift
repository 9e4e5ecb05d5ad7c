import BrowserModel

/// Why stored session bytes were refused. Offsets are byte offsets in the file, so a report
/// can name exactly where the damage is.
public enum SessionFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes end before a header or record does.
    case truncated(offset: Int, needed: Int, available: Int)
    /// The first bytes are not a windowhost session file of the expected kind.
    case badMagic(offset: Int)
    /// A file or record written by a format version this build does not read.
    case unsupportedVersion(offset: Int, found: Int, supported: Int)
    case checksumMismatch(offset: Int, stored: UInt32, computed: UInt32)
    /// A record longer than any this format writes: a damaged length field.
    case recordTooLarge(offset: Int, length: Int)
    /// A record of a kind that does not belong at this place.
    case unexpectedRecordKind(offset: Int, found: Int, expected: Int)
    /// The checksum matched but the payload is not a valid protobuf message.
    case malformedPayload(offset: Int, reason: String)
    /// The record decoded but describes something impossible.
    case invalidState(offset: Int, reason: InvalidState)
    /// A snapshot whose size is not what its list metadata says.
    case lengthMismatch(expected: Int, actual: Int)
    /// The storage under the bytes failed (a read error).
    case readFailed(offset: Int, reason: String)
    /// A file larger than any this format writes (`Limits.maxJournalBytes`): refused unread.
    case fileTooLarge(size: Int, limit: Int)
    /// A sealed record that does not authenticate (`RecordSeal`): damaged, moved from another
    /// file or place, or sealed with another key. Damage, like a checksum mismatch.
    case unopenable(offset: Int, reason: String)
    /// A sealed file read without its window's key: the key is gone (a reboot, a revocation),
    /// so the file can never be read again.
    case sealedWithoutKey
    /// File header flags this build does not know.
    case unknownFileFlags(offset: Int, flags: UInt32)
    /// A file in the clear among a sealed session's files: no writer puts one there.
    case clearAmongSealed
    /// A tab's history carried between windows past `Limits.maxMovedTabBytes`: refused unread.
    case movedTabTooLarge(bytes: Int, limit: Int)

    /// Impossible contents: each a way a damaged or hostile record could point outside itself.
    public enum InvalidState: Error, Equatable, Sendable, CustomStringConvertible {
        case activeIndexOutOfRange(Int, count: Int)
        case pinnedCountOutOfRange(Int, count: Int)
        case invalidIdentifier(Int64)
        case duplicateIdentifier(Int64)
        case openerOutOfRange(item: Int, opener: Int, count: Int)
        case navigationIndexOutOfRange(Int, count: Int)
        case negativeCount(Int)
        case historyOutOfRange(item: Int, offset: UInt64, length: UInt32, section: UInt64)
        case historyIdentifierMismatch(expected: Int64, found: Int64)
        /// A journal record that does not fit the list it is replayed onto.
        case replayMismatch(String)
        /// A command seq above `Limits.maxCommandSeq`.
        case seqOutOfRange(UInt64)
        /// A seq that goes back: below the one before it (`previous`), which the format never writes.
        case seqOutOfOrder(UInt64, previous: UInt64)
        /// A journal record whose seq is above the seq of the commit that covers it.
        case recordPastItsCommit(UInt64, commit: UInt64)
        /// More continuation records than the bytes after the first could hold.
        case continuationsOutOfRange(Int, bytesLeft: Int)
        /// An entry over the bounds a tab keeps (a URL or title too long).
        case invalidNavigationItem(NavigationItemError)
        /// A history's dropped-entry count outside 0...`Limits.maxCommandSeq`.
        case droppedCountOutOfRange(Int64)
        /// A commit whose Browser bits name no Browser or a bit no store writes.
        case undefinedCommitBits(UInt8)
        /// More tabs in one Browser than `Limits.maxTabsPerBrowser`.
        case tooManyTabs(Int, limit: Int)
        /// A format-2 index whose length is not its header's and its entries' (`count` tabs).
        case indexLengthMismatch(bytes: Int, count: Int)
        /// A tab whose title and URL are not where the tabs before it end (each tab's strings,
        /// and its history, follow the previous tab's, and the last ends its area), or reach
        /// past the area: no two tabs may share bytes, so a file cannot grow when written again.
        case stringsOutOfRange(item: Int, offset: UInt64, length: UInt64, area: UInt64)
        /// A tab whose title or URL is not UTF-8.
        case notUTF8(item: Int)
        /// A history carried between windows with more entries than a tab keeps
        /// (`Limits.maxNavigationEntries`): stored as carried, it would say more than its tab.
        case tooManyEntries(Int, limit: Int)
        /// A move received (a snapshot's index) naming no move or no tab.
        case invalidMove(move: UInt64, tab: Int64)
        /// Bits a writer of this format never sets (flags, reserved fields) in the index's header
        /// (`item` nil) or a tab's entry.
        case undefinedBits(item: Int?, UInt64)

        public var description: String {
            switch self {
            case .activeIndexOutOfRange(let index, let count): "active index \(index) outside -1..<\(count)"
            case .pinnedCountOutOfRange(let pinned, let count): "pinned count \(pinned) outside 0...\(count)"
            case .invalidIdentifier(let id): "tab identifier \(id) is not positive"
            case .duplicateIdentifier(let id): "tab identifier \(id) appears twice"
            case .openerOutOfRange(let item, let opener, let count):
                "item \(item) names opener \(opener), outside 0..<\(count) or itself"
            case .navigationIndexOutOfRange(let index, let count):
                "navigation index \(index) does not fit \(count) items"
            case .negativeCount(let count): "negative count \(count)"
            case .historyOutOfRange(let item, let offset, let length, let section):
                "item \(item) history at \(offset)+\(length) outside a section of \(section) bytes"
            case .historyIdentifierMismatch(let expected, let found):
                "history of tab \(found) stored where tab \(expected)'s belongs"
            case .replayMismatch(let reason): "journal does not fit the list: \(reason)"
            case .seqOutOfRange(let seq): "seq \(seq) above the highest a window reaches (2^53 - 1)"
            case .seqOutOfOrder(let seq, let previous): "seq \(seq) after \(previous): seqs never go back"
            case .recordPastItsCommit(let seq, let commit):
                "record seq \(seq) above the seq \(commit) of the commit that covers it"
            case .continuationsOutOfRange(let count, let bytesLeft):
                "\(count) metadata continuation records cannot fit the \(bytesLeft) bytes after the first"
            case .invalidNavigationItem(let error): "\(error)"
            case .droppedCountOutOfRange(let count): "history dropped-entry count \(count) outside 0...2^53 - 1"
            case .undefinedCommitBits(let bits):
                "commit Browser bits \(hex(UInt32(bits))) name no Browser or an undefined bit (defined: 1 regular, 2 incognito, 4 lagging)"
            case .tooManyTabs(let count, let limit):
                "\(count) tabs or more in one Browser, above the \(limit) a Browser holds"
            case .indexLengthMismatch(let bytes, let count): "an index of \(bytes) bytes does not hold \(count) entries"
            case .stringsOutOfRange(let item, let offset, let length, let area):
                "tab \(item)'s strings at \(offset), \(length) bytes, outside the \(area)-byte string area"
            case .notUTF8(let item): "tab \(item)'s title or URL is not UTF-8"
            case .tooManyEntries(let count, let limit):
                "\(count) history entries, above the \(limit) a tab keeps"
            case .invalidMove(let move, let tab):
                "move \(String(move, radix: 16)) received as tab \(tab): no move or no tab"
            case .undefinedBits(let item, let bits):
                "\(item.map { "tab \($0)" } ?? "the index header") has bits 0x\(String(bits, radix: 16)) no writer sets"
            }
        }
    }

    public var description: String {
        switch self {
        case .truncated(let offset, let needed, let available):
            "truncated at byte \(offset): \(needed) bytes needed, \(available) left"
        case .badMagic(let offset): "not a windowhost session file (bad magic at byte \(offset))"
        case .unsupportedVersion(let offset, let found, let supported):
            "format version \(found) at byte \(offset) is not supported (this build reads 1...\(supported))"
        case .checksumMismatch(let offset, let stored, let computed):
            "checksum mismatch in the frame at byte \(offset): stored \(hex(stored)), computed \(hex(computed))"
        case .recordTooLarge(let offset, let length): "record at byte \(offset) claims \(length) bytes"
        case .unexpectedRecordKind(let offset, let found, let expected):
            "record at byte \(offset) is of kind \(found), expected \(expected)"
        case .malformedPayload(let offset, let reason): "record at byte \(offset) does not decode: \(reason)"
        case .invalidState(let offset, let reason): "record at byte \(offset): \(reason)"
        case .lengthMismatch(let expected, let actual): "file is \(actual) bytes, its metadata says \(expected)"
        case .readFailed(let offset, let reason): "read at byte \(offset) failed: \(reason)"
        case .fileTooLarge(let size, let limit): "file is \(size) bytes, larger than the \(limit) this format writes"
        case .unopenable(let offset, let reason): "sealed record at byte \(offset) does not open: \(reason)"
        case .sealedWithoutKey: "the file is sealed and its window's key is gone"
        case .clearAmongSealed:
            "a file in the clear among a sealed session's files (none is written there): refused as forged"
        case .unknownFileFlags(let offset, let flags):
            "file header flags \(hex(flags)) at byte \(offset) are not ones this build writes"
        case .movedTabTooLarge(let bytes, let limit):
            "a moved tab's history of \(bytes) bytes, past the \(limit) a move carries (Limits.maxMovedTabBytes)"
        }
    }

    /// The byte offset the error points at, when it points at one.
    public var offset: Int? {
        switch self {
        case .truncated(let offset, _, _), .badMagic(let offset), .unsupportedVersion(let offset, _, _),
            .checksumMismatch(let offset, _, _), .recordTooLarge(let offset, _),
            .unexpectedRecordKind(let offset, _, _), .malformedPayload(let offset, _),
            .invalidState(let offset, _), .readFailed(let offset, _), .unopenable(let offset, _),
            .unknownFileFlags(let offset, _):
            offset
        case .lengthMismatch, .fileTooLarge, .sealedWithoutKey, .clearAmongSealed, .movedTabTooLarge: nil
        }
    }
}

private func hex(_ value: UInt32) -> String { "0x" + String(value, radix: 16) }
