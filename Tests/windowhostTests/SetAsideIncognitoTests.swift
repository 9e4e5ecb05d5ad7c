import BrowserModel
import Foundation
import Glibc
import HostControl
import HostCoordination
import HostLimits
import SessionKeys
import SessionStore
import Supervisor
import SystemPackage
import TestSupport
import Testing

/// Issue 28, item 7: a set-aside session's incognito key goes with the entry (a key record
/// named by the session directory's identity), so an adoption, under the entry's UUID or a new
/// one, brings back every acknowledged incognito tab and writes them again under the adopting
/// window's own key; a discard revokes the record, an abandoned adoption keeps it, and a kill
/// at any step of the key's move loses nothing.
@Suite(.serialized) struct SetAsideIncognitoTests {
    typealias Life = SetAsideProcessTests

    static let regular = ["https://regular-a.example/", "https://regular-b.example/"]
    static func secrets() -> [String] {
        (0..<2).map { "https://adopt-secret-\($0)-\(UUID().uuidString.prefix(8)).example/" }
    }

    static func incognitoURLs(_ host: HostProcess, _ window: String) -> [String] {
        (host.call(.dump, window: window).result?["incognito"]?["tabs"]?.array ?? []).compactMap { $0["url"]?.string }
    }

    /// A window holding the regular URLs and `secrets` incognito, durable; the host stopped.
    static func browse(_ root: URL, _ secrets: [String]) throws -> String {
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        #expect(host.open(window, regular[0]) != nil)
        for secret in secrets { #expect(host.open(window, secret, incognito: true) != nil) }
        #expect(host.open(window, regular[1]) != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
        #expect(host.terminate() == 0)
        return window
    }

    /// `browse`, then a start where the window crash-loops: its session is set aside. The host
    /// (still running, the fault still set), the window and the entry's id.
    static func setAside(_ root: URL, _ secrets: [String]) throws -> (host: HostProcess, window: String, id: String) {
        let window = try browse(root, secrets)
        let host = try HostProcess(
            root: root, scenes: 1, environment: [Life.fault: window], binary: windowhostFaultsBinary)
        try #require(waitFor({ (try? Life.entries(host).count) == 1 }, seconds: 30), "\(host.log.suffix(2000))")
        return (host, window, try #require(try Life.entries(host).first?["id"]?.string))
    }

    /// `ctl --json adopt ENTRY`, which must succeed: the window the entry became.
    static func adopt(_ host: HostProcess, _ entry: String, asNewWindow: Bool) throws -> String {
        let adopted = try host.ctlBounded(
            ["--json", "adopt", entry] + (asNewWindow ? ["--as-new-window"] : []), seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output) \(host.log.suffix(2000))")
        return try #require(try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))["window"]?.string)
    }

    /// Revokes `window`'s key: a test leaves no key in the uid's keyring.
    static func revokeKey(of window: String, in root: URL) {
        guard let id = UUID(uuidString: window), let name = try? WindowKeyName(root: root.path, window: id) else {
            return
        }
        try? KernelKeyring().revoke(name)
    }

    static func recordName(_ directory: URL, root: URL) throws -> SessionKeyName {
        try SessionKeyName(root: root.path, directory: directory.path)
    }

    static func entryDirectory(_ root: URL, _ id: String) -> URL { root.appendingPathComponent("set-aside/\(id)") }

    /// The whole course, adopted under the entry's UUID or a new one: listed with its incognito
    /// tabs counted, adopted with every one, the record revoked once the adoption ends; the
    /// files written again under the window's own key (the worker SIGKILLed restores them
    /// with the record gone), never in the clear, and after a restart of the host.
    func adoptsEveryIncognitoTab(asNewWindow: Bool) throws {
        let root = temporaryRoot("adopt-incognito\(asNewWindow ? "-new" : "")")
        defer { removeHostFiles(root) }
        let secrets = Self.secrets()
        var (host, window, id) = try Self.setAside(root, secrets)
        let entry = try #require(try Life.entries(host).first)
        #expect(
            entry["incognito_tabs"]?.int == 2 && entry["regular_tabs"]?.int == 2,
            "the summary reads the incognito tabs: \(entry)")
        let record = try Self.recordName(Self.entryDirectory(root, id), root: root)
        #expect(
            try KernelKeyring().record(record)?.entries.map(\.window.uuidString) == [window],
            "the key went with the entry")
        #expect(
            try KernelKeyring().find(WindowKeyName(root: root.path, window: try #require(UUID(uuidString: window))))
                == nil, "the window's own name is free")
        #expect(host.terminate() == 0)

        host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let adopted = try host.ctlBounded(
            ["--json", "adopt", id] + (asNewWindow ? ["--as-new-window"] : []), seconds: 30)
        try #require(adopted.status == 0, "\(adopted.output) \(host.log.suffix(2000))")
        let reply = try JSONDecoder().decode(JSONValue.self, from: Data(adopted.output.utf8))
        let back = try #require(reply["window"]?.string)
        #expect(reply["incognito_tabs"]?.int == 2, "\(adopted.output)")
        if asNewWindow { #expect(back != window) }
        #expect(Life.urls(host, back) == Self.regular)
        #expect(Self.incognitoURLs(host, back) == secrets, "every acknowledged incognito tab: \(host.log.suffix(2000))")
        #expect(try KernelKeyring().record(record) == nil, "the entry's keys revoked once the adoption ended")
        for secret in secrets {
            #expect(filesHolding(secret, under: FilePath(root.path)).isEmpty, "\(secret) in the clear")
        }

        let killed = try host.ctlBounded(["kill", "--window", back], seconds: 30)
        #expect(killed.status == 0, "\(killed.output)")
        #expect(
            Self.incognitoURLs(host, back) == secrets, "sealed under the window's own key: \(host.log.suffix(2000))")
        #expect(host.open(back, "https://after-adoption.example/", incognito: true) != nil)
        #expect(host.call(.waitDurable(seq: nil), window: back).code == .ok)
        #expect(host.terminate() == 0)
        host = try HostProcess(root: root, scenes: 2)
        #expect(
            Self.incognitoURLs(host, back) == secrets + ["https://after-adoption.example/"], "\(host.log.suffix(2000))")
        #expect(!host.log.contains("can never be read"), "\(host.log.suffix(2000))")
        Self.revokeKey(of: back, in: root)
    }

