import Foundation
import Glibc
import Supervisor
import SystemPackage
import Testing

/// Text that is not valid UTF-8 is refused where its bytes become text, with 65 (bad data),
/// and nothing is applied or takes a seq. Before, `ctl open --url` with a byte 0xFF stored
/// and acknowledged a URL with U+FFFD in its place (Swift mends argv when it reads it).
@Suite struct InvalidUTF8Tests {
    @Test(.timeLimit(.minutes(10))) func invalidUTF8TextIsRefusedAndTakesNoSeq() throws {
        let root = temporaryRoot("utf8")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://first.example/") != nil)

        // Through `windowhost ctl`, as a script passes the bytes: the URL, and any other argument.
        for arguments in [
            #"open --window "$2" --url "$(printf 'https://bad.example/\377')""#,
            #"navigate --window "$2" --tab 1 --url "$(printf 'https://bad.example/\300\200')""#,
            #"open --window "$2" --url "$(printf 'https://bad.example/\355\240\200')""#,
            #"open --window "$(printf "$2\377")" --url https://good.example/"#,
        ] {
            let refused = try host.ctlThroughShell(arguments, window: window)
            #expect(refused.status == 65, "\(arguments): \(refused.output)")
            #expect(refused.output.contains("is not valid UTF-8"), "\(refused.output)")
        }

        // Straight to the socket: the same bytes in a JSON string.
        let line =
            Array(#"{"verb":"open","window":""#.utf8) + Array(window.utf8)
            + Array(#"","url":"https://bad.example/"#.utf8) + [0xFF]
            + Array(#""}"#.utf8) + [10]
        let reply = try rawSocketReplyText(host.socket, line)
        #expect(reply.contains(#""code":65"#) && reply.contains("not valid UTF-8"), "\(reply)")

        // Nothing was applied and no seq was taken.
        let next = host.call(.open("https://after.example/"), window: window)
        #expect(next.result?["seq"]?.int == 2, "\(next)")
        let dump = try #require(host.call(.dump, window: window).result)
        let urls = (dump["regular"]?["tabs"]?.array ?? []).compactMap { $0["url"]?.string }
        #expect(urls == ["https://first.example/", "https://after.example/"], "\(dump)")
        #expect(host.terminate() == 0)
    }
}
