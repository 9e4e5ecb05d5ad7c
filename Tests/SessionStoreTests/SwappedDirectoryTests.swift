import BrowserModel
import Foundation
import Glibc
import IOUring
import Platform
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

/// A hostile tester's find: while a window runs, its session directory, its window directory or
/// its journal is moved away (a symlink put in its place). The journal's descriptor still
/// writes, outside the root. A save is acknowledged only once its file is still the one at its
/// path, walked without following a symlink; otherwise it fails, and the retry writes a new
/// generation into a real directory where the old one belonged. Real files, real symlinks.
@Suite struct SwappedDirectoryTests {
    enum Swap: String, CaseIterable, CustomTestStringConvertible {
        case sessionDirectory, windowDirectory, journal
        var testDescription: String { rawValue }
    }

    @Test(arguments: Swap.allCases)
    func aSaveToAFileMovedOutOfTheRootFailsThenHealsAndEveryAcknowledgedTabRestores(_ swap: Swap) throws {
        try withSwappableWindow { root, elsewhere, store, clock in
            var urls: [String] = []
            for seq in UInt64(1)...2 {
                urls.append("https://before.example/\(seq)")
                try openTab(store, seq: seq, url: urls.last!)
                try store.waitUntilDurable(seq)
            }
            let session = store.regular.sessionDirectory
            let window = session.removingLastComponent()
            let moved: FilePath
            switch swap {
            case .sessionDirectory: moved = session
            case .windowDirectory: moved = window
            case .journal:
                moved = session.appending(
                    try #require(names(in: session).first { $0.hasPrefix(DiskLayout.journalPrefix) }))
            }
            try #require(rename(moved.string, elsewhere.string) == 0)
            if swap != .journal { try #require(symlink(elsewhere.string, moved.string) == 0) }
            let outside = names(in: swap == .journal ? elsewhere.removingLastComponent() : elsewhere)

            // Durable, but outside the root: not acknowledged.
            try openTab(store, seq: 3, url: "https://during.example/3")
            let error = try #require(throws: StoreError.self) { try store.waitUntilDurable(3) }
            #expect(error.errno == .staleNFSFileHandle, "\(error)")
            #expect("\(error)".contains(moved.string), "names the place: \(error)")
            #expect("\(error)".contains(swap == .journal ? "nothing" : "a symlink"), "says what is there: \(error)")
            #expect(store.durableSeq == 2)
            urls.append("https://during.example/3")

            // Heals by itself once the backoff passes: a new generation in a real directory.
            let retry = try #require(store.nextDeadline)
            clock.now = max(clock.now, retry)
            var turns = 0
            while store.durableSeq < 3, turns < 10 {
                _ = try store.poll(waiting: true)
                turns += 1
            }
            #expect(store.durableSeq == 3)
            #expect(store.failure == nil)
            urls.append("https://after.example/4")
            try openTab(store, seq: 4, url: urls.last!)
            try store.waitUntilDurable(4)
            #expect(
                lstatKind(window) == "directory" && lstatKind(session) == "directory",
                "real directories inside the root")

            // What was moved is kept as itself, its target untouched (the one refused append landed there).
            #expect(
                names(in: swap == .journal ? elsewhere.removingLastComponent() : elsewhere) == outside,
                "nothing outside created or removed")
            if swap != .journal {
                let damaged = moved.removingLastComponent().appending(DiskLayout.damagedDirectory)
                let setAside = try #require(
                    names(in: damaged).first { $0.hasPrefix(moved.lastComponent!.string + "-") })
                #expect(lstatKind(damaged.appending(setAside)) == "symlink", "moved aside as itself")
                #expect(readLink(damaged.appending(setAside)) == elsewhere.string)
            }

            let restarted = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try restarted.recover()
            #expect(restarted.regular.webStateList.webStates.map(\.url) == urls, "every acknowledged tab comes back")
        }
    }

    /// The window directory swapped while both Browsers hold tabs, and only the regular one
    /// saves after: the incognito session moved out of the root with it, so it too is written
    /// again from memory, though it changed nothing (a hostile tester lost its tabs that way).
    @Test func aSwappedWindowDirectoryRewritesTheBrowserThatDidNotSave() throws {
        try withSwappableWindow { root, elsewhere, store, clock in
            try openTab(store, seq: 1, url: "https://regular.example/1")
            try openTab(store, seq: 2, url: "https://incognito.example/2", incognito: true)
            try store.waitUntilDurable(2)
            let window = store.regular.sessionDirectory.removingLastComponent()
            try #require(rename(window.string, elsewhere.string) == 0)
            try #require(symlink(elsewhere.string, window.string) == 0)

            try openTab(store, seq: 3, url: "https://regular.example/3")
            #expect(throws: StoreError.self) { try store.waitUntilDurable(3) }
            var turns = 0
            while store.durableSeq < 3 || store.hasUnsavedChanges, turns < 20 {
                clock.now = max(clock.now, store.nextDeadline ?? clock.now)
                _ = try store.poll(waiting: true)
                turns += 1
            }
            #expect(store.durableSeq == 3 && !store.hasUnsavedChanges)

            let restarted = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try restarted.recover()
            #expect(
                restarted.regular.webStateList.webStates.map(\.url) == [
                    "https://regular.example/1", "https://regular.example/3",
                ])
            #expect(
                restarted.incognito.webStateList.webStates.map(\.url) == ["https://incognito.example/2"],
                "the Browser that did not save is back too")
        }
    }

    /// A Browser's own directory moved out of the root (a symlink to it in its place) after its
    /// last save, while only the other Browser saves: noticed at the other's next save and
    /// written again where it belongs, unasked, so a restart brings its acknowledged tabs back
    /// (found by a hostile tester: they were lost, the symlink set aside at the restart).
    @Test(arguments: BrowserKind.allCases)
    func aSwappedDirectoryOfTheBrowserThatDoesNotSaveIsWrittenAgain(idle: BrowserKind) throws {
        try withSwappableWindow { root, elsewhere, store, clock in
            try openTab(store, seq: 1, url: "https://regular.example/1")
            try openTab(store, seq: 2, url: "https://incognito.example/2", incognito: true)
            try store.waitUntilDurable(2)
            let directory = store.browser(idle).sessionDirectory
            try #require(rename(directory.string, elsewhere.string) == 0)
            try #require(symlink(elsewhere.string, directory.string) == 0)

            try openTab(store, seq: 3, url: "https://other.example/3", incognito: idle == .regular)
            try store.waitUntilDurable(3)
            var turns = 0
            while store.hasUnsavedChanges, turns < 20 {
                _ = try store.poll(waiting: true)
                turns += 1
            }
            #expect(!store.hasUnsavedChanges)
            let live = try WindowContents(store)

            let restarted = WindowStore(root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0)
            _ = try restarted.recover()
            #expect(try WindowContents(restarted) == live, "the Browser that did not save is back")
        }
    }

    /// A planted directory 100,000 levels deep, a symlink out of the root at the bottom:
    /// removed whole (no recursion to overflow the stack), by `NoFollow` and by the engine,
    /// with nothing outside touched. On tmpfs: ext4 here takes minutes for that depth.
    @Test func aVeryDeepTreeIsRemovedWithoutRecursionOrFollowingASymlink() throws {
        var template = Array("/dev/shm/windowhost-deep-XXXXXX".utf8CString)
        try #require(mkdtemp(&template) != nil)
        let base = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        defer { try? NoFollow.removeTree(base) }
        let canary = base.appending("canary")
        try #require(mkdir(canary.string, 0o700) == 0)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: canary.appending("keep").string))
        let removers: [(FilePath) throws -> Void] = [
            { try NoFollow.removeTree($0) }, { try SyncEngine().removeTree($0) },
        ]
        for (index, remove) in removers.enumerated() {
            let top = base.appending("deep-\(index)")
            try plantDeepTree(at: top, depth: 100_000, canary: canary)
            try remove(top)
            #expect(lstatKind(top) == nil)
        }
        #expect(names(in: canary) == ["keep"])
        #expect(FileManager.default.contents(atPath: canary.appending("keep").string) == Data("keep".utf8))
    }
}

