import Foundation
import Testing

/// What `ctl save` prints for a script: the seq the save covers, and with `--wait` what is
/// durable, as `wait-durable` prints it (it printed nothing).
@Suite struct SaveOutputTests {
    @Test func saveAndSaveWaitPrintWhatTheyCover() throws {
        let root = temporaryRoot("save-output")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1, saveDelay: 60_000)
        defer { _ = host.terminate() }
        let window = try #require(host.windowIDs().first)
        for page in 1...3 { #expect(host.open(window, "https://save-output.example/\(page)") != nil) }
        let save = try host.ctl(["save", "--window", window])
        #expect(save.status == 0 && save.output == "seq 3\n", "\(save)")
        let waited = try host.ctl(["save", "--wait", "--window", window])
        #expect(waited.status == 0 && waited.output == "durable 3\n", "\(waited)")
        let json = try host.ctl(["save", "--wait", "--window", window, "--json"])
        #expect(json.status == 0 && json.output.contains("\"durable_seq\":3"), "\(json)")
    }
}
