import BrowserModel
import Foundation
import SystemPackage
import TestSupport
import Testing

@testable import Bench

/// Host restores through a real `windowhost run`: each window killed with `ctl kill` and timed
/// until its replacement is ready, its shape kept, and the workers' memory read.
@Suite struct HostRestoreBenchTests {
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("windowhost").path

    @Test func eachWindowIsKilledTimedAndKeepsItsShape() throws {
        let directory = FilePath(FileManager.default.temporaryDirectory.path).appending(
            "windowhost-host-restore-\(UUID().uuidString.prefix(8))")
        defer { removeTestRoot(directory.string) }
        let results = try HostRestoreBench.run(
            executable: Self.binary, kills: 3, directory: directory, cases: [(20, .journal), (300, .compacted)])
        #expect(results.map(\.tabs) == [20, 20, 300, 300])
        #expect(results.map(\.shape) == [.journal, .journal, .compacted, .compacted])
        #expect(results.map(\.spare) == [false, true, false, true], "each case without, then with, a spare")
        for row in results {
            #expect(row.kills == 3)
            #expect(row.p50Milliseconds > 0 && row.p50Milliseconds <= row.p99Milliseconds, "\(row)")
            #expect(
                row.pssKiB > 0 && row.anonymousKiB > 0 && row.emptyPssKiB > 0 && row.emptyAnonymousKiB > 0, "\(row)")
        }
        // The host's roots are inside the directory given, and only there.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.string).sorted().first == "host-0")
    }

    @Test func theMemoryOfAProcessIsItsSmapsRollup() throws {
        let memory = try HostRestoreBench.memory(of: getpid())
        #expect(memory.pss > 0 && memory.anonymous > 0 && memory.anonymous < 64 << 20)
    }
}
