import Foundation
import HostLimits
import SessionFormat
import SessionStore

/// The most a window may have handed out: every seq and tab id a reply may have shown is at or
/// below these. The supervisor raises them, durably, before a reply can show a value above;
/// the next supervisor (after a SIGKILL or a power cut) starts each window's floors there, so a
/// seq or tab id handed out for a command that was lost is never handed out again.
struct HandedOutCeiling: Equatable, Sendable {
    var seq: UInt64
    var tab: Int64

    static let zero = HandedOutCeiling(seq: 0, tab: 0)

    /// How far past what is needed a ceiling is raised: one durable write (fsync of the file and
    /// of the root) per 4096 tab commands of a window, so the command path stays fast, while a
    /// restart marks at most 4096 seqs never handed out as lost (`wait-durable` answers 75 for
    /// them: "lost or never handed out").
    static let block: UInt64 = 4096

    /// How far above what a window restored it numbers when its ceilings were lost with a
    /// damaged `handed-out`: past any ceiling a supervisor could have reached from there (each
    /// restart adds at most a block and the commands sent since), unless 2^32 commands or a
    /// million restarts went by without a save. 2^53 - 1 leaves room for two million such jumps.
    static let fallbackJump: UInt64 = 1 << 32

    /// The ceiling covering `needed` (a seq and a tab id some reply may show): itself when it
    /// already does, else each value that falls short raised to `needed` plus `block`, never
    /// past its maximum (`Limits`). Throws when `needed` is past a maximum: no window reaches
    /// one by use, and the supervisor refuses tab commands before it.
    func covering(_ needed: HandedOutCeiling) throws(HandedOutError) -> HandedOutCeiling {
        guard Limits.isValidCommandSeq(needed.seq) else { throw .numberPastMaximum(line: nil, needed.seq.description) }
        guard (0...Limits.maxWebStateID).contains(needed.tab) else {
            throw .numberPastMaximum(line: nil, needed.tab.description)
        }
        var raised = self
        if needed.seq > seq { raised.seq = min(needed.seq.saturatingAdd(Self.block), Limits.maxCommandSeq) }
        if needed.tab > tab {
            raised.tab = Int64(min(UInt64(needed.tab).saturatingAdd(Self.block), UInt64(Limits.maxWebStateID)))
        }
        return raised
    }
}

/// What `handed-out` keeps of one window: its ceilings, and its seqs replied to and then lost
/// (with a worker, or with a supervisor), so no durable answer of a later supervisor covers them.
struct HandedOutWindow: Equatable, Sendable {
    var ceiling: HandedOutCeiling
    var lost: LostSeqs

    static let none = HandedOutWindow(ceiling: .zero, lost: LostSeqs())
}

/// Why `ROOT/handed-out` does not read. Each is damage (or a file of a later version): the
/// supervisor sets the file aside and starts every window from what it restores.
enum HandedOutError: Error, Equatable, CustomStringConvertible {
    case oversize(Int)
    case badHeader
    case unsupportedVersion(String)
    /// A line that is not `<UUID> <seq> <tab> [<first>-<last> …]` (1-based line number).
    case badLine(Int)
    /// Lost ranges out of order, overlapping, above the seq ceiling or more than
    /// `LostSeqs.capacity`: no supervisor writes them so.
    case badLostSeqs(line: Int)
    /// A number past `Limits.maxCommandSeq` / `Limits.maxWebStateID` (line nil: a needed value).
    case numberPastMaximum(line: Int?, String)
    case duplicateWindow(line: Int, UUID)
    /// No `end <count>` line, or one that does not count the lines before it: cut short.
    case truncated
    /// Neither copy of the file's two (`HandedOut.slotBytes`) passes its length and checksum.
    case noCopyReads

    var description: String {
        switch self {
        case .oversize(let size): "\(size) bytes, more than the \(Limits.maxHandedOutBytes) it may hold"
        case .badHeader: "it does not start with `\(HandedOut.magic) <version>`"
        case .unsupportedVersion(let version): "version \(version), not \(HandedOut.version)"
        case .badLine(let line): "line \(line) is not `<UUID> <seq> <tab id> [<first lost>-<last lost> …]`"
        case .badLostSeqs(let line):
            "the lost seqs on line \(line) are not ordered ranges, apart, at most \(LostSeqs.capacity), below the seq ceiling"
        case .numberPastMaximum(let line, let number):
            "\(number)\(line.map { " on line \($0)" } ?? "") is past the highest a window reaches (2^53 - 1)"
        case .duplicateWindow(let line, let id): "window \(id) is named again on line \(line)"
        case .truncated: "it is cut short (no `end <count>` line counting its windows)"
        case .noCopyReads: "neither of its two copies passes its length and checksum"
        }
    }
}

/// `ROOT/handed-out`, the supervisor's one record of its windows' ceilings and lost seqs: a
/// versioned text file, one window a line, and a last line counting them so a file cut short
/// is told from a whole one.
///
///     windowhost-handed-out 1
///     <UUID> <seq ceiling> <tab id ceiling> [<first lost seq>-<last lost seq> …]
///     end <number of windows>
///
/// On disk the text is kept twice, in two fixed slots of `slotBytes` (each a little-endian
/// UInt32 length, a CRC32C of the text, the text, zeros), written in place one after the other
/// and each synced: the file never changes size and needs no new name, so a write needs neither
/// free space nor a new descriptor (a full disk, or the supervisor short of descriptors, is when
/// lost seqs must still be recorded: hostile round 5), and a write torn by a power cut leaves the
/// other slot whole. The first slot that reads wins: it is written first.
enum HandedOut {
    static let magic = "windowhost-handed-out"
    static let version = 1
    /// Room for the text of 64 windows (a supervisor's most) each with every lost range at the
    /// largest numbers (1,159 bytes a line), and of thousands of windows as they usually are (a
    /// line of about 60 bytes). Kept small: the file takes twice this on the disk.
    static let slotBytes = 128 << 10
    static let fileBytes = 2 * slotBytes
    private static let slotHeaderBytes = 8

