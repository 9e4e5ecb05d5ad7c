import Foundation

/// The JSON `stress --json` writes: one line per top-level key, and one per element of a
/// top-level list. A campaign's thousands of events stay one line each (a fraction of the
/// pretty-printed size, and `grep` finds one), and the whole is still one JSON value, with the
/// keys sorted, that any JSON parser reads.
public enum ReportJSON {
    public static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return lines(Array(try encoder.encode(value))) + [UInt8(ascii: "\n")]
    }

    /// `compact` (JSON with no whitespace between tokens) with a line break after the opening
    /// of the top-level value, of each list that is a top-level key's value, and after each of
    /// their commas; every other container stays on its line.
    static func lines(_ compact: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(compact.count + compact.count / 8)
        // Per open container: whether its elements go one a line.
        var broken: [Bool] = []
        func newline() { out += [UInt8(ascii: "\n")] + Array(repeating: UInt8(ascii: " "), count: 2 * broken.count) }
        var index = 0
        while index < compact.count {
            let byte = compact[index]
            switch byte {
            case UInt8(ascii: "\""):
                let end = endOfString(compact, at: index)
                out += compact[index..<end]
                index = end
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                out.append(byte)
                let empty =
                    index + 1 < compact.count && [UInt8(ascii: "}"), UInt8(ascii: "]")].contains(compact[index + 1])
                broken.append(!empty && (broken.isEmpty || (broken.count == 1 && byte == UInt8(ascii: "["))))
                if broken.last == true { newline() }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                let wasBroken = broken.popLast() ?? false
                if wasBroken { newline() }
                out.append(byte)
            case UInt8(ascii: ","):
                out.append(byte)
                if broken.last == true { newline() }
            default:
                out.append(byte)
            }
            index += 1
        }
        assert(broken.isEmpty, "unbalanced JSON")
        return out
    }

    /// The index just past the string that opens at `start` (its closing quote), escapes skipped.
    private static func endOfString(_ json: [UInt8], at start: Int) -> Int {
        var index = start + 1
        while index < json.count, json[index] != UInt8(ascii: "\"") {
            index += json[index] == UInt8(ascii: "\\") ? 2 : 1
        }
        return Swift.min(index + 1, json.count)
    }
}

extension CampaignReport {
    /// The report as `stress --json` writes it (`ReportJSON`): every event kept, one a line.
    public func json() throws -> [UInt8] { try ReportJSON.encode(self) }
}
