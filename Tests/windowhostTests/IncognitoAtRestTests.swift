import BrowserModel
import CLinuxShims
import CTestShims
import Foundation
import Glibc
import HostControl
import HostCoordination
import SessionKeys
import Supervisor
import SystemPackage
import TestSupport
import Testing

/// Incognito at rest (issue 16), as a person's host lives it: while incognito tabs are open and
/// durable no file under the root holds their URLs; the supervisor SIGKILLed, the next one
/// finds the key in the kernel keyring and the tabs come back; the key revoked (as a reboot
/// drops it), the next start discards the incognito session, keeps the regular one, and exits
/// 0 as always.
@Suite(.serialized) struct IncognitoAtRestTests {
    static let secrets = (0..<3).map { "https://at-rest-\($0)-\(UUID().uuidString.prefix(8)).example/" }

    /// The window's key name: the root's device and inode, and the window.
    func keyName(_ root: URL, _ window: String) throws -> WindowKeyName {
        try WindowKeyName(root: root.path, window: try #require(UUID(uuidString: window)))
    }

    func incognitoURLs(_ host: HostProcess, _ window: String) throws -> [String] {
        let dump = try host.call(.dump, window: window).decode(DumpReply.self)
        return dump.incognito.tabs.map(\.url)
    }

    /// Opens the secrets incognito and one regular tab in `window`, durable.
    func browse(_ host: HostProcess, _ window: String) throws {
        #expect(host.open(window, "https://kept-regular.example/") != nil)
        for url in Self.secrets { #expect(host.open(window, url, incognito: true) != nil) }
        #expect(try host.ctl(["wait-durable", "--window", window]).status == 0)
    }

    @Test(.timeLimit(.minutes(2))) func afterASupervisorKillIncognitoComesBackAndWasNeverInTheClear() throws {
        let root = temporaryRoot("incognito-kill")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        defer { try? KernelKeyring().revoke(try keyName(root, window)) }
        try browse(host, window)
        #expect(
            !filesHolding("https://kept-regular.example/", under: FilePath(root.path)).isEmpty,
            "the search finds what is in the clear")
        for secret in Self.secrets {
            #expect(
                filesHolding(secret, under: FilePath(root.path)).isEmpty,
                "\(secret) in \(filesHolding(secret, under: FilePath(root.path)))")
        }
        host.kill9()
        let again = try HostProcess(root: root, scenes: 1)
        #expect(try incognitoURLs(again, window) == Self.secrets, "\(again.log)")
        #expect(again.terminate() == 0)
    }

    @Test(.timeLimit(.minutes(2))) func withTheKeyRevokedTheNextStartDiscardsIncognitoAndKeepsTheRest() throws {
        let root = temporaryRoot("incognito-reboot")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        try browse(host, window)
        #expect(host.terminate() == 0)
        // What a reboot does to the kernel keyring.
        try KernelKeyring().revoke(try keyName(root, window))
        let again = try HostProcess(root: root, scenes: 1)
        let dump = try again.call(.dump, window: window).decode(DumpReply.self)
        #expect(dump.incognito.tabs.isEmpty)
        #expect(dump.regular.tabs.map(\.url) == ["https://kept-regular.example/"])
        #expect(again.log.components(separatedBy: "can never be read").count == 2, "said once: \(again.log)")
        #expect(again.terminate() == 0)
        // Deleted durably: the next start has nothing to say about it.
        let third = try HostProcess(root: root, scenes: 1)
        #expect(!third.log.contains("can never be read"))
        #expect(third.terminate() == 0)
    }

