import BrowserModel
import Foundation
import HostLimits
import Testing

@testable import SessionFormat

/// Hostile round on snapshot format 2 (issue 14): files crafted with valid checksums that pass
/// or probe the reader's one pass of checks, then every accessor, a restore and a save of the
/// restored list (what compaction does) driven over them. Nothing may trap or hang, every
/// refusal is a typed error, and a file that reads may not cost more than a small factor of
/// its own size when written again.
@Suite struct FormatTwoAttackTests {
    /// A format-2 file put together field by field: entries as given (no field checked), the
    /// string area in as many records as given, the history section as given.
    struct Crafted {
        var entries: [SnapshotIndex.Entry] = []
        var stringRecords: [[UInt8]] = [[]]
        var section: [UInt8] = []
        var activeIndex: Int? = nil
        var pinnedCount = 0
        var seq: UInt64 = 1
        /// Overrides the header's count of string records (the records themselves stay).
        var stringRecordCount: Int? = nil

        /// The file: header, index record, string records, section.
        var bytes: [UInt8] {
            var index = SnapshotIndex.header(
                count: entries.count, activeIndex: activeIndex, pinnedCount: pinnedCount, lastCommandSeq: seq)
            for entry in entries { SnapshotIndex.appendEntry(to: &index, entry) }
            SnapshotIndex.finishHeader(
                &index, stringRecords: stringRecordCount ?? stringRecords.count,
                stringAreaLength: UInt64(stringRecords.reduce(0) { $0 + $1.count }),
                historySectionLength: UInt64(section.count))
            var bytes = Framing.fileHeader(.snapshot)
            Framing.appendFrame(.listIndex, payload: index, to: &bytes)
            for record in stringRecords { Framing.appendFrame(.strings, payload: record, to: &bytes) }
            return bytes + section
        }
    }

