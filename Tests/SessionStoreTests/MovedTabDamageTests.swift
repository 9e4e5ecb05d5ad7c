import BrowserModel
import IOUring
import SessionFormat
import TestSupport
import Testing

@testable import SessionStore

/// A tab asked for its stored history to move to another window (`storedHistoryBytes`) while
/// its copy in the newest snapshot fails its checks: as any realization, the generation before
/// gives it, and the whole history moves.
@Suite struct MovedTabDamageTests {
    @Test func aDamagedNewestCopyGivesTheHistoryOfTheGenerationBefore() throws {
        let (engine, _, _) = try DoubleDamageTests.prepared(navigatingA: false)
        let snapshots = try #require(try engine.directoryEntries(DoubleDamageTests.directory)).filter {
            $0.hasPrefix(DiskLayout.snapshotPrefix) && !$0.hasSuffix(DiskLayout.temporarySuffix)
        }.sorted()
        let newest = try #require(snapshots.last)
        #expect(try DoubleDamageTests.damageTabAInEverySnapshot(engine, only: newest) == 1)
        let (restored, _) = try simulatedWindow(engine)
        let tabA = try restored.regular.webStateList.webState(at: 0)
        #expect(!tabA.isRealized, "restored lazily: the damage is not met yet")
        let bytes = try restored.storedHistoryBytes(of: tabA, in: .regular)
        let history = try #require(tabA.loadedHistory, "realized from the generation before")
        #expect(
            history.items.map(\.url) == [
                DoubleDamageTests.lostURL, "https://lost.example/second", "https://a.example/third",
            ])
        #expect(bytes == history.storageBytes(as: tabA.id))
    }
}
