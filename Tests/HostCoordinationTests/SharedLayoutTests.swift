import Foundation
import Glibc
import Testing

@testable import HostCoordination

/// The shared-memory layout holds together, and docs/shared-memory.md describes it as it is: the
/// doc's tables are parsed and compared with `SlotLayout` and the slot header's fields, so a
/// field moved in one and not the other fails here.
@Suite struct SharedLayoutTests {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/shared-memory.md").standardizedFileURL

    /// Every field within `size`, none overlapping the next, each at a multiple of its atomic
    /// width (from a base that is itself aligned: a page, or a multiple of the widest word).
    private func expectWellFormed(_ fields: [SharedField], within size: Int, _ what: String) {
        for field in fields {
            #expect(field.size > 0 && field.size % field.wordSize == 0, "\(what): \(field.name) is whole words")
            #expect(field.offset >= 0 && field.end <= size, "\(what): \(field.name) fits in \(size) bytes")
            #expect(
                field.offset % field.wordSize == 0,
                "\(what): \(field.name) at \(field.offset) is aligned to \(field.wordSize)")
        }
        let sorted = fields.sorted { $0.offset < $1.offset }
        for (field, next) in zip(sorted, sorted.dropFirst()) {
            #expect(
                field.end <= next.offset,
                "\(what): \(field.name) (\(field.offset)..<\(field.end)) overlaps \(next.name) at \(next.offset)")
        }
    }

    @Test func slotFieldsDoNotOverlapAreAlignedAndFitTheSlot() {
        expectWellFormed(SlotLayout.fields, within: SlotLayout.size, "slot")
        #expect(SlotLayout.size == WindowSlot.size && SlotMemory.size == SlotMemory.headerSize + SlotLayout.size)
        #expect(SlotLayout.fields.map(\.offset) == SlotLayout.fields.map(\.offset).sorted(), "listed in offset order")
        #expect(Set(SlotLayout.fields.map(\.name)).count == SlotLayout.fields.count)
        // The stats are what `WorkerStats` holds, one word each.
        #expect(SlotLayout.stats.wordCount == Mirror(reflecting: WorkerStats()).children.count)
        #expect(
            WorkerStats.words.count == SlotLayout.stats.wordCount
                && Set(WorkerStats.words.map { $0 as AnyKeyPath }).count == WorkerStats.words.count)
    }

    @Test func theSlotHeaderFitsBeforeASlotThatStartsOnAPage() {
        expectWellFormed(SlotMemory.headerFields, within: SlotMemory.headerSize, "header")
        #expect(SlotMemory.headerSize % Int(getpagesize()) == 0, "the slot, after the header, starts on a page")
    }

    @Test func ringPositionsSitOnSeparateCacheLinesBeforeTheBufferAndRingsOverlapNothing() {
        expectWellFormed(RingLayout.fields, within: RingLayout.headerSize, "ring header")
        #expect(RingLayout.head.offset / 64 != RingLayout.tail.offset / 64, "head and tail on separate cache lines")
        for ring in [SlotLayout.commandRing, SlotLayout.replyRing] {
            #expect(ring.offset % 64 == 0, "\(ring.name) starts a cache line")
            let capacity = ring.size - RingLayout.headerSize
            #expect(capacity > 0 && capacity & (capacity - 1) == 0, "\(ring.name) holds a power of two")
        }
        #expect(SlotLayout.commandRing.size == RingLayout.headerSize + SlotLayout.commandRingCapacity)
        #expect(SlotLayout.replyRing.size == RingLayout.headerSize + SlotLayout.replyRingCapacity)
        let fieldsEnd =
            SlotLayout.fields.filter { $0 != SlotLayout.commandRing && $0 != SlotLayout.replyRing }.map(\.end).max()
            ?? 0
        #expect(fieldsEnd <= SlotLayout.commandRing.offset && SlotLayout.commandRing.end <= SlotLayout.replyRing.offset)
    }

    /// What is zeroed between workers and for a new reservation is every worker field (rings
    /// aside, emptied on their own) and none of the supervisor's.
    @Test func theRangesZeroedBetweenWorkersHoldExactlyTheWorkersFields() {
        let supervisors = [SlotLayout.state, SlotLayout.generation, SlotLayout.pid, SlotLayout.windowID]
        let scratch = [
            SlotLayout.readyGeneration, SlotLayout.heartbeat, SlotLayout.savingSeq, SlotLayout.statsVersion,
            SlotLayout.stats,
        ]
        let counters = [
            SlotLayout.savesCompleted, SlotLayout.saveFailures, SlotLayout.compactionFailures, SlotLayout.latency,
        ]
        #expect(
            supervisors.count + scratch.count + counters.count + 2 == SlotLayout.fields.count,
            "every field is in one group")
        for range in [SlotLayout.workerScratch, SlotLayout.counters] {
            #expect(range.lowerBound % 8 == 0 && range.upperBound % 8 == 0, "cleared with 64-bit stores")
            for field in supervisors {
                #expect(!range.overlaps(field.offset..<field.end), "\(field.name) is the supervisor's")
            }
        }
        for field in scratch {
            #expect(SlotLayout.workerScratch.contains(field.offset) && field.end <= SlotLayout.workerScratch.upperBound)
        }
        for field in counters {
            #expect(SlotLayout.counters.contains(field.offset) && field.end <= SlotLayout.counters.upperBound)
        }
    }

    @Test func theDocumentedTablesAreTheLayout() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        let header = try #require(table(after: "### Slot header", in: text))
        let slot = try #require(table(after: "### Slot (", in: text))
        #expect(header == SlotMemory.headerFields.map { Row(offset: $0.offset, size: $0.size) })
        #expect(slot == SlotLayout.fields.map { Row(offset: $0.offset, size: $0.size) })
        let (headerSize, slotSize, total) = (SlotMemory.headerSize, SlotLayout.size, SlotMemory.size)
        #expect(text.contains("\(grouped(headerSize)) + \(grouped(slotSize)) = \(grouped(total)) bytes"))
        #expect(text.contains("### Slot header (\(headerSize) bytes"))
        #expect(text.contains("### Slot (one per window; \(grouped(slotSize)) bytes after the header"))
    }

    /// The layout version the doc names is the one a worker checks, and its descriptor table
    /// lists the descriptors a worker is spawned with, and no other.
    @Test func theDocumentedVersionAndDescriptorsAreTheCode() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        #expect(text.contains("## Layout (version \(SlotMemory.layoutVersion))"))
        #expect(
            text.contains("| \(SlotMemory.HeaderOffset.version) | 4 | layout version (\(SlotMemory.layoutVersion)) |"))
        let lines = text.split(separator: "\n").map(String.init)
        let start = try #require(lines.firstIndex(of: "| descriptor | what |"))
        let listed = lines[(start + 2)...].prefix { $0.hasPrefix("|") }.map {
            Int32($0.split(separator: "|").first?.trimmingCharacters(in: .whitespaces) ?? "")
        }
        #expect(listed == WorkerLaunch.Descriptor.allCases.map(\.rawValue))
    }

    struct Row: Equatable, CustomStringConvertible {
        let offset: Int
        let size: Int
        var description: String { "\(offset)+\(size)" }
    }

    /// The rows of the first table after the line starting with `heading`: offset and size, the
    /// first two columns ("16,384", "128 + 64 KiB").
    private func table(after heading: String, in text: String) -> [Row]? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix(heading) }) else { return nil }
        let rows = lines[(start + 1)...].drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
        return rows.compactMap { line in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2, let offset = bytes(cells[0]), let size = bytes(cells[1]) else { return nil }
            return Row(offset: offset, size: size)
        }
    }

    /// "9,480", "128 + 64 KiB", "1 MiB"; nil for a header cell.
    private func bytes(_ cell: String) -> Int? {
        var total = 0
        for term in cell.split(separator: "+") {
            let words = term.split(separator: " ")
            guard let number = words.first.flatMap({ Int($0.replacingOccurrences(of: ",", with: "")) }) else {
                return nil
            }
            switch words.dropFirst().first {
            case nil: total += number
            case "KiB": total += number << 10
            case "MiB": total += number << 20
            default: return nil
            }
        }
        return total
    }

    private func grouped(_ value: Int) -> String {
        var digits = String(value)
        var groups: [String] = []
        while digits.count > 3 {
            groups.insert(String(digits.suffix(3)), at: 0)
            digits = String(digits.dropLast(3))
        }
        return ([digits] + groups).joined(separator: ",")
    }
}
