import BrowserModel
import Foundation
import Glibc
import Platform
import SystemPackage

/// One thing `stress --hostile` did to the world around the store. Paths are under the root
/// unless they name the canary.
public enum HostileEvent: Sendable, CustomStringConvertible {
    /// The filesystem under the root was filled to ENOSPC by a file of the campaign's.
    case filledDisk(bytes: Int)
    /// That file was removed: space came back.
    case freedDisk
    case symlink(path: String, target: String)
    /// A FIFO, where a session file's name is read: opening it for reading would block.
    case fifo(path: String)
    /// A directory where a session file's name is read.
    case directory(path: String)
    /// A file of mode 000 (only when not root: root reads it anyway).
    case unreadableFile(path: String)

    /// What an event did, without its paths: the words its description (and its line in the
    /// report's `hostile_log`) starts with.
    public enum Kind: String, CaseIterable, Sendable {
        case filledDisk = "filled the disk"
        case freedDisk = "freed the disk"
        case symlink = "planted a symlink"
        case fifo = "planted a FIFO"
        case directory = "planted a directory"
        case unreadableFile = "planted an unreadable file"

        /// The kind of a `hostile_log` line, "step N: what"; nil for a line no event wrote.
        public init?(logLine: String) {
            guard let colon = logLine.firstRange(of: ": ") else { return nil }
            let what = logLine[colon.upperBound...]
            guard let kind = Self.allCases.first(where: { what.hasPrefix($0.rawValue) }) else { return nil }
            self = kind
        }
    }

    public var kind: Kind {
        switch self {
        case .filledDisk: .filledDisk
        case .freedDisk: .freedDisk
        case .symlink: .symlink
        case .fifo: .fifo
        case .directory: .directory
        case .unreadableFile: .unreadableFile
        }
    }

    public var description: String {
        switch self {
        case .filledDisk(let bytes): "\(kind.rawValue) (\(bytes) bytes)"
        case .freedDisk: kind.rawValue
        case .symlink(let path, let target): "\(kind.rawValue) \(path) -> \(target)"
        case .fifo(let path), .directory(let path), .unreadableFile(let path): "\(kind.rawValue) at \(path)"
        }
    }
}

/// Files outside the root that planted symlinks point at. Nothing the host does may change
/// them: a store that follows a symlink to delete, create or truncate shows up here.
struct Canary {
    let directory: FilePath
    var file: FilePath { directory.appending("canary") }
    var nestedFile: FilePath { directory.appending("nested").appending("canary") }
    let contents: [UInt8]

    init(directory: FilePath, seed: UInt64) throws {
        self.directory = directory
        contents = Array(
            "canary of the stress campaign with seed \(seed): a symlink was followed if this changed\n".utf8)
        for path in [directory, directory.appending("nested")] where mkdir(path.string, 0o700) != 0 && errno != EEXIST {
            throw StressError.hostile("mkdir \(path): \(Errno(rawValue: errno))")
        }
        for path in [file, nestedFile] {
            guard FileManager.default.createFile(atPath: path.string, contents: Data(contents)) else {
                throw StressError.hostile("cannot write the canary \(path)")
            }
        }
    }

    /// What changed since it was made, or nil.
    func damage() -> String? {
        for path in [file, nestedFile] {
            guard let data = FileManager.default.contents(atPath: path.string) else { return "\(path) is gone" }
            guard Array(data) == contents else { return "\(path) was rewritten (\(data.count) bytes)" }
        }
        let entries = Set((try? FileManager.default.contentsOfDirectory(atPath: directory.string)) ?? [])
        guard entries == ["canary", "nested"] else {
            return
                "\(directory) holds \(entries.count) entries, \(entries.sorted().prefix(10))\(entries.count > 10 ? " and more" : "")"
        }
        return nil
    }
}

/// A file of the campaign's on the root's filesystem that takes every free block, and gives
/// them back.
struct DiskFiller {
    let path: FilePath
    private(set) var isFull = false

    /// Writes until the filesystem says ENOSPC: megabytes, then pages, so nothing is left.
    /// The bytes written.
    mutating func fill() throws -> Int {
        let fd = open(path.string, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw StressError.hostile("open \(path): \(Errno(rawValue: errno))") }
        defer { close(fd) }
        isFull = true
        var total = 0
        for chunk in [1 << 20, 4096, 512] {
            let bytes = [UInt8](repeating: 0xA5, count: chunk)
            while true {
                let written = retryingOnInterrupt { bytes.withUnsafeBytes { write(fd, $0.baseAddress, chunk) } }
                if written > 0 {
                    total += written
                    continue
                }
                if written < 0, errno != ENOSPC {
                    throw StressError.hostile("write \(path): \(Errno(rawValue: errno))")
                }
                break
            }
        }
        return total
    }

