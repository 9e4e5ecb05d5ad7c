import BrowserModel
import Foundation
import HostCoordination
import HostLimits
import SessionStore

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
            if value == value.rounded(), abs(value) < 1e15 {
                try container.encode(Int64(value))
            } else {
                try container.encode(value)
            }
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
        guard let number, number.rounded() == number, number.magnitude <= Double(Limits.maxCommandSeq) else {
            return nil
        }
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

/// The name of each request on the wire (`"verb"`): the one place a verb is spelled (a `ctl`
/// subcommand whose type's name does not give it takes it from here).
public enum Verb: String, CaseIterable, Sendable {
    case status, stats, connect, shutdown
    case disconnect, background, foreground
    case open, navigate, close, activate, move, replace
    case pin, unpin, back, forward
    case closeAll = "close-all"
    case save
    case waitDurable = "wait-durable"
    case kill, dump
    case setAside = "set-aside"
    case adopt, discard
    case closeWindow = "close-window"
    case moveToWindow = "move-to-window"
}

/// What a request asks of one window.
public enum WindowRequest: Equatable, Sendable {
    case tab(TabCommand)
    case scene(SceneChange)
    /// `wait`: answered once the save is durable (74 as soon as one fails).
    case save(wait: Bool)
    case dump
    /// Answered once the command `seq` (nil: every command applied so far) is durable.
    case waitDurable(seq: UInt64?)
    /// `wait`: answered once a replacement worker has restored the window; `aim`: what the
    /// signal waits for (nil: sent at once).
    case kill(signal: Int32, wait: Bool, aim: KillAim?)
}

/// A stage of a move's course a kill can be aimed at (`MoveLifecycle.State`'s names).
public enum MoveStage: String, Codable, Sendable, CaseIterable {
    case exporting, importing, committing, dropping, settling
}

/// What a kill waits for before it is sent.
public enum KillAim: Equatable, Sendable {
    /// A save in flight in the window's slot (`--aim`).
    case save
    /// A move the window takes part in entering `stage` (`--aim-move STAGE`).
    case move(MoveStage)
}

/// One `windowhost ctl` call: a JSON object on one line over the control socket
/// (`{"verb":"open","window":"…","url":"…",…}`, the fields a verb takes beside its verb).
/// Decoding validates: a request the supervisor would refuse before reaching a window throws
/// the `ControlFailure` it is answered with (64 for a missing or unknown field, 65 for a URL or
/// an index outside what the control plane accepts).
public enum ControlRequest: Codable, Equatable, Sendable {
    case status
    /// `histogram`: also the total latency histogram, HdrHistogram's JSON in base64, so a tool
    /// watching several supervisors in turn (stress) can merge them.
    case stats(histogram: Bool)
    case connect
    case shutdown
    case window(UUID, WindowRequest)
    /// The entries of `ROOT/set-aside/`.
    case setAside
    /// Brings entry `id` back as a window: under its own UUID unless `asNewWindow` or that
    /// window is open or on disk; answered once the window has restored and saved durably.
    case adopt(entry: String, asNewWindow: Bool)
    /// Deletes entry `id` durably.
    case discard(entry: String)
    /// Closes window `id` for good (iOS's discarded scene session): its sessions deleted
    /// durably, out of the order, its UUID never handed out again.
    case closeWindow(UUID)
    /// Moves tab `tab` of window `from` to window `to` (at `index`, nil: the end), exactly once:
    /// answered once the tab is durably gone from one and present in the other.
    case moveToWindow(from: UUID, tab: Int64, to: UUID, index: Int?)

    public var verb: Verb {
        switch self {
        case .status: .status
        case .stats: .stats
        case .connect: .connect
        case .shutdown: .shutdown
        case .setAside: .setAside
        case .adopt: .adopt
        case .discard: .discard
        case .closeWindow: .closeWindow
        case .moveToWindow: .moveToWindow
        case .window(_, .tab(.open)): .open
        case .window(_, .tab(.navigate)): .navigate
        case .window(_, .tab(.close)): .close
        case .window(_, .tab(.activate)): .activate
        case .window(_, .tab(.move)): .move
        case .window(_, .tab(.replace)): .replace
        case .window(_, .tab(.closeAll)): .closeAll
        case .window(_, .tab(.setPinned(_, let pinned))): pinned ? .pin : .unpin
        case .window(_, .tab(.go(_, let direction))): direction == .back ? .back : .forward
        case .window(_, .scene(.background)): .background
        case .window(_, .scene(.foreground)): .foreground
        case .window(_, .scene(.disconnect)): .disconnect
        case .window(_, .save): .save
        case .window(_, .dump): .dump
        case .window(_, .waitDurable): .waitDurable
        case .window(_, .kill): .kill
        }
    }

