import Foundation
import HostCoordination
import HostLimits

/// A JSON value, for control replies whose shape depends on the verb.
public enum JSONValue: Codable, Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(_ value: some BinaryInteger) { self = .number(Double(value)) }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            if value == value.rounded(), abs(value) < 1e15 { try container.encode(Int64(value)) } else { try container.encode(value) }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { object[key] } else { nil }
    }

    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var number: Double? { if case .number(let value) = self { value } else { nil } }
    /// The number as an integer, when it is one a JSON double holds exactly (|n| ≤ 2⁵³ − 1,
    /// `Limits.maxCommandSeq`); nil for any other, never a trap on a reply's value.
    public var int: Int64? {
        guard let number, number.rounded() == number, number.magnitude <= Double(Limits.maxCommandSeq) else { return nil }
        return Int64(number)
    }
    public var array: [JSONValue]? { if case .array(let value) = self { value } else { nil } }
    public var bool: Bool? { if case .bool(let value) = self { value } else { nil } }

    /// One line of JSON, keys sorted.
    public var line: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(self), as: UTF8.self)) ?? "null"
    }
}

/// One `windowhost ctl` call: a JSON object on one line over the control socket.
public struct ControlRequest: Codable, Equatable, Sendable {
    public var verb: String
    public var window: String?
    public var tab: Int64?
    public var url: String?
    public var incognito: Bool?
    public var opener: Int64?
    public var index: Int?
    public var background: Bool?
    public var wait: Bool?
    public var signal: String?
    /// `stats`: also the total latency histogram, HdrHistogram's JSON in base64, so a tool
    /// watching several supervisors in turn (stress) can merge them.
    public var histogram: Bool?
    /// `kill`: wait (at most 50 ms) until shared memory shows a save in flight, then signal.
    public var aim: Bool?
    /// `wait-durable`: the command to wait for (default: every command applied so far).
    public var seq: UInt64?

    public init(verb: String) { self.verb = verb }
}

/// The answer to one request: a JSON object on one line.
public struct ControlReply: Codable, Equatable, Sendable {
    public var code: ControlCode
    public var error: String?
    public var result: JSONValue?

    public static func ok(_ result: JSONValue) -> ControlReply { ControlReply(code: .ok, error: nil, result: result) }
    public static func failure(_ code: ControlCode, _ message: String) -> ControlReply {
        ControlReply(code: code, error: message, result: nil)
    }
}

/// Signal names `ctl kill --signal` takes.
public enum SignalName {
    public static let numbers: [String: Int32] = [
        "KILL": SIGKILL, "TERM": SIGTERM, "INT": SIGINT, "ABRT": SIGABRT, "SEGV": SIGSEGV, "STOP": SIGSTOP,
        "CONT": SIGCONT, "HUP": SIGHUP, "QUIT": SIGQUIT, "USR1": SIGUSR1, "USR2": SIGUSR2,
    ]

    public static func number(_ name: String) -> Int32? {
        let bare = name.uppercased().hasPrefix("SIG") ? String(name.uppercased().dropFirst(3)) : name.uppercased()
        return numbers[bare] ?? Int32(name).flatMap { (1...64).contains($0) ? $0 : nil }
    }
}

extension UUID {
    /// A UUID that is `text` whole. `UUID(uuidString:)` reads a C string, so it stops at a NUL
    /// and takes "UUID\0anything" for the UUID: a request naming a window must name it exactly.
    public init?(exactly text: String) {
        guard text.utf8.count == 36, let id = UUID(uuidString: text) else { return nil }
        self = id
    }
}
