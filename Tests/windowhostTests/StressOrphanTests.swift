import Foundation
import Glibc
import TestSupport
import Testing

/// A stress campaign killed with SIGKILL (it can clean nothing up) leaves no supervisor or
/// worker behind: the supervisor it spawns dies with it (`PR_SET_PDEATHSIG`), and the workers
/// with their supervisor. Before, the supervisor went on running on the campaign's root.
@Suite(.serialized) struct StressOrphanTests {
    @Test(.timeLimit(.minutes(10))) func aKilledCampaignLeavesNoSupervisorBehind() throws {
        let root = temporaryRoot("stress-orphan")
        defer { cleanUpCampaign(root) }
        try killCampaignOnceItsSupervisorRuns(root)
        #expect(
            waitFor({ processes(mentioning: root.path).isEmpty }, seconds: 5),
            "left running: \(processes(mentioning: root.path).map { "\($0) \(commandLine($0))" })")
    }

    /// A hostile campaign killed with SIGKILL leaves its tmpfs mounted nowhere: it is mounted in
    /// the campaign's own mount namespace, which ends with its last process.
    @Test(.timeLimit(.minutes(10))) func aKilledHostileCampaignLeavesNothingMounted() throws {
        try #require(geteuid() == 0, "the hostile campaign mounts a tmpfs: run the tests as root")
        let root = temporaryRoot("stress-orphan-hostile")
        defer { cleanUpCampaign(root, hostile: true) }
        try killCampaignOnceItsSupervisorRuns(root, hostile: true)
        #expect(waitFor({ processes(mentioning: root.path).isEmpty }, seconds: 5))
        let mounts = try #require(procText("/proc/self/mounts"))
        #expect(!mounts.contains(root.path), "\(root.path) is still mounted")
    }
}

/// Starts a stress campaign on `root`, waits until its supervisor (`windowhost run --root
/// ROOT`) is up, and kills the campaign with SIGKILL: it can clean nothing up.
private func killCampaignOnceItsSupervisorRuns(_ root: URL, hostile: Bool = false) throws {
    let campaign = Process()
    campaign.executableURL = windowhostBinary
    campaign.arguments =
        ["stress"] + (hostile ? ["--hostile"] : []) + [
            "--duration", "60", "--kill-rate", "1", "--scenes", "2", "--seed", "3", "--root", root.path,
        ]
    campaign.standardOutput = FileHandle.nullDevice
    campaign.standardError = FileHandle.nullDevice
    try campaign.run()
    try #require(
        waitFor({ processes(mentioning: root.path).contains { $0 != campaign.processIdentifier } }, seconds: 30))

    Glibc.kill(campaign.processIdentifier, SIGKILL)
    campaign.waitUntilExit()
}

/// Kills whatever still runs on `root`, unmounts a hostile campaign's tmpfs left mounted, and
/// removes the root and the campaign's files beside it.
private func cleanUpCampaign(_ root: URL, hostile: Bool = false) {
    for pid in processes(mentioning: root.path) { Glibc.kill(pid, SIGKILL) }
    if hostile { _ = umount2(root.path, Int32(MNT_DETACH)) }
    let beside = [".stress-stdout", ".stress-log"] + (hostile ? [".hostile-canary"] : [])
    for url in [root] + beside.map({ URL(fileURLWithPath: root.path + $0) }) {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Running processes (not zombies) whose command line mentions `text`.
private func processes(mentioning text: String) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int32.init).filter { isRunning($0) && commandLine($0).contains(text) }
}

private func commandLine(_ pid: Int32) -> String {
    (procText("/proc/\(pid)/cmdline") ?? "").replacingOccurrences(of: "\0", with: " ")
}