    /// Throws when the filler stays (the disk then stays full): a campaign that went on would
    /// blame the host for saves that cannot land.
    mutating func free() throws(StressError) {
        guard unlink(path.string) == 0 || errno == ENOENT else {
            throw .hostile("unlink \(path): \(Errno(rawValue: errno))")
        }
        isFull = false
    }
}

/// The entries `stress --hostile` plants, chosen by the campaign's seed. Names follow
/// docs/storage-format.md: the ones a store reads (`snapshot-<16 hex>`, `journal-<16 hex>`,
/// their `.tmp`), the supervisor's `windows.order.tmp` and `windows/<UUID>`.
struct HostilePlanter {
    let root: FilePath
    let canary: Canary
    /// Root reads a file of mode 000 anyway: then no unreadable files are planted.
    let isRoot = geteuid() == 0

    private enum Entry: CaseIterable {
        case symlinkToDirectory, symlinkToFile, fifo, directory, unreadableFile
    }

    /// Plants one entry in `window`'s session (or, now and then, in the supervisor's files).
    /// Nil when there was nowhere to plant it.
    func plant(in window: String, using random: inout SeededGenerator) throws -> HostileEvent? {
        let windowDirectory = DiskLayout.windowDirectory(root: root, name: window)
        switch Int.random(in: 0..<8, using: &random) {
        case 0:
            return try symlink(root.appending(DiskLayout.orderTemporary), to: canary.file)
        case 1:
            // A window that is not one: on the next supervisor start its sessions would land
            // in the canary.
            return try symlink(DiskLayout.windowDirectory(root: root, name: seededUUID(&random)), to: canary.directory)
        default:
            let browsers = BrowserKind.allCases.map { DiskLayout.browserDirectory(window: windowDirectory, kind: $0) }
                .filter(isDirectory)
            guard let directory = browsers.randomElement(using: &random) else { return nil }
            let next = nextGeneration(in: directory)
            let names = [
                "planted", DiskLayout.snapshotName(next), DiskLayout.journalName(next),
                DiskLayout.snapshotName(next) + DiskLayout.temporarySuffix,
            ]
            let path = directory.appending(names[Int.random(in: 0..<names.count, using: &random)])
            let entries = Entry.allCases.filter { $0 != .unreadableFile || !isRoot }
            switch entries[Int.random(in: 0..<entries.count, using: &random)] {
            case .symlinkToDirectory: return try symlink(path, to: canary.directory)
            case .symlinkToFile: return try symlink(path, to: canary.file)
            case .fifo:
                guard mkfifo(path.string, 0o600) == 0 else { return try failed("mkfifo", path) }
                return .fifo(path: relative(path))
            case .directory:
                guard mkdir(path.string, 0o700) == 0 else { return try failed("mkdir", path) }
                return .directory(path: relative(path))
            case .unreadableFile:
                let fd = open(path.string, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0)
                guard fd >= 0 else { return try failed("open", path) }
                close(fd)
                return .unreadableFile(path: relative(path))
            }
        }
    }

    private func symlink(_ path: FilePath, to target: FilePath) throws -> HostileEvent? {
        guard Glibc.symlink(target.string, path.string) == 0 else { return try failed("symlink", path) }
        return .symlink(path: relative(path), target: target.string)
    }

    /// An entry already there (planted before, or the host's own) is no event; anything else is
    /// the campaign's own failure.
    private func failed(_ call: String, _ path: FilePath) throws -> HostileEvent? {
        if errno == EEXIST || errno == ENOENT || errno == ENOSPC { return nil }
        throw StressError.hostile("\(call) \(path): \(Errno(rawValue: errno))")
    }

    private func relative(_ path: FilePath) -> String { String(path.string.dropFirst(root.string.count + 1)) }

    private func isDirectory(_ path: FilePath) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path.string, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// One past the highest generation a snapshot or journal in `directory` names: a planted
    /// entry there is the one a store would read first.
    private func nextGeneration(in directory: FilePath) -> UInt64 {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.string)) ?? []
        let generations = names.compactMap { name in
            DiskLayout.generation(of: name, prefix: DiskLayout.snapshotPrefix)
                ?? DiskLayout.generation(of: name, prefix: DiskLayout.journalPrefix)
        }
        return (generations.max() ?? 0) &+ 1
    }

    private func seededUUID(_ random: inout SeededGenerator) -> String {
        let (high, low) = (random.next(), random.next())
        let digits = hex(high) + hex(low)
        let groups = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(digits.dropFirst(range.lowerBound).prefix(range.count))
        }
        return groups.joined(separator: "-").uppercased()
    }

    private func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
