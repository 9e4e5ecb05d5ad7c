import BrowserModel
import Foundation
import Glibc
import HostControl
import HostCoordination
import Supervisor
import Testing

/// Issue 17's second hostile round: the fixes of the first (marker identity, own-UUID
/// ceilings) attacked with variants, and kills at the moments round one did not reach (the
/// adopted worker killed before its save, the supervisor killed right after `adopt` answered,
/// a discard of a big tree cut short). The promise: a session comes back whole or stays set
/// aside, never both and never neither; no seq a reply showed is shown again for another
/// command.
@Suite(.serialized) struct SetAsideAttackRoundTwoTests {
    /// The first round's helpers: crash loops, lists, URLs.
    typealias Life = SetAsideProcessTests

    static func reply(_ output: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(output.utf8))
    }

    /// Windows whose tabs are exactly `urls`.
    static func holding(_ host: HostProcess, _ urls: [String]) -> [String] {
        host.windows().keys.filter { Life.urls(host, $0) == urls }.sorted()
    }

    /// The supervisor SIGKILLed right after `adopt` answered 0: the adoption ended before the
    /// answer, so the next start finds the window with its tabs, once, and no entry back.
    @Test func aSupervisorKilledRightAfterAdoptAnsweredKeepsTheWindowAndNoEntry() throws {
        let root = temporaryRoot("attack2-kill-after")
        defer { removeHostFiles(root) }
        var (host, ids, urls) = try Life.crashLoop(root)
        let id = try #require(try Life.entries(host).first?["id"]?.string)
        #expect(host.terminate() == 0)
        host = try HostProcess(root: root, scenes: 2)
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output)")
        host.kill9()
        let window = try #require(try Self.reply(adopted.output)["window"]?.string)

        // Every window on disk opens (the two, the one this host made, the adopted one).
        host = try HostProcess(root: root, scenes: 4)
        defer { _ = host.terminate() }
        #expect(Life.setAsideNames(root).isEmpty, "no entry and no marker: \(Life.setAsideNames(root))")
        #expect(try Life.entries(host).isEmpty)
        #expect(Life.urls(host, window) == urls[ids[0]], "the adopted window came back with its tabs")
        #expect(Self.holding(host, urls[ids[0]] ?? []) == [window], "once")
        #expect(Life.urls(host, ids[1]) == urls[ids[1]])
    }

    /// `ctl kill` of the adopted window the moment it shows in `status` (before its adoption
    /// save is durable, often before it restored): the session is back exactly once, as a
    /// window answered to `adopt` or as the entry, now and after a restart.
    @Test func theAdoptedWorkerKilledBeforeItsSaveLosesAndDuplicatesNothing() throws {
        try interruptAdoption("attack2-kill-adopted") { host, target in
            let killed = try host.ctlBounded(["kill", "--window", target], seconds: 20)
            #expect(killed.status != -1, "kill hung: \(killed.output)")
        }
    }

    /// The same with the adopting window disconnected the moment it shows in `status`.
    @Test func theAdoptingWindowDisconnectedEarlyLosesAndDuplicatesNothing() throws {
        try interruptAdoption("attack2-disconnect-adopted") { host, target in
            let gone = try host.ctlBounded(["disconnect", "--window", target], seconds: 20)
            #expect(gone.status != -1, "disconnect hung: \(gone.output)")
        }
    }

    /// Adopts a crash-looped entry in the background and does `interrupt` to the adopted
    /// window as soon as `status` shows it; then the session must be held exactly once (a
    /// window on disk or the entry), in this host and after a restart that opens every window.
    func interruptAdoption(_ name: String, _ interrupt: (HostProcess, String) throws -> Void) throws {
        let root = temporaryRoot(name)
        defer { removeHostFiles(root) }
        var (host, ids, urls) = try Life.crashLoop(root)
        let id = try #require(try Life.entries(host).first?["id"]?.string)
        #expect(host.terminate() == 0)
        host = try HostProcess(root: root, scenes: 1)
        let before = Set(host.windows().keys)
        let adopting = try Life.startAdopting(host, id)
        var target: String?
        #expect(
            waitFor(
                {
                    target = host.windows().keys.first { !before.contains($0) }
                    return target != nil || !adopting.isRunning
                }, seconds: 20))
        if let target { try interrupt(host, target) }
        adopting.waitUntilExit()
        let answered = adopting.terminationStatus
        let session = urls[ids[0]] ?? []
        #expect(Life.urls(host, ids[1]) == urls[ids[1]], "the other window untouched")
        let names = Life.setAsideNames(root)
        #expect(names.allSatisfy { !$0.hasPrefix(".adopting-") }, "no marker left while the host runs: \(names)")
        #expect(host.terminate() == 0)
        // Every window on disk opens (the two, the one this host made, the adopted one).
        host = try HostProcess(root: root, scenes: 4)
        defer { _ = host.terminate() }
        let windows = Self.holding(host, session)
        let entries = try Life.entries(host).filter { $0["id"]?.string == id }
        #expect(
            windows.count + entries.count == 1,
            "adopt \(answered): windows \(windows) entries \(entries) \(names) \(host.log.suffix(3000))")
        if answered == 0 { #expect(windows.count == 1 && entries.isEmpty, "adopt answered 0, so a window has it") }
        #expect(Life.urls(host, ids[1]) == urls[ids[1]])
    }

    /// A window whose seqs reach near 2⁵³ − 1 (a `handed-out` written by hand, as a person may):
    /// its entry's summary lists the durable seq exactly, and adopted under its own UUID it
    /// never shows a seq again, refusing commands at the limit rather than wrapping.
    @Test func anEntryWithASeqNearTheLimitIsListedExactlyAndNeverReusesOne() throws {
        let (root, window, urls) = try SetAsideAttackTests.sessionRoot("attack2-seq-limit")
        defer { removeHostFiles(root) }
        let limit: UInt64 = (1 << 53) - 1
        let text = "windowhost-handed-out 1\n\(window) \(limit - 10) 100\nend 1\n"
        try Data(text.utf8).write(to: root.appendingPathComponent(DiskLayout.handedOut))
        var host = try HostProcess(root: root, scenes: 1)
        let high = try host.call(.open("https://high.example/", incognito: false), window: window).decode(
            CommandReply.self)
        #expect(high.seq > limit - 10, "numbered above the ceiling: \(high)")
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.terminate() == 0)
        host = try HostProcess(root: root, scenes: 1, environment: [Life.fault: window], binary: windowhostFaultsBinary)
        try #require(waitFor({ (try? Life.entries(host).count) == 1 }, seconds: 30), "\(host.log.suffix(2000))")
        #expect(host.terminate() == 0)

        host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let entry = try #require(try Life.entries(host).first)
        let id = try #require(entry["id"]?.string)
        #expect(
            entry["summary"]?.string == "read" && entry["durable_seq"]?.int.flatMap { UInt64(exactly: $0) } == high.seq,
            "\(entry)")
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output)")
        try #require(try Self.reply(adopted.output)["window"]?.string == window, "own UUID: \(adopted.output)")
        #expect(Life.urls(host, window) == urls + ["https://high.example/"])
        var last = high.seq
        for n in 0..<12 {
            let reply = host.call(.open("https://near-\(n).example/", incognito: false), window: window)
            guard let opened = try? reply.decode(CommandReply.self) else { break }
            #expect(opened.seq > last && opened.seq <= limit, "\(opened) after \(last)")
            last = opened.seq
        }
        #expect(host.windows()[window] != nil, "the window still serves")
    }

    /// Commands replied and lost (a power cut before their save) by a window adopted under its
    /// own UUID, which then crash-loops again and is adopted again: no seq or tab id any reply
    /// showed is shown again, and each lost seq answers 75 through both adoptions.
    ///
    /// Failed before the fix (issue 17, round two): after the second adoption `wait-durable --seq 2` answers 0,
    /// "durable 4098", for a command lost before the first crash loop. The empty restart after
    /// a set-aside records the window's lost seqs as one range 1…ceiling (merging the older
    /// ranges into it); the adopted window restores the entry's durable seq, which that range
    /// holds, so the whole range is "not believed" (logged) and only restored+1…ceiling is
    /// named lost again: every older lost range below the restored seq is forgotten.
    @Test func adoptedTwiceUnderItsOwnUUIDNoSeqOrTabIDIsShownTwice() throws {
        let root = temporaryRoot("attack2-adopt-twice")
        defer { removeHostFiles(root) }
        var shown: [CommandReply] = []
        var lost: [UInt64] = []
        var host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        func open(_ url: String) throws -> CommandReply {
            let reply = try host.call(.open(url, incognito: false), window: window).decode(CommandReply.self)
            shown.append(reply)
            return reply
        }
        /// Power cut: supervisor and worker SIGKILLed, unsaved opens lost.
        func powerCut() throws {
            let worker = try #require(host.windows()[window]?.pid)
            host.kill9()
            Glibc.kill(pid_t(worker), SIGKILL)
            try #require(waitFor({ !isRunning(pid_t(worker)) }, seconds: 20))
        }
        /// A crash loop sets the session aside; then a host without the fault adopts it back.
        func crashLoopAndAdopt() throws {
            // Two scenes: the window the adopting host made for its scene opens first.
            host = try HostProcess(
                root: root, scenes: 2, saveDelay: 60_000, environment: [Life.fault: window],
                binary: windowhostFaultsBinary)
            try #require(waitFor({ (try? Life.entries(host).count) == 1 }, seconds: 30), "\(host.log.suffix(2000))")
            let id = try #require(try Life.entries(host).first?["id"]?.string)
            #expect(host.terminate() == 0)
            host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
            let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
            try #require(adopted.status == 0, "\(adopted.output)")
            try #require(
                try Self.reply(adopted.output)["window"]?.string == window,
                "adopted under its own UUID: \(adopted.output)")
        }
        func check(_ when: String) throws {
            for seq in lost {
                let asked = try host.ctlBounded(["wait-durable", "--window", window, "--seq", "\(seq)"], seconds: 20)
                #expect(asked.status == 75, "\(when): seq \(seq) was lost: \(asked.status) \(asked.output)")
            }
            let fresh = try open("https://\(when)-fresh.example/")
            let earlier = shown.dropLast()
            #expect(
                earlier.allSatisfy { fresh.seq > $0.seq },
                "\(when): seq \(fresh.seq) shown before: \(earlier.map(\.seq))")
            #expect(
                earlier.allSatisfy { (fresh.tab ?? 0) > ($0.tab ?? 0) },
                "\(when): tab \(fresh.tab ?? -1) shown before: \(earlier.map { $0.tab ?? -1 })")
        }

        _ = try open("https://saved-one.example/")
        #expect(host.call(.save(wait: true), window: window).code == .ok)
        lost += [try open("https://lost-a.example/").seq, try open("https://lost-b.example/").seq]
        try powerCut()
        try crashLoopAndAdopt()
        try check("first")
        #expect(host.call(.save(wait: true), window: window).code == .ok)
        lost += [try open("https://lost-c.example/").seq, try open("https://lost-d.example/").seq]
        try powerCut()
        try crashLoopAndAdopt()
        defer { _ = host.terminate() }
        try check("second")
    }

    /// The same defect in one supervisor's life and one adoption: seqs lost with a killed worker
    /// (`ctl kill` before their save), then a durable save above them, then a crash loop and the
    /// entry adopted under its own UUID. Before the fix `wait-durable --seq 2` answered 0 for a
    /// lost command (the range 1…4 the empty restart recorded holds the restored seq 4, so it
    /// is dropped whole).
    @Test func seqsLostBeforeACrashLoopStayLostAfterTheEntryIsAdopted() throws {
        let root = temporaryRoot("attack2-lost-kept")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        func open(_ url: String) throws -> CommandReply {
            try host.call(.open(url, incognito: false), window: window).decode(CommandReply.self)
        }
        _ = try open("https://saved-one.example/")
        #expect(host.call(.save(wait: true), window: window).code == .ok)
        let lost = [try open("https://lost-a.example/").seq, try open("https://lost-b.example/").seq]
        let killed = try host.ctlBounded(["kill", "--window", window], seconds: 20)
        try #require(killed.status == 0, "\(killed.output)")
        let saved = try open("https://saved-two.example/")
        #expect(host.call(.save(wait: true), window: window).code == .ok)
        #expect(saved.seq > lost.max() ?? 0)
        for seq in lost {
            #expect(
                try host.ctlBounded(["wait-durable", "--window", window, "--seq", "\(seq)"], seconds: 20).status == 75)
        }
        #expect(host.terminate() == 0)

        host = try HostProcess(root: root, scenes: 1, environment: [Life.fault: window], binary: windowhostFaultsBinary)
        try #require(waitFor({ (try? Life.entries(host).count) == 1 }, seconds: 30), "\(host.log.suffix(2000))")
        let id = try #require(try Life.entries(host).first?["id"]?.string)
        #expect(host.terminate() == 0)

        host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output)")
        try #require(try Self.reply(adopted.output)["window"]?.string == window, "own UUID: \(adopted.output)")
        #expect(Life.urls(host, window) == ["https://saved-one.example/", "https://saved-two.example/"])
        for seq in lost {
            let asked = try host.ctlBounded(["wait-durable", "--window", window, "--seq", "\(seq)"], seconds: 20)
            #expect(asked.status == 75, "seq \(seq) was lost before the crash loop: \(asked.status) \(asked.output)")
        }
        let asked = try host.ctlBounded(["wait-durable", "--window", window, "--seq", "\(saved.seq)"], seconds: 20)
        #expect(asked.status == 0, "seq \(saved.seq) is durable: \(asked.output)")
    }

    /// The same, with `handed-out` damaged while the entry waits: the own-UUID adoption has no
    /// ceiling to trust and must jump (floor probe, 2³²), never reuse a lost seq or a tab id.
    @Test func anOwnUUIDAdoptionAfterHandedOutWasDamagedReusesNothing() throws {
        let root = temporaryRoot("attack2-handed-out")
        defer { removeHostFiles(root) }
        let (window, saved, lost, id) = try Life.lostSeqsThenSetAside(root)
        // The file damaged by hand: its bytes flipped in the middle.
        let file = root.appendingPathComponent(DiskLayout.handedOut)
        var bytes = try Data(contentsOf: file)
        for offset in stride(from: 0, to: min(bytes.count, 200), by: 1) { bytes[offset] ^= 0x5A }
        try bytes.write(to: file)

        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        func open(_ url: String) throws -> CommandReply {
            try host.call(.open(url, incognito: false), window: window).decode(CommandReply.self)
        }
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output) \(host.log.suffix(2000))")
        try #require(try Self.reply(adopted.output)["window"]?.string == window, "own UUID: \(adopted.output)")
        #expect(SetAsideProcessTests.urls(host, window) == ["https://saved.example/"])
        for seq in lost.map(\.seq) {
            let asked = try host.ctlBounded(["wait-durable", "--window", window, "--seq", "\(seq)"], seconds: 20)
            #expect(asked.status == 75, "seq \(seq) was lost: \(asked.status) \(asked.output)")
        }
        let fresh = try open("https://after.example/")
        #expect(
            ([saved] + lost).allSatisfy { fresh.seq > $0.seq && (fresh.tab ?? 0) > ($0.tab ?? 0) },
            "\(fresh) above \(lost)")
    }

    /// A discard of an entry holding 10,000 files, the supervisor SIGKILLed right after it
    /// answered: the next start is not held up, the leftover goes, the window serves.
    @Test func aBigDiscardCutShortIsFinishedByTheNextStart() throws {
        let (root, window, urls) = try SetAsideAttackTests.sessionRoot("attack2-big-discard")
        defer { removeHostFiles(root) }
        let id = "\(UUID().uuidString)-\(SetAsideAttackTests.stamp)-crash-loop"
        let entry = root.appendingPathComponent("set-aside/\(id)/regular")
        try FileManager.default.createDirectory(at: entry, withIntermediateDirectories: true)
        for n in 0..<10_000 {
            let fd = Glibc.open(
                entry.appendingPathComponent("f\(n)").path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            try #require(fd >= 0)
            close(fd)
        }
        // A `.discarding-` leftover with symlinks inside, to a canary.
        let canary = try SetAsideAttackTests.canary("attack2-big-discard")
        defer { try? FileManager.default.removeItem(at: canary) }
        let leftover = root.appendingPathComponent("set-aside/.discarding-old/inner")
        try FileManager.default.createDirectory(at: leftover, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: leftover.appendingPathComponent("link").path, withDestinationPath: canary.path)
        try FileManager.default.createSymbolicLink(
            atPath: leftover.appendingPathComponent("keep").path,
            withDestinationPath: canary.appendingPathComponent("keep").path)

        var host = try HostProcess(root: root, scenes: 1)
        let discarded = try host.ctlBounded(["discard", id], seconds: 30)
        #expect(discarded.status == 0, "\(discarded.output)")
        host.kill9()
        host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        #expect(try Life.entries(host).isEmpty)
        #expect(waitFor({ Life.setAsideNames(root).isEmpty }, seconds: 20), "\(Life.setAsideNames(root))")
        #expect(SetAsideAttackTests.canaryIntact(canary))
        #expect(Life.urls(host, window) == urls)
        #expect(host.open(window, "https://after-discard.example/") != nil)
    }

    /// A discarded entry's id planted again (a copy of the session): it is a new entry, listed
    /// and adopted with its tabs; the discard's removal running meanwhile never touches it.
    @Test func anIDDiscardedThenPlantedAgainAdoptsTheNewEntry() throws {
        let (root, window, urls) = try SetAsideAttackTests.sessionRoot("attack2-replant")
        defer { removeHostFiles(root) }
        let other = try SetAsideAttackTests.sessionRoot("attack2-replant-other", tabs: 3)
        defer { removeHostFiles(other.root) }
        let id = try SetAsideAttackTests.setAsideByHand(other.root, other.window)
        let source = other.root.appendingPathComponent("set-aside/\(id)")
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(at: shelf, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: source, to: shelf.appendingPathComponent(id))
        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        #expect(try host.ctlBounded(["discard", id]).status == 0)
        try FileManager.default.copyItem(at: source, to: shelf.appendingPathComponent(id))
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output) \(host.log.suffix(2000))")
        let back = try #require(try Self.reply(adopted.output)["window"]?.string)
        #expect(Life.urls(host, back) == other.urls)
        #expect(waitFor({ Life.setAsideNames(root).isEmpty }, seconds: 20), "\(Life.setAsideNames(root))")
        #expect(Life.urls(host, window) == urls)
    }

    /// An entry holding incognito tabs: its key went with the entry (a record named by the
    /// session directory), so `inspect` reads them as it reads a live window's (the same user,
    /// the same boot), adopting it brings back the regular tabs and the incognito one, and the
    /// window reopens the same at the next start with a tab opened since.
    @Test func anEntryWithIncognitoTabsAdoptsThemAll() throws {
        let root = temporaryRoot("attack2-incognito")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://regular-a.example/") != nil)
        #expect(host.open(window, "https://secret.example/", incognito: true) != nil)
        #expect(host.open(window, "https://regular-b.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.terminate() == 0)
        host = try HostProcess(root: root, scenes: 1, environment: [Life.fault: window], binary: windowhostFaultsBinary)
        try #require(waitFor({ (try? Life.entries(host).count) == 1 }, seconds: 30), "\(host.log.suffix(2000))")
        let id = try #require(try Life.entries(host).first?["id"]?.string)
        #expect(host.terminate() == 0)
        let inspected = try runWindowhostBounded(["inspect", root.path, "--set-aside", id], seconds: 10)
        #expect(inspected.output.contains("secret.example"), "the entry's key reads it: \(inspected.output)")

        host = try HostProcess(root: root, scenes: 1)
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output)")
        let back = try #require(try Self.reply(adopted.output)["window"]?.string)
        #expect(Life.urls(host, back) == ["https://regular-a.example/", "https://regular-b.example/"])
        func incognitoURLs() -> [String] {
            (host.call(.dump, window: back).result?["incognito"]?["tabs"]?.array ?? []).compactMap { $0["url"]?.string }
        }
        #expect(incognitoURLs() == ["https://secret.example/"], "\(host.log.suffix(2000))")
        #expect(
            host.open(back, "https://new-secret.example/", incognito: true) != nil,
            "incognito works in the adopted window")
        #expect(host.call(.waitDurable(seq: nil), window: back).code == .ok)
        #expect(host.terminate() == 0)
        host = try HostProcess(root: root, scenes: 2)
        defer { _ = host.terminate() }
        #expect(
            Life.urls(host, back) == ["https://regular-a.example/", "https://regular-b.example/"],
            "\(host.log.suffix(2000))")
        #expect(incognitoURLs() == ["https://secret.example/", "https://new-secret.example/"], "\(incognitoURLs())")
    }

    /// `/api/status` is what `ctl status --json` prints with set-aside entries listed (a
    /// crash-looped session and a planted symlink).
    @Test func apiStatusListsTheSameSetAsideEntriesAsCtlStatus() throws {
        let root = temporaryRoot("attack2-http")
        defer { removeHostFiles(root) }
        var (host, _, _) = try Life.crashLoop(root)
        #expect(host.terminate() == 0)
        try FileManager.default.createSymbolicLink(
            atPath: root.appendingPathComponent("set-aside/\(UUID().uuidString)-\(SetAsideAttackTests.stamp)-symlink")
                .path, withDestinationPath: "/")
        host = try HostProcess(root: root, scenes: 2, arguments: ["--http", "127.0.0.1:0"])
        defer { _ = host.terminate() }
        #expect(waitFor({ host.output.contains("\nhttp ") }, seconds: 10))
        let line = try #require(host.output.split(separator: "\n").first { $0.hasPrefix("http ") })
        let http = HTTPTarget(port: try #require(UInt16(line.split(separator: ":").last ?? "")))
        // Summaries read first, so both show the same state.
        #expect(try Life.entries(host).count == 2)
        let ctl = try host.ctl(["status", "--json"])
        let served = try http.get("/api/status")
        func setAside(_ text: String) throws -> NSArray? {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            return object["set_aside"] as? NSArray
        }
        let listed = try setAside(ctl.output)
        #expect(listed?.count == 2, "\(ctl.output)")
        #expect(try setAside(served.body) == listed, "ctl: \(ctl.output)\nhttp: \(served.body)")
    }
}