    /// A navigation record for tab `id` with one entry per URL.
    static func frame(_ id: Int64, urls: [String]) throws -> [UInt8] {
        var history = NavigationHistory()
        for (n, url) in urls.enumerated() {
            history.commit(
                NavigationItem(url: url, title: "t\(n)", timestamp: Timestamp(microsecondsSinceEpoch: Int64(n))))
        }
        return try Framing.record(
            .navigation,
            payload: protobufBytes(NavigationStorage(id: try #require(WebStateID(rawValue: id)), history: history)))
    }

    /// An index entry; fields not given are plain (times 1 and 2, not realized).
    static func entry(
        _ id: Int64, history: (offset: Int, length: Int), strings: (offset: Int, title: Int, url: Int),
        opener: Int32 = -1, items: Int32 = 1
    ) -> SnapshotIndex.Entry {
        SnapshotIndex.Entry(
            id: WebStateID(rawValue: id)!, creationTime: Timestamp(microsecondsSinceEpoch: 1),
            lastActiveTime: Timestamp(microsecondsSinceEpoch: 2),
            historyOffset: UInt64(history.offset), historyLength: UInt32(history.length),
            stringOffset: UInt64(strings.offset),
            titleLength: UInt32(strings.title), urlLength: UInt32(strings.url), navigationItemCount: items,
            openerIndex: opener,
            openerNavigationIndex: 0, realizedAtSave: false)
    }

    /// `count` tabs with their own history frames, one after the other, and the strings given.
    static func tabs(_ count: Int, strings: (Int) -> (offset: Int, title: Int, url: Int)) throws -> Crafted {
        var crafted = Crafted()
        for n in 0..<count {
            let frame = try frame(Int64(n + 1), urls: ["https://\(n).example/"])
            crafted.entries.append(
                entry(Int64(n + 1), history: (crafted.section.count, frame.count), strings: strings(n)))
            crafted.section += frame
        }
        return crafted
    }

    /// Every accessor over every tab, a restore with degrading, the histories realized, and the
    /// restored list written again as compaction writes it (unrealized tabs' frames copied) and
    /// read back. Returns the bytes written again; throws a typed error where the reader refuses.
    @discardableResult
    static func driveEverything(_ bytes: [UInt8]) throws(SessionFormatError) -> [UInt8] {
        let reader = try SnapshotReader(InMemoryBytes(bytes))
        for index in 0..<reader.count {
            _ = reader.id(at: index)
            _ = reader.metadata(at: index)
            _ = reader.item(at: index)
            _ = try? reader.history(at: index)
            _ = try? reader.historyPayload(at: index)
        }
        let list = WebStateList()
        try reader.restore(into: list, profile: Profile(stateDirectory: "/unused"), degraded: DegradedHistories())
        let again = try SnapshotEncoder.encode(list, lastCommandSeq: reader.lastCommandSeq) {
            (tab) throws(SessionFormatError) in
            try reader.historyPayload(at: reader.index(of: tab.id) ?? -1)
        }
        let second = try SnapshotReader(InMemoryBytes(again))
        for tab in list.webStates { _ = try? tab.navigationHistory() }
        for index in 0..<second.count { _ = second.metadata(at: index) }
        return again
    }

    // MARK: aliasing: a small file that is large once written again

    /// 64 tabs whose URLs are one 64 KiB URL: the index lets every entry name the same bytes.
    /// Compaction writes each tab's strings out in full, so a 2 MiB URL shared by 16,384 tabs
    /// (a 3.4 MB file) asks for 32 GiB. The reader should refuse ranges that overlap (the
    /// encoder writes them one after the other), or else what it writes may grow only by a
    /// small factor.
    @Test func stringRangesSharedByEveryTabDoNotMultiplyWhenWrittenAgain() throws {
        let url = Array("https://a.example/".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 64 << 10)
        var crafted = try Self.tabs(64) { _ in (0, 0, url.count) }
        crafted.stringRecords = [url]
        let bytes = crafted.bytes
        do {
            let again = try Self.driveEverything(bytes)
            #expect(again.count <= 4 * bytes.count, "a \(bytes.count)-byte file written again is \(again.count) bytes")
        } catch {
            // Refused: the fix this test asks for. Any typed error will do.
        }
    }

    /// 64 tabs whose history ranges all name one frame of 64 KiB: compaction would copy it
    /// once per unrealized tab (16,384 tabs on a 64 MiB frame: 1 TiB). Refused when the file
    /// opens: each tab's frame must start where the one before ends.
    @Test func historyRangesSharedByEveryTabDoNotMultiplyWhenWrittenAgain() throws {
        let frame = try Self.frame(
            1, urls: (0..<64).map { "https://\($0).example/" + String(repeating: "h", count: 1_000) })
        var crafted = Crafted()
        crafted.section = frame
        crafted.stringRecords = [Array(String(repeating: "https://63.example/", count: 64).utf8)]
        for n in 0..<64 {
            crafted.entries.append(
                Self.entry(Int64(n + 1), history: (0, frame.count), strings: (19 * n, 0, 19), items: 64))
        }
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize,
                reason: .historyOutOfRange(
                    item: 1, offset: 0, length: UInt32(frame.count), section: UInt64(frame.count)))
        ) {
            try SnapshotReader(InMemoryBytes(crafted.bytes))
        }
    }

    // MARK: strings at the edges

    /// Zero-length strings at the area's very end and a tab spread over string records (one of
    /// them empty): read and round-trip. Strings inside another tab's, or bytes no tab names,
    /// are refused when the file opens: each tab's strings start where the one before ends.
    @Test func stringsAtTheEdgesReadAndRoundTrip() throws {
        let area = Array("Title0https://a.example/".utf8)
        var crafted = try Self.tabs(4) { n in n == 0 ? (0, 6, area.count - 6) : (area.count, 0, 0) }
        crafted.stringRecords = [Array(area[0..<4]), [], Array(area[4...])]
        let again = try Self.driveEverything(crafted.bytes)
        let reader = try SnapshotReader(InMemoryBytes(again))
        #expect(
            reader.metadata(at: 0).activePageTitle == "Title0"
                && reader.metadata(at: 0).activePageURL == "https://a.example/")
        #expect(
            (1..<4).allSatisfy {
                reader.metadata(at: $0).activePageTitle.isEmpty && reader.metadata(at: $0).activePageURL.isEmpty
            })
        var inside = crafted
        inside.entries[2].stringOffset = 3
        inside.entries[2].titleLength = 5
        inside.entries[2].urlLength = 2
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize,
                reason: .stringsOutOfRange(item: 2, offset: 3, length: 7, area: UInt64(area.count)))
        ) {
            try SnapshotReader(InMemoryBytes(inside.bytes))
        }
        var unnamed = crafted
        unnamed.entries[0].urlLength -= 1
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize,
                reason: .stringsOutOfRange(item: 1, offset: UInt64(area.count), length: 0, area: UInt64(area.count)))
        ) {
            try SnapshotReader(InMemoryBytes(unnamed.bytes))
        }
    }

    /// Bytes that are not UTF-8, as a title and as a URL, at every position around the reader's
    /// eight-bytes-at-a-time ASCII path: overlong forms, surrogates, five- and six-byte
    /// sequences, code points past U+10FFFF, lone continuation bytes, a sequence cut short, and
    /// a title that is UTF-8 only when the URL after it is joined on.
    @Test func bytesThatAreNotUTF8AreRefusedWherever() throws {
        let bad: [[UInt8]] = [
            [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xF0, 0x80, 0x80, 0x80],
            [0xF0, 0x8F, 0xBF, 0xBF],
            [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF], [0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80],
            [0xF8, 0x88, 0x80, 0x80, 0x80], [0xFC, 0x84, 0x80, 0x80, 0x80, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0xF5, 0x80, 0x80, 0x80],
            [0x80], [0xBF], [0xFE], [0xFF], [0xC3], [0xE2, 0x82], [0xF0, 0x9F, 0x99],
        ]
        for sequence in bad {
            for prefix in 0...9 {
                let text = [UInt8](repeating: UInt8(ascii: "x"), count: prefix) + sequence + [UInt8(ascii: "y")]
                for asURL in [false, true] {
                    var crafted = try Self.tabs(1) { _ in asURL ? (0, 0, text.count) : (0, text.count, 0) }
                    crafted.stringRecords = [text]
                    #expect(
                        throws: SessionFormatError.invalidState(
                            offset: Framing.fileHeaderSize, reason: .notUTF8(item: 0)), "\(sequence) after \(prefix)"
                    ) {
                        try SnapshotReader(InMemoryBytes(crafted.bytes))
                    }
                }
            }
        }
        // "é" cut between the title and the URL: each half alone is not UTF-8.
        var joined = try Self.tabs(1) { _ in (0, 1, 1) }
        joined.stringRecords = [[0xC3, 0xA9]]
        #expect(throws: SessionFormatError.invalidState(offset: Framing.fileHeaderSize, reason: .notUTF8(item: 0))) {
            try SnapshotReader(InMemoryBytes(joined.bytes))
        }
    }

    /// Text that is UTF-8 however odd: a NUL, controls, U+FFFF, U+10FFFF, a BOM. It reads, and
    /// the strings made from it are the same bytes (no replacement characters: a title at the
    /// limit stays at the limit).
    @Test func oddButValidTextReadsByteForByte() throws {
        let samples: [[UInt8]] = [
            [0], [0x01, 0x7F, 0x0A], [0xEF, 0xBF, 0xBF], [0xF4, 0x8F, 0xBF, 0xBF], [0xEF, 0xBB, 0xBF], [0xC2, 0x80],
            [UInt8](repeating: 0xE2, count: 1).flatMap { [$0, 0x9C, 0x93] },
            [UInt8](repeating: 0x41, count: Limits.maxTitleBytes - 4) + [0xF0, 0x9F, 0x99, 0x82],
        ]
        for text in samples {
            var crafted = try Self.tabs(1) { _ in (0, text.count, text.count) }
            crafted.stringRecords = [text + text]
            let again = try Self.driveEverything(crafted.bytes)
            let metadata = try SnapshotReader(InMemoryBytes(again)).metadata(at: 0)
            #expect(
                Array(metadata.activePageTitle.utf8) == text && Array(metadata.activePageURL.utf8) == text,
                "\(text.prefix(8))")
        }
    }

    // MARK: openers, counts, records

    /// Openers in cycles (0 ↔ 1, 2 → 3 → 4 → 2): restored, written again, and closed one by
    /// one (closing follows openers to pick the next active tab) without a hang or a trap.
    @Test func openerCyclesRestoreSaveAndCloseWithoutHanging() throws {
        var crafted = try Self.tabs(5) { _ in (0, 0, 0) }
        for (item, opener) in [(0, 1), (1, 0), (2, 3), (3, 4), (4, 2)] {
            crafted.entries[item].openerIndex = Int32(opener)
        }
        crafted.activeIndex = 2
        let again = try Self.driveEverything(crafted.bytes)
        let reader = try SnapshotReader(InMemoryBytes(again))
        #expect((0..<5).map { reader.item(at: $0).openerIndex } == [1, 0, 3, 4, 2])
        let list = WebStateList()
        try reader.restore(into: list, profile: Profile(stateDirectory: "/unused"), degraded: DegradedHistories())
        while list.count > 0 { try list.close(at: list.activeIndex ?? 0) }
    }

    /// More string records than tabs to fill them (each record the encoder starts holds a tab's
    /// strings; a list without strings has one empty record): refused from the header, before
    /// any is read, so a file of millions of empty records costs nothing. No tabs with one
    /// record of bytes nobody names: refused. As many records as tabs, one tab each: read.
    @Test func stringRecordsNoTabNamesAndManyTinyOnesRead() throws {
        func refusedCount(_ crafted: Crafted) -> Int? {
            do {
                _ = try SnapshotReader(InMemoryBytes(crafted.bytes))
            } catch .invalidState(_, .continuationsOutOfRange(let count, _)) {
                return count
            } catch {}
            return nil
        }
        var empty = Crafted()
        empty.stringRecords = [[0xFF, 0xFE], [0xC0]]
        #expect(refusedCount(empty) == 2)
        empty.stringRecords = [[0xFF, 0xFE, 0xC0]]
        #expect(
            throws: SessionFormatError.invalidState(
                offset: Framing.fileHeaderSize, reason: .stringsOutOfRange(item: 0, offset: 0, length: 3, area: 3))
        ) {
            try Self.driveEverything(empty.bytes)
        }
        var many = try Self.tabs(3) { n in (n, 1, 0) }
        many.stringRecords = [[UInt8]](repeating: [], count: 20_000) + [Array("abc".utf8)]
        #expect(refusedCount(many) == 20_001)
        many.stringRecords = [Array("a".utf8), Array("b".utf8), Array("c".utf8)]
        let reader = try SnapshotReader(InMemoryBytes(many.bytes))
        #expect((0..<3).map { reader.metadata(at: $0).activePageTitle } == ["a", "b", "c"])
        // The header saying one record more than there are: the history section is read as one.
        many.stringRecordCount = 4
        #expect(refusedCount(many) == 4)
    }

    /// Cut at every byte of the index and string records (and into the first frame), as is and
    /// with the header's history section length made to agree with the cut: typed errors only.
    @Test func everyTruncationIsATypedError() throws {
        let area = Array("TitleAhttps://a.example/TitleBhttps://b.example/".utf8)
        var crafted = try Self.tabs(2) { n in (n * 24, 6, 18) }
        crafted.stringRecords = [Array(area[0..<10]), Array(area[10..<30]), Array(area[30...])]
        let bytes = crafted.bytes
        let sectionStart = bytes.count - crafted.section.count
        for cut in 0..<(sectionStart + 20) {
            let short = Array(bytes[0..<cut])
            #expect(throws: SessionFormatError.self, "cut at \(cut)") { try SnapshotReader(InMemoryBytes(short)) }
        }
        // The section length patched to what is left after a cut inside the section: the
        // entries' frames then lie past it.
        for cut in sectionStart..<bytes.count {
            var short = Array(bytes[0..<cut])
            let at = Framing.fileHeaderSize + Framing.recordHeaderSize + SnapshotIndex.Header.historySectionLength
            short.storeLittleEndian(UInt64(cut - sectionStart), at: at)
            let length = Int(short.littleEndian(UInt32.self, at: Framing.fileHeaderSize + 4))
            let payload = Framing.fileHeaderSize + Framing.recordHeaderSize
            short.storeLittleEndian(
                CRC32C.checksum(
                    short[payload..<payload + length],
                    continuing: CRC32C.checksum(short[Framing.fileHeaderSize..<Framing.fileHeaderSize + 8])),
                at: Framing.fileHeaderSize + 8)
            #expect(throws: SessionFormatError.self, "cut at \(cut)") { try Self.driveEverything(short) }
        }
    }

    /// A seeded fuzz of the index: random fields set to values at the edges of what the checks
    /// allow (0, ±1 around the area, the section, the count, the extremes), the checksum made
    /// right, then everything driven. A file either is refused with a typed error or reads,
    /// restores and is written again.
    @Test func fieldFuzzNeverTraps() throws {
        let area = Array("TitleAhttps://a.example/TitleBhttps://b.example/TitleChttps://c.example/".utf8)
        var crafted = try Self.tabs(3) { n in (n * 24, 6, 18) }
        crafted.stringRecords = [Array(area[0..<30]), Array(area[30...])]
        crafted.activeIndex = 1
        crafted.pinnedCount = 1
        crafted.entries[2].openerIndex = 0
        let bytes = crafted.bytes
        let payloadStart = Framing.fileHeaderSize + Framing.recordHeaderSize
        let indexLength = Int(bytes.littleEndian(UInt32.self, at: Framing.fileHeaderSize + 4))
        let section = UInt64(crafted.section.count)
        let frameLength = UInt64(crafted.entries[0].historyLength)
        let edges: [UInt64] = [
            0, 1, 2, 3, 11, 12, 18, 23, 24, 30, 47, 48, 71, 72, UInt64(area.count - 1), UInt64(area.count),
            UInt64(area.count + 1),
            section - 1, section, section - frameLength, frameLength, frameLength - 1, frameLength + 1,
            UInt64(Int32.max), UInt64(UInt32.max), UInt64(Int64.max), UInt64.max, UInt64.max - 1, 1 << 32, 1 << 31,
        ]
        let widths = [1, 2, 4, 8]
        var random = SeededGenerator(seed: 0x14_0002)
        var read = 0
        for _ in 0..<4_000 {
            var damaged = bytes
            for _ in 0...Int.random(in: 0..<3, using: &random) {
                let width = widths.randomElement(using: &random)!
                let offset = Int.random(in: 0...(indexLength - width), using: &random)
                var value = edges.randomElement(using: &random)!
                if Bool.random(using: &random) {
                    value = value &+ UInt64(bitPattern: Int64.random(in: -2...2, using: &random))
                }
                withUnsafeBytes(of: value.littleEndian) {
                    damaged.replaceSubrange(
                        payloadStart + offset..<payloadStart + offset + width, with: $0.prefix(width))
                }
            }
            damaged.storeLittleEndian(
                CRC32C.checksum(
                    damaged[payloadStart..<payloadStart + indexLength],
                    continuing: CRC32C.checksum(damaged[Framing.fileHeaderSize..<Framing.fileHeaderSize + 8])),
                at: Framing.fileHeaderSize + 8)
            do {
                try Self.driveEverything(damaged)
                read += 1
            } catch {
                // Refused: `driveEverything` throws only `SessionFormatError`.
            }
        }
        #expect(read > 0, "some damage passes the checks (time stamps, opener navigation index): the accessors ran")
    }

    /// An id the other Browser holds, stored in this Browser's format-2 snapshot: refused before
    /// any tab exists; the list stays empty.
    @Test func anIdTheOtherBrowserHoldsIsRefused() throws {
        let profile = Profile(stateDirectory: "/unused")
        let window = UUID()
        let regular = profile.browserList.browser(for: window)
        let incognito = profile.offTheRecordProfile.browserList.browser(for: window)
        let mine = try Self.tabs(3) { _ in (0, 0, 0) }
        try SnapshotReader(InMemoryBytes(mine.bytes)).restore(into: regular.webStateList, profile: profile)
        var theirs = try Self.tabs(3) { _ in (0, 0, 0) }
        for n in 0..<3 { theirs.entries[n].id = WebStateID(rawValue: Int64(100 + n))! }
        theirs.entries[2].id = WebStateID(rawValue: 2)!
        #expect(
            throws: SessionFormatError.invalidState(offset: Framing.fileHeaderSize, reason: .duplicateIdentifier(2))
        ) {
            try SnapshotReader(InMemoryBytes(theirs.bytes)).restore(
                into: incognito.webStateList, profile: incognito.profile)
        }
        #expect(incognito.webStateList.count == 0)
    }

    /// A journal whose header says version 2 (a snapshot's layout number): refused, typed.
    @Test func aJournalWithASnapshotsVersionIsRefused() throws {
        var journal = JournalFile.header(blockSize: 4096)
        journal.replaceSubrange(0..<Framing.fileHeaderSize, with: Framing.fileHeader(.journal, version: 2))
        #expect(throws: SessionFormatError.unsupportedVersion(offset: 4, found: 2, supported: 1)) {
            try JournalFile.scan(InMemoryBytes(journal))
        }
    }
}

