import ArgumentParser
import BrowserModel
import Foundation
import SessionFormat
import SystemPackage

/// Shows the browser model and the session record format working together: seeded browsing in
/// one window's regular and incognito Browsers, a snapshot plus journal written per Browser,
/// a lazy restore checked against the live lists, and a damaged journal read safely.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Browse at random, save as snapshot + journal, restore lazily, and check nothing was lost.")

    @Option(help: "Directory to keep the session files in (default: a temporary one, removed afterwards).")
    var root: String?

    @Option(help: "Seed of the random browsing; the same seed gives the same run.")
    var seed: UInt64 = 1

    @Option(help: "Commands per Browser; the snapshot covers the first half, the journal the rest.")
    var commands: Int = 200

    func validate() throws {
        guard commands >= 2 else { throw ValidationError("--commands must be at least 2") }
    }

    func run() throws {
        let rootPath: FilePath
        if let root {
            rootPath = FilePath(root)
        } else {
            rootPath = try PrivateFiles.makeTemporaryDirectory(prefix: "windowhost-demo")
        }
        defer { if root == nil { try? FileManager.default.removeItem(atPath: rootPath.string) } }

        let profile = Profile(stateDirectory: rootPath)
        let window = UUID()
        print("windowhost demo (seed \(seed)): window \(window.uuidString) under \(rootPath)")
        var allEqual = true
        for (offset, candidate) in [profile, profile.offTheRecordProfile].enumerated() {
            let browser = candidate.browserList.browser(for: window)
            let equal = try demonstrate(browser, seed: seed &+ UInt64(offset), showSteps: offset == 0 ? 6 : 0)
            allEqual = allEqual && equal
        }
        guard allEqual else {
            print("FAILED: a restored list differs from the live one")
            throw ExitStatus.checkFailed
        }
        print("every restored list equals its live list: nothing was lost")
    }

    /// Browses, saves, restores and damages one Browser's session; true when the restore matched.
    private func demonstrate(_ browser: Browser, seed: UInt64, showSteps: Int) throws -> Bool {
        let list = browser.webStateList
        let recorder = JournalRecorder(list: list)
        var browsing = RandomBrowsing(seed: seed)
        let half = UInt64(commands / 2)
        let directory = browser.sessionDirectory
        try PrivateFiles.makeDirectories(directory)
        let snapshotPath = directory.appending("snapshot")
        let journalPath = directory.appending("journal")

        print("\n\(browser.kind) browser: \(commands) random commands")
        var journal = JournalFile.header
        var journalRecords = 0
        for seq in 1...UInt64(commands) {
            recorder.commandSeq = seq
            let did = try browsing.step(list, profile: browser.profile)
            if seq <= UInt64(showSteps) { print("  #\(seq) \(did)") }
            let records = recorder.takeRecords()
            if seq == half {
                let snapshot = try SnapshotEncoder.encode(list, lastCommandSeq: seq) { webState throws(SessionFormatError) in
                    throw .readFailed(offset: 0, reason: "tab \(webState.id) is unrealized and has no stored history")
                }
                try PrivateFiles.write(snapshot, to: snapshotPath)
            } else if seq > half {
                for record in records { journal += record.frame }
                journalRecords += records.count
            }
        }
        try PrivateFiles.write(journal, to: journalPath)
        if showSteps > 0 { print("  …") }
        let active = list.activeWebState.map { "tab \($0.id) \"\($0.title)\"" } ?? "none"
        print("  live: \(tabs(list.count)) (\(list.pinnedCount) pinned), active \(active)")

        let snapshotFile = try FileBytes(path: snapshotPath)
        let journalFile = try FileBytes(path: journalPath)
        print("  saved snapshot \(snapshotFile.size) B (covers commands 1…\(half)), "
            + "journal \(journalFile.size) B (\(journalRecords) records, commands \(half + 1)…\(commands))")

        let restored = browser.profile.browserList.browser(for: UUID()).webStateList
        let reader = try SnapshotReader(snapshotFile)
        try reader.restore(into: restored, profile: browser.profile)
        let unrealizedAfterRestore = restored.webStates.filter { !$0.isRealized }.count
        for record in try JournalFile.decode(journalFile) {
            try JournalReplayer.apply(record, to: restored, profile: browser.profile)
        }
        let realizedByReplay = restored.webStates.filter(\.isRealized).count
        print("  restored: \(tabs(reader.items.count)) from the snapshot, \(unrealizedAfterRestore) of them unrealized; "
            + "after the journal \(tabs(restored.count)), \(realizedByReplay) realized (new or navigated since)")
        if let activeTab = restored.activeWebState, !activeTab.isRealized {
            try activeTab.forceRealized()
            print("  realizing the active tab read its history only: \(activeTab.navigationItemCount) items")
        }

        let equal = try TabListContents(restored, realizing: true) == TabListContents(list, realizing: true)
        print("  restored == live, every history compared: \(equal ? "yes" : "NO")")

        var damaged = journal
        if damaged.count > Framing.fileHeaderSize + 1 {
            let position = Framing.fileHeaderSize + (damaged.count - Framing.fileHeaderSize) / 2
            damaged[position] ^= 0x40
            let scan = try JournalFile.scan(InMemoryBytes(damaged))
            print("  damaged journal (byte \(position) flipped): \(scan.stoppedBy.map { "\($0)" } ?? "no error")")
            print("    kept the \(scan.records.count) records before it (\(scan.validLength) B), trusted nothing after it")
        }
        return equal
    }
}

private func tabs(_ count: Int) -> String { count == 1 ? "1 tab" : "\(count) tabs" }
