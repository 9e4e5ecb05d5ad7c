import Foundation
import HostCoordination
import HostLimits

// The typed answers of the control socket, one per reply shape. They travel as the `result`
// of a `ControlReply` in the snake_case JSON scripts read (`ctl … --json`): the supervisor
// builds them, clients decode them (`ControlReply.decode`); no one digs in a `JSONValue`.
// Their keys are their properties' names in snake_case, by the library's key strategies
// (`ReplyCoding`), so a property is named as its key reads (`p99Us` for `p99_us`).

/// The one coding of typed replies: `JSONEncoder`'s and `JSONDecoder`'s snake_case strategies
/// (a dictionary's own keys, window UUIDs say, are left as they are).
public enum ReplyCoding {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }
}

/// `connect`: the new window and its first worker.
public struct ConnectReply: Codable, Equatable, Sendable {
    public var window: String
    public var pid: Int32

    package init(window: String, pid: Int32) {
        self.window = window
        self.pid = pid
    }
}

/// A command a window's worker applied (`open`, `navigate`, … `save` without `--wait`,
/// `background`, `disconnect`): the window's seq after it; `tab` for a command that made one
/// (`open`, `replace`), `state` for `background` and `foreground`.
public struct CommandReply: Codable, Equatable, Sendable {
    public var window: String
    public var seq: UInt64
    public var tab: Int64?
    public var state: String?

    package init(window: String, seq: UInt64, tab: Int64? = nil, state: String? = nil) {
        self.window = window
        self.seq = seq
        self.tab = tab
        self.state = state
    }
}

/// A tab moved between windows (`move-to-window`): durably gone from `from` and present in
/// `window` as `tab`, a new id of that window's.
public struct MoveReply: Codable, Equatable, Sendable {
    public var window: String
    public var tab: Int64
    public var from: String
    public var fromTab: Int64
    /// The move's id, as the supervisor's log and both windows' records name it (hex).
    public var move: String
    /// `window`'s applied seq once it held the tab, and `from`'s once it had dropped it: both
    /// durable when this reply comes, as a `wait-durable` of each would say.
    public var seq: UInt64
    public var fromSeq: UInt64

    package init(window: String, tab: Int64, seq: UInt64, from: String, fromTab: Int64, fromSeq: UInt64, move: String) {
        (self.window, self.tab, self.seq, self.from, self.fromTab, self.fromSeq, self.move) = (
            window, tab, seq, from, fromTab, fromSeq, move
        )
    }
}

/// A durable answer (`wait-durable`, `save --wait`): the seq durable, and the ranges below it
/// lost with a killed worker, which it does not cover (absent when there are none).
public struct DurableReply: Codable, Equatable, Sendable {
    public var window: String
    public var durableSeq: UInt64
    public var lostSeqs: [SeqRange]?
    /// With exit 71 (`ControlCode.memoryOnly`): the first command covered whose effect is only
    /// in an incognito Browser kept in memory only; `durable_seq` is then the regular Browser's.
    public var memoryOnlySince: UInt64?

    package init(window: String, durableSeq: UInt64, lostSeqs: [SeqRange]? = nil, memoryOnlySince: UInt64? = nil) {
        self.window = window
        self.durableSeq = durableSeq
        self.lostSeqs = lostSeqs
        self.memoryOnlySince = memoryOnlySince
    }
}

/// Seqs `first…last`, as JSON `[first, last]`.
public struct SeqRange: Codable, Equatable, Sendable {
    public var first: UInt64
    public var last: UInt64

    public init(_ range: ClosedRange<UInt64>) { (first, last) = (range.lowerBound, range.upperBound) }

    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        first = try container.decode(UInt64.self)
        last = try container.decode(UInt64.self)
        guard container.isAtEnd, first <= last else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "a seq range is [first, last], first ≤ last")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(first)
        try container.encode(last)
    }
}