    @Test(.timeLimit(.minutes(3))) func anAdoptionUnderItsOwnUUIDBringsBackEveryIncognitoTab() throws {
        try adoptsEveryIncognitoTab(asNewWindow: false)
    }

    @Test(.timeLimit(.minutes(3))) func anAdoptionAsANewWindowBringsBackEveryIncognitoTab() throws {
        try adoptsEveryIncognitoTab(asNewWindow: true)
    }

    /// `ctl discard` revokes the entry's record.
    @Test(.timeLimit(.minutes(3))) func aDiscardRevokesTheEntrysKey() throws {
        let root = temporaryRoot("discard-incognito")
        defer { removeHostFiles(root) }
        let (host, _, id) = try Self.setAside(root, Self.secrets())
        defer { _ = host.terminate() }
        let record = try Self.recordName(Self.entryDirectory(root, id), root: root)
        #expect(try KernelKeyring().record(record) != nil)
        let discarded = try host.ctlBounded(["discard", id])
        #expect(discarded.status == 0, "\(discarded.output)")
        #expect(try KernelKeyring().record(record) == nil, "revoked with the entry")
    }

    /// An entry whose record is full (adopted and undone until it holds
    /// `Limits.maxKeysPerSessionRecord` keys: here filled by hand) is refused adoption with 65
    /// before anything moves: an undo could not send the adopting window's key back with it.
    /// The entry stays, its record whole.
    @Test(.timeLimit(.minutes(3))) func anEntryWhoseKeyRecordIsFullIsRefusedAdoptionAndKeepsItsKeys() throws {
        let root = temporaryRoot("full-record")
        defer { removeHostFiles(root) }
        let (host, window, id) = try Self.setAside(root, Self.secrets())
        defer { _ = host.terminate() }
        let record = try Self.recordName(Self.entryDirectory(root, id), root: root)
        var filled = try #require(try KernelKeyring().record(record))
        while filled.entries.count < Limits.maxKeysPerSessionRecord {
            filled = try filled.adding(
                SessionKeyRecord.Entry(
                    window: UUID(), key: (0..<KernelKeyring.keyBytes).map { _ in UInt8.random(in: 0...255) }))
        }
        try KernelKeyring().store(filled, as: record)
        #expect(host.call(.scene(.disconnect), window: window).code == .ok)
        let refused = try host.ctlBounded(["adopt", id, "--as-new-window"], seconds: 30)
        #expect(refused.status == 65 && refused.output.contains("key record is full"), "\(refused.output)")
        #expect(try Life.entries(host).map { $0["id"]?.string } == [id], "the entry stays")
        #expect(try KernelKeyring().record(record) == filled, "its keys whole")
    }

