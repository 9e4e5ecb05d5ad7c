import Foundation
import Testing

@testable import HostControl
@testable import StatusServer
@testable import Supervisor

/// The dashboard's script keeps no list that grows with the host's age: every array it adds
/// to, and the event log it prepends to, is cut to a named limit; rows from the status are
/// sliced; a per-window map forgets a window whose card goes.
@Suite struct DashboardPageTests {
    private let script = DashboardPage.html

    /// The names of `receiver`s in the script written as `name.method(`.
    private func receivers(of method: String) -> Set<String> {
        Set(
            script.components(separatedBy: ".\(method)(").dropLast().compactMap { before in
                before.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "_" }).last.map(String.init)
            })
    }

    @Test func everyArrayItAddsToIsCutToANamedLimit() {
        let limits = [
            "events": DashboardPage.eventsKept, "points": DashboardPage.pointsKept,
        ]
        let pushed = receivers(of: "push")
        #expect(pushed == Set(limits.keys), "arrays the page grows: \(pushed.sorted())")
        for (name, limit) in limits {
            #expect(script.contains("while (\(name).length > \(limit)) \(name).shift();"), "\(name)")
        }
        #expect(
            DashboardPage.eventsKept == HostObservation.eventCapacity
                && DashboardPage.pointsKept == LiveFeed.historyCapacity)
    }

    @Test func theEventLogAndTheRowsFromTheStatusAreCut() {
        #expect(receivers(of: "prepend") == ["log"])
        #expect(
            script.contains("while (log.childElementCount > \(DashboardPage.eventLinesShown)) log.lastChild.remove();"))
        #expect(script.contains("status.set_aside.slice(0, \(DashboardPage.setAsideRowsShown))"))
        #expect(
            script.contains("status.set_aside.length - \(DashboardPage.setAsideRowsShown)")
                && script.contains("more: windowhost ctl set-aside lists them all"))
        #expect(script.contains("shown.slice(-\(DashboardPage.pointsDotted))"))
        #expect(!script.contains("\\#("), "every limit is put in the page")
    }

    /// Windows come and go with new UUIDs: a map by window forgets one whose card goes.
    @Test func aMapByWindowForgetsAClosedOne() {
        let maps = script.components(separatedBy: " = new Map()").dropLast().compactMap {
            $0.split(separator: " ").last.map(String.init)
        }
        #expect(Set(maps) == ["known", "restartsSeen"])
        for map in maps { #expect(script.contains("\(map).delete(uuid)"), "\(map)") }
    }
}
