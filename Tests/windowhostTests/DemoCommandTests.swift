import Foundation
import Testing

/// The built `windowhost` next to the test bundle.
private let windowhost = URL(fileURLWithPath: CommandLine.arguments[0])
    .deletingLastPathComponent().appendingPathComponent("windowhost")

private func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = windowhost
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

private func mode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

@Suite struct DemoCommandTests {
    @Test func demoRestoresEveryListAndWritesPrivateFiles() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("windowhost-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let (status, output) = try run(["demo", "--root", root.path, "--seed", "7", "--commands", "120"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("nothing was lost"))
        #expect(output.components(separatedBy: "restored == live, every history compared: yes").count == 3)

        let windows = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("windows").path)
        #expect(windows.count == 1)
        let window = root.appendingPathComponent("windows").appendingPathComponent(try #require(windows.first))
        for kind in ["regular", "incognito"] {
            let directory = window.appendingPathComponent(kind)
            #expect(try mode(directory.path) == 0o700)
            for file in ["snapshot", "journal"] {
                #expect(try mode(directory.appendingPathComponent(file).path) == 0o600, "\(kind)/\(file)")
            }
        }
        #expect(try mode(window.path) == 0o700)
    }

    @Test func theSameSeedGivesTheSameRun() throws {
        let first = try run(["demo", "--seed", "3", "--commands", "60"])
        let second = try run(["demo", "--seed", "3", "--commands", "60"])
        // Window UUIDs and temporary paths differ; everything after the first line must not.
        let body = { (text: String) in text.split(separator: "\n").dropFirst().joined(separator: "\n") }
        #expect(first.status == 0 && second.status == 0)
        #expect(body(first.output) == body(second.output))
    }

    @Test func badArgumentsExitWithUsage() throws {
        #expect(try run(["demo", "--commands", "1"]).status == 64)
        #expect(try run(["demo", "--seed", "minus-one"]).status == 64)
        #expect(try run(["no-such-verb"]).status == 64)
    }
}
