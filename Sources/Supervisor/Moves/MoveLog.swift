import BrowserModel
import Foundation
import HostCoordination
import HostLimits
import Logging
import Platform
import SessionFormat
import SystemPackage

/// A move between windows as the supervisor's log holds it: what finishing or undoing it after
/// a restart needs (docs/recovery.md, "Moving a tab between windows").
struct MoveEntry: Equatable, Sendable {
    let move: MoveID
    let source: UUID
    let tab: Int64
    let destination: UUID
    let incognito: Bool
}

/// `ROOT/moves`: the moves under way, the coordinator's log of two-phase commit. One fixed lane
/// of `laneBytes` per move, at most `lanes` (each window takes part in one move at a time, so
/// `Limits.maxOpenWindows` lanes are never all taken). A lane is written in place and synced
/// before the destination is asked to import: the file never changes size, so a write needs no
/// space. A lane is a page of its own, so a write torn by a power cut tears only that lane:
///
/// - torn while a move was recorded: the import was not sent yet (it waits for the sync), so a
///   lane that does not read is a move that never happened;
/// - torn while a move was cleared: the move had settled (the source's drop durable), so
///   forgetting it is what clearing meant.
///
/// A lane reads as: 8 bytes of magic, a CRC32C of the payload (little-endian), the payload
/// (move id, source UUID, tab id, destination UUID, incognito), zeros after.
enum MoveLog {
    static let laneBytes = 4096
    static let lanes = Limits.maxOpenWindows
    static let fileBytes = laneBytes * lanes
    static let magic = Array("whmove01".utf8)
    static let payloadBytes = 8 + 16 + 8 + 16 + 1
    static let contentBytes = magic.count + 4 + payloadBytes

    /// A lane's content (written in place; the zeros after it are the lane's already).
    static func encode(_ entry: MoveEntry) -> [UInt8] {
        var payload: [UInt8] = []
        payload.reserveCapacity(payloadBytes)
        withUnsafeBytes(of: entry.move.rawValue.littleEndian) { payload += $0 }
        withUnsafeBytes(of: entry.source.uuid) { payload += $0 }
        withUnsafeBytes(of: entry.tab.littleEndian) { payload += $0 }
        withUnsafeBytes(of: entry.destination.uuid) { payload += $0 }
        payload.append(entry.incognito ? 1 : 0)
        assert(payload.count == payloadBytes, "a lane's payload has one size")
        var content = magic
        withUnsafeBytes(of: CRC32C.checksum(payload).littleEndian) { content += $0 }
        return content + payload
    }

    /// What a lane holds.
    enum Lane: Equatable {
        case free
        case entry(MoveEntry)
        /// Neither zeros nor a whole entry: a write torn by a power cut (see above), or damage.
        case unreadable(String)
    }

    /// Reads one lane's bytes; every number is checked before it is believed.
    static func decode(_ lane: ArraySlice<UInt8>) -> Lane {
        guard lane.contains(where: { $0 != 0 }) else { return .free }
        let bytes = Array(lane.prefix(contentBytes))
        guard bytes.count == contentBytes, Array(bytes.prefix(magic.count)) == magic else {
            return .unreadable("no move entry's magic")
        }
        let payload = Array(bytes.suffix(payloadBytes))
        guard CRC32C.checksum(payload) == number(bytes, at: magic.count, as: UInt32.self) else {
            return .unreadable("checksum mismatch")
        }
        let tab = Int64(bitPattern: number(payload, at: 24, as: UInt64.self))
        guard let move = MoveID(rawValue: number(payload, at: 0, as: UInt64.self)),
            (1...Limits.maxWebStateID).contains(tab), payload[48] <= 1
        else {
            return .unreadable("a move id, tab id or flag out of range")
        }
        let source = uuid(payload, at: 8)
        let destination = uuid(payload, at: 32)
        guard source != destination else { return .unreadable("a move from a window to itself") }
        return .entry(
            MoveEntry(move: move, source: source, tab: tab, destination: destination, incognito: payload[48] == 1))
    }

    private static func number<T: FixedWidthInteger>(_ bytes: [UInt8], at offset: Int, as: T.Type) -> T {
        bytes[offset..<(offset + MemoryLayout<T>.size)].reversed().reduce(T.zero) { $0 << 8 | T($1) }
    }

    private static func uuid(_ bytes: [UInt8], at offset: Int) -> UUID {
        var value: uuid_t = UUID().uuid
        withUnsafeMutableBytes(of: &value) { raw in
            for index in 0..<16 { raw[index] = bytes[offset + index] }
        }
        return UUID(uuid: value)
    }
}

/// The log as the supervisor keeps it: the lanes in use, the file held open for writes in place
/// (made on the first move, so a host that never moves a tab never writes it).
final class MoveBook {
    private let path: FilePath
    private let logger: Logger
    private var file: FileDescriptor?
    /// The lanes in use and what each holds, as on disk.
    private(set) var lanes: [Int: MoveEntry] = [:]

