import BrowserModel
import Foundation
import HostLimits
import Testing

@testable import SessionFormat

/// Format 2's fixed-width index (issue 14): it reads back everything format 1 did, refuses
/// every impossible field with a typed error before any tab exists, and a format-1 file becomes
/// format 2 when written again. Damage sweeps over both formats are in `CorruptionTests`.
@Suite struct IndexFormatTests {
    /// Six tabs with everything the index holds: openers (one pointing forward), a pinned tab,
    /// an active one in the middle, non-ASCII and empty strings, a realized and unrealized mix.
    private static func sampleList() throws -> WebStateList {
        let profile = Profile(stateDirectory: "/unused")
        let list = WebStateList()
        let pages: [(String, String)] = [
            ("https://a.example/", "A"), ("https://b.example/ü", "Bé — ünïcödé ✓"), ("about:blank", ""),
            ("https://d.example/" + String(repeating: "d", count: 300), "D"), ("https://e.example/", "🙂 emoji"),
            ("", ""),
        ]
        var tabs: [WebState] = []
        for (index, (url, title)) in pages.enumerated() {
            var history = NavigationHistory()
            history.commit(
                NavigationItem(
                    url: "https://first.example/\(index)", title: "first",
                    timestamp: Timestamp(microsecondsSinceEpoch: 7)))
            history.commit(
                NavigationItem(url: url, title: title, timestamp: Timestamp(microsecondsSinceEpoch: Int64(100 + index)))
            )
            let tab = WebState(
                id: profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: Int64(-5 + index)),
                history: history)
            tab.wasActivated(at: Timestamp(microsecondsSinceEpoch: 1_000 * Int64(index)))
            tabs.append(tab)
        }
        let openers: [Int: WebStateOpener] = [
            1: WebStateOpener(openerID: tabs[0].id, navigationIndex: 1),
            2: WebStateOpener(openerID: tabs[4].id, navigationIndex: 0),
        ]
        try list.restore(
            tabs.enumerated().map { RestoredTab(webState: $1, opener: openers[$0]) }, activeIndex: 3, pinnedCount: 1)
        return list
    }

    private static func restore(_ bytes: [UInt8]) throws -> (SnapshotReader, WebStateList) {
        let reader = try SnapshotReader(InMemoryBytes(bytes))
        let list = WebStateList()
        try reader.restore(into: list, profile: Profile(stateDirectory: "/unused"))
        return (reader, list)
    }

    /// Everything of a list that a save keeps, metadata included.
    private static func kept(_ list: WebStateList) throws -> [String] {
        try list.webStates.enumerated().map { index, tab in
            let opener = try list.opener(at: index).map { "\($0.openerID)@\($0.navigationIndex)" } ?? "-"
            return
                "\(tab.id) \(tab.metadata) opener \(opener) pinned \(list.isPinned(at: index)) active \(list.activeIndex == index)"
        }
    }

    @Test(arguments: [Limits.maxRecordPayloadBytes, 40]) func aListReadsBackFieldForField(stringRecordLimit: Int) throws
    {
        let list = try Self.sampleList()
        let bytes = try SnapshotEncoder.encode(list, lastCommandSeq: 77, stringRecordLimit: stringRecordLimit) {
            _ throws(SessionFormatError) in []
        }
        let (reader, restored) = try Self.restore(bytes)
        #expect(reader.version == 2 && reader.lastCommandSeq == 77 && reader.count == 6)
        #expect(restored.webStates.allSatisfy { !$0.isRealized })
        #expect(try Self.kept(restored) == Self.kept(list))
        #expect(restored.webStates.allSatisfy { !$0.isRealized }, "metadata never realizes")
        // Saved again while unrealized: the frames are copied, the flags say so, nothing changes.
        let again = try SnapshotEncoder.encode(restored, lastCommandSeq: 78) { (tab) throws(SessionFormatError) in
            try reader.historyPayload(at: reader.index(of: tab.id) ?? -1)
        }
        #expect(try contents(restored) == contents(list))
        #expect((0..<6).map { reader.item(at: $0).realizedAtSave } == Array(repeating: true, count: 6))
        let (second, twice) = try Self.restore(again)
        #expect((0..<6).map { second.item(at: $0).realizedAtSave } == Array(repeating: false, count: 6))
        #expect(try Self.kept(twice) == Self.kept(list))
        #expect(try contents(twice) == contents(list))
    }

    /// A format-1 file restores tab for tab, and written again it is format 2 with the same tabs.
    @Test func aFormatOneSnapshotBecomesFormatTwoWhenWrittenAgain() throws {
        let list = try Self.sampleList()
        let old = try FormatOneSnapshot.encode(list, lastCommandSeq: 9)
        let (reader, restored) = try Self.restore(old)
        #expect(reader.version == 1)
        #expect(try Self.kept(restored) == Self.kept(list))
        let upgraded = try SnapshotEncoder.encode(restored, lastCommandSeq: 9) { (tab) throws(SessionFormatError) in
            try reader.historyPayload(at: reader.index(of: tab.id) ?? -1)
        }
        let (newReader, again) = try Self.restore(upgraded)
        #expect(newReader.version == 2 && Array(upgraded[4..<6]) == [2, 0])
        #expect(try Self.kept(again) == Self.kept(list))
        #expect(try contents(again) == contents(list))
    }

    // MARK: impossible fields

    private typealias Field = SnapshotIndex.Field
    private typealias Header = SnapshotIndex.Header

    /// The sample's bytes with `value` written at `offset` of the index record's payload, and
    /// the record's checksum made right again: damage only the field checks can catch.
    private static func patched<Value: FixedWidthInteger>(_ bytes: [UInt8], at offset: Int, _ value: Value) -> [UInt8] {
        var bytes = bytes
        let payloadStart = Framing.fileHeaderSize + Framing.recordHeaderSize
        let length = Int(bytes.littleEndian(UInt32.self, at: Framing.fileHeaderSize + 4))
        bytes.storeLittleEndian(value, at: payloadStart + offset)
        let crc = CRC32C.checksum(
            bytes[payloadStart..<payloadStart + length],
            continuing: CRC32C.checksum(bytes[Framing.fileHeaderSize..<Framing.fileHeaderSize + 8]))
        bytes.storeLittleEndian(crc, at: Framing.fileHeaderSize + 8)
        return bytes
    }

    private static func entry(_ item: Int, _ field: Int) -> Int {
        SnapshotIndex.headerSize + item * SnapshotIndex.entrySize + field
    }

    @Test func impossibleFieldsAreTypedErrorsBeforeAnyTabExists() throws {
        let bytes = try SnapshotEncoder.encode(try Self.sampleList(), lastCommandSeq: 5) {
            _ throws(SessionFormatError) in []
        }
        #expect(throws: Never.self) { try SnapshotReader(InMemoryBytes(Self.patched(bytes, at: 0, UInt32(6)))) }
        let at = Framing.fileHeaderSize
        let area = UInt64(bytes.littleEndian(UInt64.self, at: at + Framing.recordHeaderSize + Header.stringAreaLength))
        let section = bytes.littleEndian(UInt64.self, at: at + Framing.recordHeaderSize + Header.historySectionLength)
        let cases: [(String, [UInt8], SessionFormatError.InvalidState)] = [
            ("active", Self.patched(bytes, at: Header.activeIndex, Int32(6)), .activeIndexOutOfRange(6, count: 6)),
            (
                "active below -1", Self.patched(bytes, at: Header.activeIndex, Int32(-2)),
                .activeIndexOutOfRange(-2, count: 6)
            ),
            ("pinned", Self.patched(bytes, at: Header.pinnedCount, UInt32(7)), .pinnedCountOutOfRange(7, count: 6)),
            (
                "pinned huge", Self.patched(bytes, at: Header.pinnedCount, UInt32.max),
                .pinnedCountOutOfRange(Int(UInt32.max), count: 6)
            ),
            ("seq", Self.patched(bytes, at: Header.lastCommandSeq, UInt64.max), .seqOutOfRange(UInt64.max)),
            (
                "count", Self.patched(bytes, at: Header.count, UInt32(5)),
                .indexLengthMismatch(bytes: 48 + 6 * 72, count: 5)
            ),
            (
                "count huge", Self.patched(bytes, at: Header.count, UInt32.max),
                .tooManyTabs(Int(UInt32.max), limit: Limits.maxTabsPerBrowser)
            ),
            ("header reserved", Self.patched(bytes, at: Header.reserved, UInt32(1)), .undefinedBits(item: nil, 1)),
            (
                "moves the index lacks", Self.patched(bytes, at: Header.movesReceived, UInt32(1)),
                .indexLengthMismatch(bytes: 48 + 6 * 72, count: 6)
            ),
            (
                "string records", Self.patched(bytes, at: Header.stringRecords, UInt32.max),
                .continuationsOutOfRange(
                    Int(UInt32.max), bytesLeft: bytes.count - at - Framing.recordHeaderSize - 48 - 6 * 72)
            ),
            ("id 0", Self.patched(bytes, at: Self.entry(2, Field.id), Int64(0)), .invalidIdentifier(0)),
            ("id negative", Self.patched(bytes, at: Self.entry(2, Field.id), Int64.min), .invalidIdentifier(Int64.min)),
            (
                "id above the bound", Self.patched(bytes, at: Self.entry(2, Field.id), Limits.maxWebStateID + 1),
                .invalidIdentifier(Limits.maxWebStateID + 1)
            ),
            ("id twice", Self.patched(bytes, at: Self.entry(3, Field.id), Int64(1)), .duplicateIdentifier(1)),
            (
                "opener outside", Self.patched(bytes, at: Self.entry(1, Field.openerIndex), Int32(6)),
                .openerOutOfRange(item: 1, opener: 6, count: 6)
            ),
            (
                "opener itself", Self.patched(bytes, at: Self.entry(1, Field.openerIndex), Int32(1)),
                .openerOutOfRange(item: 1, opener: 1, count: 6)
            ),
            (
                "opener -2", Self.patched(bytes, at: Self.entry(1, Field.openerIndex), Int32(-2)),
                .openerOutOfRange(item: 1, opener: -2, count: 6)
            ),
            (
                "history past the section", Self.patched(bytes, at: Self.entry(5, Field.historyOffset), section),
                .historyOutOfRange(
                    item: 5, offset: section,
                    length: UInt32(bytes.littleEndian(UInt32.self, at: at + 12 + Self.entry(5, Field.historyLength))),
                    section: section)
            ),
            (
                "history offset wraps", Self.patched(bytes, at: Self.entry(0, Field.historyOffset), UInt64.max),
                .historyOutOfRange(
                    item: 0, offset: UInt64.max,
                    length: UInt32(bytes.littleEndian(UInt32.self, at: at + 12 + Self.entry(0, Field.historyLength))),
                    section: section)
            ),
            (
                "history shorter than a frame", Self.patched(bytes, at: Self.entry(0, Field.historyLength), UInt32(11)),
                .historyOutOfRange(item: 0, offset: 0, length: 11, section: section)
            ),
            (
                "negative item count", Self.patched(bytes, at: Self.entry(4, Field.navigationItemCount), Int32(-1)),
                .negativeCount(-1)
            ),
            (
                "title too long",
                Self.patched(bytes, at: Self.entry(4, Field.titleLength), UInt32(Limits.maxTitleBytes + 1)),
                .invalidNavigationItem(.titleTooLong(bytes: Limits.maxTitleBytes + 1, limit: Limits.maxTitleBytes))
            ),
            (
                "url too long", Self.patched(bytes, at: Self.entry(4, Field.urlLength), UInt32.max),
                .invalidNavigationItem(.urlTooLong(bytes: Int(UInt32.max), limit: Limits.maxURLBytes))
            ),
            (
                "strings past the area", Self.patched(bytes, at: Self.entry(5, Field.stringOffset), area + 1),
                .stringsOutOfRange(item: 5, offset: area + 1, length: 0, area: area)
            ),
            (
                "strings offset wraps", Self.patched(bytes, at: Self.entry(0, Field.stringOffset), UInt64.max),
                .stringsOutOfRange(item: 0, offset: UInt64.max, length: 19, area: area)
            ),
            // Tab 1's title starts with "B", then "é" (two bytes): one byte shorter cuts it.
            (
                "a title cut inside a character", Self.patched(bytes, at: Self.entry(1, Field.titleLength), UInt32(2)),
                .notUTF8(item: 1)
            ),
            ("flags", Self.patched(bytes, at: Self.entry(0, Field.flags), UInt32(3)), .undefinedBits(item: 0, 2)),
            (
                "entry reserved", Self.patched(bytes, at: Self.entry(0, Field.reserved), UInt32(1)),
                .undefinedBits(item: 0, 1 << 32)
            ),
        ]
        for (name, damaged, reason) in cases {
            #expect(throws: SessionFormatError.invalidState(offset: at, reason: reason), "\(name)") {
                try SnapshotReader(InMemoryBytes(damaged))
            }
        }
        // Lengths that disagree with the file: the string area's and the history section's.
        #expect(throws: SessionFormatError.lengthMismatch(expected: Int(area) + 1, actual: Int(area)), "string area") {
            try SnapshotReader(InMemoryBytes(Self.patched(bytes, at: Header.stringAreaLength, area + 1)))
        }
        #expect(
            throws: SessionFormatError.lengthMismatch(expected: bytes.count - 1, actual: bytes.count), "history section"
        ) {
            try SnapshotReader(InMemoryBytes(Self.patched(bytes, at: Header.historySectionLength, section - 1)))
        }
        // Wrapping past 2^64 lands one byte short of where the section starts: still refused.
        #expect(
            throws: SessionFormatError.lengthMismatch(expected: bytes.count - Int(section) - 1, actual: bytes.count),
            "history section wraps"
        ) {
            try SnapshotReader(InMemoryBytes(Self.patched(bytes, at: Header.historySectionLength, UInt64.max)))
        }
    }

    /// An index record too short for its header, and records of the other format's kinds.
    @Test func recordsOfTheWrongShapeAreRefused() throws {
        var short = Framing.fileHeader(.snapshot)
        try Framing.appendRecord(.listIndex, payload: [0, 0, 0, 0], to: &short)
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize, reason: .indexLengthMismatch(bytes: 4, count: 0))
        ) {
            try SnapshotReader(InMemoryBytes(short))
        }
        // Format 1's metadata under a format-2 header, and format 2's index under a format-1 one.
        let list = try Self.sampleList()
        var formatOne = try FormatOneSnapshot.encode(list, lastCommandSeq: 1)
        formatOne.replaceSubrange(0..<Framing.fileHeaderSize, with: Framing.fileHeader(.snapshot, version: 2))
        #expect(throws: SessionFormatError.unexpectedRecordKind(offset: 16, found: 1, expected: 7)) {
            try SnapshotReader(InMemoryBytes(formatOne))
        }
        var formatTwo = try SnapshotEncoder.encode(list, lastCommandSeq: 1) { _ throws(SessionFormatError) in [] }
        formatTwo.replaceSubrange(0..<Framing.fileHeaderSize, with: Framing.fileHeader(.snapshot, version: 1))
        #expect(throws: SessionFormatError.unexpectedRecordKind(offset: 16, found: 7, expected: 1)) {
            try SnapshotReader(InMemoryBytes(formatTwo))
        }
    }
}