/// `kill`: the worker signalled; once its replacement is ready, that one's pid and how long
/// the window took to come back; for a signal ignored by default, the signal and
/// `restart_expected: false`.
public struct KillReply: Codable, Equatable, Sendable {
    public var window: String
    public var killedPid: Int32
    public var whileSaving: Bool
    public var pid: Int32?
    public var recoveryMs: Double?
    public var signal: String?
    public var restartExpected: Bool?
    /// `--aim-move`: the stage of the move the window took part in when it was signalled, nil
    /// when it was in none.
    public var moveStage: MoveStage?

    package init(
        window: String,
        killedPid: Int32,
        whileSaving: Bool,
        pid: Int32? = nil,
        recoveryMs: Double? = nil,
        signal: String? = nil,
        restartExpected: Bool? = nil,
        moveStage: MoveStage? = nil
    ) {
        self.window = window
        self.killedPid = killedPid
        self.whileSaving = whileSaving
        self.pid = pid
        self.recoveryMs = recoveryMs
        self.signal = signal
        self.restartExpected = restartExpected
        self.moveStage = moveStage
    }
}

/// `shutdown`.
public struct ShutdownReply: Codable, Equatable, Sendable {
    public var stopping: Bool

    package init(stopping: Bool) {
        self.stopping = stopping
    }
}

/// `dump`: both Browsers as the worker holds them.
public struct DumpReply: Codable, Equatable, Sendable {
    public var window: String
    public var appliedSeq: UInt64
    public var durableSeq: UInt64
    /// `WindowDigest`, 16 hex digits.
    public var digest: String
    public var regular: BrowserContents
    public var incognito: BrowserContents

    public init(
        window: String, appliedSeq: UInt64, durableSeq: UInt64, digest: String, regular: BrowserContents,
        incognito: BrowserContents
    ) {
        (self.window, self.appliedSeq, self.durableSeq, self.digest) = (window, appliedSeq, durableSeq, digest)
        (self.regular, self.incognito) = (regular, incognito)
    }

    public struct BrowserContents: Codable, Equatable, Sendable {
        /// Null when the Browser has no active tab.
        @ExplicitNull public var activeIndex: Int32?
        public var tabs: [Tab]

        public init(activeIndex: Int32?, tabs: [Tab]) { (self.activeIndex, self.tabs) = (activeIndex, tabs) }
    }

    public struct Tab: Codable, Equatable, Sendable {
        public var id: Int64
        public var url: String
        public var title: String
        public var realized: Bool
        public var pinned: Bool
        @ExplicitNull public var opener: Int64?
        /// The current entry of the tab's history; absent while the tab is unrealized (a dump
        /// reads no stored history, so it realizes nothing).
        public var historyIndex: Int32?
        /// How many entries its history holds; absent from a supervisor before it was shown.
        public var historyCount: Int32?
        /// When the tab was last activated or shown, in microseconds since the epoch; absent
        /// from a supervisor before it was shown.
        public var lastActiveTimeUs: Int64?

        public init(
            id: Int64, url: String, title: String, realized: Bool, pinned: Bool, opener: Int64?,
            historyIndex: Int32? = nil, historyCount: Int32? = nil,
            lastActiveTimeUs: Int64?
        ) {
            (self.id, self.url, self.title, self.realized, self.pinned, self.opener) = (
                id, url, title, realized, pinned, opener
            )
            (self.historyIndex, self.historyCount, self.lastActiveTimeUs) = (
                historyIndex, historyCount, lastActiveTimeUs
            )
        }
    }
}

/// Where the supervisor's spare worker is: one started and waiting with no window, handed to
/// the next window that needs a worker (`SpareLifecycle`).
public enum SpareStatus: String, Codable, Sendable {
    /// `run --no-spare`: every worker is spawned for its window.
    case off
    /// None runs: one starts once the windows' restores are done, or after a backoff.
    case none
    case starting
    case waiting
    /// The last went to a window; the next starts once the windows' restores are done.
    case handed
    /// Killed, its end awaited.
    case stopping
}

