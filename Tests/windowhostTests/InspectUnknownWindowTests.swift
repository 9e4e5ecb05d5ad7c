import BrowserModel
import Foundation
import TestSupport
import Testing

/// `inspect --window` naming a window the root does not hold exits 65 naming it, as `ctl dump
/// --window` answers an unknown window (before: exit 0, "no windows under ROOT", the same as
/// an empty root).
@Suite struct InspectUnknownWindowTests {
    @Test func inspectOfAWindowTheRootDoesNotHoldExits65NamingIt() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "inspect-unknown-\(getpid())")
        let held = UUID(uuidString: "0D0D0D0D-0000-4000-8000-000000000021")!
        let unknown = UUID(uuidString: "0D0D0D0D-0000-4000-8000-000000000022")!
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent(DiskLayout.windows).appendingPathComponent(held.uuidString),
            withIntermediateDirectories: true)
        defer { removeTestRoot(directory.path) }

        for json in [false, true] {
            let result = try runWindowhost(
                ["inspect", directory.path, "--window", unknown.uuidString] + (json ? ["--json"] : []))
            #expect(result.status == 65, "json \(json): \(result.output)")
            #expect(result.output.contains("no window \(unknown.uuidString)"), "json \(json): \(result.output)")
        }
        // The window it holds is shown, and a window spelled in lowercase is that window.
        let shown = try runWindowhost(["inspect", directory.path, "--window", held.uuidString.lowercased()])
        #expect(shown.status == 0, "\(shown.output)")
        #expect(shown.output.contains("window \(held.uuidString)"), "\(shown.output)")
    }
}
