import BrowserModel
import Foundation
import Glibc
import IOUring
import SessionStore
import SystemPackage
import Testing

/// The reference model: the same seeded commands on a plain list, no storage.
private struct ReferenceRun {
    let seed: UInt64
    let profile = Profile(stateDirectory: "/unused")
    let list = WebStateList()
    var states: [TabListContents]

    init(seed: UInt64) throws {
        self.seed = seed
        states = [try TabListContents(list, realizing: true)]
    }

    mutating func state(at seq: UInt64) throws -> TabListContents {
        while states.count <= Int(seq) {
            try RandomBrowsing.command(seed: seed, seq: UInt64(states.count), list: list, profile: profile)
            states.append(try TabListContents(list, realizing: true))
        }
        return states[Int(seq)]
    }
}

@Suite struct CrashTests {
    /// A child that saves every command durably is killed with SIGKILL at random moments (in
    /// the middle of recovering, applying, writing or compacting), 200 times. After each kill
    /// the window on disk equals the reference model at a command between the last one
    /// acknowledged and the last one applied, and the next child goes on from there.
    @Test func twoHundredKillsLoseNothingAcknowledged() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("windowhost-kill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { removeHostFiles(root) }
        let acknowledgements = root.appendingPathComponent("acks")
        let seed: UInt64 = 42
        var reference = try ReferenceRun(seed: seed)
        var random = SeededGenerator(seed: seed)
        var acknowledged: UInt64 = 0
        var applied: UInt64 = 0
        var killedWhileSaving = 0

        for kill in 0..<200 {
            _ = FileManager.default.createFile(atPath: acknowledgements.path, contents: nil)
            let output = try FileHandle(forWritingTo: acknowledgements)
            let child = Process()
            child.executableURL = windowhostFaultsBinary
            child.arguments = [
                "save-loop", "--root", root.path, "--seed", "\(seed)", "--compact-after", "16",
                "--io", kill % 2 == 0 ? "uring" : "sync",
            ]
            child.standardOutput = output
            child.standardError = FileHandle.nullDevice
            try child.run()
            if kill % 5 == 0 {
                // Anywhere from start-up through recovery and the first saves.
                usleep(UInt32.random(in: 0...60_000, using: &random))
            } else {
                // Once saving (however long start-up and the first save took on a loaded
                // machine: a first save that compacts takes several syncs), while saving.
                waitForLine("durable ", in: acknowledgements)
                usleep(UInt32.random(in: 2_000...30_000, using: &random))
            }
            Glibc.kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            try output.close()
            #expect(child.terminationReason == .uncaughtSignal && child.terminationStatus == SIGKILL)

            let lines = String(decoding: try Data(contentsOf: acknowledgements), as: UTF8.self).split(separator: "\n")
            if let recovered = lines.first(where: { $0.hasPrefix("recovered ") }) {
                // The last command that changed something: commands that change nothing write nothing.
                #expect(
                    UInt64(recovered.dropFirst(10)).map { $0 <= max(acknowledged, applied) } ?? false,
                    "kill \(kill): \(recovered)")
            }
            if let last = lines.last(where: { $0.hasPrefix("durable ") }), let seq = UInt64(last.dropFirst(8)) {
                acknowledged = seq
                killedWhileSaving += 1
            }
            if let last = lines.last(where: { $0.hasPrefix("applying ") }), let seq = UInt64(last.dropFirst(9)) {
                applied = max(applied, seq)
            }

            let store = WindowStore(root: FilePath(root.path), windowID: windowID, engine: SyncEngine())
            let recovery = try store.recover()
            let got = try TabListContents(store.regular.webStateList, realizing: true)
            let matches = try (acknowledged...max(acknowledged, applied)).filter { try reference.state(at: $0) == got }
            #expect(
                !matches.isEmpty, "kill \(kill): acknowledged \(acknowledged), applied \(applied), \(recovery.regular)")
            #expect(recovery.regular.damaged.isEmpty, "kill \(kill): a crash tears at most the last save")
        }
        #expect(acknowledged > 100, "the children made progress between kills")
        #expect(killedWhileSaving >= 80, "kills landed while the child was saving")
    }
}

/// Waits (at most 10 s) until `file` has a line starting with `prefix`.
private func waitForLine(_ prefix: String, in file: URL) {
    for _ in 0..<10_000 {
        if let data = try? Data(contentsOf: file), String(decoding: data, as: UTF8.self).contains(prefix) { return }
        usleep(1_000)
    }
}

/// The window `windowhost save-loop` keeps.
private let windowID = UUID(uuidString: "5A7E100F-0000-4000-8000-000000000001")!
