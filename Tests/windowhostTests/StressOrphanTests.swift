import Foundation
import Glibc
import Testing

/// A stress campaign killed with SIGKILL (it can clean nothing up) leaves no supervisor or
/// worker behind: the supervisor it spawns dies with it (`PR_SET_PDEATHSIG`), and the workers
/// with their supervisor. Before, the supervisor went on running on the campaign's root.
@Suite(.serialized) struct StressOrphanTests {
    @Test(.timeLimit(.minutes(2))) func aKilledCampaignLeavesNoSupervisorBehind() throws {
        let root = temporaryRoot("stress-orphan")
        defer {
            for pid in processes(mentioning: root.path) { Glibc.kill(pid, SIGKILL) }
            for url in [root, URL(fileURLWithPath: root.path + ".stress-stdout"), URL(fileURLWithPath: root.path + ".stress-log")] {
                try? FileManager.default.removeItem(at: url)
            }
        }
        let campaign = Process()
        campaign.executableURL = windowhostBinary
        campaign.arguments = ["stress", "--duration", "60", "--kill-rate", "1", "--scenes", "2", "--seed", "3", "--root", root.path]
        campaign.standardOutput = FileHandle.nullDevice
        campaign.standardError = FileHandle.nullDevice
        try campaign.run()
        // Its supervisor (`windowhost run --root ROOT`) is up.
        try #require(waitFor({ processes(mentioning: root.path).contains { $0 != campaign.processIdentifier } }, seconds: 30))

        Glibc.kill(campaign.processIdentifier, SIGKILL)
        campaign.waitUntilExit()
        #expect(
            waitFor({ processes(mentioning: root.path).isEmpty }, seconds: 5),
            "left running: \(processes(mentioning: root.path).map { "\($0) \(commandLine($0))" })")
    }
}

/// Running processes (not zombies) whose command line mentions `text`.
private func processes(mentioning text: String) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int32.init).filter { isRunning($0) && commandLine($0).contains(text) }
}

private func commandLine(_ pid: Int32) -> String {
    let bytes = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
    return String(decoding: bytes.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
}
