import BrowserModel
import Foundation
import IOUring
import Platform
import SystemPackage

/// Why something was moved to `ROOT/set-aside/`. The reason is part of the entry's name, so the
/// rename that sets it aside records it too: no second file to write, lose or forge apart.
public enum SetAsideReason: String, Codable, Sendable, CaseIterable {
    /// The window's worker failed to start `RestartPolicy.failedStartLimit` times in a row.
    case crashLoop = "crash_loop"
    /// A file of the root that does not read (`handed-out`).
    case damagedFile = "damaged_file"
    /// A symlink named like a window directory (never followed).
    case symlink
    /// Something else that cannot be a window: a file or FIFO named like a window directory,
    /// or a second spelling of a window's UUID.
    case badEntry = "bad_entry"
    /// Set aside by a version that did not name the reason.
    case unrecorded

    /// How the reason is spelled in an entry's name.
    var nameToken: String { rawValue.replacingOccurrences(of: "_", with: "-") }
}

/// One entry of `ROOT/set-aside/`: a window's whole session (a directory), or whatever had a
/// window's name or `handed-out`'s, moved there as itself. Its id is its name.
public struct SetAsideEntry: Sendable, Equatable {
    public let id: String
    /// The window it came from; nil for a root file (`handed-out`) or a name that says none.
    public let window: UUID?
    public let kind: EntryKind
    /// When it was set aside (the name's UTC time, to the second); nil when the name has none.
    public let at: Date?
    public let reason: SetAsideReason
    public let path: FilePath

    /// Whether it can come back as a window: a directory from a window.
    public var holdsWindowSession: Bool { kind == .directory && window != nil }
}

/// The names under `ROOT/set-aside/` and their meaning: the one owner of the entries' naming
/// (`<UUID>-<UTC time>-<reason>[-N]`, `handed-out-<UTC time>-<reason>[-N]`, and the names of
/// versions before, without a reason) and of the hidden names the host keeps beside them
/// while an entry is adopted or discarded. Everything here reads names only: nothing under
/// `set-aside/` is opened, followed or trusted.
public enum SetAsideShelf {
    /// The longest entry id the host lists or acts on: room under NAME_MAX for the adoption
    /// marker that names it.
    public static let maxIDBytes = 160

    /// Names beginning with a dot are the host's own bookkeeping, never entries.
    static let adoptingPrefix = ".adopting-"
    static let discardingPrefix = ".discarding-"

    public static func directory(root: FilePath) -> FilePath { root.appending(DiskLayout.setAside) }

    /// The base name for something set aside now: `<prefix>-<UTC time>-<reason>`; the mover
    /// appends `-N` when that name is taken.
    /// The supervisor's own files of the root that may be set aside when damaged.
    public static let rootFiles = [DiskLayout.handedOut, DiskLayout.moves]

    public static func baseName(_ prefix: String, at date: Date, reason: SetAsideReason) -> String {
        "\(prefix)-\(stamp(date))-\(reason.nameToken)"
    }

