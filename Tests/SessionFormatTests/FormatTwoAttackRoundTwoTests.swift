import BrowserModel
import Foundation
import HostLimits
import Testing

@testable import SessionFormat

/// Second hostile round on format 2 (issue 14): the copy check (`historyPayload(at:)`) and the
/// realization check (`history(at:)`) must agree on every frame, or a frame compaction copies
/// forward is refused only once no other generation holds the tab. (The copy check first read
/// only the identifier on the wire, and a frame with a second identifier field, or without a
/// valid history, passed it; it now checks what realizing checks.)
@Suite struct LeadingIdentifierTests {
    typealias T = FormatTwoAttackTests

    /// Tab 1 and tab 2, each with `payload(id, encoded)` as its frame's payload (`encoded`: the
    /// payload SwiftProtobuf writes for that tab's one-entry history).
    static func twoTabs(_ payload: (Int64, [UInt8]) throws -> [UInt8]) throws -> [UInt8] {
        var crafted = T.Crafted()
        for id: Int64 in [1, 2] {
            let encoded = Array(try T.frame(id, urls: ["https://\(id).example/"]).dropFirst(Framing.recordHeaderSize))
            let frame = try Framing.record(.navigation, payload: try payload(id, encoded))
            crafted.entries.append(T.entry(id, history: (crafted.section.count, frame.count), strings: (0, 0, 0)))
            crafted.section += frame
        }
        return crafted.bytes
    }

    /// Both checks, for tab 1: whether each takes the frame as the tab's.
    static func verdicts(_ bytes: [UInt8]) throws -> (copy: Bool, realize: Bool) {
        let reader = try SnapshotReader(InMemoryBytes(bytes))
        return ((try? reader.historyPayload(at: 0)) != nil, (try? reader.history(at: 0)) != nil)
    }

    /// Tab 1's frame holds tab 2's history behind a leading `08 01`: protobuf keeps the last
    /// identifier (2), so realizing refuses it, but the copy check reads 1 and takes it.
    @Test func aSecondIdentifierFieldDoesNotPassTheCopyCheck() throws {
        let bytes = try Self.twoTabs { id, encoded in
            id == 1
                ? [0x08, 0x01] + (try T.frame(2, urls: ["https://2.example/"])).dropFirst(Framing.recordHeaderSize)
                : encoded
        }
        let (copy, realize) = try Self.verdicts(bytes)
        #expect(!realize)
        #expect(copy == realize, "historyFrame copies forward a frame history(at:) refuses as another tab's")
    }

    /// Tab 1's own frame with a current index past its one entry (`10 63`): its identifier
    /// reads right, its history does not; the copy check takes it all the same.
    @Test func aFrameWithoutAValidHistoryDoesNotPassTheCopyCheck() throws {
        let bytes = try Self.twoTabs { id, encoded in
            id == 1 ? [0x08, 0x01, 0x10, 0x63] + encoded.dropFirst(2) : encoded
        }
        let (copy, realize) = try Self.verdicts(bytes)
        #expect(!realize)
        #expect(copy == realize, "historyFrame copies forward a frame history(at:) refuses")
    }

    /// The tab's own identifier written as an over-long varint (valid protobuf: 1 as 81 80 80 00):
    /// both checks take it.
    @Test func anOverLongVarintIdentifierIsReadAlikeByBoth() throws {
        let bytes = try Self.twoTabs { id, encoded in
            id == 1 ? [0x08, 0x81, 0x80, 0x80, 0x00] + encoded.dropFirst(2) : encoded
        }
        let (copy, realize) = try Self.verdicts(bytes)
        #expect(copy && realize)
    }

    /// An 11-byte varint for the identifier (malformed protobuf) and a 10-byte one whose last
    /// byte carries bits past 64 (1 + 2^64·k): neither check may take a frame the other refuses.
    @Test(arguments: [
        [0x08] + [UInt8](repeating: 0x80, count: 10) + [0x01],
        [0x08, 0x81] + [UInt8](repeating: 0x80, count: 8) + [0x7E],
    ]) func malformedIdentifierVarintsAgree(prefix: [UInt8]) throws {
        let bytes = try Self.twoTabs { id, encoded in id == 1 ? prefix + encoded.dropFirst(2) : encoded }
        let (copy, realize) = try Self.verdicts(bytes)
        #expect(copy == realize, "copy \(copy), realize \(realize)")
    }
}
