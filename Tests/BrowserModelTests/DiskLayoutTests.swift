import BrowserModel
import Foundation
import SystemPackage
import Testing

/// The names `DiskLayout` gives are the ones sessions written by every earlier version carry:
/// spelled out here on purpose, as a second copy the owner must keep agreeing with.
@Suite struct DiskLayoutTests {
    static let window = UUID(uuidString: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")!

    @Test func pathsAreTheOnesOldSessionsLiveAt() {
        let root: FilePath = "/state"
        #expect(
            DiskLayout.windowDirectory(root: root, id: Self.window)
                == "/state/windows/0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0")
        #expect(
            DiskLayout.browserDirectory(root: root, id: Self.window, kind: .regular)
                == "/state/windows/0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0/regular")
        #expect(
            DiskLayout.browserDirectory(root: root, id: Self.window, kind: .incognito)
                == "/state/windows/0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0/incognito")
        #expect(DiskLayout.windowDirectory(root: root, name: "not-a-uuid") == "/state/windows/not-a-uuid")
        #expect(
            [DiskLayout.order, DiskLayout.orderTemporary, DiskLayout.setAside, DiskLayout.lock] == [
                "windows.order", "windows.order.tmp", "set-aside", "supervisor.lock",
            ])
    }

    /// A Browser's session is where the layout says, for both profiles.
    @Test func aProfilePlacesItsSessionsByTheLayout() {
        let profile = Profile(stateDirectory: "/state")
        for profile in [profile, profile.offTheRecordProfile] {
            #expect(
                profile.sessionDirectory(for: Self.window)
                    == DiskLayout.browserDirectory(root: "/state", id: Self.window, kind: profile.kind))
        }
    }

    @Test func generationNamesAreSixteenHexDigitsAndReadBack() {
        #expect(DiskLayout.snapshotName(0x1a) == "snapshot-000000000000001a")
        #expect(DiskLayout.journalName(.max) == "journal-ffffffffffffffff")
        for generation: UInt64 in [0, 1, 0xabc, .max] {
            #expect(
                DiskLayout.generation(of: DiskLayout.snapshotName(generation), prefix: DiskLayout.snapshotPrefix)
                    == generation)
            #expect(
                DiskLayout.generation(of: DiskLayout.journalName(generation), prefix: DiskLayout.journalPrefix)
                    == generation)
        }
        for name in [
            "snapshot-1a", "snapshot-000000000000001a.tmp", "journal-000000000000001a", "snapshot-00000000000000zz",
        ] {
            #expect(DiskLayout.generation(of: name, prefix: DiskLayout.snapshotPrefix) == nil, "\(name)")
        }
    }
}