/// The checksum in hardware and in software: the same values, and the hardware used where the
/// CPU has it.
@Suite struct ChecksumPathTests {
    @Test func theHardwareIsUsedWhereTheCPUHasIt() throws {
        let cpuinfo = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        let flags =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") }.map {
                $0.split(separator: " ").map(String.init)
            } ?? []
        #expect(CRC32C.hasHardware == flags.contains("sse4_2"), "cpuinfo flags say sse4_2: \(flags.contains("sse4_2"))")
    }

    @Test func bothPathsGiveTheSameChecksums() throws {
        try #require(CRC32C.hasHardware, "this test compares the SSE4.2 path with the tables; the CPU has no SSE4.2")
        "123456789".utf8.withContiguousStorageIfAvailable { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            #expect(CRC32C.hardwareChecksum(raw) == 0xE306_9283)
            #expect(CRC32C.tableChecksum(raw) == 0xE306_9283)
        }
        var random = SeededGenerator(seed: 14)
        for length in Array(0..<70) + [255, 256, 4095, 4096, 65_537] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let start = UInt32.random(in: 0...UInt32.max, using: &random)
            bytes.withUnsafeBytes { raw in
                #expect(
                    CRC32C.hardwareChecksum(raw, continuing: start) == CRC32C.tableChecksum(raw, continuing: start),
                    "length \(length)")
                // Misaligned starts: the instruction path loads eight bytes from any address.
                if length > 3 {
                    let tail = UnsafeRawBufferPointer(rebasing: raw[3...])
                    #expect(CRC32C.hardwareChecksum(tail) == CRC32C.tableChecksum(tail), "length \(length) from byte 3")
                }
            }
        }
    }
}
