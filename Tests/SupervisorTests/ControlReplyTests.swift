import Foundation
import Testing

@testable import HostControl
@testable import Supervisor

/// The typed replies keep the JSON scripts read (`ctl … --json`): each shape, as the supervisor
/// built it by hand before the types, decodes into its type and encodes back to the same line.
@Suite struct ControlReplyTests {
    static let window = "6F9619FF-8B86-D011-B42D-00CF4FC964FF"

    /// Lines as `JSONValue.line` printed them from the hand-built replies (keys sorted).
    static var yesterday: [(any Codable.Type, String)] {
        [
            (ConnectReply.self, #"{"pid":4242,"window":"\#(window)"}"#),
            (CommandReply.self, #"{"seq":7,"tab":12,"window":"\#(window)"}"#),
            (CommandReply.self, #"{"seq":7,"window":"\#(window)"}"#),
            (CommandReply.self, #"{"seq":8,"state":"background","window":"\#(window)"}"#),
            (DurableReply.self, #"{"durable_seq":9,"window":"\#(window)"}"#),
            (DurableReply.self, #"{"durable_seq":9,"lost_seqs":[[3,4],[6,6]],"window":"\#(window)"}"#),
            (KillReply.self, #"{"killed_pid":4242,"while_saving":true,"window":"\#(window)"}"#),
            (
                KillReply.self,
                #"{"killed_pid":4242,"pid":4243,"recovery_ms":12.5,"while_saving":false,"window":"\#(window)"}"#
            ),
            (
                KillReply.self,
                #"{"killed_pid":4242,"restart_expected":false,"signal":"CONT","while_saving":false,"window":"\#(window)"}"#
            ),
            (
                KillReply.self,
                #"{"killed_pid":4242,"move_stage":"committing","pid":4243,"recovery_ms":3,"while_saving":false,"window":"\#(window)"}"#
            ),
            (ShutdownReply.self, #"{"stopping":true}"#),
            (
                SetAsideReply.self,
                #"{"set_aside":[{"adopting_as":"\#(window)","at":null,"browsers":null,"damaged":null,"detail":null,"durable_seq":null,"id":"handed-out-x","#
                    + #""incognito_tabs":null,"kind":"file","path":"/r/set-aside/handed-out-x","reason":"damaged_file","regular_tabs":null,"#
                    + #""state":"adopting","summary":"pending","tabs":null,"uuid":null}]}"#
            ),
            (
                AdoptReply.self,
                #"{"as_new_window":true,"durable_seq":4,"entry":"e","incognito_tabs":0,"pid":12,"regular_tabs":2,"window":"\#(window)"}"#
            ),
            (
                DiscardReply.self,
                #"{"discarded":{"adopting_as":null,"at":"2026-11-23T04:00:00Z","browsers":["regular"],"damaged":false,"detail":"the worker died 2 times","durable_seq":4,"#
                    + #""id":"\#(window)-20261123T040000Z-crash-loop","incognito_tabs":0,"kind":"directory","path":"/r/set-aside/x","reason":"crash_loop","regular_tabs":2,"#
                    + #""state":"set_aside","summary":"read","tabs":2,"uuid":"\#(window)"}}"#
            ),
            (
                DumpReply.self,
                #"{"applied_seq":9,"digest":"00000000deadbeef","durable_seq":8,"incognito":{"active_index":null,"tabs":[]},"#
                    + #""regular":{"active_index":1,"tabs":[{"id":1,"opener":null,"pinned":true,"realized":false,"title":"","url":"about:blank"},"#
                    + #"{"id":2,"opener":1,"pinned":false,"realized":true,"title":"T","url":"https://a.example/"}]},"window":"\#(window)"}"#
            ),
            (
                StatusReply.self,
                #"{"closed_windows":1,"closed_windows_evicted":3,"keep_closed":16,"order":["\#(window)"],"root":"/r","set_aside":[{"adopting_as":null,"at":"2026-11-23T04:00:00Z","browsers":["regular"],"damaged":false,"detail":"the worker died 2 times","durable_seq":4,"#
                    + #""id":"\#(window)-20261123T040000Z-crash-loop","incognito_tabs":0,"kind":"directory","path":"/r/set-aside/x","reason":"crash_loop","regular_tabs":2,"#
                    + #""state":"set_aside","summary":"read","tabs":2,"uuid":"\#(window)"}],"#
                    + #""socket":"/r/ctl.sock","supervisor_pid":40,"windows":["#
                    + #"{"applied_seq":7,"compaction_failures":0,"digest":"00000000000000ff","durable_seq":5,"failing":null,"generation":2,"#
                    + #""heartbeat_age_ms":1.5,"incognito_tabs":1,"last_recovery_ms":12.25,"lost_seqs":[[3,4]],"pid":100,"regular_tabs":2,"#
                    + #""restarts":1,"save_failures":0,"saves":3,"saving_seq":6,"slot":0,"state":"foreground","tabs":3,"uuid":"\#(window)"},"#
                    + #"{"applied_seq":0,"compaction_failures":1,"digest":"0000000000000000","durable_seq":0,"#
                    + #""failing":{"browsers":["regular","incognito"],"error":"No space left on device"},"generation":0,"incognito_tabs":0,"#
                    + #""lost_seqs":[],"pid":0,"regular_tabs":0,"restarts":0,"save_failures":2,"saves":0,"saving_seq":0,"slot":1,"#
                    + #""state":"crashed","tabs":0,"uuid":"\#(window)"}]}"#
            ),
            (
                StatsReply.self,
                #"{"total":{"compaction_failures":0,"histogram":"e30=","max_us":900,"p50_us":100,"p90_us":200,"p999_us":800,"p99_us":700,"#
                    + #""save_failures":1,"saves":10,"saves_per_s":2.5},"uptime_s":4,"windows":[{"compaction_failures":0,"#
                    + #""direct_io":true,"failing":{"browsers":["incognito"],"error":"Input/output error"},"max_us":900,"p50_us":100,"p90_us":200,"#
                    + #""p999_us":800,"p99_us":700,"save_failures":1,"saves":10,"saves_per_s":0,"uuid":"\#(window)"}]}"#
            ),
            (
                StatsReply.self,
                #"{"total":{"compaction_failures":0,"max_us":0,"p50_us":0,"p90_us":0,"p999_us":0,"p99_us":0,"save_failures":0,"#
                    + #""saves":0,"saves_per_s":0},"uptime_s":0.25,"windows":[{"compaction_failures":0,"direct_io":null,"failing":null,"max_us":0,"#
                    + #""p50_us":0,"p90_us":0,"p999_us":0,"p99_us":0,"save_failures":0,"saves":0,"saves_per_s":0,"uuid":"\#(window)"}]}"#
            ),
        ]
    }

    @Test(arguments: 0..<yesterday.count)
    func eachShapeReadsAndWritesTheSameJSON(_ index: Int) throws {
        let (type, line) = Self.yesterday[index]
        let tree = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8))
        #expect(tree.line == line, "the literal is in JSONValue's own form")
        func roundTrip<Reply: Codable>(_: Reply.Type) throws -> String {
            let reply = try ControlReply.ok(tree).decode(Reply.self)
            return try #require(ControlReply.ok(reply).result).line
        }
        #expect(try roundTrip(type) == line)
    }

    /// A reply that does not read as the verb's shape is a failure with 70, never a silent 0.
    @Test func aReplyOfAnotherShapeIsASoftwareFailure() {
        let strange = ControlReply.ok(JSONValue.object(["window": .string(Self.window), "seq": .string("seven")]))
        #expect(throws: ControlFailure.self) { try strange.decode(CommandReply.self) }
        do {
            _ = try strange.decode(CommandReply.self)
        } catch {
            #expect(error.code == .software)
        }
        let refused = ControlReply.failure(.temporary, "retry")
        #expect(throws: ControlFailure(code: .temporary, message: "retry")) { try refused.decode(CommandReply.self) }
        #expect(throws: ControlFailure.self) {
            try ControlReply(code: .ok, error: nil, result: nil).decode(ShutdownReply.self)
        }
    }

    /// A counter past what a JSON number holds exactly (a hostile worker's, in shared memory)
    /// is carried at 2⁵³ − 1: the whole `status` still decodes.
    @Test func aCounterPastJSONsExactIntegersIsCarriedAtTheBound() throws {
        let huge = try JSONDecoder().decode(JSONValue.self, from: Data(#"{"a":18446744073709551615}"#.utf8))
        #expect(throws: (any Error).self) {
            try JSONDecoder().decode([String: UInt64].self, from: JSONEncoder().encode(huge))
        }
        #expect(exactInJSON(.max) == (1 << 53) - 1)
        #expect(try ControlReply.ok(["a": exactInJSON(.max)]).decode([String: UInt64].self) == ["a": (1 << 53) - 1])
    }
}
