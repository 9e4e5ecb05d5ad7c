import Foundation
import HostLimits
import Testing

@testable import HostCoordination

/// The hand-over message a spare worker reads: what the supervisor sends reads back field for
/// field, and every field out of its range, every length but one, is refused with its reason.
@Suite struct WindowAssignmentTests {
    static let assignment = WindowAssignment(
        slot: 7, generation: 3, window: UUID(), seqFloor: 12_345, tabFloor: 99, inBackground: true)

    @Test func theMessageReadsBackFieldForField() throws {
        let bytes = Self.assignment.bytes
        #expect(bytes.count == WindowAssignment.byteCount)
        #expect(try WindowAssignment(bytes: bytes) == Self.assignment)
        var foreground = Self.assignment
        foreground.inBackground = false
        foreground.seqFloor = Limits.maxCommandSeq
        foreground.tabFloor = Limits.maxWebStateID
        #expect(try WindowAssignment(bytes: foreground.bytes) == foreground)
    }

    /// `bytes` with `value` written little-endian at `offset`.
    private func patched<Integer: FixedWidthInteger>(_ value: Integer, at offset: Int) -> [UInt8] {
        var bytes = Self.assignment.bytes
        withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(offset..<offset + $0.count, with: $0) }
        return bytes
    }

    @Test func everyMalformedMessageIsRefusedWithItsReason() {
        let bytes = Self.assignment.bytes
        let cases: [([UInt8], WindowAssignment.Refusal)] = [
            ([], .length(0)),
            (Array(bytes.dropLast()), .length(47)),
            (bytes + [0], .length(49)),
            (patched(UInt8(ascii: "X"), at: 0), .magic),
            (patched(UInt16(2), at: 4), .version(2)),
            (patched(UInt16(3), at: 6), .flags(3)),
            (patched(UInt32(Limits.maxOpenWindows), at: 8), .slot(UInt32(Limits.maxOpenWindows))),
            (patched(UInt32.max, at: 8), .slot(.max)),
            (patched(UInt32(0), at: 12), .generation),
            (patched(UInt64.max, at: 32), .seqFloor(.max)),
            (patched(Int64(-1), at: 40), .tabFloor(-1)),
            (patched(Limits.maxWebStateID + 1, at: 40), .tabFloor(Limits.maxWebStateID + 1)),
        ]
        for (message, refusal) in cases {
            #expect(throws: refusal) { try WindowAssignment(bytes: message) }
        }
    }
}
