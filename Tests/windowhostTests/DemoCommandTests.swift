import BrowserModel
import Foundation
import Testing

private func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
    try runWindowhost(arguments)
}

private func mode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

@Suite struct DemoCommandTests {
    /// The modes are the host's whatever umask it inherits: one of 0777 would otherwise make
    /// directories nobody may enter and files nobody may read (a CI runner had one with user bits).
    @Test(arguments: ["022", "777"])
    func demoRestoresTheWindowSurvivesADamagedSnapshotAndWritesPrivateFiles(umask: String) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("windowhost-test-\(UUID().uuidString)")
        defer { removeHostFiles(root) }
        let (status, output) = try runWindowhost(
            ["demo", "--root", root.path, "--seed", "7", "--commands", "150", "--save-delay", "100"],
            prefix: ["sh", "-c", "umask \(umask) && exec \"$@\"", "sh"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("nothing acknowledged was lost"))
        #expect(output.contains("restored == live, every history compared: yes"))
        #expect(output.contains("fell back to generation"))
        #expect(output.contains("durable through command 150"))

        let windows = try FileManager.default.contentsOfDirectory(
            atPath: root.appendingPathComponent(DiskLayout.windows).path)
        #expect(windows.count == 1)
        let window = root.appendingPathComponent(DiskLayout.windows).appendingPathComponent(try #require(windows.first))
        #expect(try mode(window.path) == 0o700)
        let regular = window.appendingPathComponent(BrowserKind.regular.rawValue)
        #expect(try mode(regular.path) == 0o700)
        let files = try FileManager.default.contentsOfDirectory(atPath: regular.path)
        #expect(
            files.contains { $0.hasPrefix(DiskLayout.journalPrefix) }
                && files.contains { $0.hasPrefix(DiskLayout.snapshotPrefix) })
        for file in files where file != DiskLayout.damagedDirectory {
            #expect(try mode(regular.appendingPathComponent(file).path) == 0o600, "\(file)")
        }
        let damaged = regular.appendingPathComponent(DiskLayout.damagedDirectory)
        #expect(try mode(damaged.path) == 0o700)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: damaged.path).count == 1, "set aside, never deleted")
    }

    @Test func theSameSeedGivesTheSameCommandsAndWindow() throws {
        let first = try run(["demo", "--seed", "3", "--commands", "60", "--save-delay", "0"])
        let second = try run(["demo", "--seed", "3", "--commands", "60", "--save-delay", "0"])
        // Paths, latencies and how saves group differ between runs, and with them the generation
        // and which tabs a replayed journal realized; the commands, the tab count and the
        // restored window's equality with the live one must not.
        let stable = { (text: String) in
            text.split(separator: "\n").filter { $0.hasPrefix("  #") || $0.hasPrefix("restored:") }.map {
                $0.prefix { $0 != "," }
            }
        }
        #expect(first.status == 0 && second.status == 0)
        #expect(!stable(first.output).isEmpty && stable(first.output) == stable(second.output))
        #expect(
            first.output.contains("every history compared: yes")
                && second.output.contains("every history compared: yes"))
    }

    @Test func badArgumentsExitWithUsage() throws {
        #expect(try run(["demo", "--commands", "1"]).status == 64)
        #expect(try run(["demo", "--seed", "minus-one"]).status == 64)
        #expect(try run(["demo", "--io", "floppy"]).status == 64)
        #expect(try run(["no-such-verb"]).status == 64)
        #expect(
            try run(["save-loop", "--root", "/nonexistent", "--until", "1"]).status == 64,
            "save-loop is the test build's alone")
    }
}

@Suite struct InspectCommandTests {
    @Test func inspectShowsTheSavedWindowAndNamesCorruptionWithExitCodes() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-inspect-\(UUID().uuidString)")
        defer { removeHostFiles(root) }
        #expect(
            try runWindowhost(
                ["save-loop", "--root", root.path, "--seed", "5", "--until", "40", "--compact-after", "12"],
                binary: windowhostFaultsBinary
            ).status == 0)

        let clean = try run(["inspect", root.path, "--json"])
        #expect(clean.status == 0, "\(clean.output)")
        let json = try #require(clean.output.split(separator: "\n").first { $0.hasPrefix("{") })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let windows = try #require(object["windows"] as? [[String: Any]])
        let browser = try #require((windows.first?["browsers"] as? [[String: Any]])?.first)
        #expect(browser["kind"] as? String == "regular")
        #expect(browser["durable_seq"] as? Int ?? 0 >= 30)
        #expect((browser["tabs"] as? [[String: Any]])?.isEmpty == false)
        // Each file the tabs were read from, with its format: snapshots are written in 2.
        let files = try #require(browser["files"] as? [[String: Any]])
        #expect(
            files.first?["name"] as? String == "snapshot-"
                + String(format: "%016llx", browser["generation"] as? Int ?? -1))
        #expect(files.first?["version"] as? Int == 2, "\(files)")
        #expect(
            files.dropFirst().allSatisfy {
                ($0["name"] as? String)?.hasPrefix(DiskLayout.journalPrefix) == true && $0["version"] as? Int == 1
            })
        let text = try run(["inspect", root.path])
        #expect(text.output.contains("files: snapshot-") && text.output.contains("(format 2)"), "\(text.output)")

        // Damage the newest snapshot's metadata: exit 65, the file and offset named, the window
        // still shown (from the generation before), and nothing on disk changed by looking.
        let directory = root.appendingPathComponent("windows/5A7E100F-0000-4000-8000-000000000001/regular")
        let snapshot = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
                $0.hasPrefix(DiskLayout.snapshotPrefix)
            }
            .max())
        let path = directory.appendingPathComponent(snapshot)
        var bytes = try [UInt8](Data(contentsOf: path))
        bytes[30] ^= 0x01
        try Data(bytes).write(to: path)
        let before = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        let damaged = try run(["inspect", root.path])
        #expect(damaged.status == 65, "\(damaged.output)")
        #expect(damaged.output.contains("CORRUPT \(path.path) at byte 16"))
        #expect(damaged.output.contains("regular:"))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == before, "inspect reads only"
        )

        #expect(try run(["inspect", root.appendingPathComponent("missing").path]).status == 66)
        #expect(try run(["inspect", root.path, "--window", "not-a-uuid"]).status == 64)
    }
}
