import BrowserModel
import Foundation
import Glibc
import HostControl
import Supervisor
import SystemPackage
import Testing

/// Seqs and tab ids across the death of the supervisor itself (SIGKILL of it and its workers):
/// `ROOT/handed-out` keeps each window's ceilings, so the next supervisor never hands out a
/// seq or tab id a client was given for a command that was lost, and `wait-durable` says such
/// a seq is lost (75), never durable (0).
@Suite struct SupervisorRestartSeqTests {
    private func ctl(_ host: HostProcess, _ verb: String, _ window: String, _ arguments: [String] = []) throws -> (
        status: Int32, result: JSONValue?
    ) {
        let run = try host.ctl(["--json", verb, "--window", window] + arguments)
        let line = run.output.split(separator: "\n").last.map(String.init) ?? ""
        return (run.status, run.status == 0 ? try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)) : nil)
    }

    private func open(_ host: HostProcess, _ window: String, _ url: String) throws -> (seq: Int64, tab: Int64) {
        let reply = try ctl(host, "open", window, ["--url", url])
        try #require(reply.status == 0, "open \(url): \(host.log.suffix(2000))")
        return (try #require(reply.result?["seq"]?.int), try #require(reply.result?["tab"]?.int))
    }

    /// SIGKILL of the supervisor and of its worker, as a power cut would leave things.
    private func killAll(_ host: HostProcess, _ window: String) throws {
        let worker = try #require(host.windows()[window]?.pid)
        host.kill9()
        Glibc.kill(pid_t(worker), SIGKILL)
        try #require(waitFor({ !isRunning(pid_t(worker)) }, seconds: 20))
    }

    /// One open saved (seq 1), two more replied and lost with the supervisor (the save delay is
    /// a minute). Before, the next supervisor started the window at its durable seq 1: the next
    /// opens took seqs 2 and 3 and tab ids 2 and 3 again, and once saved `wait-durable --seq 3`
    /// answered 0 (durable) for a command that was lost.
    @Test(.timeLimit(.minutes(10))) func aKilledSupervisorsSeqsAndTabIDsAreNeverHandedOutAgain() throws {
        let root = temporaryRoot("handed-out")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        var seen = [try open(host, window, "https://saved.example/")]
        #expect(try host.ctl(["save", "--wait", "--window", window]).status == 0)
        seen.append(try open(host, window, "https://lost-one.example/"))
        seen.append(try open(host, window, "https://lost-two.example/"))
        #expect(seen.map(\.seq) == [1, 2, 3] && seen.map(\.tab) == [1, 2, 3])
        var saved: [Int64] = [1]
        var lost: [Int64] = [2, 3]
        var status = stat()
        #expect(
            lstat(root.appendingPathComponent(DiskLayout.handedOut).path, &status) == 0
                && status.st_mode & 0o7777 == 0o600,
            "private")
        try killAll(host, window)

        // Twice: the second supervisor's ceilings must survive its own death too.
        for round in 1...2 {
            let next = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
            try #require(next.windowIDs() == [window], "the saved window comes back: \(next.log.suffix(2000))")
            for seq in saved {
                #expect(
                    try next.ctl(["wait-durable", "--window", window, "--seq", "\(seq)"]).status == 0,
                    "round \(round): seq \(seq) was saved")
            }
            for seq in lost {
                #expect(
                    try next.ctl(["wait-durable", "--window", window, "--seq", "\(seq)"]).status == 75,
                    "round \(round): seq \(seq) was lost")
            }
            let fresh = [
                try open(next, window, "https://after-\(round)-a.example/"),
                try open(next, window, "https://after-\(round)-b.example/"),
            ]
            for new in fresh {
                #expect(
                    seen.allSatisfy { new.seq > $0.seq && new.tab > $0.tab },
                    "round \(round): \(new) above every one seen before \(seen)")
            }
            #expect(try next.ctl(["save", "--wait", "--window", window]).status == 0)
            for seq in lost {
                #expect(
                    try next.ctl(["wait-durable", "--window", window, "--seq", "\(seq)"]).status == 75,
                    "round \(round): seq \(seq) is still lost once saved")
            }
            for new in fresh {
                #expect(
                    try next.ctl(["wait-durable", "--window", window, "--seq", "\(new.seq)"]).status == 0,
                    "round \(round): seq \(new.seq) saved")
            }
            seen += fresh
            saved += fresh.map(\.seq)
            // Replied, then lost with this supervisor too.
            let unsaved = try open(next, window, "https://lost-\(round).example/")
            #expect(seen.allSatisfy { unsaved.seq > $0.seq && unsaved.tab > $0.tab })
            seen.append(unsaved)
            lost.append(unsaved.seq)
            try killAll(next, window)
        }
    }

    /// `handed-out` damaged while no supervisor ran (a byte changed in each copy: neither reads): set
    /// aside, and the window numbers 2^32 above what it restored, so the seqs and tab ids lost
    /// with the killed supervisor are still never handed out again, and still answer 75. Before,
    /// the window numbered from its durable seq 1 again.
    @Test(.timeLimit(.minutes(10))) func aDamagedRecordFallsBackToAJumpAboveWhatIsRestored() throws {
        let root = temporaryRoot("handed-out-damaged")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        var seen = [try open(host, window, "https://saved.example/")]
        #expect(try host.ctl(["save", "--wait", "--window", window]).status == 0)
        seen.append(try open(host, window, "https://lost.example/"))
        try killAll(host, window)
        let file = root.appendingPathComponent(DiskLayout.handedOut)
        var bytes = try Data(contentsOf: file)
        // One byte of the text in each of its two copies (one alone falls back to the other).
        let slot = bytes.count / 2
        for offset in [20, slot + 20] { bytes[offset] ^= 0x20 }
        try bytes.write(to: file)

        let next = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        try #require(next.windowIDs() == [window], "\(next.log.suffix(2000))")
        let aside = try FileManager.default.contentsOfDirectory(
            atPath: root.appendingPathComponent(DiskLayout.setAside).path)
        #expect(aside.count == 1 && aside[0].hasPrefix("handed-out-"), "\(aside)")
        #expect(try next.ctl(["wait-durable", "--window", window, "--seq", "1"]).status == 0)
        #expect(try next.ctl(["wait-durable", "--window", window, "--seq", "2"]).status == 75)
        let fresh = try open(next, window, "https://after.example/")
        #expect(
            fresh.seq > 1 << 32 && fresh.tab > 1 << 32 && seen.allSatisfy { fresh.seq > $0.seq && fresh.tab > $0.tab },
            "\(fresh)")
        #expect(try next.ctl(["save", "--wait", "--window", window]).status == 0)
        #expect(try next.ctl(["wait-durable", "--window", window, "--seq", "2"]).status == 75, "still lost once saved")
        #expect(try next.ctl(["wait-durable", "--window", window, "--seq", "\(fresh.seq)"]).status == 0)
        #expect(next.terminate() == 0)
    }

    /// A clean stop loses nothing: the next supervisor continues at the next seq and tab id
    /// (the ceilings come down to what was shown), not a block above.
    @Test(.timeLimit(.minutes(10))) func aCleanStopContinuesAtTheNextSeq() throws {
        let root = temporaryRoot("handed-out-clean")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        let opened = [try open(host, window, "https://one.example/"), try open(host, window, "https://two.example/")]
        #expect(opened.map(\.seq) == [1, 2] && opened.map(\.tab) == [1, 2])
        #expect(host.terminate() == 0, "\(host.log.suffix(2000))")
        let next = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let third = try open(next, window, "https://three.example/")
        #expect(third.seq == 3 && third.tab == 3, "\(third)")
        #expect(try ctl(next, "wait-durable", window).result?["lost_seqs"] == nil, "nothing lost")
        #expect(next.terminate() == 0)
    }

    /// A `handed-out` whose lost range holds the seq the window restores (crafted, or mixed
    /// up): that range is not believed, so the acknowledged commands it names answer 0, not 75
    /// (hostile round 5: `wait-durable --seq 1` exited 75 for a tab the window held).
    @Test(.timeLimit(.minutes(10))) func aLostRangeHoldingTheRestoredSeqIsNotBelieved() throws {
        let root = temporaryRoot("handed-out-contradicted")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        for page in ["https://one.example/", "https://two.example/"] { _ = try open(host, window, page) }
        #expect(try host.ctl(["save", "--wait", "--window", window]).status == 0)
        #expect(host.terminate() == 0, "\(host.log.suffix(2000))")
        // The bare text form, as a person writes it: the window's seqs 1 and 2 said lost.
        try Data("windowhost-handed-out 1\n\(window) 2 2 1-2\nend 1\n".utf8).write(
            to: root.appendingPathComponent(DiskLayout.handedOut))

        let next = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        #expect(try next.ctl(["wait-durable", "--window", window, "--seq", "1"]).status == 0)
        #expect(try next.ctl(["wait-durable", "--window", window, "--seq", "2"]).status == 0)
        #expect(next.log.contains("not believed"), "\(next.log.suffix(2000))")
        #expect(next.terminate() == 0)
    }
}
