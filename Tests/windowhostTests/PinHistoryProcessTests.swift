import Foundation
import Glibc
import HostControl
import Supervisor
import SystemPackage
import Testing

/// `ctl pin`, `unpin`, `back` and `forward` through real processes: the pinned order and each
/// history's current entry survive a killed worker and a SIGKILLed supervisor; a command that
/// changes nothing takes no seq; hostile input is refused with its code and changes nothing.
@Suite struct PinHistoryProcessTests {
    /// `ctl --json VERB --window W …`: the exit status and the reply's object (nil unless 0).
    private func ctl(_ host: HostProcess, _ verb: String, _ window: String, _ arguments: [String] = []) throws -> (
        status: Int32, result: JSONValue?
    ) {
        let run = try host.ctl(["--json", verb, "--window", window] + arguments)
        let line = run.output.split(separator: "\n").last.map(String.init) ?? ""
        return (run.status, run.status == 0 ? try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)) : nil)
    }

    /// The seq `verb` on `tab` replied with; the command must succeed.
    private func seq(_ host: HostProcess, _ verb: String, _ window: String, tab: Int64, _ more: [String] = []) throws
        -> Int64
    {
        let reply = try ctl(host, verb, window, ["--tab", "\(tab)"] + more)
        try #require(reply.status == 0, "\(verb) \(tab): \(host.log.suffix(2000))")
        return try #require(reply.result?["seq"]?.int)
    }

    /// What a dump shows of pinning and history, per Browser: (id, pinned, url, history count),
    /// the active index, and each realized tab's history index.
    private struct Shown: Equatable {
        var tabs: [[String]]
        var indices: [Int64: Int64]
    }

    private func shown(_ host: HostProcess, _ window: String) throws -> Shown {
        let dump = try #require(try ctl(host, "dump", window).result, "dump: \(host.log.suffix(2000))")
        var shown = Shown(tabs: [], indices: [:])
        for kind in ["regular", "incognito"] {
            let browser = try #require(dump[kind])
            shown.tabs.append(["active \(browser["active_index"]?.int.map(String.init) ?? "none")"])
            for tab in browser["tabs"]?.array ?? [] {
                let id = try #require(tab["id"]?.int)
                shown.tabs.append([
                    "\(id)", "\(tab["pinned"]?.bool ?? false)", tab["url"]?.string ?? "",
                    "\(tab["history_count"]?.int ?? -1)",
                ])
                if let index = tab["history_index"]?.int { shown.indices[id] = index }
            }
        }
        return shown
    }

    /// Pins, unpins, backs and forwards, then the worker killed through `ctl kill`, then the
    /// supervisor and its worker SIGKILLed and a new supervisor started: each time the dump
    /// shows the same pinned set and order, the same pages and history counts, and stepping
    /// from there lands where the restored history index says.
    @Test(.timeLimit(.minutes(10))) func pinnedOrderAndHistoryIndexSurviveKills() throws {
        let root = temporaryRoot("pin-history")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        for url in ["https://a.example/", "https://b.example/0", "https://c.example/", "https://d.example/"] {
            #expect(host.open(window, url) != nil)
        }
        let incognito = try #require(host.open(window, "https://private.example/0", incognito: true))
        for url in ["https://b.example/1", "https://b.example/2"] {
            #expect(try ctl(host, "navigate", window, ["--tab", "2", "--url", url]).status == 0)
        }
        #expect(
            try ctl(host, "navigate", window, ["--tab", "\(incognito)", "--url", "https://private.example/1"]).status
                == 0)
        var last = try seq(host, "back", window, tab: 2)
        #expect(try seq(host, "back", window, tab: 2) == last + 1)
        last += 1
        #expect(try seq(host, "back", window, tab: 2) == last, "nothing behind: no change, no seq")
        #expect(try seq(host, "forward", window, tab: 2) == last + 1)
        last += 1
        #expect(try seq(host, "back", window, tab: incognito) == last + 1)
        last += 1
        #expect(try seq(host, "pin", window, tab: 3) == last + 1)
        #expect(try seq(host, "pin", window, tab: 2) == last + 2)
        #expect(try seq(host, "pin", window, tab: 2) == last + 2, "already pinned: no seq")
        #expect(try seq(host, "unpin", window, tab: 4) == last + 2, "already unpinned: no seq")
        #expect(try seq(host, "pin", window, tab: 4) == last + 3)
        #expect(try seq(host, "unpin", window, tab: 3) == last + 4)
        #expect(try seq(host, "pin", window, tab: incognito) == last + 5)
        last += 5

        let before = try shown(host, window)
        #expect(
            before.tabs[1...4] == [
                ["2", "true", "https://b.example/1", "3"], ["4", "true", "https://d.example/", "1"],
                ["3", "false", "https://c.example/", "1"], ["1", "false", "https://a.example/", "1"],
            ])
        #expect(before.tabs.last == ["\(incognito)", "true", "https://private.example/0", "2"])
        #expect(before.indices[2] == 1 && before.indices[incognito] == 0, "the stepped tabs are realized: \(before)")
        let text = try host.ctl(["dump", "--window", window]).output
        #expect(text.contains("2  https://b.example/1  (pinned, history 2/3, last active "), "\(text)")
        #expect(try host.ctl(["wait-durable", "--window", window]).status == 0)

        #expect(try host.ctl(["kill", "--window", window]).status == 0)
        let afterWorker = try shown(host, window)
        #expect(afterWorker.tabs == before.tabs)
        #expect(
            afterWorker.indices.allSatisfy { before.indices[$0.key] == $0.value },
            "\(afterWorker.indices) against \(before.indices)")

        let worker = try #require(host.windows()[window]?.pid)
        host.kill9()
        Glibc.kill(pid_t(worker), SIGKILL)
        try #require(waitFor({ !isRunning(pid_t(worker)) }, seconds: 20))
        let next = try HostProcess(root: root, scenes: 1)
        try #require(next.windowIDs() == [window], "\(next.log.suffix(2000))")
        let afterSupervisor = try shown(next, window)
        #expect(afterSupervisor.tabs == before.tabs)
        #expect(
            afterSupervisor.indices.allSatisfy { before.indices[$0.key] == $0.value },
            "\(afterSupervisor.indices) against \(before.indices)")
        // The history index came back: one forward reaches the last entry, the next changes nothing.
        let forward = try seq(next, "forward", window, tab: 2)
        #expect(forward > last)
        #expect(try seq(next, "forward", window, tab: 2) == forward, "nothing ahead")
        #expect(try shown(next, window).tabs[1] == ["2", "true", "https://b.example/2", "3"])
        #expect(try shown(next, window).indices[2] == 2)
        #expect(next.terminate() == 0)
    }

    /// Unknown tabs (negative, zero, the largest id, one the other window holds), a window
    /// that is not there, a tab id past Int64, a missing tab, an option the verbs do not take:
    /// each refused with its code, and the window's seq and digest unchanged.
    @Test(.timeLimit(.minutes(10))) func hostileInputsAreRefusedAndChangeNothing() throws {
        let root = temporaryRoot("pin-hostile")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        let windows = host.windowIDs().sorted()
        try #require(windows.count == 2)
        let (window, other) = (windows[0], windows[1])
        #expect(host.open(window, "https://a.example/") != nil)
        let stranger = try #require(host.open(other, "https://other.example/"))
        #expect(try host.ctl(["wait-durable", "--window", window]).status == 0)
        let before = try #require(try ctl(host, "dump", window).result)
        for verb in ["pin", "unpin", "back", "forward"] {
            var refusals: [([String], Int32)] = [
                (["--window", window, "--tab=-1"], 65), (["--window", window, "--tab", "0"], 65),
                (["--window", window, "--tab", "\(Int64.max)"], 65),
                (["--window", window, "--tab", "\(stranger + 1)"], 65),
                (["--window", UUID().uuidString, "--tab", "1"], 65), (["--window", "nope", "--tab", "1"], 64),
                (["--window", window, "--tab", "99999999999999999999"], 64), (["--window", window], 64),
                (["--window", window, "--tab", "1", "--incognito"], 64),
            ]
            if stranger != 1 { refusals.append((["--window", window, "--tab", "\(stranger)"], 65)) }
            for (arguments, code) in refusals {
                let run = try host.ctl([verb] + arguments)
                #expect(run.status == code, "\(verb) \(arguments): \(run.output)")
            }
        }
        let after = try #require(try ctl(host, "dump", window).result)
        #expect(after == before, "nothing changed")
        // A worker that hangs (stopped) until the watchdog replaces it: the pin waiting for it is
        // answered 75 and the restored window does not have it.
        #expect(try host.ctl(["kill", "--window", window, "--signal", "STOP", "--no-wait"]).status == 0)
        let waiting = try host.ctlBounded(["pin", "--window", window, "--tab", "1"], seconds: 30)
        #expect(waiting.status == 75, "\(waiting.output)")
        #expect(waitFor({ host.windows()[window]?.state == "foreground" }, seconds: 20), "\(host.log.suffix(2000))")
        let restored = try #require(try ctl(host, "dump", window).result)
        #expect(
            restored["regular"] == before["regular"] && restored["applied_seq"] == before["applied_seq"], "\(restored)")
        #expect(try ctl(host, "dump", other).result?["applied_seq"]?.int == 1)
        #expect(host.terminate() == 0)
    }
}
