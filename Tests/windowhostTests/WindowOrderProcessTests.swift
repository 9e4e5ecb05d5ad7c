import BrowserModel
import Foundation
import Glibc
import HostControl
import Supervisor
import Testing

/// Windows come back in their saved order however their restores finish: the first of three
/// windows holds 60 tabs of 60 KB, so it finishes restoring last after a SIGKILL of the
/// supervisor and its workers (it came back last, and `windows.order` was rewritten so).
@Suite(.serialized) struct WindowOrderProcessTests {
    @Test(.timeLimit(.minutes(10))) func aBigFirstWindowComesBackFirstAfterKills() throws {
        let root = temporaryRoot("window-order")
        defer { removeHostFiles(root) }
        var host = try HostProcess(root: root, scenes: 3)
        let saved = host.windowIDs()
        try #require(saved.count == 3)
        #expect(Self.order(root) == saved, "the first start writes the scenes' order")
        let url = "https://big.example/" + String(repeating: "q", count: 60_000 - 20)
        for _ in 0..<60 { try #require(host.open(saved[0], url) != nil) }
        for window in saved.dropFirst() { #expect(host.open(window, "https://small.example/") != nil) }
        for window in saved { #expect(host.call(.waitDurable(seq: nil), window: window).code == .ok) }

        for round in 0..<2 {
            let workers = host.windows().values.map(\.pid)
            host.kill9()
            #expect(
                waitFor({ !workers.contains(where: isRunning) }, seconds: 10), "the workers died with their supervisor")
            host = try HostProcess(root: root, scenes: 3)
            #expect(host.windowIDs() == saved, "round \(round): the windows reopen in their saved order")
            let status = try host.call(.status).decode(StatusReply.self)
            #expect(status.order == saved, "round \(round): status shows the saved order")
            #expect(Self.order(root) == saved, "round \(round): windows.order is not rewritten")
        }
        #expect(host.windows()[saved[0]]?.tabs == 60)
        #expect(host.terminate() == 0)
    }

    static func order(_ root: URL) -> [String] {
        let text = (try? String(contentsOf: root.appendingPathComponent(DiskLayout.order), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }
}
