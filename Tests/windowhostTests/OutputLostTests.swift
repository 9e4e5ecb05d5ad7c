import Foundation
import Glibc
import Testing

/// A command whose results went nowhere does not exit 0: a script would take output it never got
/// for a success.
@Suite struct OutputLostTests {
    /// Runs `windowhost ARGUMENTS` with its standard output on /dev/full (every write fails with
    /// ENOSPC, as under a redirect to a full disk): its status and its standard error.
    private func runOnAFullDisk(_ arguments: [String]) throws -> (status: Int32, errors: String) {
        let (status, errors) = try runWindowhost(arguments, prefix: ["sh", "-c", "exec \"$@\" >/dev/full", "sh"])
        return (status, errors)
    }

    @Test func demoInspectAndStressExit74WhenTheirOutputCannotBeWritten() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("windowhost-test-\(UUID().uuidString)")
        defer { removeHostFiles(root) }
        let demo = try runOnAFullDisk(["demo", "--root", root.path, "--commands", "20", "--save-delay", "0"])
        #expect(demo.status == 74, "\(demo.errors)")
        #expect(demo.errors.contains("standard output could not be written"), "\(demo.errors)")
        // The demo itself ran: what it wrote is on disk, and read back when output has somewhere to go.
        #expect(try runWindowhost(["inspect", root.path]).status == 0)
        let inspect = try runOnAFullDisk(["inspect", root.path])
        #expect(inspect.status == 74, "\(inspect.errors)")
        let stress = try runOnAFullDisk(["stress", "--scenes", "1", "--kills", "2", "--seed", "5"])
        #expect(stress.status == 74, "\(stress.errors)")
    }

    /// The reader gone before the command writes: it never exits 0, whether the loss is seen
    /// by SIGPIPE (a stop asked: 128 + 13) or at its last flush (74).
    @Test func aReaderGoneBeforeTheDemoPrintsIsNoSuccess() throws {
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        let process = Process()
        process.executableURL = windowhostBinary
        process.arguments = ["demo", "--commands", "20", "--save-delay", "0"]
        process.standardOutput = pipe.fileHandleForWriting
        process.standardError = FileHandle.nullDevice
        try process.run()
        try pipe.fileHandleForWriting.close()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect([74, 128 + SIGPIPE].contains(process.terminationStatus), "exit \(process.terminationStatus)")
    }
}