/// `status`: the supervisor, each window, the sessions set aside, the windows' order.
public struct StatusReply: Codable, Equatable, Sendable {
    public var supervisorPid: Int32
    public var root: String
    public var socket: String
    public var windows: [WindowStatus]
    /// Every entry of `ROOT/set-aside/`, as `set-aside` lists them.
    public var setAside: [SetAsideStatus]
    public var order: [String]
    /// Closed windows kept on disk, the bound on them (`run --keep-closed`), and how many were
    /// deleted past it since the start.
    public var closedWindows: Int
    public var keepClosed: Int
    public var closedWindowsEvicted: UInt64
    /// Where the spare worker is (`run --no-spare`: `off`); nil from a supervisor before spares.
    public var spare: SpareStatus?
    /// The moves between windows under way, oldest first; nil from a supervisor before moves.
    public var moves: [MoveStatus]?

    package init(
        supervisorPid: Int32,
        root: String,
        socket: String,
        windows: [WindowStatus],
        setAside: [SetAsideStatus],
        order: [String],
        closedWindows: Int,
        keepClosed: Int,
        closedWindowsEvicted: UInt64
    ) {
        self.supervisorPid = supervisorPid
        self.root = root
        self.socket = socket
        self.windows = windows
        self.setAside = setAside
        self.order = order
        self.closedWindows = closedWindows
        self.keepClosed = keepClosed
        self.closedWindowsEvicted = closedWindowsEvicted
    }
}

extension StatusReply {
    /// The closed windows' fields read as 0 when absent: a reply of a supervisor before them.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        supervisorPid = try container.decode(Int32.self, forKey: .supervisorPid)
        root = try container.decode(String.self, forKey: .root)
        socket = try container.decode(String.self, forKey: .socket)
        windows = try container.decode([WindowStatus].self, forKey: .windows)
        setAside = try container.decode([SetAsideStatus].self, forKey: .setAside)
        order = try container.decode([String].self, forKey: .order)
        closedWindows = try container.decodeIfPresent(Int.self, forKey: .closedWindows) ?? 0
        keepClosed = try container.decodeIfPresent(Int.self, forKey: .keepClosed) ?? 0
        closedWindowsEvicted = try container.decodeIfPresent(UInt64.self, forKey: .closedWindowsEvicted) ?? 0
        spare = try container.decodeIfPresent(SpareStatus.self, forKey: .spare)
        moves = try container.decodeIfPresent([MoveStatus].self, forKey: .moves)
    }
}

/// A move between windows under way (`move-to-window`), as `status` shows it.
public struct MoveStatus: Codable, Equatable, Sendable {
    /// The move's id (hex), as `ROOT/moves` and the windows' records name it.
    public var move: String
    public var from: String
    public var tab: Int64
    public var to: String
    /// The destination's id for the tab, once it made it.
    public var newTab: Int64?
    /// Where its course is (`MoveLifecycle.State`: `exporting`, `importing`, `committing`,
    /// `dropping`, `settling`, `awaiting_destination`, `asking`, `awaiting_source`).
    public var state: String
    /// Whether the destination holds the tab for good (the import durable).
    public var committed: Bool
    /// Since the request, or since this supervisor took it up from the log.
    public var ms: Double

    package init(
        move: String, from: String, tab: Int64, to: String, newTab: Int64?, state: String, committed: Bool, ms: Double
    ) {
        (self.move, self.from, self.tab, self.to, self.newTab) = (move, from, tab, to, newTab)
        (self.state, self.committed, self.ms) = (state, committed, ms)
    }

    /// One line of `ctl status`.
    public var line: String {
        "move \(move): tab \(tab) of \(from) to \(to)\(newTab.map { " (tab \($0) there)" } ?? ""): \(state)"
            + (committed ? ", committed" : "") + String(format: " for %.1f ms", ms)
    }
}

/// `set-aside`: every entry of `ROOT/set-aside/`, sorted by id.
public struct SetAsideReply: Codable, Equatable, Sendable {
    public var setAside: [SetAsideStatus]

    package init(setAside: [SetAsideStatus]) {
        self.setAside = setAside
    }
}

