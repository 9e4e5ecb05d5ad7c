import BrowserModel
import Foundation
import HostLimits
import IOUring
import SystemPackage
import TestSupport
import Testing

@testable import SessionFormat
@testable import SessionStore

/// Second hostile round on format 2 (issue 14), on the first round's fixes: a frame copied
/// forward was checked by reading only the payload's first field, while realizing decodes it
/// whole. A frame that starts `08 <A>` but does not realize (another tab's history behind it,
/// as protobuf keeps the last identifier; or no valid history at all) was copied forward until
/// the generations that held A's history were gone, and A then degraded to one page. The copy
/// now checks what realizing checks, and the tab is realized through the fallback instead.
@Suite struct LeadingIdentifierBypassTests {
    /// How tab A's frame is replaced, keeping its length so nothing else in the file moves.
    enum Disguise: String, CaseIterable, Sendable {
        /// B's payload with A's identifier in front and B's `last_committed_item_index`
        /// (`10 nn`) dropped: read on the wire as A's, decoded as B's (the last `08` wins).
        case otherTabsHistoryBehindOwnID
        /// A's own payload with its `last_committed_item_index` set to 99 of 3 entries: A's on
        /// the wire and decoded, but no history.
        case ownIDButNoValidHistory

        func payload(idA: UInt8, idB: UInt8, a: [UInt8], b: [UInt8]) throws -> [UInt8] {
            // SwiftProtobuf writes fields in number order: identifier, then the last committed index.
            for (payload, id) in [(a, idA), (b, idB)] {
                try #require(
                    payload.count > 4 && payload[0] == 0x08 && payload[1] == id && payload[2] == 0x10
                        && payload[3] < 0x80)
            }
            return switch self {
            case .otherTabsHistoryBehindOwnID: [0x08, idA, 0x08, idB] + b.dropFirst(4)
            case .ownIDButNoValidHistory: [0x08, idA, 0x10, 99] + a.dropFirst(4)
            }
        }
    }

    /// Replaces tab A's frame (entry 0 of the newest snapshot) as `disguise` says, its
    /// checksum made right; realizing A from that snapshot must then fail.
    private static func disguise(_ disguise: Disguise, in directory: FilePath) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.string).filter {
            $0.hasPrefix(DiskLayout.snapshotPrefix)
        }.sorted()
        let url = URL(fileURLWithPath: directory.appending(try #require(names.last)).string)
        var bytes = Array(try Data(contentsOf: url))
        let reader = try SnapshotReader(InMemoryBytes(bytes))
        let frameA = try Framing.record(.navigation, payload: reader.historyPayload(at: 0))
        let payload = try disguise.payload(
            idA: UInt8(reader.id(at: 0).rawValue), idB: UInt8(reader.id(at: 1).rawValue),
            a: try reader.historyPayload(at: 0), b: try reader.historyPayload(at: 1))
        let disguised = try Framing.record(.navigation, payload: payload)
        try #require(disguised.count == frameA.count)
        let at = try #require(
            (0...(bytes.count - frameA.count)).first { Array(bytes[$0..<$0 + frameA.count]) == frameA })
        bytes.replaceSubrange(at..<at + frameA.count, with: disguised)
        try Data(bytes).write(to: url)
        #expect(throws: SessionFormatError.self) { _ = try SnapshotReader(InMemoryBytes(bytes)).history(at: 0) }
    }

    /// Realized at once (0) tab A comes back whole from the generation before; after two
    /// compactions (2) it must too, as the swapped frames of the first round now do.
    @Test(arguments: Disguise.allCases, [0, 2])
    func aFrameRealizingRefusesIsNotCopiedForward(disguise: Disguise, compactionsFirst: Int) throws {
        try SwappedFrameTests.expectTabsAAndBWhole(compactionsFirst: compactionsFirst) { directory in
            try Self.disguise(disguise, in: directory)
        }
    }
}
