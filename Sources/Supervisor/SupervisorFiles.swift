import BrowserModel
import Foundation
import Glibc
import HostLimits
import IOUring
import Logging
import Platform
import SessionStore
import SystemPackage

/// What the supervisor keeps under its root, all private to the user (directories 0700, files
/// 0600): `windows/` (one directory per window, the stores'), `windows.order`, `set-aside/`,
/// `supervisor.lock` and the control socket (names and kinds: `RootLayout`). Every call goes
/// through `NoFollow`: nothing under the root is reached through a symlink, and a symlink is
/// moved or removed as itself.
struct SupervisorFiles {
    let root: FilePath
    /// Where moving an entry out of `set-aside/`'s way is said.
    let logger: Logger

    init(root: FilePath, logger: Logger = Logger(label: "windowhost.supervisor")) {
        self.root = root
        self.logger = logger
    }

    var windows: FilePath { root.appending(DiskLayout.windows) }
    var order: FilePath { root.appending(DiskLayout.order) }
    var orderTemporary: FilePath { root.appending(DiskLayout.orderTemporary) }
    var setAside: FilePath { root.appending(DiskLayout.setAside) }
    var handedOut: FilePath { root.appending(DiskLayout.handedOut) }
    var handedOutTemporary: FilePath { root.appending(DiskLayout.handedOutTemporary) }
    var lock: FilePath { root.appending(DiskLayout.lock) }

    /// A window's directory: always the canonical (uppercase) spelling of its UUID.
    func windowDirectory(_ id: UUID) -> FilePath { windows.appending(id.uuidString) }

    /// Whether the window has a session directory (a real one: a symlink is none).
    /// Whether the window's session is on disk. When that cannot be told (EMFILE, EIO) it is
    /// taken to be: a window forgotten by mistake would leave `windows.order` for good, while
    /// one kept by mistake goes at the next start, which finds no directory for it.
    func hasSession(_ id: UUID) -> Bool {
        do {
            return try NoFollow.kind(windowDirectory(id)) == .directory
        } catch {
            return true
        }
    }

    /// An entry of `windows/` that could not serve as a window and was moved to `set-aside/`
    /// as itself, or could not be moved (`path` nil) and is left unused.
    struct MovedAside {
        let window: UUID
        let path: FilePath?
        let reason: SetAsideReason
        let detail: String
    }

    /// The windows under `windows/`, after putting each in order, durably:
    /// - a window directory named in another spelling of its UUID (lowercase) is renamed to
    ///   the canonical one; when both spellings exist, the canonical one is the window and the
    ///   other is set aside (both kept, neither merged);
    /// - anything but a directory under a UUID's name (a symlink, a file, a FIFO) is set aside
    ///   as itself, never followed.
    /// Names that are no UUID are left alone.
    /// A listing that fails (EIO, EMFILE) is thrown: starting with no windows would rewrite
    /// `windows.order` without them, and their order would be lost.
    func windowsOnDisk(at date: Date) throws(SupervisorError) -> (windows: [UUID], setAside: [MovedAside]) {
        let listing: [(name: String, kind: EntryKind)]?
        do {
            // Only UUID names matter here (ASCII); any other name is left alone.
            listing = try NoFollow.entries(windows)?.map { ($0.name.string, $0.kind) }
        } catch {
            throw .setup("list \(windows)", error)
        }
        guard let entries = listing else { return ([], []) }
        var found: [UUID] = []
        var setAside: [MovedAside] = []
        // Windows whose canonical name is taken by a directory: another spelling then goes aside.
        var taken = Set(
            entries.filter { $0.kind == .directory }.map(\.name).compactMap { name in
                UUID(uuidString: name).flatMap { $0.uuidString == name ? $0 : nil }
            })
        for entry in entries {
            guard let id = UUID(uuidString: entry.name) else { continue }
            let canonical = entry.name == id.uuidString
            let reason: SetAsideReason
            let detail: String
            if entry.kind != .directory {
                (reason, detail) = (
                    entry.kind == .symlink ? .symlink : .badEntry,
                    "a \(entry.kind) named like a window directory (not followed)"
                )
            } else if canonical {
                found.append(id)
                continue
            } else if taken.contains(id) {
                (reason, detail) = (.badEntry, "a second spelling of window \(id.uuidString)")
            } else {
                do {
                    try NoFollow.rename(windows.appending(entry.name), to: windowDirectory(id))
                    try Self.syncDirectory(windows)
                    taken.insert(id)
                    found.append(id)
                } catch {
                    setAside.append(
                        MovedAside(
                            window: id, path: nil, reason: .badEntry,
                            detail: "cannot rename \(entry.name) to \(id.uuidString): \(error)"))
                }
                continue
            }
            do {
                setAside.append(
                    MovedAside(
                        window: id, path: try move(entry.name, window: id, reason: reason, at: date), reason: reason,
                        detail: detail))
            } catch {
                setAside.append(
                    MovedAside(
                        window: id, path: nil, reason: reason, detail: "\(detail); cannot set it aside: \(error)"))
            }
        }
        return (found, setAside)
    }

