import Foundation
import Glibc
import HostControl
import HostCoordination
import Synchronization
import SystemPackage
import Testing

/// `ctl move-to-window` with real processes: a tab moves whole and stays moved after the host
/// is SIGKILLed; every refusal changes nothing; and whichever process is SIGKILLed at whatever
/// instant of a move, once both windows are back the tab is in exactly one of them, and in the
/// destination when the move was answered.
@Suite(.serialized) struct MoveProcessTests {
    /// Window `id`'s tabs in `browser` as its dump shows them.
    static func tabs(_ host: HostProcess, _ id: String, incognito: Bool = false) -> [JSONValue] {
        let dump = host.call(.dump, window: id).result
        return dump?[incognito ? "incognito" : "regular"]?["tabs"]?.array ?? []
    }

    static func urls(_ host: HostProcess, _ id: String) -> [String] {
        (Self.tabs(host, id) + Self.tabs(host, id, incognito: true)).compactMap { $0["url"]?.string }
    }

    /// Both windows serving in the foreground, and no move under way.
    static func ready(_ host: HostProcess, _ ids: [String]) -> Bool {
        waitFor(
            {
                let status = try? host.call(.status).decode(StatusReply.self)
                let windows = status?.windows.filter { ids.contains($0.uuid) } ?? []
                return windows.count == ids.count && windows.allSatisfy { $0.state == "foreground" }
                    && status?.moves?.isEmpty == true
            }, seconds: 20)
    }