    /// A key the request line's top-level object names more than once, if any. JSONDecoder
    /// keeps the first value of such a key and other parsers the last, so the line is two
    /// different requests (`{"window":A,…,"window":B}` acts on A where a script's parser sees
    /// B): the supervisor refuses it (64). Keys compare as Swift strings, which refuses a pair
    /// that differs only in Unicode normalization too.
    public static func repeatedKey(in line: [UInt8]) -> String? {
        guard let keys = topLevelKeys(in: line) else { return nil }
        var seen: Set<String> = []
        return keys.first { !seen.insert($0).inserted }
    }

    /// The keys of the line's top-level object in order, repeats kept; nil when the line is not
    /// an object this scan can read (the decoder then says what is wrong). Strings are skipped
    /// by their escapes and nesting is counted, not parsed; a key with an escape is read by
    /// JSONDecoder, so escapes (`"wind\u006fw"`) name the key they spell.
    public static func topLevelKeys(in line: [UInt8]) -> [String]? {
        let quote = UInt8(ascii: "\"")
        let backslash = UInt8(ascii: "\\")
        guard line.first(where: { !Self.isJSONWhitespace($0) }) == UInt8(ascii: "{") else { return nil }
        var keys: [String] = []
        var depth = 0
        var expectsKey = false
        var index = 0
        while index < line.count {
            let byte = line[index]
            switch byte {
            case quote:
                let start = index
                index += 1
                while index < line.count, line[index] != quote { index += line[index] == backslash ? 2 : 1 }
                guard index < line.count else { return nil }
                if depth == 1, expectsKey {
                    let quoted = line[start...index]
                    let key =
                        quoted.contains(backslash)
                        ? try? JSONDecoder().decode(String.self, from: Data(quoted))
                        : String(validating: quoted.dropFirst().dropLast(), as: UTF8.self)
                    guard let key else { return nil }
                    keys.append(key)
                    expectsKey = false
                }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                expectsKey = depth == 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 { return keys }
            case UInt8(ascii: ","):
                if depth == 1 { expectsKey = true }
            default: break
            }
            index += 1
        }
        return nil
    }

