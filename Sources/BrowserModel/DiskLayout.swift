import SystemPackage

import struct Foundation.UUID

/// Every name the host gives under its root, and how a session's path is built from them: the
/// one owner of the on-disk layout (docs/storage-format.md). It lives here, in the lowest module
/// that builds such a path (a `Profile` places its Browsers' sessions), so that every other user
/// (SessionStore's stores and `RootLayout`, the supervisor, `stress`, `demo`) reaches it
/// through modules it already depends on.
///
///     <root>/windows/<UUID>/<regular|incognito>/   one Browser's session (`BrowserKind.rawValue`)
///     <root>/windows.order, windows.order.tmp, handed-out, handed-out.tmp, set-aside/, supervisor.lock   the supervisor's
///     <root>/ctl.sock   the control socket, unless `run --socket` puts it elsewhere
///
/// In a session directory, generations count up from 1: snapshot N holds the list as journal
/// N-1 left it, and journal N the saves after it. The newest two generations are kept, so a
/// damaged newest snapshot falls back to the one before plus both journals without losing a
/// save.
///
///     snapshot-<N as 16 hex digits>       journal-<N>       snapshot-<N>.tmp (while compacting)
///     journal.spare                       the next journal, written ahead (no generation's)
///     damaged/<name>-<unix seconds>       files set aside by recovery, never deleted
///     <name>.damaged-<unix seconds>       one that could not go into damaged/: renamed in place
public enum DiskLayout {
    // MARK: the root

    /// The directory of every window's sessions, one directory per window named by its UUID.
    public static let windows = "windows"
    public static let order = "windows.order"
    public static let orderTemporary = "windows.order.tmp"
    /// The supervisor's per-window ceilings of seqs and tab ids (`HandedOut`), and its scratch name.
    public static let handedOut = "handed-out"
    public static let handedOutTemporary = "handed-out.tmp"
    /// The supervisor's log of moves between windows under way (`MoveLog`), and its scratch name.
    public static let moves = "moves"
    public static let movesTemporary = "moves.tmp"
    public static let setAside = "set-aside"
    public static let lock = "supervisor.lock"
    public static let controlSocket = "ctl.sock"

    /// `<root>/ctl.sock`: where `run` listens and `ctl` and `stress` call when not told otherwise.
    public static func defaultControlSocket(root: FilePath) -> FilePath { root.appending(controlSocket) }

    /// `<root>/windows/<UUID>`: the directory of one window's sessions.
    public static func windowDirectory(root: FilePath, id: UUID) -> FilePath {
        windowDirectory(root: root, name: id.uuidString)
    }

    /// `<root>/windows/<name>`, for callers that hold a window's directory name as listed or
    /// reported (`stress` plants entries under names that are no window's).
    public static func windowDirectory(root: FilePath, name: String) -> FilePath {
        root.appending(windows).appending(name)
    }

    /// `<root>/windows/<UUID>/<kind>`: one Browser's session directory.
    public static func browserDirectory(root: FilePath, id: UUID, kind: BrowserKind) -> FilePath {
        browserDirectory(window: windowDirectory(root: root, id: id), kind: kind)
    }

    /// `<window directory>/<kind>`.
    public static func browserDirectory(window: FilePath, kind: BrowserKind) -> FilePath {
        window.appending(kind.rawValue)
    }

    // MARK: a Browser's session directory

    public static let snapshotPrefix = "snapshot-"
    public static let journalPrefix = "journal-"
    public static let temporarySuffix = ".tmp"
    public static let damagedDirectory = "damaged"
    /// Between a damaged file's name and the time when it could not be moved to `damaged/` and
    /// was renamed in place: no listing reads such a name as a generation, so none removes it.
    public static let damagedInPlaceInfix = ".damaged-"
    /// Present while a session is being deleted (created durably first, removed last): a
    /// directory holding it is no session, whatever else a crash left in it.
    public static let deletionMarker = "deleting"
    /// The next generation's journal, written full of zeros ahead of need: a compaction renames
    /// it to `journal-<N>`. No generation's file (a listing reads no generation in its name),
    /// never read; recovery deletes one a kill or a power cut left, whatever it holds.
    public static let spareJournal = "journal.spare"

    public static func snapshotName(_ generation: UInt64) -> String { snapshotPrefix + hex(generation) }
    public static func journalName(_ generation: UInt64) -> String { journalPrefix + hex(generation) }

    /// The generation a file name carries, for names this layout writes; nil for any other.
    public static func generation(of name: String, prefix: String) -> UInt64? {
        guard name.hasPrefix(prefix), name.count == prefix.count + generationDigits else { return nil }
        return UInt64(name.dropFirst(prefix.count), radix: 16)
    }

    /// A generation in a name: fixed width, so names sort as their generations do.
    public static let generationDigits = 16

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: generationDigits - digits.count) + digits
    }
}

extension UUID {
    /// A UUID that is `text` whole. `UUID(uuidString:)` reads a C string, so it stops at a NUL
    /// and takes "UUID\0anything" for the UUID: a request naming a window must name it exactly.
    public init?(exactly text: String) {
        guard text.utf8.count == 36, let id = UUID(uuidString: text) else { return nil }
        self = id
    }
}
