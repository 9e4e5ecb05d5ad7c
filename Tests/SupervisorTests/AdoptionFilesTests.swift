import BrowserModel
import Foundation
import Glibc
import IOUring
import SessionStore
import SystemPackage
import TestSupport
import Testing

@testable import Supervisor

/// The moves behind `ctl adopt` and `ctl discard`, on a real disk: each step leaves either the
/// entry where it was or the marker that sends it back.
@Suite struct AdoptionFilesTests {
    /// A root with one window session set aside, and a canary outside it.
    struct Shelf {
        let base: FilePath
        let root: FilePath
        let files: SupervisorFiles
        let entry: SetAsideEntry
        let canary: FilePath

        init() throws {
            var template = Array("/tmp/windowhost-adoption-XXXXXX".utf8CString)
            try #require(mkdtemp(&template) != nil)
            base = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
            root = base.appending("root")
            canary = base.appending("canary")
            files = SupervisorFiles(root: root)
            let window = UUID()
            try SupervisorFiles.makeDirectory(files.windowDirectory(window).appending(BrowserKind.regular.rawValue))
            try SupervisorFiles.makeDirectory(canary)
            try Data("tabs\n".utf8).write(
                to: URL(fileURLWithPath: files.windowDirectory(window).appending("regular/journal-1").string))
            try #require(mkdir(canary.string, 0o700) == 0 || errno == EEXIST)
            try Data("keep".utf8).write(to: URL(fileURLWithPath: canary.appending("file").string))
            let path = try #require(try files.setAside(window, reason: .crashLoop, at: Date()))
            entry = try #require(try SetAsideShelf.entry(root: root, id: path.lastComponent!.string))
        }

        func names(_ directory: FilePath) -> [String] {
            (try? FileManager.default.contentsOfDirectory(atPath: directory.string).sorted()) ?? []
        }
        func remove() { removeTestRoot(base.string) }
    }

    @Test func aKillAfterTheMoveSendsTheSessionBackToItsEntryAtTheNextStart() throws {
        let shelf = try Shelf()
        defer { shelf.remove() }
        let target = UUID()
        try shelf.files.beginAdoption(shelf.entry, as: target)
        #expect(shelf.names(shelf.files.windows) == [target.uuidString])
        #expect(shelf.names(shelf.files.setAside) == [SetAsideShelf.adoptionMarker(id: shelf.entry.id, target: target)])
        // What a supervisor killed here leaves; the next one starts with this.
        let ended = try shelf.files.recoverAdoptions().returned
        #expect(ended.map(\.id) == [shelf.entry.id] && ended.map(\.target) == [target])
        #expect(shelf.names(shelf.files.setAside) == [shelf.entry.id], "back under its own id, the marker gone")
        #expect(shelf.names(shelf.files.windows).isEmpty)
        #expect(
            FileManager.default.contents(atPath: shelf.entry.path.appending("regular/journal-1").string)
                == Data("tabs\n".utf8))
    }

    @Test func aKillBeforeTheMoveLeavesTheEntryAndOnlyTheMarkerGoes() throws {
        let shelf = try Shelf()
        defer { shelf.remove() }
        let target = UUID()
        // The marker as `beginAdoption` writes it, the rename not yet made.
        let marker = shelf.files.setAside.appending(SetAsideShelf.adoptionMarker(id: shelf.entry.id, target: target))
        let identity = try SupervisorFiles.identity(ofDirectory: shelf.entry.path)
        try Data(SetAsideShelf.markerContent(device: identity.device, inode: identity.inode)).write(
            to: URL(fileURLWithPath: marker.string))
        #expect(try shelf.files.recoverAdoptions().returned.isEmpty, "nothing to send back")
        #expect(shelf.names(shelf.files.setAside) == [shelf.entry.id])
        #expect(shelf.names(shelf.files.windows).isEmpty)
    }

    @Test func aFinishedAdoptionLeavesAWindowAndNoEntry() throws {
        let shelf = try Shelf()
        defer { shelf.remove() }
        let target = UUID()
        try shelf.files.beginAdoption(shelf.entry, as: target)
        try shelf.files.endAdoption(shelf.entry.id, as: target, returning: false)
        #expect(shelf.names(shelf.files.setAside).isEmpty)
        #expect(shelf.names(shelf.files.windows) == [target.uuidString])
        #expect(try shelf.files.recoverAdoptions().returned.isEmpty)
    }

    /// Plain rename(2) silently replaces an empty directory: an adoption never replaces
    /// whatever has the window's name, and leaves the entry where it was, no marker behind.
    @Test func anAdoptionNeverReplacesWhatHasTheWindowsName() throws {
        let shelf = try Shelf()
        defer { shelf.remove() }
        let target = UUID()
        try SupervisorFiles.makeDirectory(shelf.files.windowDirectory(target))
        #expect(throws: Errno.fileExists) { try shelf.files.beginAdoption(shelf.entry, as: target) }
        #expect(shelf.names(shelf.files.setAside) == [shelf.entry.id])
        #expect(shelf.names(shelf.files.windowDirectory(target)).isEmpty)
    }

    /// A discarded entry is gone from the listing in one rename, synced; its bytes go off the
    /// supervisor's thread, a symlink inside removed as itself, its target untouched.
    @Test func aDiscardIsOneRenameAndTheRemovalNeverFollowsASymlink() throws {
        let shelf = try Shelf()
        defer { shelf.remove() }
        try #require(symlink(shelf.canary.string, shelf.entry.path.appending("regular/link").string) == 0)
        let away = try shelf.files.discard(shelf.entry)
        #expect(try SetAsideShelf.entries(root: shelf.root).total == 0)
        #expect(shelf.files.discardedLeftovers() == [away])
        shelf.files.removeDiscarded(shelf.files.discardedLeftovers())
        let deadline = Date().addingTimeInterval(10)
        while !shelf.names(shelf.files.setAside).isEmpty, Date() < deadline { usleep(10_000) }
        #expect(shelf.names(shelf.files.setAside).isEmpty)
        #expect(FileManager.default.contents(atPath: shelf.canary.appending("file").string) == Data("keep".utf8))
    }
}