    private static func isJSONWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
            || byte == UInt8(ascii: "\r")
    }

    /// The window a request names: `text` whole, or the refusal (64) naming it.
    public static func windowID(_ text: String) throws(ControlFailure) -> UUID {
        guard let id = UUID(exactly: text) else {
            throw ControlFailure(
                code: .usage, message: "'\(text.debugDescription.dropFirst().dropLast())' is not a UUID")
        }
        return id
    }

    /// A URL the command ring carries (`Limits.maxControlURLBytes`) and holding no character
    /// `ForbiddenCharacter` refuses (65); the tab's own bound (`Limits.maxURLBytes`) is larger
    /// and checked by the worker, with the characters again.
    public static func check(url: String) throws(ControlFailure) {
        if let forbidden = ForbiddenCharacter.inURL(url) {
            throw ControlFailure(code: .badData, message: "\(forbidden)")
        }
        guard url.utf8.count <= Limits.maxControlURLBytes else {
            throw ControlFailure(
                code: .badData,
                message:
                    "URL of \(url.utf8.count) bytes is longer than the \(Limits.maxControlURLBytes) the control plane carries (Limits.maxControlURLBytes)"
            )
        }
    }

    /// The URL the request carries, if any.
    public var url: String? {
        switch self {
        case .window(_, .tab(.open(let url, _, _, _, _))), .window(_, .tab(.navigate(_, let url))),
            .window(_, .tab(.replace(_, let url))):
            url
        default: nil
        }
    }

    /// The request's line as it goes over the wire: today's flat object, every field optional
    /// but `verb`, the fields a verb does not take ignored.
    fileprivate struct Wire: Codable {
        var verb: String
        var window: String?
        var tab: Int64?
        var url: String?
        var incognito: Bool?
        var opener: Int64?
        var index: Int?
        var background: Bool?
        var wait: Bool?
        var signal: String?
        var histogram: Bool?
        var aim: Bool?
        var seq: UInt64?
        var entry: String?
        var newWindow: Bool?
        var to: String?
        var aimMove: String?

        enum CodingKeys: String, CodingKey {
            case verb, window, tab, url, incognito, opener, index, background, wait, signal, histogram, aim, seq
            case entry, newWindow, to
            case aimMove = "aim_move"
        }
    }

    public init(from decoder: any Decoder) throws {
        try self.init(try Wire(from: decoder))
    }

    /// Validates in the order the supervisor always has: the verb, its window, then its fields.
    private init(_ wire: Wire) throws(ControlFailure) {
        guard let verb = Verb(rawValue: wire.verb) else {
            throw ControlFailure(code: .usage, message: "unknown verb '\(wire.verb)'")
        }
        if let request = try Self.hostRequest(verb, wire) {
            self = request
            return
        }
        guard let text = wire.window else {
            throw ControlFailure(code: .usage, message: "\(verb.rawValue) needs a window")
        }
        let id = try Self.windowID(text)
        self = .window(id, try Self.windowRequest(verb, wire))
    }

    /// The request of a verb that names no window, or nil for one that does.
    private static func hostRequest(_ verb: Verb, _ wire: Wire) throws(ControlFailure) -> ControlRequest? {
        switch verb {
        case .status: return .status
        case .stats: return .stats(histogram: wire.histogram ?? false)
        case .connect: return .connect
        case .shutdown: return .shutdown
        case .setAside: return .setAside
        case .adopt: return .adopt(entry: try wire.entry(verb), asNewWindow: wire.newWindow ?? false)
        case .discard: return .discard(entry: try wire.entry(verb))
        case .closeWindow:
            guard let text = wire.window else {
                throw ControlFailure(code: .usage, message: "close-window needs a window")
            }
            return .closeWindow(try windowID(text))
        case .moveToWindow:
            guard let from = wire.window, let to = wire.to else {
                throw ControlFailure(code: .usage, message: "move-to-window needs a window and the window it goes to")
            }
            let (source, destination) = (try windowID(from), try windowID(to))
            guard source != destination else {
                throw ControlFailure(
                    code: .usage, message: "move-to-window moves a tab to another window, not to its own")
            }
            let tab = try wire.tab(verb)
            var at: Int?
            if let given = wire.index { at = try checked(index: given) }
            return .moveToWindow(from: source, tab: tab, to: destination, index: at)
        default: return nil
        }
    }

    /// The request of a verb that names a window, its fields checked.
    private static func windowRequest(_ verb: Verb, _ wire: Wire) throws(ControlFailure) -> WindowRequest {
        switch verb {
        case .status, .stats, .connect, .shutdown, .setAside, .adopt, .discard, .closeWindow, .moveToWindow:
            preconditionFailure("answered by hostRequest")
        case .open:
            let url = wire.url ?? "about:blank"
            try check(url: url)
            var at: Int?
            if let given = wire.index { at = try checked(index: given) }
            return .tab(
                .open(
                    url: url, incognito: wire.incognito ?? false, index: at, opener: wire.opener,
                    background: wire.background ?? false))
        case .navigate:
            let tab = try wire.tab(verb)
            return .tab(.navigate(tab: tab, url: try wire.url(verb)))
        case .close: return .tab(.close(tab: try wire.tab(verb)))
        case .activate: return .tab(.activate(tab: try wire.tab(verb)))
        case .move:
            let tab = try wire.tab(verb)
            guard let given = wire.index else { throw ControlFailure(code: .usage, message: "move needs an index") }
            return .tab(.move(tab: tab, index: try checked(index: given)))
        case .replace:
            let tab = try wire.tab(verb)
            return .tab(.replace(tab: tab, url: try wire.url(verb)))
        case .closeAll: return .tab(.closeAll(incognito: wire.incognito ?? false))
        case .pin, .unpin: return .tab(.setPinned(tab: try wire.tab(verb), pinned: verb == .pin))
        case .back, .forward: return .tab(.go(tab: try wire.tab(verb), verb == .back ? .back : .forward))
        case .background: return .scene(.background)
        case .foreground: return .scene(.foreground)
        case .disconnect: return .scene(.disconnect)
        case .save: return .save(wait: wire.wait ?? false)
        case .dump: return .dump
        case .waitDurable: return .waitDurable(seq: wire.seq)
        case .kill:
            return .kill(
                signal: try SignalName.checked(wire.signal ?? "KILL"), wait: wire.wait ?? true, aim: try wire.killAim())
        }
    }

    /// An index as the user gave it: checked here, named unchanged, never clamped.
    private static func checked(index given: Int) throws(ControlFailure) -> Int {
        guard (0...Limits.maxTabsPerBrowser).contains(given) else {
            throw ControlFailure(
                code: .badData,
                message: "index \(given) outside 0...\(Limits.maxTabsPerBrowser) (Limits.maxTabsPerBrowser)")
        }
        return given
    }

    public func encode(to encoder: any Encoder) throws {
        var wire = Wire(verb: verb.rawValue)
        switch self {
        case .status, .connect, .shutdown, .setAside: break
        case .stats(let histogram): wire.histogram = histogram
        case .adopt(let entry, let asNewWindow): (wire.entry, wire.newWindow) = (entry, asNewWindow)
        case .discard(let entry): wire.entry = entry
        case .closeWindow(let id): wire.window = id.uuidString
        case .moveToWindow(let from, let tab, let to, let index):
            (wire.window, wire.tab, wire.to, wire.index) = (from.uuidString, tab, to.uuidString, index)
        case .window(let id, let request):
            wire.window = id.uuidString
            switch request {
            case .tab(.open(let url, let incognito, let index, let opener, let background)):
                (wire.url, wire.incognito, wire.index, wire.opener, wire.background) = (
                    url, incognito, index, opener, background
                )
            case .tab(.navigate(let tab, let url)), .tab(.replace(let tab, let url)): (wire.tab, wire.url) = (tab, url)
            case .tab(.close(let tab)), .tab(.activate(let tab)): wire.tab = tab
            case .tab(.move(let tab, let index)): (wire.tab, wire.index) = (tab, index)
            case .tab(.closeAll(let incognito)): wire.incognito = incognito
            case .tab(.setPinned(let tab, _)), .tab(.go(let tab, _)): wire.tab = tab
            case .scene, .dump: break
            case .save(let wait): wire.wait = wait
            case .waitDurable(let seq): wire.seq = seq
            case .kill(let signal, let wait, let aim):
                (wire.signal, wire.wait, wire.aim) = (SignalName.name(signal), wait, aim == .save)
                if case .move(let stage) = aim { wire.aimMove = stage.rawValue }
            }
        }
        try wire.encode(to: encoder)
    }
}

