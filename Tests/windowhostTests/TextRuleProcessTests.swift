import Foundation
import Glibc
import Supervisor
import SystemPackage
import Testing

/// Text that is no URL is refused at every way in, with 65 (bad data): nothing applied, no seq
/// taken. Before, `\u0000` in a URL was stored and acknowledged, a control character given to
/// `ctl` likewise, and a lone surrogate in the socket's JSON got 64 (usage) as if the request
/// were malformed.
@Suite struct TextRuleProcessTests {
    @Test(.timeLimit(.minutes(10))) func aURLHoldingAControlCharacterOrALoneSurrogateIsRefusedAndTakesNoSeq() throws {
        let root = temporaryRoot("text-rule")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://first.example/") == 1)

        // Through `windowhost ctl`, as a script passes the bytes (argv holds no NUL).
        for arguments in [
            #"open --window "$2" --url "$(printf 'https://bad.example/\001x')""#,
            #"open --window "$2" --url "$(printf 'https://bad.example/\tx')""#,
            #"navigate --window "$2" --tab 1 --url "$(printf 'https://bad.example/\177x')""#,
            #"replace --window "$2" --tab 1 --url "$(printf 'https://bad.example/\033x')""#,
        ] {
            let refused = try host.ctlThroughShell(arguments, window: window)
            #expect(
                refused.status == 65 && refused.output.contains("control character"), "\(arguments): \(refused.output)")
        }

        // Straight to the socket: escapes JSON allows, whose text is no URL or no text.
        func raw(_ url: String) throws -> String {
            let line = #"{"verb":"open","window":""# + window + #"","url":""# + url + "\"}\n"
            return try rawSocketReplyText(host.socket, Array(line.utf8))
        }
        for url in [#"https://bad.example/\u0000x"#, #"https://bad.example/\u001fx"#] {
            let reply = try raw(url)
            #expect(reply.contains(#""code":65"#) && reply.contains("control character"), "\(url): \(reply)")
        }
        for url in [
            #"https://bad.example/\ud800"#, #"https://bad.example/\udfff\ud800"#, #"https://bad.example/\ud800\u0041"#,
        ] {
            let reply = try raw(url)
            #expect(reply.contains(#""code":65"#) && reply.contains("surrogate"), "\(url): \(reply)")
        }
        // A window named with more after a NUL: `UUID(uuidString:)` stopped at the NUL and the
        // tab went to that window (0, seq taken). Refused as no UUID (64), nothing applied.
        for suffix in [#"\u0000junk"#, #"\u0000"#] {
            let line =
                #"{"verb":"open","window":""# + window + suffix + #"","url":"https://nul-window.example/"}"# + "\n"
            let reply = try rawSocketReplyText(host.socket, Array(line.utf8))
            #expect(reply.contains(#""code":64"#) && reply.contains("is not a UUID"), "\(suffix): \(reply)")
        }
        // A surrogate pair is a character: taken.
        let pair = try raw(#"https://good.example/\ud83d\ude00"#)
        #expect(pair.contains(#""code":0"#) && pair.contains(#""seq":2"#), "\(pair)")

        // Nothing else was applied and no seq was taken.
        #expect(host.call(.open("https://after.example/"), window: window).result?["seq"]?.int == 3)
        let dump = try #require(host.call(.dump, window: window).result)
        let urls = (dump["regular"]?["tabs"]?.array ?? []).compactMap { $0["url"]?.string }
        #expect(urls == ["https://first.example/", "https://good.example/😀", "https://after.example/"], "\(dump)")
        #expect(host.terminate() == 0)
    }
}
