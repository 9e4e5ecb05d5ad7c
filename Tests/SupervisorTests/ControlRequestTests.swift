import Foundation
import Glibc
import HostControl
import HostCoordination
import HostLimits
import Supervisor
import Testing

/// The control socket's requests: one typed value per line of today's wire format, and every
/// refusal decoding gives, with the code and message clients and scripts see.
@Suite struct ControlRequestTests {
    static let id = UUID(uuidString: "6F1D3C1E-2B7A-4C55-9D0E-8A3F2B1C4D5E")!

    static let everyVerb: [ControlRequest] = [
        .status, .stats(histogram: false), .stats(histogram: true), .connect, .shutdown,
        .window(id, .tab(.open(url: "https://a.example/x y", incognito: true, index: 2, opener: 5, background: true))),
        .window(id, .tab(.open(url: "about:blank", incognito: false, index: nil, opener: nil, background: false))),
        .window(id, .tab(.navigate(tab: 3, url: "https://b.example/"))),
        .window(id, .tab(.close(tab: 3))),
        .window(id, .tab(.activate(tab: 4))),
        .window(id, .tab(.move(tab: 4, index: 0))),
        .window(id, .tab(.replace(tab: 4, url: "https://c.example/"))),
        .window(id, .tab(.closeAll(incognito: true))),
        .window(id, .tab(.setPinned(tab: 4, pinned: true))), .window(id, .tab(.setPinned(tab: 4, pinned: false))),
        .window(id, .tab(.go(tab: 5, .back))), .window(id, .tab(.go(tab: 5, .forward))),
        .window(id, .scene(.background)), .window(id, .scene(.foreground)), .window(id, .scene(.disconnect)),
        .window(id, .save(wait: true)), .window(id, .save(wait: false)), .window(id, .dump),
        .window(id, .waitDurable(seq: 7)), .window(id, .waitDurable(seq: nil)),
        .window(id, .kill(signal: SIGKILL, wait: true, aim: .save)),
        .window(id, .kill(signal: SIGSEGV, wait: false, aim: nil)),
        .window(id, .kill(signal: 40, wait: true, aim: nil)),
        .window(id, .kill(signal: SIGKILL, wait: true, aim: .move(.exporting))),
        .window(id, .kill(signal: SIGKILL, wait: false, aim: .move(.committing))),
        .window(id, .kill(signal: SIGTERM, wait: true, aim: .move(.settling))),
        .setAside,
        .adopt(entry: "6F1D3C1E-2B7A-4C55-9D0E-8A3F2B1C4D5E-20261124T040000Z-crash-loop", asNewWindow: false),
        .adopt(entry: "e-2", asNewWindow: true), .discard(entry: "handed-out-20261124T040000Z-damaged-file"),
        .closeWindow(id),
        .moveToWindow(from: id, tab: 4, to: other, index: 2), .moveToWindow(from: other, tab: 9, to: id, index: nil),
    ]

    static let other = UUID(uuidString: "0A1B2C3D-4E5F-4061-8293-A4B5C6D7E8F9")!

    static func decode(_ line: String) throws -> ControlRequest {
        try JSONDecoder().decode(ControlRequest.self, from: Data(line.utf8))
    }

    /// What decoding `line` refuses with, if it does.
    static func refusal(_ line: String) -> ControlFailure? {
        do {
            _ = try decode(line)
            return nil
        } catch let failure as ControlFailure {
            return failure
        } catch {
            Issue.record("\(line): \(error) is no ControlFailure")
            return nil
        }
    }