/// The answer to one request: a JSON object on one line.
public struct ControlReply: Codable, Equatable, Sendable {
    public var code: ControlCode
    public var error: String?
    public var result: JSONValue?

    package init(code: ControlCode, error: String? = nil, result: JSONValue? = nil) {
        self.code = code
        self.error = error
        self.result = result
    }

    public static func ok(_ result: JSONValue) -> ControlReply { ControlReply(code: .ok, error: nil, result: result) }
    public static func failure(_ code: ControlCode, _ message: String) -> ControlReply {
        ControlReply(code: code, error: message, result: nil)
    }
    public static func failure(_ refusal: ControlFailure) -> ControlReply { .failure(refusal.code, refusal.message) }
}

/// Signal names `ctl kill --signal` takes: the one table its help text lists names from, so a
/// name the help shows is one the request accepts.
public enum SignalName {
    /// Every standard Linux signal by its name without SIG, one name for each number.
    public static let numbers: [String: Int32] = [
        "HUP": SIGHUP, "INT": SIGINT, "QUIT": SIGQUIT, "ILL": SIGILL, "TRAP": SIGTRAP, "ABRT": SIGABRT, "BUS": SIGBUS,
        "FPE": SIGFPE, "KILL": SIGKILL, "USR1": SIGUSR1, "SEGV": SIGSEGV, "USR2": SIGUSR2, "PIPE": SIGPIPE,
        "ALRM": SIGALRM, "TERM": SIGTERM, "CHLD": SIGCHLD, "CONT": SIGCONT, "STOP": SIGSTOP, "TSTP": SIGTSTP,
        "TTIN": SIGTTIN, "TTOU": SIGTTOU, "URG": SIGURG, "XCPU": SIGXCPU, "XFSZ": SIGXFSZ, "VTALRM": SIGVTALRM,
        "PROF": SIGPROF, "WINCH": SIGWINCH, "IO": SIGIO, "PWR": SIGPWR, "SYS": SIGSYS,
    ]
    /// The signals that stop a process by default: a hang the watchdog catches.
    public static let stopping: [Int32] = [SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU]
    /// The signals a process ignores by default: nothing dies, no restart comes.
    public static let ignoredByDefault: [Int32] = [SIGCONT, SIGCHLD, SIGURG, SIGWINCH]

