import BrowserModel
import Foundation
import IOUring
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

    public static func directory(root: FilePath) -> FilePath { root.appending(RootLayout.setAside) }

    /// The base name for something set aside now: `<prefix>-<UTC time>-<reason>`; the mover
    /// appends `-N` when that name is taken.
    public static func baseName(_ prefix: String, at date: Date, reason: SetAsideReason) -> String {
        "\(prefix)-\(stamp(date))-\(reason.nameToken)"
    }

    /// A UTC time for names: `20261122T185700Z`.
    public static func stamp(_ date: Date) -> String {
        stampFormatter().string(from: date)
    }

    private static func stampFormatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter
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
        } else if rest.hasPrefix(RootLayout.handedOut + "-") {
            rest = rest.dropFirst(RootLayout.handedOut.count + 1)
        }
        var at: Date?
        if rest.utf8.count >= 16, let date = stampFormatter().date(from: String(rest.prefix(16))) {
            at = date
            rest = rest.dropFirst(16)
        }
        let named = SetAsideReason.allCases.first { rest == "-\($0.nameToken)" || rest.hasPrefix("-\($0.nameToken)-") }
        let reason: SetAsideReason
        if let named {
            reason = named
        } else if id.hasPrefix(RootLayout.handedOut + "-") {
            reason = .damagedFile
        } else if window != nil, kind == .symlink {
            reason = .symlink
        } else if window != nil, kind != .directory {
            reason = .badEntry
        } else {
            reason = .unrecorded
        }
        return SetAsideEntry(id: id, window: window, kind: kind, at: at, reason: reason, path: directory(root: root).appending(id))
    }

    /// Every entry under `ROOT/set-aside/`, sorted by id; none when it is missing or no
    /// directory. A listing that fails is thrown.
    public static func entries(root: FilePath) throws(Errno) -> [SetAsideEntry] {
        (try NoFollow.entryNames(directory(root: root)) ?? []).compactMap { entry(named: $0.name, kind: $0.kind, root: root) }
    }

    /// The entry `id` names, as it is on disk now; nil when there is none.
    public static func entry(root: FilePath, id: String) throws(Errno) -> SetAsideEntry? {
        guard isValidID(id) else { return nil }
        guard let kind = try NoFollow.kind(directory(root: root).appending(id)) else { return nil }
        return entry(named: id, kind: kind, root: root)
    }

    /// The marker that says entry `id` is being adopted as window `target`: made durable before
    /// the entry moves to `windows/<target>`, removed once the window has restored and saved.
    public static func adoptionMarker(id: String, target: UUID) -> String { "\(adoptingPrefix)\(target.uuidString)-\(id)" }

    /// What an adoption marker names: nil for any other name.
    public static func adoption(marker name: String) -> (id: String, target: UUID)? {
        guard name.hasPrefix(adoptingPrefix) else { return nil }
        let rest = name.dropFirst(adoptingPrefix.count)
        guard rest.utf8.count > 37, let target = UUID(exactly: String(rest.prefix(36))), rest.dropFirst(36).first == "-" else { return nil }
        let id = String(rest.dropFirst(37))
        return isValidID(id) ? (id, target) : nil
    }

    /// Where a discarded entry goes, in one rename, before its bytes are removed.
    public static func discardingName(_ id: String) -> String { discardingPrefix + id }

    public static func isDiscarding(_ name: String) -> Bool { name.hasPrefix(discardingPrefix) }
}