    /// What a slot holds: length, checksum, text (the zeros after it are never read). Throws
    /// when the text does not fit. An in-place write writes only this.
    static func encodeSlotContent(_ windows: [UUID: HandedOutWindow]) throws(HandedOutError) -> [UInt8] {
        let text = encode(windows)
        guard text.count <= slotBytes - slotHeaderBytes else { throw .oversize(text.count) }
        var content: [UInt8] = []
        content.reserveCapacity(slotHeaderBytes + text.count)
        for value in [UInt32(text.count), CRC32C.checksum(text)] {
            withUnsafeBytes(of: value.littleEndian) { content += $0 }
        }
        return content + text
    }

    /// One whole slot: its content, then zeros to `slotBytes`.
    static func encodeSlot(_ windows: [UUID: HandedOutWindow]) throws(HandedOutError) -> [UInt8] {
        let content = try encodeSlotContent(windows)
        return content + [UInt8](repeating: 0, count: slotBytes - content.count)
    }

    /// The file: the slot twice.
    static func encodeFile(_ windows: [UUID: HandedOutWindow]) throws(HandedOutError) -> [UInt8] {
        let slot = try encodeSlot(windows)
        return slot + slot
    }

    /// The file as written (`encodeFile`): the first slot whose length and checksum hold. A file
    /// of any other size is the bare text (`parse`), as a person may write it.
    static func parseFile(_ bytes: [UInt8]) throws(HandedOutError) -> [UUID: HandedOutWindow] {
        guard bytes.count == fileBytes else { return try parse(bytes) }
        var firstError: HandedOutError?
        for start in [0, slotBytes] {
            let slot = bytes[start..<(start + slotBytes)]
            let length = slot.prefix(4).reversed().reduce(0) { $0 << 8 | Int($1) }
            let checksum = slot.dropFirst(4).prefix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            // An empty text is no copy: zeros (a slot never written) pass an empty checksum.
            guard length > 0, length <= slotBytes - slotHeaderBytes else { continue }
            let text = Array(slot.dropFirst(slotHeaderBytes).prefix(length))
            guard CRC32C.checksum(text) == checksum else { continue }
            do {
                return try parse(text)
            } catch {
                firstError = firstError ?? error
            }
        }
        throw firstError ?? .noCopyReads
    }

    static func encode(_ windows: [UUID: HandedOutWindow]) -> [UInt8] {
        let lines = windows.sorted { $0.key.uuidString < $1.key.uuidString }.map { id, window in
            "\(id.uuidString) \(window.ceiling.seq) \(window.ceiling.tab)"
                + window.lost.ranges.map { " \($0.lowerBound)-\($0.upperBound)" }.joined() + "\n"
        }
        return Array(("\(magic) \(version)\n" + lines.joined() + "end \(lines.count)\n").utf8)
    }

    /// The one parse of the file: every number checked against `Limits`, no window twice.
    static func parse(_ bytes: [UInt8]) throws(HandedOutError) -> [UUID: HandedOutWindow] {
        guard bytes.count <= Limits.maxHandedOutBytes else { throw .oversize(bytes.count) }
        guard bytes.last == UInt8(ascii: "\n") else { throw bytes.isEmpty ? .badHeader : .truncated }
        let lines = bytes.dropLast().split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        let header = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        guard header.count == 2, header[0] == magic else { throw .badHeader }
        guard header[1] == "\(version)" else { throw .unsupportedVersion(String(header[1].prefix(32))) }
        guard lines.count >= 2, lines[lines.count - 1] == "end \(lines.count - 2)" else { throw .truncated }
        var windows: [UUID: HandedOutWindow] = [:]
        for (index, line) in lines.dropFirst().dropLast().enumerated() {
            let number = index + 2
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count >= 3, let id = UUID(uuidString: String(fields[0])), id.uuidString == fields[0],
                fields[1...2].allSatisfy(Self.isNumber)
            else { throw .badLine(number) }
            guard let seq = UInt64(fields[1]), Limits.isValidCommandSeq(seq) else {
                throw .numberPastMaximum(line: number, String(fields[1].prefix(32)))
            }
            guard let tab = Int64(fields[2]), tab <= Limits.maxWebStateID else {
                throw .numberPastMaximum(line: number, String(fields[2].prefix(32)))
            }
            guard fields.count - 3 <= LostSeqs.capacity else { throw .badLostSeqs(line: number) }
            var lost = LostSeqs()
            var below: UInt64?
            for field in fields.dropFirst(3) {
                let ends = field.split(separator: "-", omittingEmptySubsequences: false)
                guard ends.count == 2, ends.allSatisfy(Self.isNumber) else { throw .badLine(number) }
                // Past the ceiling (itself within `Limits`) is damage, so no number here overflows.
                guard let first = UInt64(ends[0]), let last = UInt64(ends[1]), first >= 1, first <= last, last <= seq,
                    below.map({ $0 < first - 1 }) ?? true
                else { throw .badLostSeqs(line: number) }
                lost.insert(first...last)
                below = last
            }
            guard
                windows.updateValue(
                    HandedOutWindow(ceiling: HandedOutCeiling(seq: seq, tab: tab), lost: lost), forKey: id) == nil
            else {
                throw .duplicateWindow(line: number, id)
            }
        }
        return windows
    }

    private static func isNumber(_ field: Substring) -> Bool { !field.isEmpty && field.allSatisfy(\.isASCIIDigit) }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