/// One entry of `ROOT/set-aside/`. What it holds (`browsers` to `damaged`) is read by
/// `windowhost inspect --set-aside ID --summary` in a child process, never by the supervisor
/// itself (a session that crashes its worker must not crash the supervisor): null until
/// `summary` is `read`.
public struct SetAsideStatus: Codable, Equatable, Sendable {
    public var id: String
    /// The window it came from; null for a root file (`handed-out`).
    @ExplicitNull public var uuid: String?
    /// `crash_loop`, `damaged_file`, `symlink`, `bad_entry` or `unrecorded` (`SetAsideReason`).
    public var reason: String
    /// ISO 8601, to the second; null when its name carries no time.
    @ExplicitNull public var at: String?
    /// What this supervisor saw when it set the entry aside; null for entries found on disk.
    @ExplicitNull public var detail: String?
    public var path: String
    /// `directory`, `symlink`, `file` or `other`, as found (never followed).
    public var kind: String
    /// `set_aside`, or `adopting` while `adopt` brings it back as window `adopting_as`.
    public var state: String
    @ExplicitNull public var adoptingAs: String?
    /// `read`, `pending`, `not_a_session` (a symlink, a file, `handed-out`) or `unreadable: …`.
    public var summary: String
    @ExplicitNull public var browsers: [String]?
    @ExplicitNull public var tabs: UInt64?
    @ExplicitNull public var regularTabs: UInt64?
    @ExplicitNull public var incognitoTabs: UInt64?
    /// The newest durable seq readable in it (the higher of its Browsers').
    @ExplicitNull public var durableSeq: UInt64?
    /// Whether any of its files failed their checks (`inspect --set-aside ID` names them).
    @ExplicitNull public var damaged: Bool?

    package init(
        id: String,
        uuid: String? = nil,
        reason: String,
        at: String? = nil,
        detail: String? = nil,
        path: String,
        kind: String,
        state: String,
        adoptingAs: String? = nil,
        summary: String,
        browsers: [String]? = nil,
        tabs: UInt64? = nil,
        regularTabs: UInt64? = nil,
        incognitoTabs: UInt64? = nil,
        durableSeq: UInt64? = nil,
        damaged: Bool? = nil
    ) {
        self.id = id
        self.uuid = uuid
        self.reason = reason
        self.at = at
        self.detail = detail
        self.path = path
        self.kind = kind
        self.state = state
        self.adoptingAs = adoptingAs
        self.summary = summary
        self.browsers = browsers
        self.tabs = tabs
        self.regularTabs = regularTabs
        self.incognitoTabs = incognitoTabs
        self.durableSeq = durableSeq
        self.damaged = damaged
    }
}

/// `adopt`: the entry is a window again, restored and saved durably; it has left `set-aside/`.
public struct AdoptReply: Codable, Equatable, Sendable {
    public var entry: String
    public var window: String
    public var pid: Int32
    /// Whether it came back under a new UUID (asked, or its own was taken).
    public var asNewWindow: Bool
    public var regularTabs: UInt64
    public var incognitoTabs: UInt64
    public var durableSeq: UInt64

    package init(
        entry: String, window: String, pid: Int32, asNewWindow: Bool, regularTabs: UInt64, incognitoTabs: UInt64,
        durableSeq: UInt64
    ) {
        self.entry = entry
        self.window = window
        self.pid = pid
        self.asNewWindow = asNewWindow
        self.regularTabs = regularTabs
        self.incognitoTabs = incognitoTabs
        self.durableSeq = durableSeq
    }
}

/// `close-window`: the window deleted for good.
public struct CloseWindowReply: Codable, Equatable, Sendable {
    public var window: String

    package init(window: String) {
        self.window = window
    }
}

/// `discard`: what was deleted, as the list showed it last.
public struct DiscardReply: Codable, Equatable, Sendable {
    public var discarded: SetAsideStatus

    package init(discarded: SetAsideStatus) {
        self.discarded = discarded
    }
}

