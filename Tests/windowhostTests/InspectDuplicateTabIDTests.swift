import BrowserModel
import Foundation
import IOUring
import SessionStore
import SystemPackage
import TestSupport
import Testing

/// `inspect` says a tab id held twice is damage and exits 65, as recovery treats it: in the two
/// Browsers of one window through a journal record (recovery sets that journal aside) or through
/// their snapshots. Before, `inspect` showed both tabs under one id and exited 0: each Browser
/// was read into a list of its own, which no check of the window's other Browser reached.
@Suite struct InspectDuplicateTabIDTests {
    private let windowID = UUID(uuidString: "0D0D0D0D-0000-4000-8000-000000000011")!

    @Test(arguments: [nil, 1] as [Int?]) func inspectReportsATabIDInBothBrowsersAndExits65(compactAfterRecords: Int?)
        throws
    {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "inspect-dup-\(getpid())-\(compactAfterRecords ?? 0)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { removeTestRoot(directory.path) }
        let root = FilePath(directory.path)
        try writeWindowWithATabIDInBothBrowsers(root, windowID: windowID, compactAfterRecords: compactAfterRecords)

        let windows = try SessionInspector.inspect(root: root)
        let window = try #require(windows.first)
        #expect(window.isDamaged, "\(window)")
        let damage = window.damaged.map(\.error) + window.browsers.flatMap { $0.damaged.map(\.error) }
        #expect(damage.contains { $0.contains("tab identifier 5 appears twice") }, "\(damage)")
        if compactAfterRecords == nil {
            // The journal record is where recovery stops: shown as recovery keeps the window.
            #expect(window.browsers.flatMap { $0.tabs.map(\.id) } == [5, 7], "\(window)")
        }

        let result = try runWindowhost(["inspect", directory.path])
        #expect(result.status == 65, "\(result.output)")
        #expect(
            result.output.contains("CORRUPT") && result.output.contains("tab identifier 5 appears twice"),
            "\(result.output)")
    }
}