    /// Reads the log at the start: the moves a supervisor before left under way. A lane that
    /// does not read is a move that never reached its destination (`MoveLog`): logged, freed.
    /// Something else under its name (a symlink, a directory, a FIFO) is set aside as itself,
    /// never followed; a log that is there and does not read (EIO) stops the start, as its
    /// lanes are what keeps a move from being undone after its commit.
    init(files: SupervisorFiles, logger: Logger) throws(SupervisorError) {
        path = files.root.appending(DiskLayout.moves)
        self.logger = logger
        let bytes: [UInt8]
        do {
            bytes = try Self.read(path)
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            return
        } catch let error as Errno
            where [.tooManySymbolicLinkLevels, .isDirectory, .noSuchAddressOrDevice].contains(error)
        {
            let away = try? files.setAsideRootFile(DiskLayout.moves, at: Date())
            logger.error(
                "\(DiskLayout.moves) is not a regular file (\(error)): not followed, set aside; no move was under way",
                metadata: ["path": "\(away?.string ?? "-")"])
            return
        } catch {
            throw .setup("read \(path)", (error as? Errno) ?? .ioError)
        }
        for lane in 0..<min(MoveLog.lanes, bytes.count / MoveLog.laneBytes) {
            let start = lane * MoveLog.laneBytes
            switch MoveLog.decode(bytes[start..<(start + MoveLog.laneBytes)]) {
            case .free: break
            case .entry(let entry): lanes[lane] = entry
            case .unreadable(let reason):
                logger.warning(
                    "a lane of \(DiskLayout.moves) does not read: a move recorded when a power cut tore it never reached its destination",
                    metadata: ["lane": "\(lane)", "reason": "\(reason)"])
            }
        }
        assert(lanes.count <= MoveLog.lanes, "no more moves than lanes")
    }

    /// The file's bytes, never more than one byte past its size (which says it is not the log's).
    private static func read(_ path: FilePath) throws -> [UInt8] {
        let fd = try NoFollow.open(path, .read)
        return try fd.closeAfter {
            var bytes = [UInt8](repeating: 0, count: MoveLog.fileBytes + 1)
            var count = 0
            while count < bytes.count {
                let read = try bytes[count...].withUnsafeMutableBytes {
                    try fd.read(fromAbsoluteOffset: Int64(count), into: $0)
                }
                if read == 0 { break }
                count += read
            }
            return Array(bytes.prefix(count))
        }
    }

    /// Records `entry` in a free lane, durably: when this returns a power cut leaves it on disk.
    func record(_ entry: MoveEntry) throws -> Int {
        guard let lane = (0..<MoveLog.lanes).first(where: { lanes[$0] == nil }) else {
            throw Errno.noSpace
        }
        let fd = try openFile()
        _ = try fd.writeAll(toAbsoluteOffset: Int64(lane * MoveLog.laneBytes), MoveLog.encode(entry))
        guard fdatasync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
        lanes[lane] = entry
        return lane
    }

    /// Frees the lane of a move that settled or was undone. Not synced: a lane still on disk
    /// after a power cut is asked about again, and every answer then finds the move whole.
    func clear(_ move: MoveID) {
        guard let lane = lanes.first(where: { $0.value.move == move })?.key else { return }
        lanes[lane] = nil
        do {
            let fd = try openFile()
            let zeros = [UInt8](repeating: 0, count: MoveLog.contentBytes)
            _ = try fd.writeAll(toAbsoluteOffset: Int64(lane * MoveLog.laneBytes), zeros)
        } catch {
            logger.error(
                "cannot clear a settled move from \(DiskLayout.moves): it is asked about again at the next start",
                metadata: ["move": "\(move)", "error": "\(error)"])
        }
    }

    /// The log held open, made anew (zeros, durably) when missing or of another size.
    private func openFile() throws -> FileDescriptor {
        if let file { return file }
        if let fd = try? NoFollow.open(path, .write) {
            var status = stat()
            if fstat(fd.rawValue, &status) == 0, status.st_size == MoveLog.fileBytes {
                file = fd
                return fd
            }
            try? fd.close()
        }
        var bytes = [UInt8](repeating: 0, count: MoveLog.fileBytes)
        for (lane, entry) in lanes {
            let content = MoveLog.encode(entry)
            bytes.replaceSubrange(
                (lane * MoveLog.laneBytes)..<(lane * MoveLog.laneBytes + content.count), with: content)
        }
        let temporary = path.removingLastComponent().appending(DiskLayout.movesTemporary)
        try NoFollow.removeTree(temporary)
        try NoFollow.replace(path, through: temporary, with: bytes)
        try SupervisorFiles.syncDirectory(path.removingLastComponent())
        let fd = try NoFollow.open(path, .write)
        file = fd
        return fd
    }

    deinit { try? file?.close() }
}