    @Test func everyRequestRoundTripsThroughOneLineOfJSON() throws {
        #expect(Set(Self.everyVerb.map(\.verb)) == Set(Verb.allCases))
        for request in Self.everyVerb {
            let line = try JSONEncoder().encode(request)
            #expect(!line.contains(UInt8(ascii: "\n")))
            #expect(
                try JSONDecoder().decode(ControlRequest.self, from: line) == request,
                "\(String(decoding: line, as: UTF8.self))")
            let object = try JSONDecoder().decode([String: JSONValue].self, from: line)
            #expect(object["verb"]?.string == request.verb.rawValue)
        }
    }

    /// A kill aimed at a move's stage says so in a field of its own, `aim_move`; `aim` stays the
    /// aim at a save that clients before it send.
    @Test func aKillAimedAtAMoveStageGoesOutAsItsOwnField() throws {
        func fields(_ aim: KillAim?) throws -> [String: JSONValue] {
            let line = try JSONEncoder().encode(
                ControlRequest.window(Self.id, .kill(signal: SIGKILL, wait: true, aim: aim)))
            return try JSONDecoder().decode([String: JSONValue].self, from: line)
        }
        for stage in MoveStage.allCases {
            let wire = try fields(.move(stage))
            #expect(wire["aim_move"]?.string == stage.rawValue && wire["aim"]?.bool == false, "\(wire)")
        }
        let saving = try fields(.save)
        #expect(saving["aim"]?.bool == true && saving["aim_move"] == nil, "\(saving)")
        let plain = try fields(nil)
        #expect(plain["aim"]?.bool == false && plain["aim_move"] == nil, "\(plain)")
    }

    /// Lines as scripts and clients of earlier versions write them, fields they do not need
    /// included and defaults left out.
    @Test func todaysWireLinesDecodeToTheirRequests() throws {
        let window = Self.id.uuidString
        let lines: [(String, ControlRequest)] = [
            (#"{"verb":"status"}"#, .status),
            (#"{"verb":"stats"}"#, .stats(histogram: false)),
            (#"{"verb":"stats","histogram":true}"#, .stats(histogram: true)),
            (#"{"verb":"connect","window":"junk"}"#, .connect),
            (#"{"verb":"shutdown"}"#, .shutdown),
            (
                #"{"verb":"open","window":"\#(window)","url":"https://a.example/","incognito":true,"index":2,"opener":5,"background":true,"wait":true,"signal":"KILL","aim":true,"seq":7,"histogram":true,"tab":3}"#,
                .window(
                    Self.id,
                    .tab(.open(url: "https://a.example/", incognito: true, index: 2, opener: 5, background: true)))
            ),
            (
                #"{"verb":"open","window":"\#(window)"}"#,
                .window(
                    Self.id,
                    .tab(.open(url: "about:blank", incognito: false, index: nil, opener: nil, background: false)))
            ),
            (
                #"{"verb":"open","window":"\#(window.lowercased())","url":""}"#,
                .window(Self.id, .tab(.open(url: "", incognito: false, index: nil, opener: nil, background: false)))
            ),
            (
                #"{"verb":"navigate","window":"\#(window)","tab":3,"url":"https://b.example/"}"#,
                .window(Self.id, .tab(.navigate(tab: 3, url: "https://b.example/")))
            ),
            (#"{"verb":"close","window":"\#(window)","tab":3}"#, .window(Self.id, .tab(.close(tab: 3)))),
            (#"{"verb":"activate","window":"\#(window)","tab":-1}"#, .window(Self.id, .tab(.activate(tab: -1)))),
            (
                #"{"verb":"move","window":"\#(window)","tab":4,"index":\#(Limits.maxTabsPerBrowser)}"#,
                .window(Self.id, .tab(.move(tab: 4, index: Limits.maxTabsPerBrowser)))
            ),
            (
                #"{"verb":"replace","window":"\#(window)","tab":4,"url":"https://c.example/"}"#,
                .window(Self.id, .tab(.replace(tab: 4, url: "https://c.example/")))
            ),
            (#"{"verb":"close-all","window":"\#(window)"}"#, .window(Self.id, .tab(.closeAll(incognito: false)))),
            (
                #"{"verb":"close-all","window":"\#(window)","incognito":true}"#,
                .window(Self.id, .tab(.closeAll(incognito: true)))
            ),
            (
                #"{"verb":"pin","window":"\#(window)","tab":3,"index":0}"#,
                .window(Self.id, .tab(.setPinned(tab: 3, pinned: true)))
            ),
            (
                #"{"verb":"unpin","window":"\#(window)","tab":-3}"#,
                .window(Self.id, .tab(.setPinned(tab: -3, pinned: false)))
            ),
            (
                #"{"verb":"back","window":"\#(window)","tab":3,"incognito":true}"#,
                .window(Self.id, .tab(.go(tab: 3, .back)))
            ),
            (
                #"{"verb":"forward","window":"\#(window)","tab":9223372036854775807}"#,
                .window(Self.id, .tab(.go(tab: .max, .forward)))
            ),
            (#"{"verb":"background","window":"\#(window)"}"#, .window(Self.id, .scene(.background))),
            (#"{"verb":"foreground","window":"\#(window)"}"#, .window(Self.id, .scene(.foreground))),
            (#"{"verb":"disconnect","window":"\#(window)"}"#, .window(Self.id, .scene(.disconnect))),
            (#"{"verb":"save","window":"\#(window)"}"#, .window(Self.id, .save(wait: false))),
            (#"{"verb":"save","window":"\#(window)","wait":true}"#, .window(Self.id, .save(wait: true))),
            (#"{"verb":"dump","window":"\#(window)"}"#, .window(Self.id, .dump)),
            (#"{"verb":"wait-durable","window":"\#(window)"}"#, .window(Self.id, .waitDurable(seq: nil))),
            (#"{"verb":"wait-durable","window":"\#(window)","seq":7}"#, .window(Self.id, .waitDurable(seq: 7))),
            (
                #"{"verb":"kill","window":"\#(window)"}"#,
                .window(Self.id, .kill(signal: SIGKILL, wait: true, aim: nil))
            ),
            (
                #"{"verb":"kill","window":"\#(window)","signal":"sigsegv","wait":false,"aim":true}"#,
                .window(Self.id, .kill(signal: SIGSEGV, wait: false, aim: .save))
            ),
            (
                #"{"verb":"kill","window":"\#(window)","signal":"19"}"#,
                .window(Self.id, .kill(signal: SIGSTOP, wait: true, aim: nil))
            ),
            (
                #"{"verb":"kill","window":"\#(window)","aim_move":"importing"}"#,
                .window(Self.id, .kill(signal: SIGKILL, wait: true, aim: .move(.importing)))
            ),
            // `aim: false` beside a stage is no second aim.
            (
                #"{"verb":"kill","window":"\#(window)","aim":false,"aim_move":"dropping","wait":false}"#,
                .window(Self.id, .kill(signal: SIGKILL, wait: false, aim: .move(.dropping)))
            ),
        ]
        for (line, expected) in lines {
            #expect(try Self.decode(line) == expected, "\(line)")
        }
    }

    /// Each refusal, with the code and message the supervisor answered before requests were
    /// typed (then from `handle`, now from decoding, before any window is looked up).
    @Test func refusalsCarryTheirCodeAndMessage() {
        let window = Self.id.uuidString
        let url = "https://long.example/" + String(repeating: "a", count: Limits.maxControlURLBytes)
        let cases: [(String, ControlCode, String)] = [
            (#"{"verb":"teleport","window":"\#(window)"}"#, .usage, "unknown verb 'teleport'"),
            (#"{"verb":"Open","window":"\#(window)"}"#, .usage, "unknown verb 'Open'"),
            (#"{"verb":"open"}"#, .usage, "open needs a window"),
            (#"{"verb":"wait-durable","seq":3}"#, .usage, "wait-durable needs a window"),
            (#"{"verb":"dump","window":"nope"}"#, .usage, "'nope' is not a UUID"),
            (#"{"verb":"close-window"}"#, .usage, "close-window needs a window"),
            (#"{"verb":"close-window","window":"E1E1E1E1"}"#, .usage, "'E1E1E1E1' is not a UUID"),
            (#"{"verb":"dump","window":"\#(window)\u0000junk"}"#, .usage, #"'\#(window)\0junk' is not a UUID"#),
            (#"{"verb":"navigate","window":"\#(window)","url":"https://a.example/"}"#, .usage, "navigate needs a tab"),
            (#"{"verb":"navigate","window":"\#(window)","tab":1}"#, .usage, "navigate needs a URL"),
            (#"{"verb":"replace","window":"\#(window)","tab":1,"url":""}"#, .usage, "replace needs a URL"),
            (#"{"verb":"close","window":"\#(window)"}"#, .usage, "close needs a tab"),
            (#"{"verb":"activate","window":"\#(window)"}"#, .usage, "activate needs a tab"),
            (#"{"verb":"pin","window":"\#(window)"}"#, .usage, "pin needs a tab"),
            (#"{"verb":"unpin","window":"\#(window)","url":"https://a.example/"}"#, .usage, "unpin needs a tab"),
            (#"{"verb":"back","tab":1}"#, .usage, "back needs a window"),
            (#"{"verb":"forward","window":"\#(window)"}"#, .usage, "forward needs a tab"),
            (#"{"verb":"move","window":"\#(window)","tab":1}"#, .usage, "move needs an index"),
            (
                #"{"verb":"move-to-window","window":"\#(window)","tab":1}"#, .usage,
                "move-to-window needs a window and the window it goes to"
            ),
            (
                #"{"verb":"move-to-window","to":"\#(window)","tab":1}"#, .usage,
                "move-to-window needs a window and the window it goes to"
            ),
            (
                #"{"verb":"move-to-window","window":"\#(window)","to":"\#(window)","tab":1}"#, .usage,
                "move-to-window moves a tab to another window, not to its own"
            ),
            (#"{"verb":"move-to-window","window":"\#(window)","to":"nope","tab":1}"#, .usage, "'nope' is not a UUID"),
            (
                #"{"verb":"move-to-window","window":"\#(window)","to":"\#(Self.other)"}"#, .usage,
                "move-to-window needs a tab"
            ),
            (
                #"{"verb":"move-to-window","window":"\#(window)","to":"\#(Self.other)","tab":1,"index":-1}"#, .badData,
                "index -1 outside 0...\(Limits.maxTabsPerBrowser) (Limits.maxTabsPerBrowser)"
            ),
            (#"{"verb":"move","window":"\#(window)","index":1}"#, .usage, "move needs a tab"),
            (
                #"{"verb":"move","window":"\#(window)","tab":1,"index":-1}"#, .badData,
                "index -1 outside 0...\(Limits.maxTabsPerBrowser) (Limits.maxTabsPerBrowser)"
            ),
            (
                #"{"verb":"open","window":"\#(window)","index":\#(Limits.maxTabsPerBrowser + 1)}"#, .badData,
                "index \(Limits.maxTabsPerBrowser + 1) outside 0...\(Limits.maxTabsPerBrowser) (Limits.maxTabsPerBrowser)"
            ),
            (
                #"{"verb":"open","window":"\#(window)","url":"\#(url)"}"#, .badData,
                "URL of \(url.utf8.count) bytes is longer than the \(Limits.maxControlURLBytes) the control plane carries (Limits.maxControlURLBytes)"
            ),
            (#"{"verb":"kill","window":"\#(window)","signal":"NOPE"}"#, .usage, "unknown signal 'NOPE'"),
            (#"{"verb":"kill","window":"\#(window)","signal":"65"}"#, .usage, "unknown signal '65'"),
            (
                #"{"verb":"kill","window":"\#(window)","aim":true,"aim_move":"importing"}"#, .usage,
                "kill is aimed at a save in flight or at a move's stage, not both"
            ),
            (
                #"{"verb":"kill","window":"\#(window)","aim_move":"asking"}"#, .usage,
                "unknown move stage 'asking' (one of exporting, importing, committing, dropping, settling)"
            ),
            (
                #"{"verb":"kill","window":"\#(window)","aim_move":"Importing"}"#, .usage,
                "unknown move stage 'Importing' (one of exporting, importing, committing, dropping, settling)"
            ),
            (#"{"verb":"adopt"}"#, .usage, "adopt needs an entry id (ctl set-aside lists them)"),
            (
                #"{"verb":"discard","window":"\#(window)"}"#, .usage,
                "discard needs an entry id (ctl set-aside lists them)"
            ),
            (
                #"{"verb":"adopt","entry":"../windows/x"}"#, .badData,
                "'../windows/x' is no set-aside entry id (ctl set-aside lists them)"
            ),
            (
                #"{"verb":"discard","entry":".adopting-x"}"#, .badData,
                "'.adopting-x' is no set-aside entry id (ctl set-aside lists them)"
            ),
            (
                #"{"verb":"discard","entry":"a\u0000b"}"#, .badData,
                #"'a\0b' is no set-aside entry id (ctl set-aside lists them)"#
            ),
        ]
        for (line, code, message) in cases {
            let refusal = Self.refusal(line)
            #expect(refusal == ControlFailure(code: code, message: message), "\(line.prefix(200))")
        }
        // A URL holding a control character: 65, named by `ForbiddenCharacter` (its own tests
        // pin the wording), in each verb that carries one.
        for line in [
            #"{"verb":"open","window":"\#(window)","url":"https://bad.example/\u0001x"}"#,
            #"{"verb":"navigate","window":"\#(window)","tab":1,"url":"https://bad.example/\u007fx"}"#,
            #"{"verb":"replace","window":"\#(window)","tab":1,"url":"https://bad.example/\tx"}"#,
        ] {
            let refusal = Self.refusal(line)
            #expect(
                refusal?.code == .badData && refusal?.message.contains("control character") == true,
                "\(line): \(String(describing: refusal))")
        }
    }

    /// A request of the wrong shape is no refusal of its fields: the decoder's own error, which
    /// the control server answers 64 (malformed).
    /// `SignalName` is one table: one name for each number, each name read back as its number
    /// (with or without SIG, any case), and the signals the help lists by kind among them.
    @Test func everySignalNameReadsAsItsNumber() throws {
        #expect(Set(SignalName.numbers.values).count == SignalName.numbers.count, "one name for each number")
        for (name, number) in SignalName.numbers {
            #expect(
                SignalName.number(name) == number && SignalName.number("sig" + name.lowercased()) == number
                    && SignalName.name(number) == name)
            let request = try Self.decode(#"{"verb":"kill","window":"\#(Self.id.uuidString)","signal":"\#(name)"}"#)
            #expect(request == .window(Self.id, .kill(signal: number, wait: true, aim: nil)))
        }
        for signal in SignalName.stopping + SignalName.ignoredByDefault {
            #expect(SignalName.numbers.values.contains(signal))
        }
        #expect(SignalName.list(SignalName.ignoredByDefault) == "CONT, CHLD, URG, WINCH")
        #expect(SignalName.list(SignalName.stopping) == "STOP, TSTP, TTIN, TTOU")
    }

    @Test func aMalformedRequestIsADecodingError() {
        for line in [
            #"{"window":"x"}"#, #"{"verb":3}"#, #"{"verb":"close","window":"\#(Self.id.uuidString)","tab":"1"}"#,
            #"[]"#,
        ] {
            #expect(throws: DecodingError.self, "\(line)") { _ = try Self.decode(line) }
        }
    }

    /// The one converter to the ring: each window command goes out as a message and reads back
    /// as itself, and a message that is none is a typed error.
    @Test func windowCommandsRoundTripThroughTheRingMessage() throws {
        let commands: [WindowCommand] = Self.everyVerb.compactMap {
            guard case .window(_, let request) = $0 else { return nil }
            switch request {
            case .tab(let command): return .tab(command)
            case .scene(let change): return .scene(change)
            case .save: return .save
            case .dump: return .dump
            case .waitDurable, .kill: return nil
            }
        }
        for (number, command) in commands.enumerated() {
            let message = command.message(request: UInt64(number) + 1)
            let read = try WorkerCommand(serializedBytes: try message.serializedBytes() as [UInt8])
            #expect(read.request == UInt64(number) + 1)
            #expect(try WindowCommand(read) == command)
        }
        let tab = MovedTab.with {
            ($0.tab, $0.incognito, $0.pinned, $0.creationTimeUs, $0.navigation) = (4, true, true, 12, Data([8, 4]))
        }
        let move = MoveID(rawValue: 0xfeed)!
        for step in [
            MoveStep.export(tab: 4), .import(move, tab, index: 3), .import(move, tab, index: nil),
            .drop(tab: 4, move), .held(move),
        ] {
            let read = try WorkerCommand(
                serializedBytes: try WindowCommand.move(step).message(request: 5).serializedBytes() as [UInt8])
            #expect(try WindowCommand(read) == .move(step))
        }
        var unnamed = WorkerCommand()
        unnamed.moveHeld = MoveHeld()
        #expect { _ = try WindowCommand(unnamed) } throws: {
            ($0 as? UndecodableCommand)?.description == "a move's question with no move id"
        }
        #expect(MoveID(rawValue: 0) == nil && (0..<1_000).allSatisfy { _ in MoveID.random().rawValue != 0 })
        #expect { _ = try WindowCommand(WorkerCommand()) } throws: {
            ($0 as? UndecodableCommand)?.description == "a command with no action"
        }
        var unknown = WorkerCommand()
        var event = SceneEvent()
        event.kind = .UNRECOGNIZED(9)
        unknown.scene = event
        #expect { _ = try WindowCommand(unknown) } throws: {
            ($0 as? UndecodableCommand)?.description == "a scene event of unknown kind 9"
        }
        var step = HistoryStep()
        (step.tab, step.direction) = (1, .UNRECOGNIZED(2))
        unknown.step = step
        #expect { _ = try WindowCommand(unknown) } throws: {
            ($0 as? UndecodableCommand)?.description == "a history step of unknown direction 2"
        }
    }
}
