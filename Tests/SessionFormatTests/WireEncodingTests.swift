import BrowserModel
import Foundation
import HostLimits
import SwiftProtobuf
import Testing

@testable import SessionFormat

/// The store's own protobuf encoder writes exactly SwiftProtobuf's bytes for the message the
/// model maps to (`ModelStorage.swift`, the reference): every record and history it writes reads
/// as before, and a reader sees no difference.
@Suite struct WireEncodingTests {
    /// Each record the recorder wrote is what SwiftProtobuf writes for the message it decodes
    /// to (replaying those records rebuilds the list: `RoundTripTests`).
    @Test(arguments: [31, 32, 33] as [UInt64])
    func recordedBrowsingIsCanonicalProtobuf(seed: UInt64) throws {
        let profile = Profile(stateDirectory: "/unused")
        let list = WebStateList()
        let recorder = JournalRecorder(list: list)
        var browsing = RandomBrowsing(seed: seed)
        var payloads: [[UInt8]] = []
        for seq in 1...800 as ClosedRange<UInt64> {
            recorder.commandSeq = seq
            try browsing.step(list, profile: profile)
            payloads += recorder.takePayloads()
        }
        #expect(payloads.count > 800)
        for payload in payloads {
            let decoded = try MutationStorage(serializedBytes: payload)
            #expect(protobufBytes(decoded) == payload, "\(JournalRecord(decoded))")
        }
    }

    /// Every field at its extremes: defaults left out, negative int32s in ten bytes, multi-byte
    /// lengths, text beyond ASCII, openers, histories with dropped entries, unrealized tabs.
    @Test(arguments: 0..<200)
    func randomTabsEncodeAsSwiftProtobufDoes(index: Int) throws {
        var random = SeededGenerator(seed: UInt64(index) + 1000)
        let history = Self.history(using: &random)
        let id = try #require(WebStateID(rawValue: Int64.random(in: 1...Limits.maxWebStateID, using: &random)))
        #expect(
            encodeMessage(HistoryWire(id: id, history: history))
                == protobufBytes(NavigationStorage(id: id, history: history)))
        let webState = WebState(
            id: id, creationTime: Timestamp(microsecondsSinceEpoch: Self.int64(using: &random)), history: history)
        webState.wasActivated(at: Timestamp(microsecondsSinceEpoch: Self.int64(using: &random)))
        let opener =
            Bool.random(using: &random)
            ? WebStateOpener(
                openerID: try #require(
                    WebStateID(rawValue: Int64.random(in: 1...Limits.maxWebStateID, using: &random))),
                navigationIndex: Int(Self.int64(using: &random) >> 16))
            : nil
        let reference = WebStateStorage(webState, opener: opener)
        #expect(encodeMessage(TabWire(webState, opener: opener)) == protobufBytes(reference))
        #expect(try reference.navigation.model() == history)
    }

    @Test func everyMutationEncodesAsSwiftProtobufDoes() throws {
        var random = SeededGenerator(seed: 7)
        let webState = WebState(
            id: try #require(WebStateID(rawValue: 5)), creationTime: .zero, history: Self.history(using: &random))
        let tab = TabWire(webState, opener: nil)
        let item = NavigationItem(
            url: "https://a.example/ü", title: "Ä", timestamp: Timestamp(microsecondsSinceEpoch: -3))
        var insert = MutationStorage()
        insert.insert.index = -1
        insert.insert.pinned = true
        insert.insert.webState = WebStateStorage(webState, opener: nil)
        var replace = MutationStorage()
        replace.replace.replacedIdentifier = .min
        replace.replace.webState = WebStateStorage(webState, opener: nil)
        var move = MutationStorage()
        move.move.identifier = 300
        move.move.toIndex = .max
        var remove = MutationStorage()
        remove.remove.identifier = 1
        var movedIn = insert
        movedIn.insert.movedIn = .max
        var movedOut = remove
        movedOut.remove.movedOut = 0x1234_5678_9ABC
        var activate = MutationStorage()
        activate.activate.activatedAtUs = 0
        var navigation = MutationStorage()
        navigation.navigation.identifier = 2
        navigation.navigation.itemIndex = 1 << 40
        navigation.navigation.item = NavigationItemStorage(item)
        var goTo = MutationStorage()
        goTo.navigation.identifier = 2
        var pin = MutationStorage()
        pin.pin.identifier = -9
        pin.pin.pinned = true
        pin.pin.toIndex = 128
        let cases: [(MutationWire, MutationStorage)] = [
            (.insert(index: -1, pinned: true, tab: tab, movedIn: 0), insert),
            (.insert(index: -1, pinned: true, tab: tab, movedIn: .max), movedIn),
            (.replace(replacedID: .min, tab: tab), replace),
            (.move(id: 300, toIndex: .max), move), (.remove(id: 1, closing: false, movedOut: 0), remove),
            (.remove(id: 1, closing: false, movedOut: 0x1234_5678_9ABC), movedOut),
            (.activate(activatedAtUs: 0), activate), (.navigation(id: 2, itemNumber: 1 << 40, item: item), navigation),
            (.navigation(id: 2, itemNumber: 0, item: nil), goTo), (.pin(id: -9, pinned: true, toIndex: 128), pin),
        ]
        for (seq, active) in [(0, 0), (1, -1), (UInt64.max, Int64.max)] as [(UInt64, Int64)] {
            for (wire, storage) in cases {
                var reference = storage
                reference.seq = seq
                reference.activeIdentifier = active
                let bytes = encodeMessage(RecordWire(seq: seq, activeIdentifier: active, mutation: wire))
                #expect(bytes == protobufBytes(reference), "\(JournalRecord(reference))")
            }
        }
        // A oneof case is written though its message is all defaults.
        #expect(
            encodeMessage(
                RecordWire(seq: 0, activeIdentifier: 0, mutation: .remove(id: 0, closing: false, movedOut: 0))) == [
                    0x62, 0x00,
                ])
    }

    static func int64(using random: inout SeededGenerator) -> Int64 {
        switch Int.random(in: 0..<5, using: &random) {
        case 0: 0
        case 1: .min
        case 2: .max
        case 3: Int64.random(in: -300...300, using: &random)
        default: Int64.random(in: .min ... .max, using: &random)
        }
    }

    private static func text(using random: inout SeededGenerator) -> String {
        let pieces = ["", "a", "Site 7, page 3", "https://example.com/ä/日本/🙂", String(repeating: "x", count: 200)]
        return (0..<Int.random(in: 0..<3, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
    }

    /// A history of 0 to 60 entries, some of them dropped off the front by the bounds.
    static func history(using random: inout SeededGenerator) -> NavigationHistory {
        var history = NavigationHistory()
        for _ in 0..<Int.random(in: 0...60, using: &random) {
            history.commit(
                NavigationItem(
                    url: text(using: &random), title: text(using: &random),
                    timestamp: Timestamp(microsecondsSinceEpoch: int64(using: &random))))
            if Int.random(in: 0..<4, using: &random) == 0, let current = history.currentIndex, current > 0 {
                _ = history.goToItem(at: Int.random(in: 0..<current, using: &random))
            }
        }
        return history
    }
}
