import Foundation
import Testing

@Suite struct StressStartFailureTests {
    /// A supervisor that refuses to start says why in the campaign's own error: the log it
    /// points at is gone with the campaign's temporary root.
    @Test func aSocketPathTooLongIsNamedInTheCampaignsError() throws {
        let long = FileManager.default.temporaryDirectory.appendingPathComponent(
            "windowhost-test-" + String(repeating: "x", count: 100))
        try FileManager.default.createDirectory(at: long, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: long) }
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = long.path
        let (status, output) = try runWindowhost(
            ["stress", "--scenes", "1", "--kills", "1", "--seed", "3"], environment: environment)
        #expect(status == 69, "\(output)")
        #expect(output.contains("the supervisor did not get ready (exit 64)"), "\(output)")
        #expect(output.contains("is too long for a Unix socket"), "\(output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: long.path).isEmpty, "the temporary root is removed")
    }
}