    /// A UTC time for names: `20261122T185700Z`.
    public static func stamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.string(from: date)
    }

    /// Whether `id` can name an entry: one path component the host could have made, printable
    /// ASCII, no dot first. Anything else (a `/`, `..`, a NUL, a control character) is refused
    /// before any path is made from it.
    public static func isValidID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        return !bytes.isEmpty && bytes.count <= maxIDBytes && bytes.first != UInt8(ascii: ".")
            && bytes.allSatisfy { (0x21...0x7e).contains($0) && $0 != UInt8(ascii: "/") }
    }

    /// What an entry's name says, and its kind as found: nil for a name that is no entry.
    public static func entry(named id: String, kind: EntryKind, root: FilePath) -> SetAsideEntry? {
        guard isValidID(id) else { return nil }
        var rest = Substring(id)
        var window: UUID?
        if rest.utf8.count >= 37, let parsed = UUID(exactly: String(rest.prefix(36))), rest.dropFirst(36).first == "-" {
            window = parsed
            rest = rest.dropFirst(37)
        } else if let file = Self.rootFiles.first(where: { rest.hasPrefix($0 + "-") }) {
            rest = rest.dropFirst(file.count + 1)
        }
        var at: Date?
        if let date = date(stamp: rest.prefix(16)) {
            at = date
            rest = rest.dropFirst(16)
        }
        let named = SetAsideReason.allCases.first { rest == "-\($0.nameToken)" || rest.hasPrefix("-\($0.nameToken)-") }
        let reason: SetAsideReason
        if let named {
            reason = named
        } else if Self.rootFiles.contains(where: { id.hasPrefix($0 + "-") }) {
            reason = .damagedFile
        } else if window != nil, kind == .symlink {
            reason = .symlink
        } else if window != nil, kind != .directory {
            reason = .badEntry
        } else {
            reason = .unrecorded
        }
        return SetAsideEntry(
            id: id, window: window, kind: kind, at: at, reason: reason, path: directory(root: root).appending(id))
    }

    /// The first `limit` entries under `ROOT/set-aside/` by id, and how many there are; none
    /// when it is missing or no directory (a symlink is never followed). Only the names kept
    /// are parsed: a directory flooded with names costs one listing. A listing that fails is
    /// thrown.
    public static func entries(root: FilePath, limit: Int = .max) throws(Errno) -> (
        entries: [SetAsideEntry], total: Int
    ) {
        let named = (try NoFollow.entryNames(directory(root: root)) ?? []).filter { isValidID($0.name) }
        return (named.prefix(limit).compactMap { entry(named: $0.name, kind: $0.kind, root: root) }, named.count)
    }

    /// The entry `id` names, as it is on disk now; nil when there is none (or `set-aside` is no
    /// directory: nothing is reached through a symlink).
    public static func entry(root: FilePath, id: String) throws(Errno) -> SetAsideEntry? {
        guard isValidID(id) else { return nil }
        let kind: EntryKind?
        do {
            kind = try NoFollow.kind(directory(root: root).appending(id))
        } catch  where error == .notDirectory || error == .tooManySymbolicLinkLevels {
            return nil
        }
        return kind.flatMap { entry(named: id, kind: $0, root: root) }
    }

    /// The time a name's `yyyyMMdd'T'HHmmss'Z'` says, read by hand (no formatter per name:
    /// `entries` may meet thousands): nil unless every field is a valid UTC date and time.
    static func date(stamp: Substring) -> Date? {
        let bytes = Array(stamp.utf8)
        guard bytes.count == 16, bytes[8] == UInt8(ascii: "T"), bytes[15] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8),
            let hour = number(9..<11), let minute = number(11..<13), let second = number(13..<15),
            (1...12).contains(month), hour < 24, minute < 60, second < 60
        else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...lengths[month - 1]).contains(day) else { return nil }
        // Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: TimeInterval(((days * 24 + hour) * 60 + minute) * 60 + second))
    }

    /// The marker that says entry `id` is being adopted as window `target`: made durable before
    /// the entry moves to `windows/<target>`, removed once the window has restored and saved.
    public static func adoptionMarker(id: String, target: UUID) -> String {
        "\(adoptingPrefix)\(target.uuidString)-\(id)"
    }

    /// What an adoption marker names: nil for any other name.
    public static func adoption(marker name: String) -> (id: String, target: UUID)? {
        guard name.hasPrefix(adoptingPrefix) else { return nil }
        let rest = name.dropFirst(adoptingPrefix.count)
        guard rest.utf8.count > 37, let target = UUID(exactly: String(rest.prefix(36))), rest.dropFirst(36).first == "-"
        else { return nil }
        let id = String(rest.dropFirst(37))
        return isValidID(id) ? (id, target) : nil
    }

    /// What an adoption marker holds: the identity of the directory it moved (`st_dev` and
    /// `st_ino`, which a rename keeps), so a start sends back only that directory, never a
    /// window a planted or stale marker names.
    public static func markerContent(device: UInt64, inode: UInt64) -> [UInt8] { Array("\(device) \(inode)\n".utf8) }

    /// The identity a marker's bytes name: nil unless they are exactly what `markerContent` writes.
    public static func markedIdentity(_ bytes: [UInt8]) -> (device: UInt64, inode: UInt64)? {
        guard bytes.count <= 48, bytes.last == UInt8(ascii: "\n") else { return nil }
        let fields = bytes.dropLast().split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard fields.count == 2, let device = UInt64(String(decoding: fields[0], as: UTF8.self)),
            let inode = UInt64(String(decoding: fields[1], as: UTF8.self)),
            markerContent(device: device, inode: inode) == bytes
        else { return nil }
        return (device, inode)
    }

    /// Where a discarded entry goes, in one rename, before its bytes are removed.
    public static func discardingName(_ id: String) -> String { discardingPrefix + id }

    public static func isDiscarding(_ name: String) -> Bool { name.hasPrefix(discardingPrefix) }
}
