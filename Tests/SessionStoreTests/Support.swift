import BrowserModel
import Foundation
import IOUring
import Platform
import SystemPackage
import TestSupport
import Testing

@testable import SessionStore

let simulatedRoot = FilePath("/sim")
let windowID = UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!

/// Both Browsers' contents, every history realized: what must survive.
struct WindowContents: Equatable, CustomStringConvertible {
    let regular: TabListContents
    let incognito: TabListContents

    init(_ store: WindowStore) throws {
        regular = try TabListContents(store.regular.webStateList, realizing: true)
        incognito = try TabListContents(store.incognito.webStateList, realizing: true)
    }

    var description: String { "regular \(regular) incognito \(incognito)" }
}

/// Seeded browsing over a window: mostly in the regular Browser, one command in four incognito.
struct WindowBrowsing {
    private var random: SeededGenerator
    private var regular: RandomBrowsing
    private var incognito: RandomBrowsing
    /// One command in this many goes to the incognito Browser.
    private let incognitoOneIn: Int

    init(seed: UInt64, maxTabs: Int = 12, incognitoOneIn: Int = 4) {
        random = SeededGenerator(seed: seed)
        self.incognitoOneIn = incognitoOneIn
        regular = RandomBrowsing(seed: seed &* 31 &+ 1, maxTabs: maxTabs)
        incognito = RandomBrowsing(seed: seed &* 31 &+ 2, maxTabs: maxTabs / 2)
    }

    /// One command, in the Browser given or else one chosen at random.
    mutating func step(_ store: WindowStore, seq: UInt64, incognito forced: Bool? = nil) throws {
        let useIncognito = forced ?? (Int.random(in: 0..<incognitoOneIn, using: &random) == 0)
        var browsing = useIncognito ? incognito : regular
        let browser = useIncognito ? store.incognito : store.regular
        try store.apply(seq: seq) { try browsing.step(browser.webStateList, profile: browser.profile) }
        if useIncognito { incognito = browsing } else { regular = browsing }
    }

    mutating func coin(_ outOf: Int) -> Bool { Int.random(in: 0..<outOf, using: &random) == 0 }
}

/// The window a power cut now leaves on `disk` (cut in place: pass a copy to go on with the
/// original), recovered: what a test compares with what was acknowledged.
func contentsAfterPowerCut(_ disk: FaultEngine, options: StoreOptions = pipelinedAtOnce) throws -> WindowContents {
    disk.powerCut()
    return try WindowContents(try simulatedWindow(disk, options: options).0)
}

/// Expects the window on `disk` to come back as `live` after a kill (no damage reported) and,
/// apart, after a power cut, each on a copy of the disk as it is now.
func expectKillAndPowerCutKeep(
    _ live: WindowContents, on disk: FaultEngine, options: StoreOptions,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let killed = disk.copy()
    killed.processKilled()
    let (afterKill, recovery) = try simulatedWindow(killed, options: options)
    #expect(recovery.regular.damaged.isEmpty, "\(recovery.regular.damaged)", sourceLocation: sourceLocation)
    #expect(try WindowContents(afterKill) == live, sourceLocation: sourceLocation)
    #expect(try contentsAfterPowerCut(disk.copy(), options: options) == live, sourceLocation: sourceLocation)
}

/// A monotonic clock the test moves by hand.
final class ManualClock {
    var now: UInt64 = 1_000_000_000
    func advance(milliseconds: UInt64) { now += milliseconds * 1_000_000 }
}

/// Options that start a save at every turn with room (no `GroupCommit`): what the tests that
/// hold writes in flight (`FaultEngine.completionOrder`) and build depth by hand rely on.
let pipelinedAtOnce = StoreOptions(groupCommit: nil)

/// A window on the simulated disk, recovered and ready.
func simulatedWindow(
    _ engine: FaultEngine, options: StoreOptions = pipelinedAtOnce, delay: UInt64 = 0, clock: ManualClock? = nil
) throws -> (WindowStore, WindowRecovery) {
    let store = WindowStore(
        root: simulatedRoot, windowID: windowID, engine: engine, options: options, saveDelayMilliseconds: delay,
        keys: engine.keyring.keys(for: windowID), clock: clock.map { clock in { clock.now } } ?? monotonicNanoseconds)
    let recovery = try store.recover()
    return (store, recovery)
}

/// What `path` is, by lstat (the test's own look, not the code under test's).
func lstatKind(_ path: FilePath) -> String? {
    var status = stat()
    guard lstat(path.string, &status) == 0 else { return nil }
    switch status.st_mode & S_IFMT {
    case S_IFREG: return "file"
    case S_IFDIR: return "directory"
    case S_IFLNK: return "symlink"
    default: return "other"
    }
}

/// A tab of one page, opened at a fixed time.
func newTab(_ url: String, _ profile: Profile) -> WebState {
    let time = Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000)
    var history = NavigationHistory()
    _ = history.commit(NavigationItem(url: url, timestamp: time))
    return WebState(id: profile.makeWebStateID(), creationTime: time, history: history)
}

/// Sum of what the simulated disk's files hold now.
func totalBytes(_ engine: FaultEngine) -> Int {
    func walk(_ path: FilePath) -> Int {
        guard let entries = try? engine.directoryEntries(path) else { return engine.contents(of: path)?.count ?? 0 }
        return entries.reduce(0) { $0 + walk(path.appending($1)) }
    }
    return walk(simulatedRoot)
}

extension FaultEngine {
    /// Every fault a test set (failing operations, a full disk, held completions) lifted.
    func removeFaults() {
        failures = [:]
        capacity = nil
        completionOrder = nil
    }
}