/// CRC-32C: both paths against a bit-at-a-time reference and the RFC 3720 vectors, over every
/// length to 10,000 from every alignment, and split anywhere (`continuing`).
@Suite struct ChecksumAttackTests {
    /// CRC-32C a bit at a time: slow, and sharing no code with either path.
    static func reference(_ bytes: some Sequence<UInt8>, continuing crc: UInt32 = 0) -> UInt32 {
        var crc = ~crc
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    /// RFC 3720's vectors, "123456789", and the empty input, by every path.
    @Test func knownVectors() {
        let vectors: [([UInt8], UInt32)] = [
            ([UInt8](repeating: 0, count: 32), 0x8A91_36AA), ([UInt8](repeating: 0xFF, count: 32), 0x62A8_AB43),
            ((0..<32).map(UInt8.init), 0x46DD_794E), ((0..<32).reversed().map(UInt8.init), 0x113F_DB5C),
            (Array("123456789".utf8), 0xE306_9283), ([], 0),
        ]
        for (bytes, expected) in vectors {
            #expect(CRC32C.checksum(bytes) == expected)
            bytes.withUnsafeBytes { raw in
                #expect(CRC32C.tableChecksum(raw) == expected)
                if CRC32C.hasHardware { #expect(CRC32C.hardwareChecksum(raw) == expected) }
            }
        }
    }

    /// Both paths equal the reference from eight alignments over lengths to 10,000.
    @Test func everyLengthAndAlignmentAgrees() throws {
        var random = SeededGenerator(seed: 32)
        let buffer = (0..<10_016).map { _ in UInt8.random(in: 0...255, using: &random) }
        try buffer.withUnsafeBytes { raw in
            for length in 0...10_000 where length < 300 || length % 7 == 0 || length > 9_990 {
                for start in 0..<8 {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<start + length])
                    let expected = Self.reference(slice, continuing: UInt32(length))
                    let table = CRC32C.tableChecksum(slice, continuing: UInt32(length))
                    try #require(table == expected, "table, length \(length) from \(start)")
                    if CRC32C.hasHardware {
                        try #require(
                            CRC32C.hardwareChecksum(slice, continuing: UInt32(length)) == expected,
                            "hardware, length \(length) from \(start)")
                    }
                }
            }
            // Split anywhere: the second part continuing the first is the whole.
            let whole = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<4_099]))
            for split in [0, 1, 7, 8, 9, 63, 64, 4_095, 4_096, 4_099] {
                let first = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<split]))
                #expect(
                    CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[split..<4_099]), continuing: first) == whole,
                    "split at \(split)")
            }
        }
    }
}
