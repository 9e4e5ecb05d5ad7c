import BrowserModel
import Foundation
import Glibc
import HostControl
import HostCoordination
import Supervisor
import Testing

/// Issue 17 attacked as a hostile user would: planted adoption markers, ids that try to leave
/// `set-aside/`, symlinks to a canary outside the root, FIFOs, a full host. The promise: nothing
/// acknowledged is lost, no window or file outside the entry named is touched, and the host
/// keeps starting and answering.
@Suite(.serialized) struct SetAsideAttackTests {
    static let stamp = "20260101T000000Z"

    /// A root with one window holding `tabs` durable tabs, its host stopped: the root, the
    /// window's UUID and its URLs.
    static func sessionRoot(_ name: String, tabs: Int = 2) throws -> (root: URL, window: String, urls: [String]) {
        let root = temporaryRoot(name)
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        var urls: [String] = []
        for tab in 0..<tabs {
            let url = "https://\(name)-t\(tab).example/"
            #expect(host.open(window, url) != nil)
            urls.append(url)
        }
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.terminate() == 0)
        return (root, window, urls)
    }

    /// Moves the stopped host's window directory to a set-aside entry named as a crash loop
    /// would name it: the entry's id.
    static func setAsideByHand(_ root: URL, _ window: String) throws -> String {
        let id = "\(window)-\(stamp)-crash-loop"
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(at: shelf, withIntermediateDirectories: true)
        try FileManager.default.moveItem(
            at: root.appendingPathComponent("windows/\(window)"), to: shelf.appendingPathComponent(id))
        return id
    }

    /// A directory outside any root with one file: what must never be touched.
    static func canary(_ name: String) throws -> URL {
        let canary = temporaryRoot("\(name)-canary")
        try FileManager.default.createDirectory(at: canary, withIntermediateDirectories: true)
        try Data("canary".utf8).write(to: canary.appendingPathComponent("keep"))
        return canary
    }

    static func canaryIntact(_ canary: URL) -> Bool {
        (try? Data(contentsOf: canary.appendingPathComponent("keep"))) == Data("canary".utf8)
            && ((try? FileManager.default.contentsOfDirectory(atPath: canary.path)) ?? []) == ["keep"]
    }

    static func windowNames(_ root: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(DiskLayout.windows).path))
            ?? [])
            .sorted()
    }

    /// A planted directory named like an adoption marker (of no window at all) must not keep
    /// the host from starting: before the fix `recoverAdoptions` could not unlink it (EISDIR), throws, and
    /// every start fails from then on.
    @Test func aPlantedMarkerDirectoryDoesNotKeepTheHostFromStarting() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-marker-dir")
        defer { removeHostFiles(root) }
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(
            at: shelf.appendingPathComponent(".adopting-\(UUID().uuidString)-planted"),
            withIntermediateDirectories: true)
        let host = try? HostProcess(root: root, scenes: 1)
        #expect(host != nil, "the host starts despite a planted marker directory")
        if let host {
            #expect(SetAsideProcessTests.urls(host, window) == urls, "the window keeps its tabs")
            #expect(host.terminate() == 0)
        }
    }

    /// The same directory marker naming the closed window: before the fix the start moved the window's
    /// session to `set-aside/planted`, then fails on the marker, and every later start fails.
    @Test func aPlantedMarkerDirectoryNamingAWindowNeitherMovesItNorStopsTheHost() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-marker-dir-window")
        defer { removeHostFiles(root) }
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(
            at: shelf.appendingPathComponent(".adopting-\(window)-planted"), withIntermediateDirectories: true)
        let host = try? HostProcess(root: root, scenes: 1)
        #expect(host != nil, "the host starts despite a planted marker directory")
        if let host {
            #expect(SetAsideProcessTests.urls(host, window) == urls, "the window keeps its tabs")
            #expect(host.terminate() == 0)
        }
        #expect(
            !FileManager.default.fileExists(atPath: shelf.appendingPathComponent("planted").path),
            "\(SetAsideProcessTests.setAsideNames(root))")
    }

    /// A planted marker file naming a window that is no adoption's (a closed window with its
    /// tabs, in `windows.order`): the next start takes the window out of the session and sets it
    /// aside under the marker's id. Nothing is lost (the bytes are in `set-aside/planted`), but a
    /// file any process of the user can make removes a window the user never touched.
    @Test func aPlantedMarkerFileDoesNotTakeAnOrdinaryWindowOutOfTheSession() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-marker-file")
        defer { removeHostFiles(root) }
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(at: shelf, withIntermediateDirectories: true)
        #expect(
            FileManager.default.createFile(
                atPath: shelf.appendingPathComponent(".adopting-\(window)-planted").path, contents: nil))
        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        #expect(SetAsideProcessTests.urls(host, window) == urls, "the window keeps its tabs: \(host.log)")
        #expect(
            SetAsideProcessTests.setAsideNames(root).allSatisfy { $0 != "planted" },
            "\(SetAsideProcessTests.setAsideNames(root))")
    }

    /// Ids that try to leave `set-aside/`, name the host's own bookkeeping or are not ids at
    /// all: adopt, discard and inspect refuse each (64 or 65), and nothing on disk changes,
    /// the canary outside the root included.
    @Test func idsThatLeaveTheShelfOrNameBookkeepingAreRefused() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-ids")
        defer { removeHostFiles(root) }
        let canary = try Self.canary("attack-ids")
        defer { try? FileManager.default.removeItem(at: canary) }
        let other = try Self.sessionRoot("attack-ids-other")
        defer { removeHostFiles(other.root) }
        let id = try Self.setAsideByHand(other.root, other.window)
        // The entry moved into this root, and bookkeeping names planted beside it.
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(at: shelf, withIntermediateDirectories: true)
        try FileManager.default.moveItem(
            at: other.root.appendingPathComponent("set-aside/\(id)"), to: shelf.appendingPathComponent(id))
        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let marker = ".adopting-\(UUID().uuidString)-\(id)"
        #expect(FileManager.default.createFile(atPath: shelf.appendingPathComponent(marker).path, contents: nil))
        try FileManager.default.createDirectory(
            at: shelf.appendingPathComponent(".discarding-x/inner"), withIntermediateDirectories: true)
        let before = (SetAsideProcessTests.setAsideNames(root), Self.windowNames(root))

        let hostile = [
            "..", ".", "../windows/\(window)", "../windows", canary.path, "\(id)/..", "\(id)/../..", marker,
            ".discarding-x",
            "\(id)\n", "a\nb", "entré", String(repeating: "a", count: 161), String(repeating: "a", count: 4096),
            " \(id)", "",
            window, "\(window)-\(Self.stamp)-crash-loop",
        ]
        for name in hostile {
            for verb in [["adopt"], ["adopt", "--as-new-window"], ["discard"]] {
                let run = try host.ctlBounded(verb + [name])
                #expect([64, 65].contains(run.status), "\(verb) \(name.debugDescription): \(run.status) \(run.output)")
            }
            let inspected = try runWindowhostBounded(["inspect", root.path, "--set-aside", name], seconds: 10)
            #expect(
                inspected.status != nil && inspected.status != 0,
                "inspect \(name.debugDescription): \(inspected.status.map { "\($0)" } ?? "hung") \(inspected.output)")
        }
        #expect((SetAsideProcessTests.setAsideNames(root), Self.windowNames(root)) == before, "nothing moved")
        #expect(Self.canaryIntact(canary))
        #expect(SetAsideProcessTests.urls(host, window) == urls)
        let listed = try SetAsideProcessTests.entries(host)
        #expect(listed.map { $0["id"]?.string } == [id], "bookkeeping is never listed: \(listed)")
        // The one real entry still adopts, with its tabs.
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output)")
        let reply = try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))
        let back = try #require(reply["window"]?.string)
        #expect(SetAsideProcessTests.urls(host, back) == other.urls)
    }

    /// A symlink named like a crash-looped session's entry, pointing at a real session outside
    /// the root (and a canary): listed as a symlink, never read through, never adopted; a
    /// discard removes the link only. `set-aside/` itself a symlink to a directory holding a
    /// session: nothing under it is listed or adopted.
    @Test func symlinkedEntriesAndAShelfThatIsASymlinkAreNeverFollowed() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-links")
        defer { removeHostFiles(root) }
        let outside = try Self.sessionRoot("attack-links-outside", tabs: 3)
        defer { removeHostFiles(outside.root) }
        let canary = try Self.canary("attack-links")
        defer { try? FileManager.default.removeItem(at: canary) }
        let session = outside.root.appendingPathComponent("windows/\(outside.window)")
        let sessionFiles = try SetAsideProcessTests.tree(session)
        try Data("canary".utf8).write(to: session.appendingPathComponent("keep"))

        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(at: shelf, withIntermediateDirectories: true)
        let linkID = "\(outside.window)-\(Self.stamp)-crash-loop"
        let canaryLinkID = "\(UUID().uuidString)-\(Self.stamp)-crash-loop"
        try FileManager.default.createSymbolicLink(
            atPath: shelf.appendingPathComponent(linkID).path, withDestinationPath: session.path)
        try FileManager.default.createSymbolicLink(
            atPath: shelf.appendingPathComponent(canaryLinkID).path, withDestinationPath: canary.path)
        // A discarding leftover that is a symlink to the canary: removed at start as itself.
        try FileManager.default.createSymbolicLink(
            atPath: shelf.appendingPathComponent(".discarding-gone").path, withDestinationPath: canary.path)

        var host = try HostProcess(root: root, scenes: 1)
        let listed = try SetAsideProcessTests.entries(host)
        #expect(Set(listed.compactMap { $0["id"]?.string }) == [linkID, canaryLinkID], "\(listed)")
        for entry in listed {
            #expect(
                entry["kind"]?.string == "symlink" && entry["summary"]?.string == "not_a_session"
                    && entry["tabs"]?.int == 0, "\(entry)")
        }
        for id in [linkID, canaryLinkID] {
            let inspected = try runWindowhostBounded(["inspect", root.path, "--set-aside", id, "--json"], seconds: 10)
            #expect(!inspected.output.contains("attack-links-outside-t"), "read through the link: \(inspected.output)")
            #expect(try host.ctlBounded(["adopt", id]).status == 65)
            #expect(try host.ctlBounded(["adopt", "--as-new-window", id]).status == 65)
        }
        #expect(host.windows().count == 1 && SetAsideProcessTests.urls(host, window) == urls)
        #expect(try host.ctlBounded(["discard", canaryLinkID]).status == 0)
        #expect(try host.ctlBounded(["discard", linkID]).status == 0)
        #expect(
            waitFor({ SetAsideProcessTests.setAsideNames(root).isEmpty }, seconds: 10),
            "\(SetAsideProcessTests.setAsideNames(root))")
        #expect(Self.canaryIntact(canary))
        #expect(
            try SetAsideProcessTests.tree(session).filter { $0.key != "keep" } == sessionFiles,
            "the session outside untouched")
        #expect(FileManager.default.fileExists(atPath: session.appendingPathComponent("keep").path))
        #expect(host.terminate() == 0)

        // `set-aside/` a symlink to a directory holding a real session entry.
        let elsewhere = temporaryRoot("attack-links-shelf")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        let realID = try Self.setAsideByHand(outside.root, outside.window)
        try FileManager.default.moveItem(
            at: outside.root.appendingPathComponent("set-aside/\(realID)"), to: elsewhere.appendingPathComponent(realID)
        )
        try FileManager.default.removeItem(at: shelf)
        try FileManager.default.createSymbolicLink(atPath: shelf.path, withDestinationPath: elsewhere.path)
        host = try HostProcess(root: root, scenes: 1)
        #expect(try SetAsideProcessTests.entries(host).isEmpty)
        #expect(try host.ctlBounded(["adopt", realID]).status == 65)
        #expect(try host.ctlBounded(["discard", realID]).status == 65)
        let inspected = try runWindowhostBounded(["inspect", root.path, "--set-aside", realID], seconds: 10)
        #expect(inspected.status == 65, "\(inspected.output)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: elsewhere.path) == [realID],
            "the linked directory untouched")
        #expect(SetAsideProcessTests.urls(host, window) == urls)
        #expect(host.terminate() == 0)
    }

    /// An entry that is a real directory whose `regular` is a symlink to another session's
    /// Browser outside the root: inspect never reads through it, and adopting it never restores
    /// or writes through it (the outside files stay byte for byte).
    @Test func anEntryWhoseBrowserIsASymlinkOutsideIsNeverReadOrWrittenThrough() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-inner-link")
        defer { removeHostFiles(root) }
        let outside = try Self.sessionRoot("attack-inner-link-outside", tabs: 3)
        defer { removeHostFiles(outside.root) }
        let browser = outside.root.appendingPathComponent("windows/\(outside.window)/regular")
        let before = try Self.contents(browser)
        let id = "\(UUID().uuidString)-\(Self.stamp)-crash-loop"
        let entry = root.appendingPathComponent("set-aside/\(id)")
        try FileManager.default.createDirectory(at: entry, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: entry.appendingPathComponent(BrowserKind.regular.rawValue).path, withDestinationPath: browser.path)
        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let listed = try SetAsideProcessTests.entries(host).first
        #expect(listed?["tabs"]?.int == 0, "\(String(describing: listed))")
        let inspected = try runWindowhostBounded(
            ["inspect", root.path, "--set-aside", id, "--json", "--deep"], seconds: 10)
        #expect(!inspected.output.contains("attack-inner-link-outside-t"), "read through the link: \(inspected.output)")
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        if adopted.status == 0 {
            let back = try #require(
                try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))["window"]?.string)
            #expect(SetAsideProcessTests.urls(host, back).isEmpty, "restored through the link")
            #expect(host.open(back, "https://written.example/") != nil)
            #expect(host.call(.waitDurable(seq: nil), window: back).code == .ok)
        }
        #expect(try Self.contents(browser) == before, "the outside Browser untouched")
        #expect(SetAsideProcessTests.urls(host, window) == urls)
    }

    /// Every file under `directory` with its bytes.
    static func contents(_ directory: URL) throws -> [String: Data] {
        var found: [String: Data] = [:]
        for path in try SetAsideProcessTests.tree(directory).keys {
            found[path] = try Data(contentsOf: directory.appendingPathComponent(path))
        }
        return found
    }

    /// A shutdown (SIGTERM) while an entry that still crash-loops is being adopted: the one
    /// who asked is answered, the host exits 0, and the next start finds the entry as it was,
    /// no marker and no window left of it.
    @Test func aShutdownMidAdoptionLeavesTheEntrySetAside() throws {
        let root = temporaryRoot("attack-term")
        defer { removeHostFiles(root) }
        var (host, ids, _) = try SetAsideProcessTests.crashLoop(root)
        let id = try #require(try SetAsideProcessTests.entries(host).first?["id"]?.string)
        let before = try Self.contents(root.appendingPathComponent("set-aside/\(id)"))
        #expect(host.call(.scene(.disconnect), window: ids[0]).code == .ok)
        let adopting = try SetAsideProcessTests.startAdopting(host, id)
        #expect(
            waitFor(
                { host.call(.setAside).result?["set_aside"]?.array?.first?["state"]?.string == "adopting" }, seconds: 10
            ))
        #expect(host.terminate() == 0, "\(host.log.suffix(2000))")
        adopting.waitUntilExit()
        #expect(adopting.terminationStatus != 0, "not adopted")
        // A stop leaves the marker and the session in `windows/` (as a kill does) or the entry back.
        let stopped = SetAsideProcessTests.setAsideNames(root)
        #expect(
            stopped == [id]
                || (stopped.count == 1 && stopped[0].hasPrefix(".adopting-") && stopped[0].hasSuffix("-\(id)")),
            "\(stopped)")

        host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        #expect(SetAsideProcessTests.setAsideNames(root) == [id])
        #expect(try Self.contents(root.appendingPathComponent("set-aside/\(id)")).keys == before.keys, "the same files")
        #expect(try SetAsideProcessTests.entries(host).map { $0["id"]?.string } == [id])
        #expect(!Self.windowNames(root).contains(ids[0]) || SetAsideProcessTests.urls(host, ids[0]).isEmpty)
    }

    /// FIFOs where a session's files belong, and a FIFO entry: the summaries, `inspect` and the
    /// host never block on them; `status` answers meanwhile; the entry with FIFOs is listed
    /// unreadable or read with damage, never hangs the list past its wait.
    @Test func fifosInAnEntryHangNothing() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-fifo")
        defer { removeHostFiles(root) }
        let other = try Self.sessionRoot("attack-fifo-other")
        defer { removeHostFiles(other.root) }
        let id = try Self.setAsideByHand(other.root, other.window)
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(at: shelf, withIntermediateDirectories: true)
        let entry = shelf.appendingPathComponent(id)
        try FileManager.default.moveItem(at: other.root.appendingPathComponent("set-aside/\(id)"), to: entry)
        for file in try SetAsideProcessTests.tree(entry).keys {
            let path = entry.appendingPathComponent(file).path
            try FileManager.default.removeItem(atPath: path)
            #expect(mkfifo(path, 0o600) == 0)
        }
        let fifoID = "\(UUID().uuidString)-\(Self.stamp)-crash-loop"
        #expect(mkfifo(shelf.appendingPathComponent(fifoID).path, 0o600) == 0)

        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let status = try host.ctlBounded(["--json", "status"], seconds: 3)
        #expect(status.status == 0, "\(status.output)")
        let listed = try host.ctlBounded(["--json", "set-aside"], seconds: 30)
        #expect(listed.status == 0, "\(listed.output)")
        for name in [id, fifoID] {
            let inspected = try runWindowhostBounded(
                ["inspect", root.path, "--set-aside", name, "--json"], seconds: 10)
            #expect(inspected.status != nil, "inspect \(name) hung")
        }
        let entries = try SetAsideProcessTests.entries(host)
        let fifoEntry = entries.first { $0["id"]?.string == fifoID }
        let session = entries.first { $0["id"]?.string == id }
        #expect(fifoEntry?["kind"]?.string == "other" && fifoEntry?["summary"]?.string == "not_a_session", "\(entries)")
        #expect(session?["summary"]?.string == "read" && session?["damaged"]?.bool == true, "\(entries)")
        #expect(try host.ctlBounded(["adopt", fifoID]).status == 65)
        // Adopting the entry whose files are FIFOs: it adopts what reads (nothing), each FIFO
        // kept (moved to `damaged/`, never opened), the other window untouched.
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 60)
        #expect(adopted.status == 0, "\(adopted.output)")
        let back = try #require(
            try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))["window"]?.string)
        let damaged = root.appendingPathComponent("windows/\(back)/regular/damaged")
        #expect(
            ((try? FileManager.default.contentsOfDirectory(atPath: damaged.path)) ?? []).count == 2, "both FIFOs kept")
        #expect(SetAsideProcessTests.urls(host, window) == urls)
        #expect(try host.ctlBounded(["discard", fifoID]).status == 0)
    }

    /// The seqs and tab ids a window handed out are never handed out again under its UUID
    /// (`handed-out`), and `wait-durable` says a lost seq is lost. A session set aside by a crash
    /// loop and adopted back under its own UUID at a later start: before the fix the window's ceilings
    /// were dropped with its directory, so the adopted window numbers from its durable seq again,
    /// and a seq replied for a command that was lost is then answered durable for another.
    @Test func anEntryAdoptedUnderItsOwnUUIDNeverReusesASeqOrTabIDThatWasHandedOut() throws {
        let root = temporaryRoot("attack-adopt-seqs")
        defer { removeHostFiles(root) }
        let (window, saved, lost, id) = try SetAsideProcessTests.lostSeqsThenSetAside(root)
        let host = try HostProcess(root: root, scenes: 1)
        func open(_ url: String) throws -> CommandReply {
            try host.call(.open(url, incognito: false), window: window).decode(CommandReply.self)
        }
        defer { _ = host.terminate() }
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output)")
        let reply = try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))
        try #require(
            reply["window"]?.string == window && reply["as_new_window"]?.bool == false,
            "the scenario: adopted under its own UUID \(reply)")
        #expect(SetAsideProcessTests.urls(host, window) == ["https://saved.example/"])
        for seq in lost.map(\.seq) {
            let asked = try host.ctl(["wait-durable", "--window", window, "--seq", "\(seq)"])
            #expect(asked.status == 75, "seq \(seq) was lost: \(asked.status) \(asked.output)")
        }
        let fresh = try open("https://after.example/")
        #expect(
            ([saved] + lost).allSatisfy { fresh.seq > $0.seq && (fresh.tab ?? 0) > ($0.tab ?? 0) },
            "\(fresh) above every one handed out \(lost)")
        #expect(host.call(.save(wait: true), window: window).code == .ok)
        for seq in lost.map(\.seq) {
            let asked = try host.ctl(["wait-durable", "--window", window, "--seq", "\(seq)"])
            #expect(asked.status == 75, "seq \(seq) is still lost once saved: \(asked.status) \(asked.output)")
        }
    }

    /// Adopting on a full disk (a real tmpfs filled to ENOSPC): the rename needs no space, the
    /// restore and its save do. `adopt` answers within its bound (never hangs), the session is
    /// never lost (back in its entry with its files, or a window with its tabs), and once
    /// space returns it adopts with every tab.
    @Test func anAdoptionOnAFullDiskAnswersAndLosesNothing() throws {
        let disk = try Tmpfs(megabytes: 16)
        defer { disk.unmount() }
        var host = try HostProcess(root: disk.root, scenes: 1, logs: disk.logs)
        let window = try #require(host.windowIDs().first)
        let urls = ["https://full-a.example/", "https://full-b.example/"]
        for url in urls { #expect(host.open(window, url) != nil) }
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.terminate() == 0)
        let id = try Self.setAsideByHand(disk.root, window)
        let files = try SetAsideProcessTests.tree(disk.root.appendingPathComponent("set-aside/\(id)"))

        host = try HostProcess(root: disk.root, scenes: 1, logs: disk.logs)
        defer { if host.process.isRunning { host.kill9() } }
        let other = try #require(host.windowIDs().first)
        try disk.fill()
        let full = try host.ctlBounded(["--json", "adopt", id], seconds: 60)
        #expect(full.status != -1, "adopt hung on a full disk: \(full.output)")
        let names = SetAsideProcessTests.setAsideNames(disk.root)
        if full.status == 0 {
            let back = try #require(
                try JSONDecoder().decode(JSONValue.self, from: Data(full.output.utf8))["window"]?.string)
            #expect(SetAsideProcessTests.urls(host, back) == urls)
        } else {
            #expect(names == [id] || names.contains { $0.hasPrefix(".adopting-") }, "\(names)")
            if names == [id] {
                #expect(
                    try SetAsideProcessTests.tree(disk.root.appendingPathComponent("set-aside/\(id)")).keys
                        == files.keys)
            }
        }
        #expect(host.windows()[other] != nil, "the other window serves")
        disk.free()
        if full.status != 0 {
            let state = waitFor(
                { (try? SetAsideProcessTests.entries(host).first?["state"]?.string) == "set_aside" }, seconds: 30)
            #expect(state, "\(String(describing: try? SetAsideProcessTests.entries(host)))")
            let again = try host.ctlBounded(["--json", "adopt", id], seconds: 60)
            try #require(again.status == 0, "\(again.output) \(host.log.suffix(3000))")
            let back = try #require(
                try JSONDecoder().decode(JSONValue.self, from: Data(again.output.utf8))["window"]?.string)
            #expect(SetAsideProcessTests.urls(host, back) == urls)
        }
        #expect(host.terminate() == 0)
    }

    /// Thousands of empty files planted under `set-aside/` (each a valid entry id, listed as
    /// "not a session"): `status` still answers, its list capped at 1,024 entries (before: the
    /// whole list went into every `status`, and at 70,000 the reply passed the 16 MiB any reply
    /// may have, `ctl status` exiting 70; each name was parsed with a new DateFormatter on every
    /// request, and a discard took 19 s). Windows take commands and a discard answers, each
    /// within `ctl`'s bound (a hang is -1).
    @Test func aFloodOfPlantedEntriesDoesNotBreakStatusOrSlowTheWindows() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-flood")
        defer { removeHostFiles(root) }
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(at: shelf, withIntermediateDirectories: true)
        for n in 0..<5_000 {
            let fd = open(
                shelf.appendingPathComponent(String(format: "junk%06d", n)).path,
                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            try #require(fd >= 0)
            close(fd)
        }
        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let status = try host.ctlBounded(["--json", "status"], seconds: 30)
        #expect(status.status == 0, "\(status.output.prefix(500))")
        let listed = try JSONDecoder().decode(JSONValue.self, from: Data(status.output.utf8))["set_aside"]?.array ?? []
        #expect(listed.count == 1_024 && listed.first?["id"]?.string == "junk000000", "the first 1,024 by name")
        #expect(host.log.contains("holds 5000 entries"), "the rest are named in the log")
        let opened = try host.ctlBounded(
            ["open", "--window", window, "--url", "https://during-flood.example/"], seconds: 30)
        #expect(opened.status == 0, "\(opened.output)")
        let discarded = try host.ctlBounded(["discard", "junk000001"], seconds: 30)
        #expect(discarded.status == 0, "\(discarded.output)")
        #expect(!FileManager.default.fileExists(atPath: shelf.appendingPathComponent("junk000001").path))
        let again = try host.ctlBounded(["--json", "set-aside"], seconds: 30)
        #expect(
            again.status == 0 && !again.output.contains("junk000001") && again.output.contains("junk001024"),
            "the next name moves up")
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(SetAsideProcessTests.urls(host, window) == urls + ["https://during-flood.example/"])
    }

    /// An entry whose journal is damaged in its second of three saves (a byte flipped): `inspect`
    /// shows what reads (the first save's tab) and the damage; `adopt` brings that back and keeps the
    /// damaged journal, byte for byte, in the window's `damaged/`.
    @Test func aDamagedEntryAdoptsWhatReadsAndKeepsTheDamage() throws {
        let root = temporaryRoot("attack-damaged")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://first-save.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.open(window, "https://second-save.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.open(window, "https://third-save.example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.terminate() == 0)
        let id = try Self.setAsideByHand(root, window)
        let browser = root.appendingPathComponent("set-aside/\(id)/regular")
        let journalName = try #require(
            try FileManager.default.contentsOfDirectory(atPath: browser.path).first {
                $0.hasPrefix(DiskLayout.journalPrefix)
            })
        let journal = browser.appendingPathComponent(journalName)
        var bytes = try Data(contentsOf: journal)
        // A byte of the second save's URL flipped: damage in the middle, a valid save after it (a
        // flip in the last save would read as a torn tail, which recovery drops by design).
        let url = try #require(bytes.firstRange(of: Data("second-save".utf8)))
        bytes[url.lowerBound + 2] ^= 0xFF
        try bytes.write(to: journal)

        let inspected = try runWindowhostBounded(["inspect", root.path, "--set-aside", id], seconds: 10)
        #expect(
            inspected.output.contains("https://first-save.example/") && inspected.output.contains("CORRUPT"),
            "\(inspected.output)")
        #expect(!inspected.output.contains("https://third-save.example/"), "\(inspected.output)")
        host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let entry = try #require(try SetAsideProcessTests.entries(host).first)
        #expect(entry["damaged"]?.bool == true && entry["regular_tabs"]?.int == 1, "\(entry)")
        let adopted = try host.ctlBounded(["--json", "adopt", id], seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output)")
        let back = try #require(
            try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))["window"]?.string)
        #expect(SetAsideProcessTests.urls(host, back) == ["https://first-save.example/"])
        let damaged = root.appendingPathComponent("windows/\(back)/regular/damaged")
        let kept = try FileManager.default.contentsOfDirectory(atPath: damaged.path)
        #expect(kept.count == 1 && kept.allSatisfy { $0.hasPrefix(journalName) }, "\(kept)")
        #expect(
            kept.first.map { try? Data(contentsOf: damaged.appendingPathComponent($0)) } == bytes,
            "the damaged journal kept byte for byte")
    }

    /// A host at its capacity: adopt answers 75 and nothing moves, no marker stays. Then two
    /// adopts of one entry at once: one adopts, the other is refused, the tabs come back once.
    @Test func aFullHostRefusesAndTwoAdoptsAtOnceAdoptOnce() throws {
        let (root, window, urls) = try Self.sessionRoot("attack-full")
        defer { removeHostFiles(root) }
        let other = try Self.sessionRoot("attack-full-other", tabs: 3)
        defer { removeHostFiles(other.root) }
        let id = try Self.setAsideByHand(other.root, other.window)
        let shelf = root.appendingPathComponent(DiskLayout.setAside)
        try FileManager.default.createDirectory(at: shelf, withIntermediateDirectories: true)
        try FileManager.default.moveItem(
            at: other.root.appendingPathComponent("set-aside/\(id)"), to: shelf.appendingPathComponent(id))
        let files = try SetAsideProcessTests.tree(shelf.appendingPathComponent(id))

        var host = try HostProcess(root: root, scenes: 2, arguments: ["--capacity", "2"])
        #expect(host.windows().count == 2)
        #expect(try host.ctlBounded(["adopt", id]).status == 75)
        #expect(try host.ctlBounded(["adopt", "--as-new-window", id]).status == 75)
        #expect(
            SetAsideProcessTests.setAsideNames(root) == [id],
            "no marker left: \(SetAsideProcessTests.setAsideNames(root))")
        #expect(try SetAsideProcessTests.tree(shelf.appendingPathComponent(id)) == files)
        #expect(SetAsideProcessTests.urls(host, window) == urls)
        #expect(host.terminate() == 0)

        host = try HostProcess(root: root, scenes: 1, arguments: ["--capacity", "4"])
        defer { _ = host.terminate() }
        let runs = (0..<2).map { _ in
            let process = Process()
            process.executableURL = windowhostBinary
            process.arguments = ["ctl", "--socket", host.socket, "--json", "adopt", id]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            return process
        }
        for run in runs { try run.run() }
        for run in runs { run.waitUntilExit() }
        let codes = runs.map(\.terminationStatus).sorted()
        #expect(codes == [0, 65] || codes == [0, 75], "\(codes)")
        let adopted = host.windows().keys.filter { SetAsideProcessTests.urls(host, $0) == other.urls }
        #expect(
            adopted.count == 1,
            "the session came back once: \(host.windows().keys.map { ($0, SetAsideProcessTests.urls(host, $0)) })")
        #expect(SetAsideProcessTests.urls(host, window) == urls)
        #expect(SetAsideProcessTests.setAsideNames(root).isEmpty, "\(SetAsideProcessTests.setAsideNames(root))")
    }
}
