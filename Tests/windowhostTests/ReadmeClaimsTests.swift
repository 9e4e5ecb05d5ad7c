import Foundation
import HostCoordination
import IOUring
import Testing

/// What README.md states that the code can check: its exit-code table is the one `windowhost
/// --help` prints (from `ControlCode`), and the engines it lists are the ones `--io` takes.
@Suite struct ReadmeClaimsTests {
    static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "../../README.md"
    ).standardizedFileURL

    @Test func theExitCodeTableIsTheHelpsTable() throws {
        let text = try String(contentsOf: Self.readme, encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init)
        let start = try #require(lines.firstIndex(of: "| code | meaning |"), "no exit-code table in README.md")
        let rows = lines[(start + 2)...].prefix { $0.hasPrefix("|") }.map { line in
            line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        }
        let help = try runWindowhost(["--help"]).output
        let paragraph = try #require(help.components(separatedBy: "\n\n").first { $0.hasPrefix("Exit codes") })
        let entries = paragraph.replacingOccurrences(of: "\n", with: " ").drop { $0 != ":" }.dropFirst().split(
            separator: ";"
        ).map {
            $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "."))
        }
        #expect(rows == entries)
        #expect(rows.map { Int32($0.split(separator: " ")[0]) } == ControlCode.allCases.map(\.rawValue))
    }

    @Test func theEnginesListedAreTheEnginesIoTakes() throws {
        let text = try String(contentsOf: Self.readme, encoding: .utf8)
        #expect(text.contains("`--io \(IOEngineChoice.allCases.map(\.rawValue).joined(separator: "|"))`"))
        let help = try runWindowhost(["run", "--help"]).output
        for engine in IOEngineChoice.allCases { #expect(help.contains(engine.rawValue)) }
    }
}
