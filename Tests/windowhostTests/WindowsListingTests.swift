import BrowserModel
import Foundation
import Glibc
import Testing

/// Listing `windows/` fails for want of descriptors (a real EMFILE: `prlimit` caps the
/// supervisor's descriptors, from a few to enough). Before, the supervisor took the failure
/// for an empty `windows/`, started knowing no windows and would rewrite `windows.order`
/// without them. Now, at every cap, `run` either starts or stops before anything is written;
/// at the caps where a listing is what fails, it exits 74 saying so (`set-aside/` is listed
/// first, for adoptions to undo, then `windows/`).
@Suite struct WindowsListingTests {
    @Test(.timeLimit(.minutes(10))) func aFailingListingStopsRunInsteadOfStartingEmpty() throws {
        let root = temporaryRoot("listing")
        defer { removeHostFiles(root) }
        let windows = root.appendingPathComponent(DiskLayout.windows)
        let ids = [UUID(), UUID()].map(\.uuidString).sorted().reversed()
        for id in ids {
            try FileManager.default.createDirectory(
                at: windows.appendingPathComponent(id), withIntermediateDirectories: true)
        }
        try #require(chmod(root.path, 0o700) == 0 && chmod(windows.path, 0o700) == 0)
        let order = root.appendingPathComponent(DiskLayout.order)
        let saved = Data(ids.map { $0 + "\n" }.joined().utf8)
        try saved.write(to: order)
        try #require(chmod(order.path, 0o600) == 0)

        var listingFailures = 0
        for cap in 4...24 {
            let run = try runWindowhostBounded(
                ["run", "--root", root.path, "--scenes", "0", "--io", "sync"],
                prefix: ["prlimit", "--nofile=\(cap):\(cap)"],
                until: "ready ", stoppingWith: SIGTERM)
            #expect(try Data(contentsOf: order) == saved, "cap \(cap): \(run.output)")
            let listings = [windows.path, root.appendingPathComponent(DiskLayout.setAside).path]
            if run.status == 74, listings.contains(where: { run.output.contains("list \($0)") }) {
                listingFailures += 1
            }
            #expect(run.status == nil || run.status != 0, "cap \(cap): \(run.output)")
        }
        #expect(listingFailures > 0, "some cap makes the listing itself fail")
    }
}
