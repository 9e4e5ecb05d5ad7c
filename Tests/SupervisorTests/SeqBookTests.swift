import HostLimits
import Testing

@testable import Supervisor

/// One window's seqs without processes: what a worker's restart, a reply, a lost range and a
/// floor probe do to them, as the supervisor drives the book.
@Suite struct SeqBookTests {
    /// A worker replied up to 7, was killed with 5 durable, and the next one restored 5: the
    /// seqs above up to the floor it was given are lost, and a reply after shows no seq below 7.
    @Test func aRestartThatLostRepliedSeqsNamesThemAndShowsNoLowerSeq() {
        var book = SeqBook()
        book.raiseFloorForSpawn(published: 0)
        #expect(book.floor == 0)
        book.apply(7)
        #expect(book.show(7) == 7 && book.highest == 7)
        book.raiseFloorForSpawn(published: 6)
        #expect(book.floor == 7, "the next worker numbers above every seq shown")
        book.restored(5)
        #expect(book.applied == 5 && book.highest == 7)
        #expect(book.loseAboveRestored() == 6...7)
        #expect(book.lost.ranges == [6...7])
        #expect(book.show(5) == 7, "a command that changes nothing shows the highest seq shown before")
        book.apply(8)
        #expect(book.show(8) == 8)
        #expect(book.loseAboveRestored() == nil, "nothing above what it holds is lost")
    }

    @Test func theFloorCoversWhatTheDeadWorkerPublished() {
        var book = SeqBook()
        book.apply(3)
        book.raiseFloorForSpawn(published: 9)
        #expect(book.floor == 9, "status showed 9: the next worker numbers above it")
        #expect(book.ceiling(published: 4) == HandedOutCeiling(seq: 9, tab: 0))
    }

    @Test func aHandedOutEntryGivesTheFirstWorkersFloorsAndLostSeqs() {
        var lost = LostSeqs()
        lost.insert(10...12)
        var book = SeqBook(handedOut: HandedOutWindow(ceiling: HandedOutCeiling(seq: 4096, tab: 300), lost: lost))
        #expect(book.floor == 4096 && book.tab == 300 && book.lost.ranges == [10...12])
        book.restored(11)
        book.forgetLost(seq: 11)
        #expect(book.lost.ranges == [10...10, 12...12], "only the seq restored is taken out")
        book.forgetLost(10...10)
        #expect(book.lost.ranges == [12...12])
        #expect(book.loseAboveRestored() == 12...4096)
        #expect(book.lost.ranges == [12...4096], "touching ranges merge")
    }

    @Test func tabIdsOnlyRise() {
        var book = SeqBook()
        book.showTab(5)
        book.showTab(3)
        #expect(book.tab == 5)
        #expect(book.ceiling(published: 0).tab == 5)
    }

    /// A floor probe's jump is above what was restored and every floor before, and stops at the
    /// maximums.
    @Test func aProbeJumpsBothFloorsAndStopsAtTheMaximums() {
        var book = SeqBook()
        book.jumpFloors(restoredSeq: 20, restoredTab: 7, by: 1000)
        #expect(book.floor == 1020 && book.tab == 1007)
        book.jumpFloors(restoredSeq: 5, restoredTab: 2, by: 1000)
        #expect(book.floor == 2020 && book.tab == 2007, "above the floors before, not what this probe restored")
        book.jumpFloors(restoredSeq: Limits.maxCommandSeq - 1, restoredTab: Limits.maxWebStateID - 1, by: 1000)
        #expect(book.floor == Limits.maxCommandSeq && book.tab == Limits.maxWebStateID)
    }
}