    /// `windows.order` as saved (`RootLayout.savedOrder`, its one parse and bound).
    func savedOrder() throws(SupervisorError) -> [UUID] {
        do {
            return try RootLayout.savedOrder(root: root, engine: SyncEngine())
        } catch {
            throw .setup("read \(order)", error.errno)
        }
    }

    /// Replaces `windows.order` atomically (`replace`), then syncs the root directory.
    func saveOrder(_ ids: [UUID]) throws {
        try replace(order, through: orderTemporary, with: Array(ids.map { $0.uuidString + "\n" }.joined().utf8))
        try Self.syncDirectory(root)
    }

    /// `NoFollow.replace`, after removing whatever had the temporary's name, as itself.
    private func replace(_ path: FilePath, through temporary: FilePath, with bytes: [UInt8]) throws {
        try NoFollow.removeTree(temporary)
        try NoFollow.replace(path, through: temporary, with: bytes)
    }

    /// What `handed-out` holds, as the supervisor starts.
    enum HandedOutRecord {
        /// No file: a first start, or a root of a version before it (nothing handed out is
        /// known beyond what each window restores).
        case missing
        case read([UUID: HandedOutWindow])
        /// It does not read as a record (`HandedOutError`, or not a regular file): moved to
        /// `set-aside/` as itself (`path`, nil if it could not be), never trusted.
        case damaged(reason: String, path: FilePath?)
    }

