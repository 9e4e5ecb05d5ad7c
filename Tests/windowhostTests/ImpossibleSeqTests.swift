import BrowserModel
import Foundation
import HostLimits
import SessionFormat
import Supervisor
import Testing

/// Seqs no window can reach, written on disk as a valid commit (right CRC) the way damage or a
/// hostile file would: the supervisor never traps on them, other windows go on working, and a
/// window at the highest valid seq refuses tab commands with a typed error.
@Suite(.serialized) struct ImpossibleSeqTests {
    @Test(arguments: [UInt64.max, UInt64.max - 1, Limits.maxCommandSeq + 1])
    func aCommitWithAnImpossibleSeqNeverStopsTheSupervisor(seq: UInt64) throws {
        let root = temporaryRoot("seq")
        defer { removeHostFiles(root) }
        let (damaged, healthy) = try twoSavedWindows(root)
        try appendCommit(seq: seq, to: damaged, in: root)

        let host = try HostProcess(root: root, scenes: 2)
        defer { if host.process.isRunning { host.kill9() } }
        // Whatever becomes of the damaged window (refused at recovery, or its worker killed for
        // publishing the seq, then set aside), it ends up serving, and nothing traps.
        let serving = waitFor({ host.windows()[damaged]?.state == "foreground" }, seconds: 20)
        #expect(serving, "the damaged window serves again: \(String(describing: host.windows()[damaged])) \(host.log)")
        #expect(host.process.isRunning, "the supervisor is alive: \(host.log)")
        let opened = try host.ctlBounded(["open", "--window", damaged, "--url", "https://after.example/"])
        #expect(opened.status == 0, "\(opened.output)")
        #expect(try host.ctlBounded(["wait-durable", "--window", damaged]).status == 0)
        let applied = host.windows()[damaged]?.appliedSeq
        #expect(
            applied.map { $0 <= Int64(Limits.maxCommandSeq) } ?? false,
            "a seq the window can have: \(String(describing: applied))")

        #expect(try host.ctlBounded(["open", "--window", healthy, "--url", "https://other.example/"]).status == 0)
        #expect(try host.ctlBounded(["wait-durable", "--window", healthy]).status == 0)
        let status = try host.ctlBounded(["status"])
        #expect(status.status == 0, "\(status.output)")
        #expect(host.terminate() == 0, "\(host.log)")
    }

    /// The highest valid seq restores; the next tab command would pass it, so it is refused
    /// (76, naming the cause and what to do) rather than wrapped, and the window still answers
    /// everything else.
    @Test func aWindowAtTheHighestSeqRefusesTabCommandsWithATypedError() throws {
        let root = temporaryRoot("maxseq")
        defer { removeHostFiles(root) }
        let (full, healthy) = try twoSavedWindows(root)
        try appendCommit(seq: Limits.maxCommandSeq, to: full, in: root)

        let host = try HostProcess(root: root, scenes: 2)
        defer { if host.process.isRunning { host.kill9() } }
        try #require(waitFor({ host.windows()[full]?.state == "foreground" }, seconds: 20), "\(host.log)")
        let refused = try host.ctlBounded(["open", "--window", full, "--url", "https://one-more.example/"])
        #expect(
            refused.status == 76 && refused.output.contains("highest command seq")
                && refused.output.contains("ctl connect"), "\(refused.output)")
        // Every tab command, whatever it is, is refused the same way.
        for verb in [
            ["navigate", "--tab", "1", "--url", "https://b.example/"], ["close", "--tab", "1"],
            ["activate", "--tab", "1"],
            ["move", "--tab", "1", "--index", "0"], ["replace", "--tab", "1", "--url", "https://c.example/"],
            ["close-all"],
            ["open", "--incognito", "--url", "https://d.example/"],
        ] {
            let other = try host.ctlBounded([verb[0], "--window", full] + verb.dropFirst())
            #expect(other.status == 76 && other.output.contains("highest command seq"), "\(verb): \(other.output)")
        }
        let dump = try host.ctlBounded(["dump", "--window", full])
        #expect(
            dump.status == 0 && dump.output.contains("applied \(Limits.maxCommandSeq)"),
            "printed exactly: \(dump.output)")
        #expect(try host.ctlBounded(["save", "--wait", "--window", full]).status == 0)
        #expect(try host.ctlBounded(["open", "--window", healthy, "--url", "https://other.example/"]).status == 0)
        #expect(host.process.isRunning)
        #expect(host.terminate() == 0, "\(host.log)")
    }
}

/// Two windows with a tab each, saved, the supervisor stopped cleanly.
private func twoSavedWindows(_ root: URL) throws -> (String, String) {
    let host = try HostProcess(root: root, scenes: 2)
    defer { if host.process.isRunning { host.kill9() } }
    let ids = host.windowIDs()
    try #require(ids.count == 2)
    for window in ids {
        #expect(host.open(window, "https://\(window.prefix(8)).example/") != nil)
        #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok)
    }
    #expect(host.terminate() == 0)
    return (ids[0], ids[1])
}

/// Writes a commit of `seq` (valid frame and CRC) after the last one of the window's newest
/// regular journal, in its preallocated room: what recovery takes for the last save.
private func appendCommit(seq: UInt64, to window: String, in root: URL) throws {
    let directory = root.appendingPathComponent("windows/\(window)/regular")
    let journals = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
        $0.hasPrefix(DiskLayout.journalPrefix)
    }.sorted()
    let path = directory.appendingPathComponent(try #require(journals.last)).path
    let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    let scan = try JournalFile.scan(InMemoryBytes(bytes))
    let tail = try #require(scan.commits.last).end
    let handle = try #require(FileHandle(forWritingAtPath: path))
    defer { try? handle.close() }
    try handle.seek(toOffset: UInt64(tail))
    try handle.write(contentsOf: Data(JournalCommit(seq: seq, browsers: BrowserKind.regular.commitBit).frame))
}
