import Foundation
import Glibc
import HostControl
import Supervisor
import SystemPackage
import Testing

/// Seqs and tab ids as a script sees them through `windowhost ctl`: within a supervisor's life a
/// window never hands out one seq twice, nor one tab id twice, nor replies with a seq below one
/// it replied before; and a command that changes nothing takes no seq.
@Suite struct SeqNumberingTests {
    /// `ctl --json VERB --window W …`: the exit status and the reply's object (nil unless 0).
    private func ctl(_ host: HostProcess, _ verb: String, _ window: String, _ arguments: [String] = []) throws -> (
        status: Int32, result: JSONValue?
    ) {
        let run = try host.ctl(["--json", verb, "--window", window] + arguments)
        let line = run.output.split(separator: "\n").last.map(String.init) ?? ""
        return (run.status, run.status == 0 ? try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)) : nil)
    }

    /// Commands replied to and then lost with their worker (killed before a save: the save delay
    /// is a minute). Before, the restarted worker came back at the durable seq (0) and handed
    /// out seq 1 and tab 1 again, and a command that changed nothing replied with seq 0, below
    /// the 3 already replied.
    @Test(.timeLimit(.minutes(10))) func aKilledWorkersSeqsAndTabIDsAreNeverHandedOutAgain() throws {
        let root = temporaryRoot("seq-floor")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        var seqs: [Int64] = []
        var tabs: [Int64] = []
        func open(_ url: String, _ more: [String] = []) throws {
            let reply = try ctl(host, "open", window, ["--url", url] + more)
            try #require(reply.status == 0, "open \(url): \(host.log.suffix(2000))")
            seqs.append(try #require(reply.result?["seq"]?.int))
            tabs.append(try #require(reply.result?["tab"]?.int))
        }
        try open("https://one.example/")
        try open("https://two.example/")
        try open("https://private.example/", ["--incognito"])
        #expect(seqs == [1, 2, 3] && tabs == [1, 2, 3])

        // Killed through ctl (it returns once the window is restored): nothing was durable.
        #expect(try host.ctl(["kill", "--window", window]).status == 0)
        let restored = try ctl(host, "dump", window)
        #expect(
            restored.result?["regular"]?["tabs"]?.array?.isEmpty == true,
            "nothing was durable: \(String(describing: restored.result))")
        // The window's own seqs say what it holds: a durable seq is one on disk, whatever was lost.
        #expect(restored.result?["applied_seq"]?.int == 0 && restored.result?["durable_seq"]?.int == 0)
        #expect(try ctl(host, "wait-durable", window).result?["durable_seq"]?.int == 0)
        #expect(
            try ctl(host, "wait-durable", window, ["--seq", "2"]).status == 75,
            "seq 2 was lost: no wait ever ends for it")
        // A command that changes nothing shows the window's seq: not below one replied before.
        let nothing = try ctl(host, "close-all", window, ["--incognito"])
        #expect(
            nothing.status == 0 && (nothing.result?["seq"]?.int ?? -1) >= 3, "\(String(describing: nothing.result))")
        try open("https://after-kill.example/")

        // Killed by SIGKILL of its pid, as the tester did.
        let pid = try #require(host.windows()[window]?.pid)
        Glibc.kill(pid_t(pid), SIGKILL)
        try #require(
            waitFor(
                {
                    (host.windows()[window]?.pid).map { $0 != pid } == true
                        && host.windows()[window]?.state == "foreground"
                }, seconds: 20))
        try open("https://after-sigkill.example/", ["--incognito"])

        #expect(seqs == [1, 2, 3, 4, 5], "each change a new seq, in order: \(seqs)")
        #expect(Set(tabs).count == tabs.count && tabs == tabs.sorted(), "every tab id new: \(tabs)")

        // Saved, then a clean stop; the next supervisor brings the window back at the seq last
        // reported durable (5; seq 4 went with the SIGKILLed worker), never below it.
        #expect(try host.ctl(["save", "--wait", "--window", window]).status == 0)
        // Durable through 5 does not cover the seqs lost below it: the answer names them, and a
        // wait for one of them says it is gone. (Before, `durable 5` alone: a script that held
        // seq 4 took its command for durable.)
        let durable = try ctl(host, "wait-durable", window)
        #expect(durable.result?["durable_seq"]?.int == 5)
        #expect(
            durable.result?["lost_seqs"] == .array([.array([JSONValue(1), JSONValue(4)])]),
            "\(String(describing: durable.result))")
        #expect(try ctl(host, "wait-durable", window, ["--seq", "4"]).status == 75)
        #expect(try ctl(host, "wait-durable", window, ["--seq", "5"]).result?["durable_seq"]?.int == 5)
        #expect(try ctl(host, "wait-durable", window, ["--seq", "6"]).status == 65, "no command 6 yet")
        #expect(
            try host.ctl(["wait-durable", "--window", window]).output.contains(
                "durable 5 (lost with a killed worker, never durable: 1-4)"))
        #expect(host.terminate() == 0, "\(host.log.suffix(2000))")
        let next = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let back = try ctl(next, "dump", window)
        #expect(back.result?["applied_seq"]?.int == 5, "\(String(describing: back.result))")
        let urls = ["regular", "incognito"].flatMap { back.result?[$0]?["tabs"]?.array ?? [] }.compactMap {
            $0["url"]?.string
        }
        #expect(urls == ["https://after-sigkill.example/"], "\(urls)")
        #expect(next.terminate() == 0)
    }

    /// Every verb that changes nothing (or is refused) leaves the seq where it was, so the next
    /// change takes the next one: no gap. Before, the supervisor numbered each command as it sent
    /// it, and the empty close-all, the activation of the active tab and the move in place each
    /// used up a seq no change ever named.
    @Test(.timeLimit(.minutes(10))) func aCommandThatChangesNothingTakesNoSeq() throws {
        let root = temporaryRoot("seq-noop")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(try ctl(host, "open", window, ["--url", "https://one.example/"]).result?["seq"]?.int == 1)
        #expect(try ctl(host, "open", window, ["--url", "https://two.example/"]).result?["seq"]?.int == 2)
        for (verb, arguments) in [
            ("close-all", ["--incognito"]), ("activate", ["--tab", "2"]), ("move", ["--tab", "2", "--index", "1"]),
        ] {
            let reply = try ctl(host, verb, window, arguments)
            #expect(
                reply.status == 0 && reply.result?["seq"]?.int == 2,
                "\(verb) changes nothing: \(String(describing: reply.result))")
        }
        for (verb, arguments) in [
            ("close", ["--tab", "99"]), ("navigate", ["--tab", "99", "--url", "https://x.example/"]),
            ("move", ["--tab", "1", "--index", "7"]),
        ] {
            #expect(try ctl(host, verb, window, arguments).status == 65, "\(verb) \(arguments)")
        }
        #expect(
            try ctl(host, "navigate", window, ["--tab", "1", "--url", "https://one.example/next"]).result?["seq"]?.int
                == 3)
        #expect(try ctl(host, "close-all", window).result?["seq"]?.int == 4)
        #expect(try ctl(host, "close-all", window).result?["seq"]?.int == 4, "nothing left to close")
        let dump = try ctl(host, "dump", window)
        #expect(dump.result?["applied_seq"]?.int == 4)
        #expect(host.terminate() == 0)
    }
}
