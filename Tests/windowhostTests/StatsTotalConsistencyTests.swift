import Dispatch
import Foundation
import HostControl
import SystemPackage
import Testing

/// `stats` while saves land: the total is the sum of the windows it lists, in one reply. Each
/// window's counters in shared memory are read once per reply, so a save landing while the reply
/// is built shows in both or in neither.
@Suite(.serialized) struct StatsTotalConsistencyTests {
    @Test func theTotalSavesAreTheSumOfTheWindowsWhileSavesLand() throws {
        let root = temporaryRoot("stats-total")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 2)
        defer { if host.process.isRunning { host.kill9() } }
        let windows = host.windowIDs()
        try #require(windows.count == 2)
        let socket = host.socket
        let busy = DispatchGroup()
        for window in windows {
            let tab = try #require(host.open(window, "https://start.example/"))
            let id = try #require(UUID(uuidString: window))
            DispatchQueue.global().async(group: busy) {
                // Save delay 0: each navigation is a save of its own.
                for round in 0..<400 {
                    _ = ControlClient.call(
                        .window(id, .tab(.navigate(tab: tab, url: "https://next.example/\(round)"))),
                        socket: FilePath(socket), timeout: 10)
                }
            }
        }
        var polls = 0
        var torn: [String] = []
        while busy.wait(timeout: .now()) == .timedOut {
            let stats = try host.call(.stats(histogram: false)).decode(StatsReply.self)
            let sum = stats.windows.reduce(UInt64(0)) { $0 + $1.saves.saves }
            polls += 1
            if stats.total.saves.saves != sum { torn.append("total \(stats.total.saves.saves), windows \(sum)") }
        }
        #expect(polls > 20, "stats were asked while saves landed: \(polls) polls")
        #expect(torn.isEmpty, "\(torn.count) of \(polls) replies: \(torn.prefix(3))")
    }
}
