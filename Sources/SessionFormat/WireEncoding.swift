import BrowserModel

/// The protobuf wire format of what this module writes (journal records, tab histories),
/// encoded by hand straight from the model into one buffer of the exact size: byte for byte
/// what SwiftProtobuf's encoder makes of the `session.proto` message the model maps to
/// (`WireEncodingTests` compare the two). Building SwiftProtobuf's messages and encoding them
/// took a third of a large save's CPU: every accessor copied nested messages, and the encoder
/// measured each nested message again at each level above it (`docs/benchmarks.md`).
/// Decoding stays SwiftProtobuf's.
///
/// A message lists its fields once (`encodeFields`), in field-number order with the oneof in
/// place, skipping proto3 defaults, as the generated `traverse` does; the same list measures
/// it (`WireCounter`) and writes it (`WireWriter`).
protocol WireMessage {
    func encodeFields<Sink: WireSink>(into sink: inout Sink)
}

/// Where a message's fields go: counted or written.
protocol WireSink {
    mutating func varint(_ value: UInt64, field: Int)
    mutating func string(_ value: String, field: Int)
    mutating func message(_ value: some WireMessage, field: Int)
    /// A length-delimited field whose bytes are already encoded (a message carried as stored).
    mutating func bytes(_ value: [UInt8], field: Int)
    mutating func fixed64(_ value: UInt64, field: Int)
}

extension WireSink {
    mutating func int64(_ value: Int64, field: Int) {
        if value != 0 { varint(UInt64(bitPattern: value), field: field) }
    }
    /// A negative int32 takes ten bytes: it is sign-extended to 64 bits, as protobuf says.
    mutating func int32(_ value: Int32, field: Int) { int64(Int64(value), field: field) }
    mutating func uint64(_ value: UInt64, field: Int) { if value != 0 { varint(value, field: field) } }
    mutating func bool(_ value: Bool, field: Int) { if value { varint(1, field: field) } }
    mutating func nonEmptyString(_ value: String, field: Int) { if !value.isEmpty { string(value, field: field) } }
    mutating func nonZeroFixed64(_ value: UInt64, field: Int) { if value != 0 { fixed64(value, field: field) } }
}

enum Wire {
    static let varintType: UInt64 = 0
    static let fixed64Type: UInt64 = 1
    static let lengthDelimitedType: UInt64 = 2

    static func tag(_ field: Int, _ type: UInt64) -> UInt64 { UInt64(field) << 3 | type }

    static func varintSize(_ value: UInt64) -> Int { value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7 }

    /// The bytes `message` encodes to.
    static func size(of message: some WireMessage) -> Int {
        var counter = WireCounter()
        message.encodeFields(into: &counter)
        return counter.count
    }

    /// `message` encoded.
    static func encode(_ message: some WireMessage) -> [UInt8] {
        let size = size(of: message)
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            var writer = WireWriter(buffer)
            message.encodeFields(into: &writer)
            precondition(writer.written == size, "a message encodes to the bytes it was measured at")
            initialized = size
        }
        return bytes
    }
}

struct WireCounter: WireSink {
    private(set) var count = 0

    mutating func varint(_ value: UInt64, field: Int) {
        count += Wire.varintSize(Wire.tag(field, Wire.varintType)) + Wire.varintSize(value)
    }

    mutating func string(_ value: String, field: Int) { lengthDelimited(value.utf8.count, field: field) }

    mutating func message(_ value: some WireMessage, field: Int) {
        lengthDelimited(Wire.size(of: value), field: field)
    }

    mutating func bytes(_ value: [UInt8], field: Int) { lengthDelimited(value.count, field: field) }

    mutating func fixed64(_ value: UInt64, field: Int) {
        count += Wire.varintSize(Wire.tag(field, Wire.fixed64Type)) + 8
    }

    private mutating func lengthDelimited(_ length: Int, field: Int) {
        count += Wire.varintSize(Wire.tag(field, Wire.lengthDelimitedType)) + Wire.varintSize(UInt64(length)) + length
    }
}

/// Writes into a buffer measured for the message; a write past its end traps before it lands.
struct WireWriter: WireSink {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private(set) var written = 0

    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    mutating func varint(_ value: UInt64, field: Int) {
        put(Wire.tag(field, Wire.varintType))
        put(value)
    }

