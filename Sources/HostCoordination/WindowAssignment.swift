import Foundation
import HostLimits

/// The window a spare worker is handed (`docs/shared-memory.md`, "The spare worker"): the facts
/// a worker spawned for the window reads from its command line (`WorkerLaunch`), as one fixed
/// message of `byteCount` bytes sent with the window's slot memfd over the spare's hand-over
/// socket. The spare holds no window before it; it reads the message as any input, checking
/// every field (`init(bytes:)`), and exits `WorkerExit.handOverRefused` on any it refuses.
///
/// Little-endian: magic `WHSP`, version (2 bytes), flags (2: bit 0 background), slot (4),
/// generation (4), window UUID (16), seq floor (8), tab floor (8, signed).
public struct WindowAssignment: Equatable, Sendable {
    public var slot: Int
    public var generation: UInt32
    public var window: UUID
    public var seqFloor: UInt64
    public var tabFloor: Int64
    public var inBackground: Bool

    public static let byteCount = 48
    static let magic: [UInt8] = Array("WHSP".utf8)
    static let version: UInt16 = 1
    static let backgroundFlag: UInt16 = 1

    public init(slot: Int, generation: UInt32, window: UUID, seqFloor: UInt64, tabFloor: Int64, inBackground: Bool) {
        self.slot = slot
        self.generation = generation
        self.window = window
        self.seqFloor = seqFloor
        self.tabFloor = tabFloor
        self.inBackground = inBackground
    }

    /// Why a hand-over message is refused.
    public enum Refusal: Error, Equatable, CustomStringConvertible {
        case length(Int)
        case magic
        case version(UInt16)
        case flags(UInt16)
        case slot(UInt32)
        case generation
        case seqFloor(UInt64)
        case tabFloor(Int64)

        public var description: String {
            switch self {
            case .length(let count): "\(count) bytes, not \(WindowAssignment.byteCount)"
            case .magic: "no WHSP magic"
            case .version(let version): "version \(version), not \(WindowAssignment.version)"
            case .flags(let flags): "unknown flags \(flags)"
            case .slot(let slot): "slot \(slot) is past the \(Limits.maxOpenWindows) a supervisor has"
            case .generation: "generation 0, which no spawn gives"
            case .seqFloor(let seq): "seq floor \(seq) is beyond what a window reaches"
            case .tabFloor(let tab): "tab floor \(tab) is outside what a window reaches"
            }
        }
    }

    /// The message as sent.
    public var bytes: [UInt8] {
        var bytes = Self.magic
        append(Self.version, to: &bytes)
        append(inBackground ? Self.backgroundFlag : 0, to: &bytes)
        append(UInt32(truncatingIfNeeded: slot), to: &bytes)
        append(generation, to: &bytes)
        withUnsafeBytes(of: window.uuid) { bytes.append(contentsOf: $0) }
        append(seqFloor, to: &bytes)
        append(UInt64(bitPattern: tabFloor), to: &bytes)
        assert(bytes.count == Self.byteCount, "the layout's fields fill the message exactly")
        return bytes
    }

    /// The message read back: every field checked, none trusted.
    public init(bytes: [UInt8]) throws(Refusal) {
        guard bytes.count == Self.byteCount else { throw .length(bytes.count) }
        guard Array(bytes[0..<4]) == Self.magic else { throw .magic }
        let version: UInt16 = Self.read(bytes, at: 4)
        guard version == Self.version else { throw .version(version) }
        let flags: UInt16 = Self.read(bytes, at: 6)
        guard flags & ~Self.backgroundFlag == 0 else { throw .flags(flags) }
        let slot: UInt32 = Self.read(bytes, at: 8)
        guard slot < Limits.maxOpenWindows else { throw .slot(slot) }
        let generation: UInt32 = Self.read(bytes, at: 12)
        guard generation != 0 else { throw .generation }
        let seqFloor: UInt64 = Self.read(bytes, at: 32)
        guard Limits.isValidCommandSeq(seqFloor) else { throw .seqFloor(seqFloor) }
        let tabFloor = Int64(bitPattern: Self.read(bytes, at: 40))
        guard (0...Limits.maxWebStateID).contains(tabFloor) else { throw .tabFloor(tabFloor) }
        let id = bytes[16..<32]
        self.init(
            slot: Int(slot), generation: generation,
            window: UUID(
                uuid: (
                    id[16], id[17], id[18], id[19], id[20], id[21], id[22], id[23],
                    id[24], id[25], id[26], id[27], id[28], id[29], id[30], id[31]
                )),
            seqFloor: seqFloor, tabFloor: tabFloor, inBackground: flags & Self.backgroundFlag != 0)
    }

    private func append<Integer: FixedWidthInteger>(_ value: Integer, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static func read<Integer: FixedWidthInteger>(_ bytes: [UInt8], at offset: Int) -> Integer {
        bytes[offset..<offset + MemoryLayout<Integer>.size].reversed().reduce(0) { $0 << 8 | Integer($1) }
    }
}
