import ArgumentParser
import BrowserModel
import Foundation
import SessionStore
import Stress
import SystemPackage
import WindowhostCLI

/// A window that applies seeded commands and saves each durably, forever, printing
/// `applying SEQ` before each command and `durable SEQ` as its save is acknowledged: what crash tests kill with SIGKILL at random
/// moments. On start it recovers and prints `recovered SEQ`, then goes on from there exactly as
/// the uninterrupted run would (`RandomBrowsing.command`). The test build's alone.
struct SaveLoopCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "save-loop",
        abstract: "Apply seeded commands to one window and save each durably until killed (for crash tests).",
        shouldDisplay: false)

    @Option(help: "The state directory.")
    var root: String

    @Option(help: "Seed of the commands.")
    var seed: UInt64 = 1

    @Option(help: "Stop after this command (default: run until killed).")
    var until: UInt64?

    @Option(help: "Compact after this many journal records (small values exercise compaction).")
    var compactAfter = 4096

    @OptionGroup var io: IOOptions

    func run() throws {
        let store = WindowStore(
            root: FilePath(root), windowID: Self.window, engine: try io.makeEngine(),
            options: StoreOptions(compactAfterRecords: compactAfter), saveDelayMilliseconds: 0)
        let recovery = try store.recover()
        emit("recovered \(recovery.seq)")
        var seq = recovery.seq
        let list = store.regular.webStateList
        while until.map({ seq < $0 }) ?? true {
            seq += 1
            emit("applying \(seq)")
            try store.apply(seq: seq) {
                try RandomBrowsing.command(seed: seed, seq: seq, list: list, profile: store.regular.profile)
            }
            try store.waitUntilDurable(seq)
            emit("durable \(seq)")
        }
    }

    /// The window every save-loop uses: one per root.
    static let window = UUID(uuidString: "5A7E100F-0000-4000-8000-000000000001")!

    /// One unbuffered write per line: a SIGKILL right after loses no acknowledgement printed.
    private func emit(_ line: String) {
        StandardStreams.output(line + "\n")
    }
}