    @Test func aTabMovesWholeAndStaysMovedAfterTheHostIsKilled() throws {
        let root = temporaryRoot("move-whole")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 2)
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        let (a, b) = (ids[0], ids[1])
        let tab = try #require(host.open(a, "https://moving.example/1"))
        for page in 2...3 {
            #expect(host.call(.tab(.navigate(tab: tab, url: "https://moving.example/\(page)")), window: a).code == .ok)
        }
        #expect(host.call(.tab(.setPinned(tab: tab, pinned: true)), window: a).code == .ok)
        #expect(host.open(a, "https://stays.example/") != nil)
        #expect(host.open(b, "https://there.example/") != nil)
        let moved = try host.ctl(["move-to-window", "--window", a, "--tab", "\(tab)", "--to", b, "--index", "0"])
        #expect(moved.status == 0, "\(moved.output) \(host.log)")
        let words = moved.output.split(separator: " ")
        let made = try #require(words.count > 1 ? Int64(words[1]) : nil, "the new id: \(moved.output)")
        #expect(moved.output.contains("in window \(b)") && moved.output.contains("was tab \(tab) of \(a)"))
        for round in 0..<2 {
            #expect(Self.urls(host, a) == ["https://stays.example/"], "round \(round)")
            let there = Self.tabs(host, b)
            #expect(there.count == 2)
            #expect(there.first?["id"]?.int == made && there.first?["url"]?.string == "https://moving.example/3")
            #expect(there.first?["history_count"]?.int == 3 && there.first?["pinned"]?.bool == true)
            host.kill9()
            host = try HostProcess(root: root, scenes: 2)
            try #require(Self.ready(host, [a, b]), "\(host.log)")
        }
        #expect(host.terminate() == 0)
        // What B holds of the move is shown: `inspect` names it with the tab it made.
        let move = try #require(moved.output.split(separator: " ").last?.dropLast(2), "\(moved.output)")
        let inspected = try runWindowhost(["inspect", root.path, "--window", b])
        #expect(
            inspected.status == 0 && inspected.output.contains("moves received: \(move) made tab \(made)"),
            "\(inspected.output)")
        let json = try runWindowhost(["inspect", root.path, "--window", b, "--json"])
        #expect(json.output.contains(#""moves_received":[{"move":"\#(move)","tab":\#(made)}]"#), "\(json.output)")
    }

    @Test func everyRefusalChangesNothing() throws {
        let root = temporaryRoot("move-refused")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        let (a, b) = (ids[0], ids[1])
        let tab = try #require(host.open(a, "https://kept.example/"))
        let cases: [([String], Int32, String)] = [
            (["--window", a, "--tab", "\(tab)", "--to", a], 64, "not to its own"),
            (["--window", a, "--tab", "999", "--to", b], 65, "no tab 999"),
            (["--window", a, "--tab", "\(tab)", "--to", UUID().uuidString], 65, "no open window"),
            (["--window", a, "--tab", "\(tab)", "--to", b, "--index", "5"], 65, "index 5"),
        ]
        for (arguments, status, message) in cases {
            let refused = try host.ctl(["move-to-window"] + arguments)
            #expect(refused.status == status && refused.output.contains(message), "\(arguments): \(refused.output)")
            #expect(Self.urls(host, a) == ["https://kept.example/"] && Self.urls(host, b).isEmpty)
        }
        // A window restarting answers 75, and so does one in another move.
        #expect(host.call(.kill(signal: SIGKILL, wait: false, aim: nil), window: b).code == .ok)
        let restarting = try host.ctl(["move-to-window", "--window", a, "--tab", "\(tab)", "--to", b])
        #expect(restarting.status == 75 || restarting.status == 0, "\(restarting.output)")
        let status = try #require(try? host.call(.status).decode(StatusReply.self))
        #expect(status.moves?.isEmpty == true, "no move is left under way: \(status.moves ?? [])")
        #expect(host.terminate() == 0)
    }

    /// Seeded: each round opens a tab, starts its move in a `ctl` of its own, and SIGKILLs the
    /// victim 0 to 3 ms later (at any step of the move), then waits for both windows to be back
    /// with no move under way.
    @Test(arguments: ["source", "destination", "supervisor"])
    func killedAtAnyInstantTheTabIsInExactlyOneWindow(_ victim: String) throws {
        let root = temporaryRoot("move-kill-\(victim)")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 2)
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        var seed = 0x3200 + UInt64(victim.count)
        var answered = 0
        for round in 0..<16 {
            let (a, b) = round % 2 == 0 ? (ids[0], ids[1]) : (ids[1], ids[0])
            let url = "https://round\(round)-\(victim).example/"
            let tab = try #require(host.open(a, url), "\(host.log)")
            // Durable before it moves: a tab lost with an unsaved open is no move's doing.
            try #require(host.call(.waitDurable(seq: nil), window: a).code == .ok)
            // Asked from a thread of this process, not a `ctl` of its own, so the kill lands
            // within the move's few milliseconds rather than during a process start.
            let asked = UUID(uuidString: a)!
            let to = UUID(uuidString: b)!
            let socket = host.socket
            let answer = Mutex<ControlCode?>(nil)
            let mover = DispatchGroup()
            DispatchQueue.global().async(group: mover) {
                let reply = ControlClient.call(
                    .moveToWindow(from: asked, tab: tab, to: to, index: nil), socket: FilePath(socket), timeout: 30)
                answer.withLock { $0 = reply.code }
            }
            usleep(UInt32(splitMix(&seed) % 3_000))
            switch victim {
            case "supervisor":
                host.kill9()
            default:
                let killed = host.windows()[victim == "source" ? a : b]?.pid ?? 0
                if killed > 0 { Glibc.kill(killed, SIGKILL) }
                // Its death seen and a replacement serving, before the windows are looked at.
                let window = victim == "source" ? a : b
                try #require(
                    waitFor({ (host.windows()[window]?.pid).map { $0 != killed && $0 != 0 } == true }, seconds: 20),
                    "round \(round): the killed worker is replaced: \(host.log)")
            }
            mover.wait()
            if victim == "supervisor" { host = try HostProcess(root: root, scenes: 2) }
            try #require(Self.ready(host, ids), "round \(round): both windows back, no move under way: \(host.log)")
            let inA = Self.urls(host, a).filter { $0 == url }.count
            let inB = Self.urls(host, b).filter { $0 == url }.count
            #expect(
                inA + inB == 1,
                "round \(round): the tab in exactly one window (A \(inA), B \(inB)): \(host.log.suffix(6000))")
            if answer.withLock({ $0 }) == .ok {
                answered += 1
                #expect(inB == 1, "round \(round): an answered move is in the destination")
            }
        }
        #expect(host.terminate() == 0)
        print("\(victim): \(answered) of 16 moves answered before the kill")
    }
}