/// One window in `status`. Counters a worker publishes in shared memory are `exactInJSON`.
public struct WindowStatus: Codable, Equatable, Sendable {
    public var uuid: String
    public var state: String
    public var slot: Int
    /// 0 while no worker runs.
    public var pid: Int32
    public var generation: UInt32
    public var tabs: UInt64
    public var regularTabs: UInt64
    public var incognitoTabs: UInt64
    public var appliedSeq: UInt64
    public var durableSeq: UInt64
    public var digest: String
    public var saves: UInt64
    public var saveFailures: UInt64
    public var compactionFailures: UInt64
    /// Null unless the window's saves are failing.
    @ExplicitNull public var failing: FailingSaves?
    public var restarts: Int
    public var savingSeq: UInt64
    public var heartbeatAgeMs: Double?
    public var lastRecoveryMs: Double?
    public var lostSeqs: [SeqRange]
    /// `sealed` (on disk, encrypted with the window's key) or `memory_only` (the keyring was
    /// refused: nothing of the incognito session is saved).
    public var incognitoStorage: String?

    package init(
        uuid: String,
        state: String,
        slot: Int,
        pid: Int32,
        generation: UInt32,
        tabs: UInt64,
        regularTabs: UInt64,
        incognitoTabs: UInt64,
        appliedSeq: UInt64,
        durableSeq: UInt64,
        digest: String,
        saves: UInt64,
        saveFailures: UInt64,
        compactionFailures: UInt64,
        failing: FailingSaves? = nil,
        restarts: Int,
        savingSeq: UInt64,
        heartbeatAgeMs: Double? = nil,
        lastRecoveryMs: Double? = nil,
        lostSeqs: [SeqRange],
        incognitoStorage: String? = nil
    ) {
        self.uuid = uuid
        self.state = state
        self.slot = slot
        self.pid = pid
        self.generation = generation
        self.tabs = tabs
        self.regularTabs = regularTabs
        self.incognitoTabs = incognitoTabs
        self.appliedSeq = appliedSeq
        self.durableSeq = durableSeq
        self.digest = digest
        self.saves = saves
        self.saveFailures = saveFailures
        self.compactionFailures = compactionFailures
        self.failing = failing
        self.restarts = restarts
        self.savingSeq = savingSeq
        self.heartbeatAgeMs = heartbeatAgeMs
        self.lastRecoveryMs = lastRecoveryMs
        self.lostSeqs = lostSeqs
        self.incognitoStorage = incognitoStorage
    }
}

/// While a window's saves fail: the error and the Browsers failing (`regular`, `incognito`).
public struct FailingSaves: Codable, Equatable, Sendable {
    public var error: String
    public var browsers: [String]

    package init(error: String, browsers: [String]) {
        self.error = error
        self.browsers = browsers
    }
}

/// `stats`: save latency and rates per window and in total.
public struct StatsReply: Codable, Equatable, Sendable {
    public var windows: [WindowStats]
    public var total: TotalStats
    public var uptimeS: Double

    package init(windows: [WindowStats], total: TotalStats, uptimeS: Double) {
        self.windows = windows
        self.total = total
        self.uptimeS = uptimeS
    }

    public struct WindowStats: Codable, Equatable, Sendable {
        public var uuid: String
        public var saves: SaveSummary
        @ExplicitNull public var failing: FailingSaves?
        /// Whether the window's journal writes go direct (`O_DIRECT`); false where they are
        /// buffered (tmpfs), null before a journal is open.
        @ExplicitNull public var directIo: Bool?

        enum CodingKeys: String, CodingKey { case uuid, failing, directIo }

        package init(uuid: String, saves: SaveSummary, failing: FailingSaves?, directIo: Bool?) {
            (self.uuid, self.saves, self.failing, self.directIo) = (uuid, saves, failing, directIo)
        }