    mutating func string(_ value: String, field: Int) {
        put(Wire.tag(field, Wire.lengthDelimitedType))
        put(UInt64(value.utf8.count))
        if value.utf8.withContiguousStorageIfAvailable({ put(UnsafeRawBufferPointer($0)) }) == nil {
            Array(value.utf8).withUnsafeBytes { put($0) }
        }
    }

    mutating func message(_ value: some WireMessage, field: Int) {
        put(Wire.tag(field, Wire.lengthDelimitedType))
        put(UInt64(Wire.size(of: value)))
        value.encodeFields(into: &self)
    }

    mutating func bytes(_ value: [UInt8], field: Int) {
        put(Wire.tag(field, Wire.lengthDelimitedType))
        put(UInt64(value.count))
        value.withUnsafeBytes { put($0) }
    }

    mutating func fixed64(_ value: UInt64, field: Int) {
        put(Wire.tag(field, Wire.fixed64Type))
        withUnsafeBytes(of: value.littleEndian) { put($0) }
    }

    private mutating func put(_ value: UInt64) {
        precondition(written + Wire.varintSize(value) <= buffer.count, "a write stays in the measured buffer")
        var value = value
        while value > 0x7F {
            buffer[written] = UInt8(truncatingIfNeeded: value) | 0x80
            written += 1
            value >>= 7
        }
        buffer[written] = UInt8(value)
        written += 1
    }

    private mutating func put(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count <= buffer.count - written, "a write stays in the measured buffer")
        guard let source = bytes.baseAddress, bytes.count > 0, let base = buffer.baseAddress else { return }
        (base + written).update(from: source.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        written += bytes.count
    }
}

/// A navigation entry: `NavigationItemStorage`.
struct ItemWire: WireMessage {
    let item: NavigationItem

    func encodeFields<Sink: WireSink>(into sink: inout Sink) {
        sink.nonEmptyString(item.url, field: 1)
        sink.nonEmptyString(item.title, field: 2)
        sink.int64(item.timestamp.microsecondsSinceEpoch, field: 3)
    }
}

/// A tab's history: `NavigationStorage`, what a snapshot's navigation record and a journal's
/// insert carry.
struct HistoryWire: WireMessage {
    let id: WebStateID
    let history: NavigationHistory

    func encodeFields<Sink: WireSink>(into sink: inout Sink) {
        sink.int64(id.rawValue, field: 1)
        // The history's bounds keep its index far inside Int32.
        sink.int32(Int32(history.currentIndex ?? -1), field: 2)
        for item in history.items { sink.message(ItemWire(item: item), field: 3) }
        sink.int64(Int64(history.droppedItemCount), field: 4)
    }
}

/// A tab's metadata: `WebStateMetadataStorage`, its active page always present.
private struct MetadataWire: WireMessage {
    let metadata: WebStateMetadata

    private struct Page: WireMessage {
        let title: String
        let url: String

        func encodeFields<Sink: WireSink>(into sink: inout Sink) {
            sink.nonEmptyString(title, field: 1)
            sink.nonEmptyString(url, field: 2)
        }
    }

    func encodeFields<Sink: WireSink>(into sink: inout Sink) {
        sink.int64(metadata.creationTime.microsecondsSinceEpoch, field: 1)
        sink.int64(metadata.lastActiveTime.microsecondsSinceEpoch, field: 2)
        sink.message(Page(title: metadata.activePageTitle, url: metadata.activePageURL), field: 3)
        sink.int32(Int32(clamping: metadata.navigationItemCount), field: 4)
    }
}

/// A tab as it enters a list, history included: `WebStateStorage`. An unrealized tab kept as
/// bytes (`JournalTabs`: a tab moved in from another window) carries them as they are; any
/// other unrealized tab is realized for this (a tab moved between lists), and if its history
/// cannot be read, its current page from the metadata stands in for it, so nothing that was
/// known is dropped.
struct TabWire: WireMessage {
    let id: WebStateID
    let opener: WebStateOpener?
    let metadata: WebStateMetadata
    let history: Either

