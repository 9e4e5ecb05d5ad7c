import BrowserModel
import Foundation
import Glibc
import HostControl
import HostCoordination
import Supervisor
import Testing

/// Issue 17: what is set aside can be seen, inspected, brought back and discarded, from the CLI
/// of a running host, with real crash loops (`WINDOWHOST_FAULT_ABORT_RESTORE`), real kills and
/// the files on disk checked.
@Suite(.serialized) struct SetAsideProcessTests {
    static let fault = "WINDOWHOST_FAULT_ABORT_RESTORE"

    /// Two windows with tabs saved durably; then a start where `poisoned`'s worker aborts each
    /// restore, so its session is set aside and it restarts empty. The host and the URLs saved.
    static func crashLoop(_ root: URL, poisoned index: Int = 0, extra: [String: String] = [:]) throws
        -> (host: HostProcess, windows: [String], urls: [String: [String]])
    {
        var host = try HostProcess(root: root, scenes: 2)
        let ids = host.windowIDs()
        var urls: [String: [String]] = [:]
        for (n, window) in ids.enumerated() {
            for tab in 0..<3 {
                let url = "https://w\(n)-t\(tab).example/"
                #expect(host.open(window, url) != nil)
                urls[window, default: []].append(url)
            }
            #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        }
        #expect(host.terminate() == 0)
        host = try HostProcess(
            root: root, scenes: 2, environment: [fault: ids[index]].merging(extra) { $1 },
            binary: windowhostFaultsBinary)
        return (host, ids, urls)
    }

    static func entries(_ host: HostProcess) throws -> [[String: JSONValue]] {
        let listed = try host.ctl(["--json", "set-aside"])
        try #require(listed.status == 0, "\(listed.output)")
        let reply = try JSONDecoder().decode(JSONValue.self, from: Data(listed.output.utf8))
        return (reply["set_aside"]?.array ?? []).compactMap { if case .object(let entry) = $0 { entry } else { nil } }
    }

    static func urls(_ host: HostProcess, _ window: String) -> [String] {
        (host.call(.dump, window: window).result?["regular"]?["tabs"]?.array ?? []).compactMap { $0["url"]?.string }
    }

    static func setAsideNames(_ root: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(DiskLayout.setAside).path))
            ?? [])
            .sorted()
    }

    /// The whole life: a crash loop sets the session aside; `ctl set-aside` lists it (the same
    /// entries as `status`); `inspect --set-aside` shows its tabs; once the cause is gone it is
    /// adopted back, under its own UUID and, for a second entry, under a new one, with every
    /// acknowledged tab; the entry leaves the disk. Then another entry is discarded and is
    /// gone from the disk too.
    @Test func aCrashLoopedSessionIsListedInspectedAdoptedAndAnotherDiscarded() throws {
        let root = temporaryRoot("set-aside-life")
        defer { removeHostFiles(root) }
        var (host, ids, urls) = try Self.crashLoop(root)
        let poisoned = ids[0]
        let listed = try Self.entries(host)
        try #require(listed.count == 1, "\(listed)")
        let entry = listed[0]
        let id = try #require(entry["id"]?.string)
        #expect(entry["uuid"]?.string == poisoned && entry["reason"]?.string == "crash_loop")
        #expect(
            entry["browsers"]?.array == [.string("regular")] && entry["tabs"]?.int == 3
                && entry["durable_seq"]?.int == 3, "\(entry)")
        let at = try #require(entry["at"]?.string.flatMap { ISO8601DateFormatter().date(from: $0) })
        #expect(abs(at.timeIntervalSinceNow) < 60)
        let status = try #require(host.call(.status).result?["set_aside"])
        #expect(status == .array([.object(entry)]), "status lists the same entries")
        let text = try host.ctl(["set-aside"])
        #expect(
            text.status == 0 && text.output.contains(id) && text.output.contains("crash_loop")
                && text.output.contains("tabs 3+0"), "\(text.output)")

        // Read only, as for live windows: the tabs, then the JSON.
        let inspected = try runWindowhost(["inspect", root.path, "--set-aside", id])
        #expect(inspected.status == 0, "\(inspected.output)")
        for url in urls[poisoned] ?? [] { #expect(inspected.output.contains(url)) }
        let json = try runWindowhost(["inspect", root.path, "--set-aside", id, "--json"])
        let tree = try JSONDecoder().decode(JSONValue.self, from: Data(json.output.utf8))
        #expect(tree["set_aside"]?["id"]?.string == id && tree["summary"]?["regular_tabs"]?.int == 3, "\(json.output)")
        #expect(try runWindowhost(["inspect", root.path, "--set-aside", "no-such-entry"]).status == 65)
        #expect(Self.setAsideNames(root) == [id], "inspect changed nothing")

        // The window restarted empty and takes a tab: its UUID has a new session on disk.
        #expect(host.windows()[poisoned]?.tabs == 0)
        #expect(host.open(poisoned, "https://new-session.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: poisoned).code == .ok)
        // The cause removed: a host without the fault. The window's own UUID is taken (open,
        // and on disk), so adopting without asking brings the entry back under a new UUID.
        #expect(host.terminate() == 0)
        host = try HostProcess(root: root, scenes: 2)
        #expect(Self.urls(host, poisoned) == ["https://new-session.example/"])
        let adopted = try host.ctl(["--json", "adopt", id])
        try #require(adopted.status == 0, "\(adopted.output) \(host.log)")
        let reply = try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))
        let window = try #require(reply["window"]?.string)
        #expect(window != poisoned && reply["as_new_window"]?.bool == true && reply["entry"]?.string == id)
        #expect(Self.urls(host, window) == urls[poisoned], "every acknowledged tab")
        #expect(host.call(.dump, window: window).result?["durable_seq"]?.int == 3)
        #expect(Self.setAsideNames(root).isEmpty, "the entry left set-aside/")
        #expect(try Self.entries(host).isEmpty)
        #expect(try host.ctl(["adopt", id]).status == 65, "no such entry any more")
        #expect(Self.urls(host, ids[1]) == urls[ids[1]], "the other window untouched")
        #expect(Self.urls(host, poisoned) == ["https://new-session.example/"], "the window that had its UUID untouched")
        // It is a window like the others: it takes commands and reopens at the next start.
        #expect(host.open(window, "https://after.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.terminate() == 0)

        // Two more entries: the other window crash-loops, and a symlink named like a window.
        host = try HostProcess(root: root, scenes: 3, environment: [Self.fault: ids[1]], binary: windowhostFaultsBinary)
        let planted = UUID().uuidString
        #expect(host.terminate() == 0)
        try FileManager.default.createSymbolicLink(
            atPath: root.appendingPathComponent("windows/\(planted)").path, withDestinationPath: "/")
        host = try HostProcess(root: root, scenes: 3)
        let two = try Self.entries(host)
        #expect(Set(two.compactMap { $0["reason"]?.string }) == ["crash_loop", "symlink"], "\(two)")
        let session = try #require(two.first { $0["reason"]?.string == "crash_loop" })
        let link = try #require(two.first { $0["reason"]?.string == "symlink" })
        let linkID = try #require(link["id"]?.string)
        #expect(link["summary"]?.string == "not_a_session" && link["uuid"]?.string == planted)
        #expect(try host.ctl(["adopt", linkID]).status == 65, "a symlink holds no session")

        // Adopting under its own UUID: that window restarted empty and took no command, so it
        // left nothing on disk at the shutdown, and is not open now.
        #expect(host.windows()[ids[1]] == nil)
        let sessionID = try #require(session["id"]?.string)
        let own = try host.ctl(["--json", "adopt", sessionID])
        try #require(own.status == 0, "\(own.output) \(host.log)")
        let ownReply = try JSONDecoder().decode(JSONValue.self, from: Data(own.output.utf8))
        #expect(ownReply["window"]?.string == ids[1] && ownReply["as_new_window"]?.bool == false)
        #expect(Self.urls(host, ids[1]) == urls[ids[1]])

        // Discard: said, durable, gone from the disk; a second discard finds nothing.
        let discarded = try host.ctl(["discard", linkID])
        #expect(discarded.status == 0 && discarded.output.contains(linkID), "\(discarded.output)")
        #expect(Self.setAsideNames(root).allSatisfy { !$0.contains(planted) }, "\(Self.setAsideNames(root))")
        #expect(waitFor({ Self.setAsideNames(root).isEmpty }, seconds: 10), "\(Self.setAsideNames(root))")
        #expect(try host.ctl(["discard", linkID]).status == 65)
        #expect(try Self.entries(host).isEmpty)
        #expect(FileManager.default.fileExists(atPath: "/etc/hostname"), "the symlink's target untouched")
        #expect(host.terminate() == 0)
    }

    /// An entry that still crash-loops when adopted goes back to its entry, bytes and id the
    /// same; the window it was to be is gone, and no other window is touched. While it is being
    /// adopted, adopt and discard answer 75.
    @Test func anEntryThatStillCrashLoopsIsSetAsideAgainAndNothingElseIsHarmed() throws {
        let root = temporaryRoot("set-aside-again")
        defer { removeHostFiles(root) }
        let (host, ids, urls) = try Self.crashLoop(root)
        let poisoned = ids[0]
        let entry = try #require(try Self.entries(host).first)
        let id = try #require(entry["id"]?.string)
        let before = try Self.tree(root.appendingPathComponent("set-aside/\(id)"))
        #expect(host.call(.scene(.disconnect), window: poisoned).code == .ok)
        let other = try #require(host.windows()[ids[1]])

        // The fault is still set for the window's own UUID: adopting under it crash-loops.
        let adopting = try Self.startAdopting(host, id)
        var refused: [ControlCode] = []
        #expect(
            waitFor(
                {
                    let listed = host.call(.setAside).result?["set_aside"]?.array?.first
                    guard listed?["state"]?.string == "adopting" else { return false }
                    refused = [
                        host.call(.discard(entry: id)).code, host.call(.adopt(entry: id, asNewWindow: true)).code,
                    ]
                    return true
                }, seconds: 10))
        adopting.waitUntilExit()
        #expect(refused == [.temporary, .temporary], "while it is adopted")
        #expect(adopting.terminationStatus == 65)

        let after = try Self.entries(host)
        #expect(after.map { $0["id"]?.string } == [id] && after.first?["state"]?.string == "set_aside", "\(after)")
        #expect(
            try Self.tree(root.appendingPathComponent("set-aside/\(id)")).keys == before.keys,
            "the same files, nothing lost")
        #expect(host.windows()[poisoned] == nil, "the window it was to be is gone")
        let now = try #require(host.windows()[ids[1]])
        #expect(
            now.pid == other.pid && now.restarts == 0 && Self.urls(host, ids[1]) == urls[ids[1]],
            "the other window untouched")
        #expect(host.log.contains("adoption abandoned"))
        #expect(host.terminate() == 0)
    }

    /// A supervisor SIGKILLed while an entry is being adopted: the next start sends the session
    /// back to its entry (same id, same files) before it reads `windows/`.
    @Test func aSupervisorKilledMidAdoptionLeavesTheEntrySetAside() throws {
        let root = temporaryRoot("set-aside-kill")
        defer { removeHostFiles(root) }
        var (host, ids, _) = try Self.crashLoop(root)
        let id = try #require(try Self.entries(host).first?["id"]?.string)
        let before = try Self.tree(root.appendingPathComponent("set-aside/\(id)"))
        #expect(host.call(.scene(.disconnect), window: ids[0]).code == .ok)
        let adopting = try Self.startAdopting(host, id)
        #expect(
            waitFor(
                { host.call(.setAside).result?["set_aside"]?.array?.first?["state"]?.string == "adopting" }, seconds: 10
            ))
        host.kill9()
        adopting.waitUntilExit()
        #expect(
            Self.setAsideNames(root).contains { $0.hasPrefix(".adopting-") } || Self.setAsideNames(root) == [id],
            "\(Self.setAsideNames(root))")

        host = try HostProcess(root: root, scenes: 1)
        #expect(Self.setAsideNames(root) == [id], "back under its id, the marker gone")
        #expect(try Self.tree(root.appendingPathComponent("set-aside/\(id)")).keys == before.keys)
        #expect(try Self.entries(host).map { $0["id"]?.string } == [id])
        #expect(host.log.contains("adoption left unfinished"), "\(host.log)")
        #expect(host.terminate() == 0)
    }

    /// Upgrades lose nothing: an entry named as versions before issue 17 named them (no
    /// reason) is listed, with its reason unrecorded, and adopted with every tab.
    @Test func anEntrySetAsideByAnEarlierVersionIsListedAndAdopted() throws {
        let root = temporaryRoot("set-aside-legacy")
        defer { removeHostFiles(root) }
        var (host, ids, urls) = try Self.crashLoop(root)
        let id = try #require(try Self.entries(host).first?["id"]?.string)
        #expect(host.terminate() == 0)
        let legacy = String(id.dropLast("-crash-loop".count))
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.moveItem(at: shelf.appendingPathComponent(id), to: shelf.appendingPathComponent(legacy))

        host = try HostProcess(root: root, scenes: 1)
        let listed = try Self.entries(host)
        #expect(
            listed.map { $0["id"]?.string } == [legacy] && listed.first?["reason"]?.string == "unrecorded", "\(listed)")
        #expect(listed.first?["uuid"]?.string == ids[0] && listed.first?["tabs"]?.int == 3)
        let adopted = try host.ctl(["--json", "adopt", legacy, "--as-new-window"])
        try #require(adopted.status == 0, "\(adopted.output)")
        let window = try #require(
            try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))["window"]?.string)
        #expect(Self.urls(host, window) == urls[ids[0]])
        #expect(Self.setAsideNames(root).isEmpty)
        #expect(host.terminate() == 0)
    }

    /// A window with one tab saved (seq 1) and two opens replied and then lost to a power cut
    /// (the supervisor and the worker SIGKILLed); then a start where it crash-loops, so its
    /// session is set aside and it restarts empty, takes no command and leaves nothing on disk.
    /// The host is stopped when this returns.
    static func lostSeqsThenSetAside(_ root: URL) throws -> (
        window: String, saved: CommandReply, lost: [CommandReply], id: String
    ) {
        var host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        func open(_ url: String) throws -> CommandReply {
            try host.call(.open(url, incognito: false), window: window).decode(CommandReply.self)
        }
        let saved = try open("https://saved.example/")
        #expect(host.call(.save(wait: true), window: window).code == .ok)
        let lost = [try open("https://lost-one.example/"), try open("https://lost-two.example/")]
        #expect(([saved] + lost).map(\.seq) == [1, 2, 3])
        let worker = try #require(host.windows()[window]?.pid)
        host.kill9()
        Glibc.kill(pid_t(worker), SIGKILL)
        try #require(waitFor({ !isRunning(pid_t(worker)) }, seconds: 20))
        host = try HostProcess(root: root, scenes: 1, environment: [fault: window], binary: windowhostFaultsBinary)
        try #require(waitFor({ (try? entries(host).count) == 1 }, seconds: 30), "\(host.log.suffix(2000))")
        let id = try #require(try entries(host).first?["id"]?.string)
        #expect(host.terminate() == 0)
        return (window, saved, lost, id)
    }

    /// `ctl adopt ID` started in the background: a crash-looping adoption lasts two failed starts.
    static func startAdopting(_ host: HostProcess, _ id: String) throws -> Process {
        let adopting = Process()
        adopting.executableURL = windowhostBinary
        adopting.arguments = ["ctl", "--socket", host.socket, "adopt", id]
        adopting.standardOutput = FileHandle.nullDevice
        adopting.standardError = FileHandle.nullDevice
        try adopting.run()
        return adopting
    }

    /// Every file under `directory`, by relative path, with its size.
    static func tree(_ directory: URL) throws -> [String: Int] {
        var found: [String: Int] = [:]
        let enumerator = try #require(FileManager.default.enumerator(atPath: directory.path))
        while let path = enumerator.nextObject() as? String {
            let attributes = try FileManager.default.attributesOfItem(
                atPath: directory.appendingPathComponent(path).path)
            if attributes[.type] as? FileAttributeType == .typeRegular {
                found[path] = (attributes[.size] as? Int) ?? -1
            }
        }
        return found
    }
}
