import CLinuxShims
import Glibc
import SystemPackage

/// What an entry is as itself (`fstatat` with `AT_SYMLINK_NOFOLLOW`): a symlink is a symlink,
/// never its target.
public enum EntryKind: Sendable, Equatable {
    case file
    case directory
    case symlink
    /// A FIFO, socket or device: nothing the host ever creates.
    case other
}

/// How `IOEngine.open` opens a file. Every mode refuses anything but a regular file (see
/// `NoFollow.open`).
public enum OpenMode: Sendable, Equatable {
    /// Read only: what recovery's reads and `inspect` use, so a read-only copy works.
    case read
    /// Read and write, an existing file.
    case write
    /// A new file, 0600, read and write: `O_CREAT|O_EXCL`, so an entry already there (a stale
    /// temporary, a planted symlink) fails with `EEXIST` and is never written through.
    case create
}

/// Which file an entry or an open descriptor is: (st_dev, st_ino).
public struct FileIdentity: Sendable, Hashable {
    public let device: UInt64
    public let inode: UInt64
}

/// File-system calls that never follow a symlink. Each path is walked one component at a time
/// from `/` (or the working directory for a relative path), every directory opened with
/// `openat(O_PATH|O_DIRECTORY|O_NOFOLLOW)`, and the last component is acted on relative to its
/// directory's descriptor (`openat`, `mkdirat`, `renameat`, `unlinkat`, `fstatat` with
/// `O_NOFOLLOW`/`AT_SYMLINK_NOFOLLOW`). A symlink anywhere in a path fails (`ENOTDIR` in the
/// middle, `ELOOP` at the end) instead of leading outside; a symlink is renamed and removed as
/// itself. Callers resolve a user-named root once (`realpath`) and pass the result on.
public enum NoFollow {
    /// `fstatat(AT_SYMLINK_NOFOLLOW)`: what `path` is, nil when nothing has that name (nor,
    /// then, has a directory on the way to it).
    public static func kind(_ path: FilePath) throws(Errno) -> EntryKind? {
        do {
            return try withParent(of: path) { parent, name throws(Errno) in
                var status = stat()
                guard fstatat(parent, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { throw Errno(rawValue: errno) }
                return kind(of: status.st_mode)
            }
        } catch .noSuchFileOrDirectory {
            return nil
        }
    }

    /// `openat` of a regular file, `O_NOFOLLOW|O_CLOEXEC`. An existing entry is checked as
    /// itself first and opened only if it is a regular file: a symlink fails with `ELOOP`, a
    /// directory with `EISDIR`, a FIFO, socket or device with `ENXIO` (it is never opened, so
    /// opening cannot block or touch a device); `O_NONBLOCK` covers an entry swapped in between,
    /// and is cleared once `fstat` shows a regular file.
    public static func open(_ path: FilePath, _ mode: OpenMode) throws(Errno) -> FileDescriptor {
        try withParent(of: path) { parent, name throws(Errno) in
            let fd: Int32
            if mode == .create {
                fd = retryingOnInterrupt {
                    openat(parent, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                }
                guard fd >= 0 else { throw Errno(rawValue: errno) }
                do throws(Errno) {
                    try setPrivateMode(fd, 0o600)
                } catch {
                    Glibc.close(fd)
                    throw error
                }
                return FileDescriptor(rawValue: fd)
            }
            var status = stat()
            guard fstatat(parent, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { throw Errno(rawValue: errno) }
            try requireFile(status.st_mode)
            let access = mode == .read ? O_RDONLY : O_RDWR
            fd = retryingOnInterrupt { openat(parent, name, access | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0) }
            guard fd >= 0 else { throw Errno(rawValue: errno) }
            guard fstat(fd, &status) == 0 else {
                let error = Errno(rawValue: errno)
                Glibc.close(fd)
                throw error
            }
            do throws(Errno) {
                try requireFile(status.st_mode)
                // A regular file after all: O_NONBLOCK goes, or io_uring would fail a write that
                // must wait (a durable one) with EAGAIN instead of running it in its workers.
                let flags = fcntl(fd, F_GETFL)
                guard flags >= 0, fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 else { throw Errno(rawValue: errno) }
            } catch {
                Glibc.close(fd)
                throw error
            }
            return FileDescriptor(rawValue: fd)
        }
    }

    /// A directory, read only (for listing and fsync), `O_DIRECTORY|O_NOFOLLOW`.
    public static func openDirectory(_ path: FilePath) throws(Errno) -> FileDescriptor {
        let (components, absolute) = split(path)
        let fd = try walk(components, from: absolute, flags: O_RDONLY)
        guard fd != AT_FDCWD else {
            let current = retryingOnInterrupt { Glibc.open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            guard current >= 0 else { throw Errno(rawValue: errno) }
            return FileDescriptor(rawValue: current)
        }
        return FileDescriptor(rawValue: fd)
    }

    /// `mkdirat`, 0700 whatever the umask.
    public static func makeDirectory(_ path: FilePath) throws(Errno) {
        try withParent(of: path) { parent, name throws(Errno) in
            guard mkdirat(parent, name, 0o700) == 0 else { throw Errno(rawValue: errno) }
            let fd = retryingOnInterrupt { openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            guard fd >= 0 else { throw Errno(rawValue: errno) }
            defer { Glibc.close(fd) }
            try setPrivateMode(fd, 0o700)
        }
    }

    /// Sets exactly `mode` on what `fd` names. A mode passed to `mkdir` or `open` is cut by the
    /// umask the process inherited (one of 0277 makes a directory nobody may enter, even its
    /// owner): what the host creates gets its mode here instead.
    public static func setPrivateMode(_ fd: Int32, _ mode: mode_t) throws(Errno) {
        guard fchmod(fd, mode) == 0 else { throw Errno(rawValue: errno) }
    }

    /// Writes `bytes` to `temporary`, a new file (`O_EXCL|O_NOFOLLOW`), synced, and renames it
    /// over `path`. A step that fails removes the temporary: a full disk leaves no empty or
    /// partial file behind.
    public static func replace(_ path: FilePath, through temporary: FilePath, with bytes: [UInt8]) throws {
        let fd = try open(temporary, .create)
        do {
            try fd.closeAfter {
                _ = try fd.writeAll(bytes)
                guard fdatasync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
            }
            try rename(temporary, to: path)
        } catch {
            try? remove(temporary)
            throw error
        }
    }

    /// `renameat`: the entry itself moves, whatever it is. Not `replacing`: `EEXIST` when
    /// anything has the new name (`renameat2(RENAME_NOREPLACE)`), where plain `rename` would
    /// silently replace an empty directory or a file.
    public static func rename(_ source: FilePath, to destination: FilePath, replacing: Bool = true) throws(Errno) {
        try withParent(of: source) { from, fromName throws(Errno) in
            try withParent(of: destination) { to, toName throws(Errno) in
                let renamed =
                    replacing ? renameat(from, fromName, to, toName) : wh_renameat_noreplace(from, fromName, to, toName)
                guard renamed == 0 else { throw Errno(rawValue: errno) }
            }
        }
    }

    /// `unlinkat`: removes a file, symlink, FIFO or socket as itself (`EISDIR` for a directory);
    /// with `directory`, an empty directory (`AT_REMOVEDIR`).
    public static func remove(_ path: FilePath, directory: Bool = false) throws(Errno) {
        try withParent(of: path) { parent, name throws(Errno) in
            guard unlinkat(parent, name, directory ? AT_REMOVEDIR : 0) == 0 else { throw Errno(rawValue: errno) }
        }
    }

    /// Entry names and kinds, sorted by name's bytes; nil when `path` is missing or is not a
    /// directory (a symlink to one included). Each name is the entry's bytes exactly, valid
    /// UTF-8 or not, so a path made with it names that entry (a `String` would replace bad
    /// bytes with U+FFFD and name nothing). A listing that fails part-way is thrown, never
    /// taken for the end of the directory.
    public static func entries(_ path: FilePath) throws(Errno) -> [(name: FilePath.Component, kind: EntryKind)]? {
        try listing(path)?.map { entry throws(Errno) in
            // A name from readdir is one component ("." and ".." are skipped): never nil.
            guard let component = FilePath.Component(platformString: entry.name) else { throw .invalidArgument }
            return (component, entry.kind)
        }
    }

    /// `entries` with each name as a `String` (a name that is not UTF-8 gets U+FFFD): for
    /// matching the names the host writes. No `FilePath.Component` is made: each costs about
    /// a millisecond in a debug build, and this lists a session directory on every compaction.
    public static func entryNames(_ path: FilePath) throws(Errno) -> [(name: String, kind: EntryKind)]? {
        try listing(path)?.map { entry in
            // The bytes without their NUL terminator.
            (String(decoding: entry.name.dropLast().lazy.map { UInt8(bitPattern: $0) }, as: UTF8.self), entry.kind)
        }
    }

    /// What `entries` and `entryNames` list: each name's bytes and kind, sorted by the bytes.
    private static func listing(_ path: FilePath) throws(Errno) -> [(name: Name, kind: EntryKind)]? {
        let fd: FileDescriptor
        do {
            fd = try openDirectory(path)
        } catch  where error == .noSuchFileOrDirectory || error == .notDirectory || error == .tooManySymbolicLinkLevels
        {
            return nil
        }
        // fdopendir owns the descriptor from here: closedir closes it.
        guard let stream = fdopendir(fd.rawValue) else {
            let error = Errno(rawValue: errno)
            try? fd.close()
            throw error
        }
        defer { closedir(stream) }
        var found: [(name: Name, kind: EntryKind)] = []
        while let name = try nextName(stream) {
            var status = stat()
            // Gone since it was listed: no longer an entry.
            guard fstatat(fd.rawValue, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
                if errno == ENOENT { continue }
                throw Errno(rawValue: errno)
            }
            found.append((name, kind(of: status.st_mode)))
        }
        return found.sorted { $0.name.lexicographicallyPrecedes($1.name) }
    }

    /// An entry's name as its bytes, NUL-terminated: what `openat`, `fstatat`, `unlinkat` and
    /// the like take, exactly as `readdir` gave it.
    private typealias Name = [CChar]

    /// The next entry's name but `.` and `..`, nil at the end of the directory. `readdir`
    /// returns NULL both at the end and on an error: errno, cleared before the call, tells
    /// them apart, so an error part-way is thrown rather than cutting the listing short.
    private static func nextName(_ stream: OpaquePointer) throws(Errno) -> Name? {
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                guard errno == 0 else { throw Errno(rawValue: errno) }
                return nil
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                bytes.prefix { $0 != 0 }.map { CChar(bitPattern: $0) } + [0]
            }
            if name != dot, name != dotDot { return name }
        }
    }

    private static let dot: Name = [0x2E, 0]
    private static let dotDot: Name = [0x2E, 0x2E, 0]

    /// Whether the open `descriptor` is the entry `path` names now, walked without following a
    /// symlink: (st_dev, st_ino) of `fstat` against those of the entry at the path.
    /// False when nothing has the name, a symlink is on the way, or another file has it.
    /// (`inKernel`: whether `openat2` resolves the path, as it does wherever it works.)
    public static func isAt(
        _ descriptor: FileDescriptor, _ path: FilePath, inKernel: Bool = kernelResolvesWithoutSymlinks
    ) throws(Errno) -> Bool {
        try isAt(identity(of: descriptor), path, inKernel: inKernel)
    }

    /// An open file's (st_dev, st_ino): what it is wherever it moves, for as long as it is open.
    public static func identity(of descriptor: FileDescriptor) throws(Errno) -> FileIdentity {
        var open = stat()
        guard fstat(descriptor.rawValue, &open) == 0 else { throw Errno(rawValue: errno) }
        return FileIdentity(device: UInt64(open.st_dev), inode: UInt64(open.st_ino))
    }

    /// `isAt` for an open file whose identity is known.
    public static func isAt(_ identity: FileIdentity, _ path: FilePath, inKernel: Bool = kernelResolvesWithoutSymlinks)
        throws(Errno) -> Bool
    {
        do {
            let named = try entryStatus(path, inKernel: inKernel)
            return UInt64(named.st_dev) == identity.device && UInt64(named.st_ino) == identity.inode
        } catch  where error == .noSuchFileOrDirectory || error == .notDirectory || error == .tooManySymbolicLinkLevels
        {
            return false
        }
    }

    /// The status of the entry `path` names (a symlink's own), reached without following a
    /// symlink on the way: resolved by the kernel in one `openat2` where it has one, else
    /// walked a directory at a time. Every durable write is checked so (`isAt`): the walk's two
    /// calls per component were a third of a small save's CPU.
    static func entryStatus(_ path: FilePath, inKernel: Bool) throws(Errno) -> stat {
        var status = stat()
        if inKernel {
            let entry = path.withPlatformString { name in
                retryingOnInterrupt { wh_open_path_resolving_no_symlinks(name) }
            }
            guard entry >= 0 else { throw Errno(rawValue: errno) }
            defer { Glibc.close(entry) }
            guard fstat(entry, &status) == 0 else { throw Errno(rawValue: errno) }
            return status
        }
        return try withParent(of: path) { parent, name throws(Errno) in
            guard fstatat(parent, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { throw Errno(rawValue: errno) }
            return status
        }
    }

    /// Whether `openat2` works here (Linux 5.6 and later, unless a sandbox refuses it).
    public static let kernelResolvesWithoutSymlinks: Bool = {
        let root = wh_open_path_resolving_no_symlinks("/")
        guard root >= 0 else { return false }
        Glibc.close(root)
        return true
    }()

    /// Removes `path` whatever it is, a directory with everything under it, each entry as
    /// itself: a symlink is unlinked, never followed, so nothing outside `path` is touched.
    /// Iterative and descriptor-relative, so a planted tree of any depth neither overflows the
    /// stack nor costs a walk from `/` per entry: it descends with `openat(O_NOFOLLOW)` holding
    /// one descriptor, and climbs back with `..` only to the directory it came from (its
    /// (st_dev, st_ino) remembered on the way down), failing with `ESTALE` if the tree was moved
    /// meanwhile rather than removing anything outside it.
    public static func removeTree(_ path: FilePath) throws(Errno) {
        guard try kind(path) == .directory else {
            do {
                return try remove(path)
            } catch .noSuchFileOrDirectory {
                return
            }
        }
        var current = try openDirectory(path).rawValue
        defer { Glibc.close(current) }
        // Per level below `path`: the identity of the directory above and this one's name.
        var climb: [(parent: (dev: UInt, ino: UInt), name: Name)] = []
        while true {
            if let child = try removeEntriesUntilDirectory(in: current) {
                var status = stat()
                guard fstat(current, &status) == 0 else { throw Errno(rawValue: errno) }
                let next = retryingOnInterrupt {
                    openat(current, child, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
                }
                guard next >= 0 else { throw Errno(rawValue: errno) }
                Glibc.close(current)
                current = next
                climb.append(((UInt(status.st_dev), UInt(status.st_ino)), child))
                continue
            }
            guard let level = climb.popLast() else { break }
            let parent = retryingOnInterrupt {
                openat(current, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
            }
            guard parent >= 0 else { throw Errno(rawValue: errno) }
            Glibc.close(current)
            current = parent
            var status = stat()
            guard fstat(current, &status) == 0 else { throw Errno(rawValue: errno) }
            guard UInt(status.st_dev) == level.parent.dev, UInt(status.st_ino) == level.parent.ino else {
                throw .staleNFSFileHandle
            }
            guard unlinkat(current, level.name, AT_REMOVEDIR) == 0 else { throw Errno(rawValue: errno) }
        }
        try remove(path, directory: true)
    }

    /// Unlinks the entries of the directory open as `directory` that are not directories, until
    /// the first directory: its name, or nil when the directory is left empty.
    private static func removeEntriesUntilDirectory(in directory: Int32) throws(Errno) -> Name? {
        let listing = dup(directory)
        guard listing >= 0 else { throw Errno(rawValue: errno) }
        // fdopendir owns the duplicate (and its read position) from here: closedir closes it.
        guard let stream = fdopendir(listing) else {
            let error = Errno(rawValue: errno)
            Glibc.close(listing)
            throw error
        }
        defer { closedir(stream) }
        rewinddir(stream)
        while let name = try nextName(stream) {
            var status = stat()
            guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
                if errno == ENOENT { continue }
                throw Errno(rawValue: errno)
            }
            if kind(of: status.st_mode) == .directory { return name }
            guard unlinkat(directory, name, 0) == 0 || errno == ENOENT else { throw Errno(rawValue: errno) }
        }
        return nil
    }

    /// Runs `body` with the descriptor of the directory holding `path`'s last component, and
    /// that component. `path` must name an entry, not `/`.
    private static func withParent<T>(of path: FilePath, _ body: (Int32, Name) throws(Errno) -> T) throws(Errno) -> T {
        let (components, absolute) = split(path)
        guard let name = components.last, name != dotDot, name != dot else { throw .invalidArgument }
        let parent = try walk(components.dropLast(), from: absolute, flags: wh_open_flag_path())
        defer { if parent != AT_FDCWD { Glibc.close(parent) } }
        return try body(parent, name)
    }

    /// Opens the directory the components lead to, each step `O_DIRECTORY|O_NOFOLLOW`; the
    /// last one opened with `flags`. `AT_FDCWD` for a relative path with no components.
    private static func walk(_ components: some Collection<Name>, from root: Bool, flags: Int32) throws(Errno) -> Int32
    {
        var current = AT_FDCWD
        if root {
            current = retryingOnInterrupt {
                Glibc.open("/", (components.isEmpty ? flags : wh_open_flag_path()) | O_DIRECTORY | O_CLOEXEC)
            }
            guard current >= 0 else { throw Errno(rawValue: errno) }
        }
        for (index, component) in components.enumerated() {
            let last = index == components.count - 1
            let next = retryingOnInterrupt {
                openat(
                    current, component, (last ? flags : wh_open_flag_path()) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
            }
            let error = errno
            if current != AT_FDCWD { Glibc.close(current) }
            guard next >= 0 else { throw Errno(rawValue: error) }
            current = next
        }
        return current
    }

    /// The path's components, each its bytes exactly (a name that is not UTF-8 included),
    /// and whether it is absolute. Plain byte work: `FilePath`'s component view costs
    /// milliseconds a call in a debug build, and this runs for every file operation.
    private static func split(_ path: FilePath) -> (components: [Name], absolute: Bool) {
        path.withPlatformString { start in
            var components: [Name] = []
            var component: Name = []
            var index = 0
            while start[index] != 0 {
                if start[index] != 0x2F {
                    component.append(start[index])
                } else if !component.isEmpty {
                    components.append(component + [0])
                    component.removeAll(keepingCapacity: true)
                }
                index += 1
            }
            if !component.isEmpty { components.append(component + [0]) }
            return (components, start[0] == 0x2F)
        }
    }

    private static func kind(of mode: mode_t) -> EntryKind {
        switch mode & S_IFMT {
        case S_IFREG: .file
        case S_IFDIR: .directory
        case S_IFLNK: .symlink
        default: .other
        }
    }

    private static func requireFile(_ mode: mode_t) throws(Errno) {
        switch kind(of: mode) {
        case .file: return
        case .directory: throw .isDirectory
        case .symlink: throw .tooManySymbolicLinkLevels
        case .other: throw .noSuchAddressOrDevice
        }
    }
}