        // The summary's keys sit beside the window's, as one flat object.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            uuid = try container.decode(String.self, forKey: .uuid)
            _failing = try container.decode(ExplicitNull<FailingSaves>.self, forKey: .failing)
            _directIo =
                try container.decodeIfPresent(ExplicitNull<Bool>.self, forKey: .directIo)
                ?? ExplicitNull(wrappedValue: nil)
            saves = try SaveSummary(from: decoder)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(uuid, forKey: .uuid)
            try container.encode(_failing, forKey: .failing)
            try container.encode(_directIo, forKey: .directIo)
            try saves.encode(to: encoder)
        }
    }

    public struct TotalStats: Codable, Equatable, Sendable {
        public var saves: SaveSummary
        /// With `histogram: true` in the request: HdrHistogram's JSON in base64.
        public var histogram: String?

        enum CodingKeys: String, CodingKey { case histogram }

        package init(saves: SaveSummary, histogram: String?) { (self.saves, self.histogram) = (saves, histogram) }

        public init(from decoder: any Decoder) throws {
            histogram = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(String.self, forKey: .histogram)
            saves = try SaveSummary(from: decoder)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(histogram, forKey: .histogram)
            try saves.encode(to: encoder)
        }
    }

    /// Saves, their rate, their latency (request → durable) in µs, and failures.
    public struct SaveSummary: Codable, Equatable, Sendable {
        public var saves: UInt64
        public var savesPerS: Double
        public var p50Us: UInt64
        public var p90Us: UInt64
        public var p99Us: UInt64
        public var p999Us: UInt64
        public var maxUs: UInt64
        public var saveFailures: UInt64
        public var compactionFailures: UInt64

        package init(
            saves: UInt64,
            savesPerS: Double,
            p50Us: UInt64,
            p90Us: UInt64,
            p99Us: UInt64,
            p999Us: UInt64,
            maxUs: UInt64,
            saveFailures: UInt64,
            compactionFailures: UInt64
        ) {
            self.saves = saves
            self.savesPerS = savesPerS
            self.p50Us = p50Us
            self.p90Us = p90Us
            self.p99Us = p99Us
            self.p999Us = p999Us
            self.maxUs = maxUs
            self.saveFailures = saveFailures
            self.compactionFailures = compactionFailures
        }
    }
}

/// An optional that a reply always carries, as `null` when absent (Swift's synthesized
/// coding would leave the key out): the keys scripts read stay put.
@propertyWrapper
public struct ExplicitNull<Wrapped: Codable & Equatable & Sendable>: Codable, Equatable, Sendable {
    public var wrappedValue: Wrapped?

    public init(wrappedValue: Wrapped?) { self.wrappedValue = wrappedValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        wrappedValue = container.decodeNil() ? nil : try container.decode(Wrapped.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}

extension ControlReply {
    /// A reply carrying `result`: encoded into the `JSONValue` the socket sends. One that does
    /// not encode (a non-finite number) is a failure with 70, said as such.
    public static func ok(_ result: some Encodable) -> ControlReply {
        do {
            return .ok(try JSONValue(reply: result))
        } catch {
            return .failure(.software, "unencodable reply: \(error)")
        }
    }

    /// The reply's result as `Reply`; a failure reply, or a result that does not read as one,
    /// throws (the latter `.software`, 70: the supervisor answered in a shape this client does
    /// not know, never a silent 0).
    public func decode<Reply: Decodable>(_ type: Reply.Type) throws(ControlFailure) -> Reply {
        guard code == .ok else { throw ControlFailure(code: code, message: error ?? "failed") }
        guard let result else { throw ControlFailure(code: .software, message: "a reply without a result") }
        do {
            return try ReplyCoding.decoder().decode(Reply.self, from: JSONEncoder().encode(result))
        } catch {
            throw ControlFailure(code: .software, message: "a reply that does not read as \(Reply.self): \(error)")
        }
    }
}

/// A request that did not succeed: the code `ctl` exits with, and why.
public struct ControlFailure: Error, Equatable, CustomStringConvertible {
    public let code: ControlCode
    public let message: String

    public init(code: ControlCode, message: String) { (self.code, self.message) = (code, message) }

    public var description: String { message }
}

extension JSONValue {
    /// The typed reply `reply` as the JSON tree it travels as (`ReplyCoding`).
    public init(reply: some Encodable) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: ReplyCoding.encoder().encode(reply))
    }
}

/// A counter a worker publishes in shared memory, as a reply carries it: at most 2⁵³ − 1
/// (`Limits.maxCommandSeq`), the largest integer a JSON number holds exactly, so a damaged or
/// hostile value cannot make a whole `status` or `stats` unreadable to a client that decodes it.
package func exactInJSON(_ counter: UInt64) -> UInt64 { min(counter, Limits.maxCommandSeq) }
