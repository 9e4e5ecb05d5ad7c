import Foundation
import Glibc
import HostControl
import HostLimits
import Supervisor
import Testing

/// Issue 28, item 5: every window the host accepts reads back whole. A dump longer than the
/// reply ring comes in parts; a window is bounded (`Limits.maxWindowTextBytes`) so that its
/// dump always can.
@Suite(.serialized) struct WholeDumpProcessTests {
    /// The issue's window: 30 tabs of 50 KB URLs (1.5 MB, past the 1 MiB reply ring), some
    /// incognito, some whose characters JSON escapes. Every save is durable, and `ctl dump`
    /// and `ctl dump --json` show every URL whole (before: exit 70, "reply … larger than the
    /// reply ring").
    @Test(.timeLimit(.minutes(5))) func thirtyTabsOfFiftyKilobyteURLsDumpWhole() throws {
        let root = temporaryRoot("whole-dump")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        var opened: [(url: String, incognito: Bool)] = []
        for index in 0..<30 {
            let prefix = "https://tab\(index).example/"
            // Every third URL holds 12,000 quotes and backslashes, which JSON doubles (the
            // request stays within `Limits.maxControlRequestBytes`).
            let filler =
                (index % 3 == 0 ? String(repeating: #"\""#, count: 6_000) : "") + String(repeating: "q", count: 50_000)
            let url = String((prefix + filler).prefix(50_000))
            let incognito = index % 4 == 3
            try #require(host.open(window, url, incognito: incognito) != nil, "open \(index): \(host.log.suffix(500))")
            opened.append((url, incognito))
        }
        let durable = try host.ctl(["wait-durable", "--window", window])
        #expect(durable.status == 0, "\(durable.output)")

        let json = try host.ctl(["--json", "dump", "--window", window])
        #expect(json.status == 0, "\(json.output.prefix(500))")
        let line = json.output.split(separator: "\n").last.map(String.init) ?? ""
        let dump = try ReplyCoding.decoder().decode(DumpReply.self, from: Data(line.utf8))
        #expect(dump.regular.tabs.map(\.url) == opened.filter { !$0.incognito }.map(\.url))
        #expect(dump.incognito.tabs.map(\.url) == opened.filter(\.incognito).map(\.url))
        #expect(dump.appliedSeq == 30 && dump.durableSeq == 30)
        #expect(dump.digest == host.windows()[window]?.digest)

        let text = try host.ctl(["dump", "--window", window])
        #expect(text.status == 0, "\(text.output.prefix(500))")
        let lines = text.output.split(separator: "\n")
        for (url, _) in opened {
            #expect(lines.contains { $0.contains("  \(url)  (") }, "the URL of \(url.prefix(30))… shown whole")
        }
        #expect(host.terminate() == 0)
    }

    /// The largest window the host accepts: filled through the control socket to
    /// `Limits.maxWindowTextBytes` exactly (the longest URLs `ctl` takes, and one to make up the
    /// rest), it dumps whole; one command more is refused (65) with nothing applied.
    @Test(.timeLimit(.minutes(10))) func aWindowFilledToTheBoundDumpsWholeAndTakesNoMore() throws {
        let root = temporaryRoot("full-window")
        defer { removeHostFiles(root) }
        // No save until asked: the test is about what the window shows. The watchdog is wide: a
        // debug build's dump of the largest window can hold the worker past the default 3 s on a
        // loaded machine, and the test is not about the watchdog.
        let host = try HostProcess(root: root, scenes: 1, saveDelay: 600_000, arguments: ["--watchdog", "30000"])
        let window = try #require(host.windowIDs().first)
        var urls: [String] = []
        var left = Limits.maxWindowTextBytes
        while left > 0 {
            let prefix = "https://\(urls.count).example/"
            let bytes = min(left, Limits.maxControlURLBytes)
            urls.append(prefix + String(repeating: "f", count: bytes - prefix.utf8.count))
            left -= bytes
        }
        for (index, url) in urls.enumerated() {
            try #require(
                host.open(window, url, incognito: index % 3 == 2) != nil, "open \(index): \(host.log.suffix(500))")
        }
        let before = try #require(host.windows()[window])
        #expect(before.tabs == UInt64(urls.count) && before.appliedSeq == UInt64(urls.count))

        let started = Date()
        let json = try host.ctl(["--json", "dump", "--window", window])
        let seconds = Date().timeIntervalSince(started)
        #expect(json.status == 0, "\(json.output.prefix(500))")
        let line = json.output.split(separator: "\n").last.map(String.init) ?? ""
        let dump = try ReplyCoding.decoder().decode(DumpReply.self, from: Data(line.utf8))
        let shown = dump.regular.tabs + dump.incognito.tabs
        #expect(shown.reduce(0) { $0 + $1.url.utf8.count + $1.title.utf8.count } == Limits.maxWindowTextBytes)
        #expect(Set(shown.map(\.url)) == Set(urls), "every URL whole")
        print(
            "a window of \(Limits.maxWindowTextBytes) bytes of URLs (\(urls.count) tabs) dumped as \(line.utf8.count) bytes of JSON in \(seconds) s"
        )
        let text = try host.ctl(["dump", "--window", window])
        #expect(text.status == 0 && text.output.split(separator: "\n").count == urls.count + 3, "a line per tab")

        let tab = try #require(dump.regular.tabs.last)
        let refusals = [
            ["open", "--window", window, "--url", "y"],
            ["open", "--window", window, "--url", "y", "--incognito"],
            ["navigate", "--window", window, "--tab", "\(tab.id)", "--url", tab.url + "y"],
            ["replace", "--window", window, "--tab", "\(tab.id)", "--url", tab.url + "y"],
        ]
        for arguments in refusals {
            let run = try host.ctl(arguments)
            #expect(
                run.status == 65 && run.output.contains("Limits.maxWindowTextBytes"),
                "\(arguments[0]): \(run.output.prefix(300))")
        }
        let after = try #require(host.windows()[window])
        #expect(after.appliedSeq == before.appliedSeq && after.tabs == before.tabs, "nothing applied, no seq taken")
        let again = try host.call(.dump, window: window).decode(DumpReply.self)
        #expect(again.digest == dump.digest)
        #expect(host.terminate() == 0)
    }
}
