import BrowserModel
import Foundation
import Glibc
import HostControl
import Supervisor
import SystemPackage
import Testing

/// The supervisor and its workers as real processes, driven through the control socket and
/// `windowhost ctl` as a script would.
@Suite(.serialized) struct SupervisorProcessTests {
    @Test func aKilledWorkerComesBackWithItsUUIDAndItsLastDurableState() throws {
        let root = temporaryRoot("kill")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        let (window, other) = (ids[0], ids[1])
        let otherPID = host.windows()[other]?.pid
        var random = SeededGenerator(seed: 42)
        for round in 1...5 {
            for _ in 0..<6 {
                let incognito = Int.random(in: 0..<4, using: &random) == 0
                let tab = try #require(
                    host.open(
                        window, "https://site\(Int.random(in: 0..<99, using: &random)).example/", incognito: incognito))
                if Bool.random(using: &random) {
                    #expect(
                        host.call(.tab(.navigate(tab: tab, url: "https://next.example/\(round)")), window: window).code
                            == .ok)
                }
            }
            #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
            let before = try #require(host.call(.dump, window: window).result)
            let pid = host.windows()[window]?.pid

            let killed = try host.ctl(["kill", "--window", window])
            #expect(killed.status == 0 && killed.output.contains("restored by"), "\(killed.output)")
            let after = try #require(host.call(.dump, window: window).result)
            #expect(
                after["digest"] == before["digest"]
                    && after["regular"] == stripRealized(before["regular"], like: after["regular"]))
            #expect(after["durable_seq"] == before["durable_seq"])
            let status = try #require(host.windows()[window])
            #expect(status.pid != pid && status.generation == UInt32(round + 1) && status.state == "foreground")
            #expect(pid.map { !isRunning($0) } ?? false, "the old worker is gone")
        }
        #expect(host.windows()[other]?.pid == otherPID, "the other window's worker was not touched")
        #expect(host.call(.shutdown).code == .ok)
        host.process.waitUntilExit()
        #expect(host.process.terminationStatus == 0)
    }

    @Test func reservationAndReopenOrderSurviveSupervisorRestarts() throws {
        let root = temporaryRoot("order")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 2)
        let ids = host.windowIDs()
        try #require(ids.count == 2)
        for (index, window) in ids.enumerated() { _ = host.open(window, "https://window\(index).example/") }
        for window in ids { #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok) }
        // Close 2 then 1: 1 reopens first, then 2.
        let (one, two) = (ids[0], ids[1])
        #expect(host.call(.scene(.disconnect), window: two).code == .ok)
        #expect(host.call(.scene(.disconnect), window: one).code == .ok)
        #expect(host.windowIDs().isEmpty)
        let order = try String(contentsOf: root.appendingPathComponent(DiskLayout.order), encoding: .utf8)
        #expect(order == "\(one)\n\(two)\n")
        #expect(host.call(.connect).result?["window"]?.string == one)
        #expect(host.terminate() == 0)

        host = try HostProcess(root: root, scenes: 2)
        let reopened = Set(host.windowIDs())
        #expect(reopened == [one, two], "both on-disk windows reopen; none is handed out twice")
        let dump = host.call(.dump, window: two).result
        #expect(dump?["regular"]?["tabs"]?.array?.first?["url"]?.string == "https://window1.example/")
        let fresh = try #require(host.call(.connect).result?["window"]?.string)
        #expect(!reopened.contains(fresh) && fresh != WindowRegistry.unavailable.uuidString)
        #expect(host.terminate() == 0)
    }

    /// Ctrl-C at the terminal (and `kill` of the group, and the terminal closing) signals
    /// `run`'s whole process group: the supervisor takes it (every window saves, then
    /// everything exits 0), and its workers, in groups of their own, do not die of it first. A
    /// change waiting on a long save delay is on disk after.
    @Test(arguments: [SIGINT, SIGTERM, SIGHUP]) func ctrlCToTheGroupSavesEveryWindowBeforeTheExit(signal: Int32) throws
    {
        let root = temporaryRoot("supervisor-ctrl-c")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2, saveDelay: 600_000)
        let windows = host.windowIDs()
        try #require(windows.count == 2)
        for window in windows { #expect(host.open(window, "https://unsaved.example/") != nil) }
        let workers = host.windows().values.map(\.pid)
        #expect(workers.allSatisfy { getpgid($0) != host.process.processIdentifier }, "a worker in run's group")
        Glibc.kill(-host.process.processIdentifier, signal)
        host.process.waitUntilExit()
        #expect(host.process.terminationStatus == 0, "\((try? String(contentsOf: host.stderr, encoding: .utf8)) ?? "")")

        let next = try HostProcess(root: root, scenes: 2)
        for window in windows {
            #expect(
                next.call(.dump, window: window).result?["regular"]?["tabs"]?.array?.first?["url"]?.string
                    == "https://unsaved.example/")
        }
        #expect(next.terminate() == 0)
    }

    @Test func aKilledSupervisorTakesItsWorkersAndTheNextStartCleansUp() throws {
        let root = temporaryRoot("supervisor-kill")
        defer { removeHostFiles(root) }
        let shmBefore = Set((try? FileManager.default.contentsOfDirectory(atPath: "/dev/shm")) ?? [])
        let host = try HostProcess(root: root, scenes: 3)
        let window = try #require(host.windowIDs().first)
        _ = host.open(window, "https://kept.example/")
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        let workers = host.windows().values.map(\.pid)
        let all = Set(host.windowIDs())
        #expect(workers.count == 3 && workers.allSatisfy(isRunning))
        host.kill9()
        #expect(waitFor({ workers.allSatisfy { !isRunning($0) } }, seconds: 5), "PR_SET_PDEATHSIG took every worker")
        let shmAfter = Set((try? FileManager.default.contentsOfDirectory(atPath: "/dev/shm")) ?? [])
        #expect(shmAfter.subtracting(shmBefore).isEmpty, "the region is a memfd: nothing in /dev/shm")
        #expect(FileManager.default.fileExists(atPath: host.socket), "the dead supervisor's socket is left behind")

        // Every window's session is made at its start, so all three come back, in their saved
        // order, the one with a tab among them.
        let next = try HostProcess(root: root, scenes: 3)
        #expect(Set(next.windowIDs()) == all)
        #expect(next.call(.dump, window: window).result?["regular"]?["tabs"]?.array?.count == 1)
        #expect(next.terminate() == 0)
        #expect(!FileManager.default.fileExists(atPath: next.socket), "a normal exit removes the socket")
    }

    @Test func aWindowThatCrashesWhileRestoringIsSetAsideWhileTheOthersWork() throws {
        let root = temporaryRoot("set-aside")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 2)
        let ids = host.windowIDs()
        for window in ids { _ = host.open(window, "https://before.example/") }
        for window in ids { #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok) }
        #expect(host.terminate() == 0)

        let poisoned = ids[0]
        host = try HostProcess(
            root: root, scenes: 2, environment: ["WINDOWHOST_FAULT_ABORT_RESTORE": poisoned],
            binary: windowhostFaultsBinary)
        let status = try #require(host.call(.status).result)
        let aside = try #require(status["set_aside"]?.array?.first)
        #expect(aside["uuid"]?.string == poisoned)
        let path = try #require(aside["path"]?.string)
        #expect(path.hasPrefix(root.appendingPathComponent(DiskLayout.setAside).path + "/\(poisoned)-"))
        #expect(FileManager.default.fileExists(atPath: path + "/regular"), "the session is kept, not deleted")
        let windows = host.windows()
        #expect(windows[poisoned]?.tabs == 0 && windows[poisoned]?.state == "foreground", "restarted empty")
        #expect(windows[ids[1]]?.tabs == 1 && windows[ids[1]]?.restarts == 0, "the other window is untouched")
        #expect(
            host.open(poisoned, "https://after.example/") != nil && host.open(ids[1], "https://after.example/") != nil)
        #expect(host.log.contains("set aside"))
        #expect(host.terminate() == 0)
    }

    @Test func malformedControlInputGetsAnErrorAndTheSupervisorKeepsServing() throws {
        let root = temporaryRoot("malformed")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        for line in [
            "this is not json", #"{"verb": 7}"#, #"{"verb": "fly"}"#, #"{"verb": "open"}"#,
            #"{"verb": "open", "window": "nope"}"#,
        ] {
            #expect(try rawRequest(host.socket, Array((line + "\n").utf8))["code"]?.int == 64, "\(line)")
        }
        #expect(try rawRequest(host.socket, [UInt8](repeating: UInt8(ascii: "x"), count: 70_000))["code"]?.int == 64)

        #expect(try host.ctl(["close", "--window", window, "--tab", "424242"]).status == 65)
        #expect(try host.ctl(["dump", "--window", UUID().uuidString]).status == 65)
        #expect(
            try host.ctl(["move", "--window", window, "--tab", "1"]).status == 64, "a missing option is a usage error")
        #expect(try host.ctl(["kill", "--window", window, "--signal", "BOGUS"]).status == 64)
        #expect(
            try runWindowhost(["ctl", "--socket", root.appendingPathComponent("nobody.sock").path, "status"]).status
                == 69)

        let tab = try host.ctl(["open", "--window", window, "--url", "https://still.example/"])
        #expect(tab.status == 0 && Int(tab.output.trimmingCharacters(in: .whitespacesAndNewlines)) != nil)
        let socketMode = try FileManager.default.attributesOfItem(atPath: host.socket)[.posixPermissions] as? Int
        let rootMode = try FileManager.default.attributesOfItem(atPath: root.path)[.posixPermissions] as? Int
        #expect(socketMode == 0o600 && rootMode == 0o700)
        #expect(host.terminate() == 0)
    }

    /// Another user is refused twice over: by the socket's mode, and, with the mode opened up,
    /// by SO_PEERCRED. Needs root to act as another user (CI runs as root).
    @Test func anotherUserIsRefusedEvenWhenTheSocketIsOpenedUp() throws {
        try #require(getuid() == 0, "acting as another user needs root (CI runs as root)")
        let root = temporaryRoot("peer")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let asNobody = { () throws -> Int32 in
            try runWindowhost(
                ["ctl", "--socket", host.socket, "status"],
                prefix: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            ).status
        }
        // The directories on the way must let the other user reach the socket at all.
        #expect(chmod(root.path, 0o711) == 0)
        #expect(try asNobody() == 69, "the socket is 0600")
        #expect(chmod(host.socket, 0o666) == 0)
        #expect(try asNobody() == 69, "SO_PEERCRED: the supervisor hangs up on another uid")
        #expect(host.log.contains("refused a control connection from uid 65534"))
        #expect(host.call(.status).code == .ok)
        #expect(host.terminate() == 0)
    }

    @Test func aHungWorkerIsKilledByTheWatchdogAndRestarted() throws {
        let root = temporaryRoot("watchdog")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, arguments: ["--watchdog", "400"])
        let window = try #require(host.windowIDs().first)
        _ = host.open(window, "https://hung.example/")
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        let pid = host.windows()[window]?.pid
        // SIGSTOP: alive to the pidfd, silent to the watchdog.
        let stopped = host.call(.kill(signal: SIGSTOP, wait: true, aim: nil), window: window)
        #expect((try? stopped.decode(KillReply.self))?.killedPid == pid)
        #expect(host.log.contains("worker hung"))
        let status = try #require(host.windows()[window])
        #expect(status.pid != pid && status.tabs == 1)
        #expect(host.terminate() == 0)
    }

    @Test func sigtermSavesWhatTheDelayHadNotYetSavedAndExitsZero() throws {
        let root = temporaryRoot("sigterm")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 2, saveDelay: 60_000)
        let window = try #require(host.windowIDs().first)
        for index in 0..<5 { _ = host.open(window, "https://unsaved\(index).example/") }
        let dump = try #require(host.call(.dump, window: window).result)
        #expect(dump["durable_seq"]?.int == 0 && dump["applied_seq"]?.int == 5, "the delayed save has not run")
        #expect(host.terminate() == 0)

        host = try HostProcess(root: root, scenes: 2)
        let restored = try #require(host.call(.dump, window: window).result)
        #expect(restored["regular"]?["tabs"]?.array?.count == 5 && restored["digest"] == dump["digest"])
        #expect(host.terminate() == 0)
    }
}

/// `before` with each tab's `realized` taken from `after`: a restart leaves tabs unrealized.
private func stripRealized(_ before: JSONValue?, like after: JSONValue?) -> JSONValue? {
    guard case .object(var browser) = before, let tabs = browser["tabs"]?.array, let afterTabs = after?["tabs"]?.array,
        tabs.count == afterTabs.count
    else { return before }
    browser["tabs"] = .array(
        zip(tabs, afterTabs).map { tab, restored in
            guard case .object(var fields) = tab else { return tab }
            fields["realized"] = restored["realized"]
            // A dump shows the current history entry of a realized tab only: it reads no stored history.
            if restored["realized"] == .bool(false) { fields["history_index"] = nil }
            return .object(fields)
        })
    return .object(browser)
}

/// Writes `bytes` to the control socket as is and reads the reply.
private func rawRequest(_ path: String, _ bytes: [UInt8]) throws -> JSONValue {
    try JSONDecoder().decode(JSONValue.self, from: Data(try rawSocketReply(path, bytes)))
}