    /// Reads `handed-out` (`HandedOut.parse`, never past `Limits.maxHandedOutBytes`, never
    /// through a symlink). A file that is there and does not read (EIO) is thrown: its
    /// ceilings are what keeps lost seqs from being handed out again.
    func handedOutRecord(at date: Date) throws(SupervisorError) -> HandedOutRecord {
        let reason: String
        do {
            let fd = try NoFollow.open(handedOut, .read)
            let bytes: [UInt8] = try fd.closeAfter {
                // Never past one byte over the bound, which tells an oversize file.
                var bytes: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 1 << 16)
                while bytes.count <= Limits.maxHandedOutBytes {
                    let read = try chunk.withUnsafeMutableBytes {
                        try fd.read(fromAbsoluteOffset: Int64(bytes.count), into: $0)
                    }
                    if read == 0 { break }
                    bytes += chunk[..<read]
                }
                return bytes
            }
            return .read(try HandedOut.parseFile(bytes))
        } catch let error as HandedOutError {
            reason = "\(error)"
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            return .missing
        } catch let error as Errno
            where [.tooManySymbolicLinkLevels, .isDirectory, .noSuchAddressOrDevice].contains(error)
        {
            reason = "not a regular file (\(error)); not followed"
        } catch {
            throw .setup("read \(handedOut)", (error as? Errno) ?? .ioError)
        }
        do {
            return .damaged(reason: reason, path: try setAsideRootFile(DiskLayout.handedOut, at: date))
        } catch {
            return .damaged(reason: "\(reason); cannot set it aside: \(error)", path: nil)
        }
    }

    /// Moves the root's file `name` (one of `SetAsideShelf.rootFiles`) to `set-aside/` as
    /// itself, durably: where it went.
    func setAsideRootFile(_ name: String, at date: Date) throws -> FilePath {
        assert(SetAsideShelf.rootFiles.contains(name), "only the supervisor's own root files are set aside")
        try makeSetAsideDirectory(at: date)
        let destination = try Self.unusedName(
            under: setAside, SetAsideShelf.baseName(name, at: date, reason: .damagedFile))
        try NoFollow.rename(root.appending(name), to: destination, replacing: false)
        try Self.syncDirectory(setAside)
        try Self.syncDirectory(root)
        return destination
    }

    /// Makes `handed-out` anew, durably, as `saveOrder` does `windows.order` (both slots,
    /// `HandedOut.encodeFile`), and opens it for the writes in place after: when this returns, a
    /// power cut leaves these ceilings on disk.
    func makeHandedOut(_ windows: [UUID: HandedOutWindow]) throws -> FileDescriptor {
        try replace(handedOut, through: handedOutTemporary, with: HandedOut.encodeFile(windows))
        try Self.syncDirectory(root)
        return try openHandedOut()
    }

    /// `handed-out` opened for writes in place, if it has the two slots' size (else it is made
    /// anew: `makeHandedOut`).
    func openHandedOut() throws -> FileDescriptor {
        let fd = try NoFollow.open(handedOut, .write)
        do {
            var status = stat()
            guard fstat(fd.rawValue, &status) == 0 else { throw Errno(rawValue: errno) }
            guard status.st_size == HandedOut.fileBytes else { throw Errno.invalidArgument }
            return fd
        } catch {
            try? fd.close()
            throw error
        }
    }

    /// Writes `windows` over `handed-out` in place, one slot then the other, each synced: no
    /// space and no descriptor needed, and a power cut leaves one slot whole, the new ceilings
    /// or (in the second slot, until the first is synced) the ones before.
    static func writeHandedOut(_ windows: [UUID: HandedOutWindow], inPlace fd: FileDescriptor) throws {
        // The content only: a slot's bytes past its length are never read.
        let content = try HandedOut.encodeSlotContent(windows)
        for offset in [0, HandedOut.slotBytes] {
            _ = try fd.writeAll(toAbsoluteOffset: Int64(offset), content)
            guard fdatasync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
        }
    }

    /// Moves a window's whole session to `set-aside/<UUID>-<UTC time>-<reason>/`, never
    /// deleting it. Nil when the window has nothing on disk.
    func setAside(_ id: UUID, reason: SetAsideReason, at date: Date) throws -> FilePath? {
        guard try NoFollow.kind(windowDirectory(id)) != nil else { return nil }
        let destination = try move(id.uuidString, window: id, reason: reason, at: date)
        // The key went with the session (`move`): the window's own name is free for the empty
        // window that restarts. Left behind by a failure or a kill, that window's restore
        // revokes it (it finds no sealed file).
        revokeWindowKey(id, after: "its session was set aside")
        return destination
    }

    /// Moves `windows/<name>` as itself to `set-aside/<UUID>-<UTC time>-<reason>[-N]`
    /// (`SetAsideShelf` names it). A directory takes the window's incognito key with it first
    /// (`SessionKeyRecords.keep`): a kill before the rename leaves a record the next start
    /// revokes (`revokeLeftoverRecords`), one after it the entry with its key. A key that
    /// cannot be kept stops the move: the entry's sealed files would never be read again.
    private func move(_ name: String, window id: UUID, reason: SetAsideReason, at date: Date) throws -> FilePath {
        let source = windows.appending(name)
        if try NoFollow.kind(source) == .directory {
            try SessionKeyRecords.keep(root: root, window: id, directory: source)
        }
        try makeSetAsideDirectory(at: date)
        let destination = try Self.unusedName(
            under: setAside, SetAsideShelf.baseName(id.uuidString, at: date, reason: reason))
        try NoFollow.rename(source, to: destination, replacing: false)
        try Self.syncDirectory(setAside)
        try Self.syncDirectory(windows)
        return destination
    }

    /// At start, once unfinished adoptions went back: a key record on a window's own directory
    /// is what a kill left (a set-aside before its rename, an adoption ended before its record
    /// was revoked), the window's own key holding all its files. Revoked, so no second copy of
    /// a key outlives the window's.
    func revokeLeftoverRecords(_ ids: [UUID], sparing unfinished: Set<UUID>) {
        for id in ids where !unfinished.contains(id) {
            do {
                try SessionKeyRecords.revoke(root: root, directory: windowDirectory(id))
            } catch {
                logger.warning("cannot revoke a leftover key record of window \(id)", metadata: ["error": "\(error)"])
            }
        }
    }

    // MARK: adopting and discarding set-aside entries (`ctl adopt`, `ctl discard`)

    /// Moves `entry` to `windows/<target>` for adoption. The marker naming both, and holding
    /// the identity of the directory moved, is made durable first, so a supervisor killed at any
    /// point leaves either the entry where it was or the marker that sends it back
    /// (`recoverAdoptions`); the entry leaves `set-aside/` for good only at
    /// `endAdoption(returning: false)`.
    func beginAdoption(_ entry: SetAsideEntry, as target: UUID) throws {
        let identity = try Self.identity(ofDirectory: entry.path)
        let marker = setAside.appending(SetAsideShelf.adoptionMarker(id: entry.id, target: target))
        let fd = try NoFollow.open(marker, .create)
        do {
            try fd.closeAfter {
                _ = try fd.writeAll(SetAsideShelf.markerContent(device: identity.device, inode: identity.inode))
                guard fdatasync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
            }
            try Self.syncDirectory(setAside)
        } catch {
            try? NoFollow.remove(marker)
            throw error
        }
        do {
            try NoFollow.rename(entry.path, to: windowDirectory(target), replacing: false)
        } catch {
            try? NoFollow.remove(marker)
            try? Self.syncDirectory(setAside)
            throw error
        }
        do {
            try Self.syncDirectory(windows)
            try Self.syncDirectory(setAside)
        } catch {
            try? endAdoption(entry.id, as: target, returning: true)
            throw error
        }
    }

    /// Ends the adoption of entry `id` as `target`. `returning`: the session goes back to
    /// `set-aside/<id>` as it is now (when `windows/<target>` is there and that name free);
    /// else it stays a window. Either way the marker goes last, each step synced.
    /// A session sent back takes the adopting window's key into its record first (the restore
    /// may have written it again under that key), and the window's own copy is revoked last.
    func endAdoption(_ id: String, as target: UUID, returning: Bool) throws {
        let entry = setAside.appending(id)
        var returned = false
        if returning, try NoFollow.kind(windowDirectory(target)) == .directory, try NoFollow.kind(entry) == nil {
            try SessionKeyRecords.keep(root: root, window: target, directory: windowDirectory(target))
            try NoFollow.rename(windowDirectory(target), to: entry, replacing: false)
            try Self.syncDirectory(setAside)
            try Self.syncDirectory(windows)
            returned = true
        }
        try NoFollow.remove(setAside.appending(SetAsideShelf.adoptionMarker(id: id, target: target)))
        try Self.syncDirectory(setAside)
        if returned { revokeWindowKey(target, after: "its adoption was undone") }
    }

    /// Revokes window `id`'s own key, a copy of which went into a session's record (`what`
    /// happened). A failure is logged: the copy left is revoked by the window's next restore
    /// that finds no sealed file. A refused keyring sealed nothing.
    private func revokeWindowKey(_ id: UUID, after what: String) {
        do {
            try ClosedWindowKey.revoke(root: root, window: id)
        } catch .unavailable {
            return
        } catch {
            logger.warning("cannot revoke the key of window \(id) after \(what)", metadata: ["error": "\(error)"])
        }
    }

    /// Adoptions a supervisor before did not finish (killed, or stopped before the window had
    /// saved): each session goes back to its entry, before `windows/` is read. A marker is
    /// believed only when it is a regular file naming the very directory now at
    /// `windows/<target>` (`SetAsideShelf.markerContent`): a planted or stale one moves nothing
    /// and, as a file, is removed; anything else under a marker's name is left alone (never
    /// listed, never followed). Each marker's failure is logged and the start goes on. The
    /// sessions sent back, and the windows whose adoption could not be ended: their sessions
    /// stay at `windows/<target>` with their markers, and their records, which may hold the
    /// only keys of their sealed files, are never taken for leftovers (`revokeLeftoverRecords`).
    func recoverAdoptions() throws(SupervisorError) -> (returned: [(id: String, target: UUID)], unfinished: Set<UUID>) {
        let names: [(name: String, kind: EntryKind)]
        do {
            names = try NoFollow.entryNames(setAside) ?? []
        } catch {
            throw .setup("list \(setAside)", error)
        }
        var returned: [(id: String, target: UUID)] = []
        var unfinished: Set<UUID> = []
        for (name, kind) in names {
            guard let (id, target) = SetAsideShelf.adoption(marker: name) else { continue }
            guard kind == .file else {
                logger.warning(
                    "a \(kind) has the name of an adoption marker: left alone",
                    metadata: ["path": "\(setAside.appending(name))"])
                continue
            }
            do {
                let marked = try Self.readMarker(setAside.appending(name))
                // Only a directory that is not there is no session moved; one that cannot be
                // looked at now keeps its marker for the next start.
                let moved: (device: UInt64, inode: UInt64)?
                do {
                    moved = try Self.identity(ofDirectory: windowDirectory(target))
                } catch let error as Errno where error == .noSuchFileOrDirectory {
                    moved = nil
                }
                let ours = marked.map { marked in moved.map { $0 == marked } ?? false } ?? false
                try endAdoption(id, as: target, returning: ours)
                if ours { returned.append((id, target)) }
                if !ours {
                    logger.warning(
                        "an adoption marker names no directory it moved: removed, nothing moved",
                        metadata: ["marker": "\(name)"])
                }
            } catch {
                unfinished.insert(target)
                logger.error(
                    "cannot end an adoption left unfinished; the session stays where it is",
                    metadata: ["marker": "\(name)", "error": "\(error)"])
            }
        }
        return (returned, unfinished)
    }

    /// A directory's `(st_dev, st_ino)`, opened as itself (never through a symlink).
    static func identity(ofDirectory path: FilePath) throws -> (device: UInt64, inode: UInt64) {
        let fd = try NoFollow.openDirectory(path)
        return try fd.closeAfter {
            var status = stat()
            guard fstat(fd.rawValue, &status) == 0 else { throw Errno(rawValue: errno) }
            return (UInt64(status.st_dev), UInt64(status.st_ino))
        }
    }

    /// The identity an adoption marker holds; nil when its bytes are not one (`markedIdentity`).
    private static func readMarker(_ path: FilePath) throws -> (device: UInt64, inode: UInt64)? {
        let fd = try NoFollow.open(path, .read)
        return try fd.closeAfter {
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = try buffer.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: 0, into: $0) }
            return SetAsideShelf.markedIdentity(Array(buffer[..<count]))
        }
    }

    /// Takes `entry` out of `set-aside/` durably, in one rename to its discarding name: from
    /// then on it is gone, whatever happens to the removal of its bytes (`removeDiscarded`).
    /// Its key record is revoked after the rename (`revokeRecords`, again at the next start).
    func discard(_ entry: SetAsideEntry) throws -> FilePath {
        let away = try Self.unusedName(under: setAside, SetAsideShelf.discardingName(entry.id))
        try NoFollow.rename(entry.path, to: away, replacing: false)
        try Self.syncDirectory(setAside)
        revokeRecords(of: [away])
        return away
    }

    /// Revokes the key records of discarded directories (a file or symlink has none), before
    /// their bytes are removed: the identity naming a record is gone with the directory.
    func revokeRecords(of paths: [FilePath]) {
        for path in paths where (try? NoFollow.kind(path)) == .directory {
            do {
                try SessionKeyRecords.revoke(root: root, directory: path)
            } catch {
                logger.warning(
                    "cannot revoke the key record of a discarded session",
                    metadata: ["path": "\(path)", "error": "\(error)"])
            }
        }
    }

    /// Takes closed window `id`'s directory out of `windows/` durably, in one rename to
    /// `set-aside/.discarding-<UUID>`: before it the window is whole, after it gone, whatever
    /// happens to the removal of its bytes (`removeDiscarded`, at the latest at the next start).
    /// A failure before the rename is thrown (the window is whole); one syncing the directories
    /// after it is returned with the new name: the close is decided, only its durability is not.
    func discardWindow(_ id: UUID) throws -> (away: FilePath, unsynced: (any Error)?) {
        try makeSetAsideDirectory(at: Date())
        let away = try Self.unusedName(under: setAside, SetAsideShelf.discardingName(id.uuidString))
        try NoFollow.rename(windowDirectory(id), to: away, replacing: false)
        do {
            try Self.syncDirectory(windows)
            try Self.syncDirectory(setAside)
        } catch {
            return (away, error)
        }
        return (away, nil)
    }

    /// The windows whose closes for good were under way (`discardWindow`'s names, exactly):
    /// their keys are revoked again at the next start.
    func windowsBeingDiscarded() -> [UUID] {
        discardedLeftovers().compactMap { path in
            path.lastComponent.flatMap {
                UUID(exactly: String($0.string.dropFirst(SetAsideShelf.discardingName("").count)))
            }
        }
    }

    /// Discarded entries whose bytes are not all removed yet (a supervisor stopped meanwhile).
    func discardedLeftovers() -> [FilePath] {
        ((try? NoFollow.entryNames(setAside)) ?? nil)?.map(\.name).filter(SetAsideShelf.isDiscarding).map {
            setAside.appending($0)
        } ?? []
    }

    /// Removes what `discard` took away, as itself (never following a symlink, any depth), off
    /// the supervisor's thread: a planted tree of a million entries takes minutes.
    func removeDiscarded(_ paths: [FilePath]) {
        guard !paths.isEmpty else { return }
        let (logger, directory) = (self.logger, setAside)
        DispatchQueue.global(qos: .utility).async {
            for path in paths {
                do {
                    try NoFollow.removeTree(path)
                    try Self.syncDirectory(directory)
                } catch {
                    logger.error(
                        "cannot remove a discarded set-aside entry; tried again at the next start",
                        metadata: ["path": "\(path)", "error": "\(error)"])
                }
            }
        }
    }

    /// Makes `set-aside/` a real directory. Anything else under its name (a symlink, a file, a
    /// FIFO) only has to make way: it is moved, as itself, to `set-aside.not-a-directory-<UTC
    /// time>[-N]` beside it (never followed, never deleted) and logged.
    private func makeSetAsideDirectory(at date: Date) throws {
        if let kind = try NoFollow.kind(setAside), kind != .directory {
            let away = try Self.unusedName(
                under: root, "\(DiskLayout.setAside).not-a-directory-\(SetAsideShelf.stamp(date))")
            try NoFollow.rename(setAside, to: away)
            try Self.syncDirectory(root)
            logger.warning(
                "a \(kind) had the name of set-aside/: moved out of the way as itself (never followed), a real directory made",
                metadata: ["path": "\(away)"])
        }
        try Self.makeDirectory(setAside)
    }

    private static func unusedName(under directory: FilePath, _ base: String) throws(Errno) -> FilePath {
        try directory.appendingUnusedName(base) { path throws(Errno) in try NoFollow.kind(path) != nil }
    }

    /// Creates `path` and its missing parents, 0700, each followed by a sync of its parent. An
    /// existing component must be a directory (a symlink is refused, not followed).
    static func makeDirectory(_ path: FilePath) throws {
        var current = path.root.map { FilePath(root: $0) } ?? FilePath()
        for component in path.components {
            current.append(component)
            switch try NoFollow.kind(current) {
            case .directory?:
                continue
            case nil:
                // Made by someone else meanwhile: checked as itself on the next start.
                if let error = makeDirectoryError(current), error != .fileExists { throw error }
                try syncDirectory(current.removingLastComponent())
            case .some:
                throw Errno.notDirectory
            }
        }
    }

    private static func makeDirectoryError(_ path: FilePath) -> Errno? {
        do {
            try NoFollow.makeDirectory(path)
            return nil
        } catch {
            return error
        }
    }

    static func syncDirectory(_ path: FilePath) throws {
        let fd = try NoFollow.openDirectory(path)
        try fd.closeAfter {
            guard fsync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
        }
    }
}