    /// `signals` named for a help text: "CONT, CHLD, URG, WINCH".
    public static func list(_ signals: [Int32]) -> String { signals.map(name).joined(separator: ", ") }

    public static func number(_ name: String) -> Int32? {
        let bare = name.uppercased().hasPrefix("SIG") ? String(name.uppercased().dropFirst(3)) : name.uppercased()
        return numbers[bare] ?? Int32(name).flatMap { (1...64).contains($0) ? $0 : nil }
    }

    /// The signal `name` names, or the refusal (64) a request naming it gets.
    public static func checked(_ name: String) throws(ControlFailure) -> Int32 {
        guard let signal = number(name) else { throw ControlFailure(code: .usage, message: "unknown signal '\(name)'") }
        return signal
    }

    /// `signal`'s name without SIG (`KILL`), or its number for one without a name here.
    public static func name(_ signal: Int32) -> String {
        numbers.first { $0.value == signal }?.key ?? "\(signal)"
    }
}

extension ControlRequest.Wire {
    /// What a kill is aimed at: `aim` (a save in flight) or `aim_move` (a move's stage), not both.
    fileprivate func killAim() throws(ControlFailure) -> KillAim? {
        guard let name = aimMove else { return aim == true ? .save : nil }
        guard aim != true else {
            throw ControlFailure(
                code: .usage, message: "kill is aimed at a save in flight or at a move's stage, not both")
        }
        guard let stage = MoveStage(rawValue: name) else {
            let stages = MoveStage.allCases.map(\.rawValue).joined(separator: ", ")
            throw ControlFailure(
                code: .usage,
                message: "unknown move stage '\(name.debugDescription.dropFirst().dropLast())' (one of \(stages))")
        }
        return .move(stage)
    }

    /// The tab a verb needs.
    fileprivate func tab(_ verb: Verb) throws(ControlFailure) -> Int64 {
        guard let tab else { throw ControlFailure(code: .usage, message: "\(verb.rawValue) needs a tab") }
        return tab
    }

    /// The URL a verb needs, checked as the command ring carries it.
    fileprivate func url(_ verb: Verb) throws(ControlFailure) -> String {
        guard let url, !url.isEmpty else {
            throw ControlFailure(code: .usage, message: "\(verb.rawValue) needs a URL")
        }
        try ControlRequest.check(url: url)
        return url
    }

    /// A set-aside entry's id as the user gave it: one the host could have named, or 65.
    fileprivate func entry(_ verb: Verb) throws(ControlFailure) -> String {
        guard let entry else {
            throw ControlFailure(code: .usage, message: "\(verb.rawValue) needs an entry id (ctl set-aside lists them)")
        }
        guard SetAsideShelf.isValidID(entry) else {
            throw ControlFailure(
                code: .badData,
                message:
                    "'\(entry.debugDescription.dropFirst().dropLast())' is no set-aside entry id (ctl set-aside lists them)"
            )
        }
        return entry
    }
}
