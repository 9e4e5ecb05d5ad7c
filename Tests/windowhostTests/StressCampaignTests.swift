import Foundation
import Glibc
import TestSupport
import Testing

@Suite struct StressCampaignTests {
    /// A short seeded campaign against real processes: 300 kills of workers (some aimed at a
    /// save in flight, some at a stage of a move between windows) and of the supervisor, and now
    /// and then a damaged snapshot, every recovery and every move judged by the oracle.
    @Test func threeHundredKillsLoseNothingAcknowledged() throws {
        let report = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-stress-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: report) }
        let (status, output) = try runWindowhost([
            "stress", "--kills", "300", "--kill-rate", "40", "--scenes", "3", "--seed", "11", "--json", report.path,
        ])
        #expect(status == 0, "\(output)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: report)) as? [String: Any])
        func count(_ key: String) -> Int { (object[key] as? NSNumber)?.intValue ?? -1 }
        #expect(count("kills") == 300 && count("seed") == 11)
        #expect(count("lost") == 0 && count("unexpected") == 0 && count("torn") == 0)
        #expect(count("recoveries") >= 300, "every kill's windows were checked")
        #expect(
            count("supervisor_kills") >= 1 && count("killed_while_saving") >= 10 && count("corruptions") >= 5,
            "\(object)")
        // The campaign is paced by time (--kill-rate): how much it does between kills depends on
        // the machine (2,022 acknowledged in release on a loaded 2-core machine, under 1,000 in
        // debug under CI load). At least one acknowledged command per kill on average, whatever it is.
        #expect(count("acknowledged") >= count("kills") && count("commands") > count("acknowledged") / 2, "\(object)")
        let recovery = try #require(object["recovery_ms"] as? [String: Any])
        #expect((recovery["p50"] as? NSNumber)?.doubleValue ?? 0 > 0)
        #expect(output.contains("nothing acknowledged was lost"))
        // Moves between windows, half the kills aimed at one: each judged once over, and every
        // stage of the move's course hit on both sides.
        #expect(count("moves_started") >= 30 && count("moves_resolved") == count("moves_started"), "\(object)")
        #expect(count("moves_committed") >= 10 && count("moves_acknowledged") >= 10, "\(object)")
        #expect(count("duplicated") == 0 && count("lost_in_move") == 0 && count("supervisor_kills_in_moves") >= 1)
        let moveKills = try #require(object["move_kills"] as? [String: Any])
        for side in ["source", "destination"] {
            for stage in ["exporting", "importing", "committing", "dropping", "settling"] {
                #expect(
                    (moveKills["\(side) \(stage)"] as? NSNumber)?.intValue ?? 0 > 0, "\(side) \(stage): \(moveKills)")
            }
        }
        // Every tab verb changed some window, so each is judged across the kills.
        let changes = try #require(object["changes_by_verb"] as? [String: Any])
        for verb in ["open", "navigate", "close", "activate", "move", "replace", "pin", "unpin", "back", "forward"] {
            #expect((changes[verb] as? NSNumber)?.intValue ?? 0 > 0, "\(verb): \(changes)")
        }
    }

    /// Power cuts: every kill also loses each write not yet synced. Without the bug nothing
    /// acknowledged is lost; with the deliberate bug (saves acknowledged before the sync, in the
    /// test build alone: the shipped command ignores the switch) the oracle reports lost commands
    /// and the campaign fails with a reproducing line.
    @Test func powerCutsLoseNothingAcknowledgedUnlessSavesAreAcknowledgedBeforeTheSync() throws {
        let arguments = [
            "stress", "--power-cut", "--kills", "40", "--kill-rate", "20", "--scenes", "3", "--seed", "5",
            "--damage-one-in", "0",
        ]
        let honest = try runWindowhost(arguments)
        #expect(honest.status == 0 && honest.output.contains("nothing acknowledged was lost"), "\(honest.output)")

        let report = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-stress-bug-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: report) }
        var environment = ProcessInfo.processInfo.environment
        environment["WINDOWHOST_FAULT_ACK_BEFORE_SYNC"] = "1"
        let shipped = try runWindowhost(arguments, environment: environment)
        #expect(shipped.status == 0 && shipped.output.contains("nothing acknowledged was lost"), "\(shipped.output)")
        let buggy = try runWindowhost(
            arguments + ["--json", report.path], environment: environment, binary: windowhostFaultsBinary)
        #expect(buggy.status == 1)
        #expect(
            buggy.output.contains("acknowledged commands lost")
                && buggy.output.contains("reproduce: windowhost stress --seed 5"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: report)) as? [String: Any])
        #expect(((object["lost"] as? NSNumber)?.intValue ?? 0) > 0)
    }

    /// A short seeded hostile campaign: the disk filled and freed, symlinks, FIFOs and
    /// directories planted where the host reads and writes, with the oracle unchanged. As root
    /// it mounts a tmpfs for its root and unmounts it after; a refused mount fails it.
    @Test func aHostileWorldLosesNothingAcknowledgedAndNeverHangs() throws {
        try #require(geteuid() == 0, "the hostile campaign mounts a tmpfs: run the tests as root")
        let report = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-stress-hostile-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: report) }
        let (status, output) = try runWindowhost([
            "stress", "--hostile", "--kills", "25", "--kill-rate", "5", "--scenes", "3", "--seed", "7", "--json",
            report.path,
        ])
        #expect(status == 0, "\(output)")
        #expect(output.contains("a tmpfs of"), "\(output)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: report)) as? [String: Any])
        func count(_ key: String) -> Int { (object[key] as? NSNumber)?.intValue ?? -1 }
        #expect(count("lost") == 0 && count("unexpected") == 0 && count("torn") == 0, "\(object)")
        #expect(count("disk_fills") >= 1 && count("planted_entries") >= 2 && count("hostile_events") >= 4, "\(object)")
        #expect((object["failures"] as? [String])?.isEmpty == true, "\(object)")
        // The tmpfs is gone: nothing of the campaign stays mounted.
        let banner = try #require(output.split(separator: "\n").first { $0.hasPrefix("windowhost stress: seed") })
        let root = try #require(banner.split(separator: " ").first { $0.hasPrefix("/") })
        let mounts = try #require(procText("/proc/self/mounts"))
        #expect(!mounts.contains(String(root)), "\(root) is still mounted")
    }

    /// `--hostile` fills the filesystem under its root, so it refuses one it may not mount over.
    @Test func aHostileCampaignRefusesARootItCannotFillSafely() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-hostile-busy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { removeHostFiles(root) }
        _ = FileManager.default.createFile(
            atPath: root.appendingPathComponent("kept").path, contents: Data("mine".utf8))
        let refused = try runWindowhost(["stress", "--hostile", "--kills", "1", "--root", root.path])
        #expect(refused.status == 64, "\(refused.output)")
        #expect(FileManager.default.contents(atPath: root.appendingPathComponent("kept").path) == Data("mine".utf8))
    }

    @Test func badArgumentsExitWithUsage() throws {
        #expect(try runWindowhost(["stress", "--kills", "5", "--duration", "3"]).status == 64)
        #expect(try runWindowhost(["stress", "--kill-rate", "0"]).status == 64)
        #expect(try runWindowhost(["stress", "--scenes", "0"]).status == 64)
        #expect(try runWindowhost(["stress", "--power-cut", "--io", "sync"]).status == 64)
        #expect(try runWindowhost(["stress", "--damage-one-in", "-1"]).status == 64)
        #expect(try runWindowhost(["stress", "--move-one-in", "-1"]).status == 64)
    }
}