    enum Either {
        case model(NavigationHistory)
        /// The tab's `NavigationStorage`, encoded.
        case stored([UInt8])
    }

    init(_ webState: WebState, opener: WebStateOpener?) {
        id = webState.id
        self.opener = opener
        if let (tabs, index) = webState.storedContent, let kept = tabs as? JournalTabs {
            history = .stored(kept.historyPayload(at: index))
        } else {
            history = .model(Self.history(of: webState))
        }
        metadata = webState.metadata
    }

    /// The tab's history, realizing it; its current page alone when the history does not read.
    static func history(of webState: WebState) -> NavigationHistory {
        if let loaded = try? webState.navigationHistory() { return loaded }
        let metadata = webState.metadata
        var fallback = NavigationHistory()
        fallback.commit(
            NavigationItem(
                url: metadata.activePageURL, title: metadata.activePageTitle, timestamp: metadata.lastActiveTime))
        return fallback
    }

    func encodeFields<Sink: WireSink>(into sink: inout Sink) {
        sink.int64(id.rawValue, field: 1)
        if let opener {
            sink.int64(opener.openerID.rawValue, field: 2)
            sink.int32(Int32(clamping: opener.navigationIndex), field: 3)
        }
        sink.message(MetadataWire(metadata: metadata), field: 4)
        switch history {
        case .model(let history): sink.message(HistoryWire(id: id, history: history), field: 5)
        case .stored(let bytes): sink.bytes(bytes, field: 5)
        }
    }
}

/// One list mutation: the `MutationRecord` oneof's message, fields of whichever it is.
enum MutationWire: WireMessage {
    /// `movedIn`, `movedOut`: the move between windows that brought or took the tab (0: none).
    case insert(index: Int32, pinned: Bool, tab: TabWire, movedIn: UInt64)
    case move(id: Int64, toIndex: Int32)
    case remove(id: Int64, closing: Bool, movedOut: UInt64)
    case replace(replacedID: Int64, tab: TabWire)
    case activate(activatedAtUs: Int64)
    /// `itemNumber`: the entry's number (`NavigationHistory.itemNumber`); `item`: a new entry.
    case navigation(id: Int64, itemNumber: Int64, item: NavigationItem?)
    case pin(id: Int64, pinned: Bool, toIndex: Int32)

    /// Its field in `MutationRecord`.
    var field: Int {
        switch self {
        case .insert: 10
        case .move: 11
        case .remove: 12
        case .replace: 13
        case .activate: 14
        case .navigation: 15
        case .pin: 16
        }
    }

    func encodeFields<Sink: WireSink>(into sink: inout Sink) {
        switch self {
        case .insert(let index, let pinned, let tab, let movedIn):
            sink.int32(index, field: 1)
            sink.bool(pinned, field: 2)
            sink.message(tab, field: 4)
            sink.nonZeroFixed64(movedIn, field: 5)
        case .move(let id, let toIndex):
            sink.int64(id, field: 1)
            sink.int32(toIndex, field: 2)
        case .remove(let id, let closing, let movedOut):
            sink.int64(id, field: 1)
            sink.bool(closing, field: 2)
            sink.nonZeroFixed64(movedOut, field: 3)
        case .replace(let replacedID, let tab):
            sink.int64(replacedID, field: 1)
            sink.message(tab, field: 2)
        case .activate(let activatedAtUs): sink.int64(activatedAtUs, field: 1)
        case .navigation(let id, let itemNumber, let item):
            sink.int64(id, field: 1)
            sink.int64(itemNumber, field: 2)
            if let item { sink.message(ItemWire(item: item), field: 3) }
        case .pin(let id, let pinned, let toIndex):
            sink.int64(id, field: 1)
            sink.bool(pinned, field: 2)
            sink.int32(toIndex, field: 3)
        }
    }
}

/// A journal record: `MutationRecord`.
struct RecordWire: WireMessage {
    let seq: UInt64
    let activeIdentifier: Int64
    let mutation: MutationWire

    func encodeFields<Sink: WireSink>(into sink: inout Sink) {
        sink.uint64(seq, field: 1)
        sink.int64(activeIdentifier, field: 2)
        sink.message(mutation, field: mutation.field)
    }
}