/// `depth` nested directories (made relative to each other: the path is longer than PATH_MAX),
/// a file and a symlink to `canary` in the deepest.
private func plantDeepTree(at top: FilePath, depth: Int, canary: FilePath) throws {
    try #require(mkdir(top.string, 0o700) == 0)
    var current = open(top.string, O_RDONLY | O_DIRECTORY)
    try #require(current >= 0)
    for _ in 0..<depth {
        try #require(mkdirat(current, "d", 0o700) == 0)
        let next = openat(current, "d", O_RDONLY | O_DIRECTORY)
        close(current)
        try #require(next >= 0)
        current = next
    }
    defer { close(current) }
    let file = openat(current, "f", O_CREAT | O_WRONLY, 0o600)
    try #require(file >= 0)
    close(file)
    try #require(symlinkat(canary.string, current, "link") == 0)
}

private func openTab(_ store: WindowStore, seq: UInt64, url: String, incognito: Bool = false) throws {
    let browser = incognito ? store.incognito : store.regular
    var history = NavigationHistory()
    history.commit(NavigationItem(url: url, title: url, timestamp: Timestamp(microsecondsSinceEpoch: 1)))
    try store.apply(seq: seq) {
        try browser.webStateList.insert(
            WebState(
                id: browser.profile.makeWebStateID(), creationTime: Timestamp(microsecondsSinceEpoch: 1),
                history: history))
    }
}

private func names(in directory: FilePath) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: directory.string)) ?? []).sorted()
}

private func readLink(_ path: FilePath) -> String? {
    try? FileManager.default.destinationOfSymbolicLink(atPath: path.string)
}

/// A window recovered on a real, empty root under a temporary directory, on a clock the test
/// moves; `elsewhere` is a free path beside the root, where a test moves what it swaps out.
private func withSwappableWindow(
    _ body: (_ root: FilePath, _ elsewhere: FilePath, _ store: WindowStore, _ clock: ManualClock) throws -> Void
) throws {
    try withTemporaryDirectory { base in
        let root = base.appending("root")
        try #require(mkdir(root.string, 0o700) == 0)
        let clock = ManualClock()
        let store = WindowStore(
            root: root, windowID: windowID, engine: SyncEngine(), saveDelayMilliseconds: 0, clock: { clock.now })
        _ = try store.recover()
        try body(root, base.appending("elsewhere"), store, clock)
    }
}