    /// An adoption that still crash-loops (the fault set for the entry's UUID) is abandoned:
    /// the entry keeps its keys, the one its restore wrote the session under included, and a
    /// later adoption brings every incognito tab back.
    @Test(.timeLimit(.minutes(3))) func anAbandonedAdoptionKeepsTheEntrysKeys() throws {
        let root = temporaryRoot("abandon-incognito")
        defer { removeHostFiles(root) }
        let secrets = Self.secrets()
        var (host, window, id) = try Self.setAside(root, secrets)
        #expect(host.call(.scene(.disconnect), window: window).code == .ok)
        let refused = try host.ctlBounded(["adopt", id], seconds: 60)
        #expect(refused.status == 65, "\(refused.output)")
        #expect(host.log.contains("adoption abandoned"))
        let record = try Self.recordName(Self.entryDirectory(root, id), root: root)
        let kept = try #require(try KernelKeyring().record(record), "the entry keeps its keys")
        #expect(
            kept.entries.allSatisfy { $0.window.uuidString == window } && !kept.entries.isEmpty,
            "\(kept.entries.map(\.window))")
        #expect(host.terminate() == 0)

        host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let back = try Self.adopt(host, id, asNewWindow: true)
        #expect(Self.incognitoURLs(host, back) == secrets, "\(host.log.suffix(2000))")
        #expect(try KernelKeyring().record(record) == nil)
        Self.revokeKey(of: back, in: root)
    }

    /// The supervisor SIGKILLed while an entry with incognito tabs is adopted (its restore may
    /// have written them under the adopting window's key already): the next start sends it back
    /// to its entry with its keys, and an adoption then brings every incognito tab back.
    @Test(.timeLimit(.minutes(3))) func aSupervisorKilledMidAdoptionLosesNoIncognitoTab() throws {
        let root = temporaryRoot("kill-adopt-incognito")
        defer { removeHostFiles(root) }
        let secrets = Self.secrets()
        var (host, window, id) = try Self.setAside(root, secrets)
        #expect(host.call(.scene(.disconnect), window: window).code == .ok)
        let adopting = try Life.startAdopting(host, id)
        #expect(
            waitFor(
                { host.call(.setAside).result?["set_aside"]?.array?.first?["state"]?.string == "adopting" }, seconds: 10
            ))
        // Past the adopting worker's first restore, which wrote the session again under the
        // window's new key and then aborted (the third abort: two made the crash loop), and
        // before the second, 100 ms later, which would end the adoption.
        #expect(
            waitFor({ host.log.components(separatedBy: "aborting while restoring").count == 4 }, seconds: 20),
            "\(host.log.suffix(2000))")
        host.kill9()
        adopting.waitUntilExit()
        #expect(
            Life.setAsideNames(root).contains { $0.hasPrefix(".adopting-") },
            "killed mid-adoption: \(Life.setAsideNames(root))")

        host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        #expect(Life.setAsideNames(root) == [id], "\(Life.setAsideNames(root))")
        let record = try Self.recordName(Self.entryDirectory(root, id), root: root)
        #expect(
            try KernelKeyring().record(record)?.entries.count == 2,
            "the key the session was written under went back with it")
        let back = try Self.adopt(host, id, asNewWindow: true)
        #expect(Self.incognitoURLs(host, back) == secrets, "\(host.log.suffix(2000))")
        Self.revokeKey(of: back, in: root)
    }

    /// The supervisor's set-aside killed after the key record is made and before the rename:
    /// the next start finds the window whole, revokes the record (its own key holds the files)
    /// and restores every incognito tab.
    @Test(.timeLimit(.minutes(3))) func aSetAsideKilledBeforeItsRenameLosesNothing() throws {
        let root = temporaryRoot("kill-before-rename")
        defer { removeHostFiles(root) }
        let secrets = Self.secrets()
        let window = try Self.browse(root, secrets)
        let id = try #require(UUID(uuidString: window))
        defer { Self.revokeKey(of: window, in: root) }
        let directory = root.appendingPathComponent("windows/\(window)")
        #expect(try SessionKeyRecords.keep(root: FilePath(root.path), window: id, directory: FilePath(directory.path)))
        let record = try Self.recordName(directory, root: root)
        #expect(try KernelKeyring().record(record) != nil)

        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        #expect(try KernelKeyring().record(record) == nil, "a leftover record revoked at start")
        #expect(Self.incognitoURLs(host, window) == secrets, "\(host.log.suffix(2000))")
    }

    /// The set-aside killed after its rename and before the window's own key is revoked: the
    /// entry has its record, the window's leftover key is harmless, and adopting the entry
    /// brings every incognito tab back.
    @Test(.timeLimit(.minutes(3))) func aSetAsideKilledAfterItsRenameLosesNothing() throws {
        let root = temporaryRoot("kill-after-rename")
        defer { removeHostFiles(root) }
        let secrets = Self.secrets()
        let window = try Self.browse(root, secrets)
        let id = try #require(UUID(uuidString: window))
        defer { Self.revokeKey(of: window, in: root) }
        let directory = root.appendingPathComponent("windows/\(window)")
        #expect(try SessionKeyRecords.keep(root: FilePath(root.path), window: id, directory: FilePath(directory.path)))
        let entry = "\(window)-\(SetAsideAttackTests.stamp)-crash-loop"
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent(DiskLayout.setAside), withIntermediateDirectories: true)
        try FileManager.default.moveItem(at: directory, to: Self.entryDirectory(root, entry))

        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let listed = try #require(try Life.entries(host).first)
        #expect(listed["incognito_tabs"]?.int == 2, "\(listed)")
        let back = try Self.adopt(host, entry, asNewWindow: true)
        #expect(Self.incognitoURLs(host, back) == secrets, "\(host.log.suffix(2000))")
        Self.revokeKey(of: back, in: root)
    }

    /// The set-aside at start: a second spelling of a window's directory (a copy, lowercase)
    /// goes aside with a copy of the window's key in its record, so it too adopts with every
    /// incognito tab, and the window itself keeps its own.
    @Test(.timeLimit(.minutes(3))) func aSecondSpellingSetAsideAtStartKeepsItsIncognitoTabs() throws {
        let root = temporaryRoot("spelling-incognito")
        defer { removeHostFiles(root) }
        let secrets = Self.secrets()
        let window = try Self.browse(root, secrets)
        _ = try #require(UUID(uuidString: window))
        defer { Self.revokeKey(of: window, in: root) }
        let windows = root.appendingPathComponent(DiskLayout.windows)
        try FileManager.default.copyItem(
            at: windows.appendingPathComponent(window), to: windows.appendingPathComponent(window.lowercased()))

        let host = try HostProcess(root: root, scenes: 1)
        defer { _ = host.terminate() }
        let listed = try #require(try Life.entries(host).first)
        #expect(listed["reason"]?.string == "bad_entry" && listed["incognito_tabs"]?.int == 2, "\(listed)")
        #expect(Self.incognitoURLs(host, window) == secrets, "the window keeps its own")
        let entry = try #require(listed["id"]?.string)
        let back = try Self.adopt(host, entry, asNewWindow: false)
        #expect(back != window)
        #expect(Self.incognitoURLs(host, back) == secrets, "\(host.log.suffix(2000))")
        #expect(Self.incognitoURLs(host, window) == secrets)
        Self.revokeKey(of: back, in: root)
    }
}
