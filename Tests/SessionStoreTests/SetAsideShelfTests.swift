import BrowserModel
import Foundation
import IOUring
import SessionStore
import SystemPackage
import Testing

/// What a name under `ROOT/set-aside/` says: the reason and time the rename recorded, read back
/// from the name alone, and every name that must never become a path refused.
@Suite struct SetAsideShelfTests {
    static let root = FilePath("/r")
    static let window = UUID(uuidString: "6F9619FF-8B86-D011-B42D-00CF4FC964FF")!
    static let at = Date(timeIntervalSince1970: 1_795_000_000)

    @Test(arguments: SetAsideReason.allCases)
    func aNameTheHostMakesReadsBackItsWindowTimeAndReason(_ reason: SetAsideReason) throws {
        let name = SetAsideShelf.baseName(Self.window.uuidString, at: Self.at, reason: reason)
        for id in [name, name + "-2", name + "-17"] {
            let entry = try #require(SetAsideShelf.entry(named: id, kind: .directory, root: Self.root))
            #expect(entry.window == Self.window && entry.at == Self.at && entry.reason == reason, "\(id)")
            #expect(entry.path == Self.root.appending(DiskLayout.setAside).appending(id))
            #expect(entry.holdsWindowSession)
        }
    }

    /// Names of versions before the reason was recorded: the reason is told by what the entry
    /// is, or said to be unrecorded.
    @Test func namesWithoutAReasonAreReadByWhatTheEntryIs() throws {
        let stamp = SetAsideShelf.stamp(Self.at)
        let legacy = "\(Self.window.uuidString)-\(stamp)"
        #expect(SetAsideShelf.entry(named: legacy, kind: .directory, root: Self.root)?.reason == .unrecorded)
        #expect(SetAsideShelf.entry(named: legacy + "-2", kind: .directory, root: Self.root)?.reason == .unrecorded)
        #expect(SetAsideShelf.entry(named: legacy, kind: .symlink, root: Self.root)?.reason == .symlink)
        #expect(SetAsideShelf.entry(named: legacy, kind: .other, root: Self.root)?.reason == .badEntry)
        #expect(SetAsideShelf.entry(named: legacy, kind: .symlink, root: Self.root)?.holdsWindowSession == false)
        let handedOut = try #require(SetAsideShelf.entry(named: "handed-out-\(stamp)", kind: .file, root: Self.root))
        #expect(
            handedOut.reason == .damagedFile && handedOut.window == nil && handedOut.at == Self.at
                && !handedOut.holdsWindowSession)
        let foreign = try #require(SetAsideShelf.entry(named: "notes.txt", kind: .directory, root: Self.root))
        #expect(
            foreign.reason == .unrecorded && foreign.window == nil && foreign.at == nil && !foreign.holdsWindowSession)
        // A reason token that is only a prefix of the rest is no reason.
        #expect(
            SetAsideShelf.entry(named: legacy + "-crash-loopy", kind: .directory, root: Self.root)?.reason
                == .unrecorded)
    }

    @Test(arguments: [
        "", ".", "..", "../x", "a/b", "/abs", ".adopting-x", ".discarding-x", "a b", "a\u{0}b", "a\nb", "a\u{7f}", "é",
        String(repeating: "x", count: SetAsideShelf.maxIDBytes + 1),
    ])
    func anIDThatCouldNameAnotherPathIsRefused(_ id: String) throws {
        #expect(!SetAsideShelf.isValidID(id))
        #expect(SetAsideShelf.entry(named: id, kind: .directory, root: Self.root) == nil)
        #expect(try SetAsideShelf.entry(root: Self.root, id: id) == nil, "refused before any path is made")
    }

    /// Stamps are read by hand (no formatter per name): the same instant the formatter writes,
    /// over leap days and centuries, and nothing for a field out of range.
    @Test func aStampReadsBackAsTheInstantItWasWrittenFromAndNothingElseDoes() throws {
        for seconds in [0, 951_782_400, 1_709_164_800, 1_795_000_000, 4_107_542_399, 4_102_444_800] as [TimeInterval] {
            let date = Date(timeIntervalSince1970: seconds)
            let id = SetAsideShelf.baseName(Self.window.uuidString, at: date, reason: .symlink)
            #expect(SetAsideShelf.entry(named: id, kind: .symlink, root: Self.root)?.at == date, "\(id)")
        }
        for stamp in [
            "20261324T000000Z", "20260230T000000Z", "20250229T000000Z", "20261124T240000Z", "20261124T006000Z",
            "20261124T000060Z", "2026112AT000000Z", "20261124X000000Z", "20261124T000000z", "+2026124T000000Z",
        ] {
            let entry = SetAsideShelf.entry(
                named: "\(Self.window.uuidString)-\(stamp)-crash-loop", kind: .directory, root: Self.root)
            #expect(entry?.at == nil && entry?.reason == .unrecorded, "\(stamp)")
        }
    }

    @Test func anAdoptionMarkerNamesItsEntryAndWindowAndNothingElseParsesAsOne() throws {
        let id = SetAsideShelf.baseName(Self.window.uuidString, at: Self.at, reason: .crashLoop) + "-3"
        let target = UUID()
        let marker = SetAsideShelf.adoptionMarker(id: id, target: target)
        let parsed = try #require(SetAsideShelf.adoption(marker: marker))
        #expect(parsed.id == id && parsed.target == target)
        #expect(marker.utf8.count <= 255, "fits NAME_MAX with the longest id")
        #expect(
            SetAsideShelf.adoptionMarker(id: String(repeating: "x", count: SetAsideShelf.maxIDBytes), target: target)
                .utf8.count <= 255)
        #expect(SetAsideShelf.entry(named: marker, kind: .file, root: Self.root) == nil, "a marker is never an entry")
        for name in [
            id, ".adopting-", ".adopting-\(target.uuidString)", ".adopting-\(target.uuidString)-",
            ".adopting-\(target.uuidString)-../x", ".adopting-nope-\(id)",
        ] {
            #expect(SetAsideShelf.adoption(marker: name) == nil, "\(name)")
        }
    }
}