    /// Issue 28's reproduction: the root moved away while incognito B is opened (the key's name
    /// needs the root's `lstat`, which fails), then moved back. B's save fails and is retried;
    /// incognito is never turned to memory only. Before, B and C were never written, a regular
    /// save acknowledged them (`durable 3`), and after a SIGKILL only A came back.
    @Test(.timeLimit(.minutes(2))) func aRootMovedAwayForAWhileLosesNoIncognitoTab() throws {
        let root = temporaryRoot("incognito-moved")
        let away = URL(fileURLWithPath: root.path + ".away")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        let id = try #require(UUID(uuidString: window))
        defer { try? KernelKeyring().revoke(try keyName(root, window)) }
        #expect(host.open(window, Self.secrets[0], incognito: true) != nil)
        #expect(try host.ctl(["wait-durable", "--window", window]).status == 0)
        try FileManager.default.moveItem(at: root, to: away)
        let socketAway = FilePath(away.appendingPathComponent(DiskLayout.controlSocket).path)
        let opened = ControlClient.call(
            .window(id, .open(Self.secrets[1], incognito: true)), socket: socketAway, timeout: 10)
        let waited = ControlClient.call(.window(id, .waitDurable(seq: nil)), socket: socketAway, timeout: 10)
        try FileManager.default.moveItem(at: away, to: root)
        #expect((try? opened.decode(CommandReply.self))?.tab != nil, "\(opened)")
        #expect(
            waited.code == ControlCode.ioError, "B answered durable while its key's name could not be had: \(waited)")
        #expect(host.windows()[window]?.incognitoStorage == "sealed")
        #expect(host.open(window, Self.secrets[2], incognito: true) != nil)
        #expect(host.open(window, "https://kept-regular.example/") != nil)
        let durable = try host.ctl(["wait-durable", "--window", window])
        #expect(durable.status == 0, "\(durable.output)")
        host.kill9()
        let again = try HostProcess(root: root, scenes: 1)
        #expect(try incognitoURLs(again, window) == Self.secrets, "\(again.log)")
        #expect(again.terminate() == 0)
    }
}

/// Item 6 of issue 28: where the kernel keyring is refused (a seccomp filter on the thread
/// that starts the host, inherited by the supervisor and every worker), incognito is kept in
/// memory only, and no durable wait covering an incognito change answers it durable: exit 71,
/// with the regular Browser's durable seq. Before, `wait-durable` answered 0 and a kill lost
/// the tabs.
@Suite(.serialized) struct MemoryOnlyIncognitoTests {
    /// A host started from a thread whose keyring calls fail with EPERM, as a sandbox's.
    func hostWithoutKeyring(_ root: URL) throws -> HostProcess {
        final class Box: @unchecked Sendable { var result: Result<HostProcess, any Error>? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            box.result = Result {
                guard wh_deny_keyring_in_this_thread(EPERM) == 0 else {
                    throw HostFailure("seccomp refused: errno \(errno)")
                }
                return try HostProcess(root: root, scenes: 1)
            }
            done.signal()
        }
        thread.start()
        done.wait()
        return try #require(box.result).get()
    }

    @Test(.timeLimit(.minutes(2))) func aMemoryOnlyChangeIsNeverAnsweredDurable() throws {
        let root = temporaryRoot("incognito-memory-only")
        defer { removeHostFiles(root) }
        let host = try hostWithoutKeyring(root)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, "https://regular-before.example/") != nil)
        let before = try host.ctl(["wait-durable", "--window", window])
        #expect(before.status == 0 && before.output.hasPrefix("durable "), "\(before.output)")
        let regularSeq = try #require(
            UInt64(before.output.split(separator: " ")[1].trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(host.open(window, "https://kept-in-memory.example/", incognito: true) != nil)
        #expect(host.windows()[window]?.incognitoStorage == "memory_only")
        let waited = try host.ctl(["wait-durable", "--window", window])
        #expect(waited.status == 71, "a memory-only incognito tab answered: \(waited)")
        let saved = try host.ctl(["save", "--wait", "--window", window])
        #expect(saved.status == 71, "\(saved)")
        let json = try host.ctl(["--json", "wait-durable", "--window", window])
        let reply = try ReplyCoding.decoder().decode(
            DurableReply.self,
            from: Data(try #require(json.output.split(separator: "\n").first { $0.hasPrefix("{") }).utf8))
        #expect(
            json.status == 71 && reply.memoryOnlySince == regularSeq + 1 && reply.durableSeq == regularSeq + 1,
            "\(json)")
        // A wait for the regular command before it is still answered durable.
        #expect(try host.ctl(["wait-durable", "--window", window, "--seq", "\(regularSeq)"]).status == 0)
        #expect(host.open(window, "https://regular-after.example/") != nil)
        #expect(
            try host.ctl(["wait-durable", "--window", window]).status == 71,
            "a later regular command covers the incognito one")
        host.kill9()
        let again = try hostWithoutKeyring(root)
        let dump = try again.call(.dump, window: window).decode(DumpReply.self)
        #expect(dump.regular.tabs.map(\.url) == ["https://regular-before.example/", "https://regular-after.example/"])
        #expect(dump.incognito.tabs.isEmpty, "memory only: nothing of it was on disk")
        #expect(again.terminate() == 0)
    }
}
