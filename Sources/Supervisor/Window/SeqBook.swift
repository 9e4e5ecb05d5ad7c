import HostLimits
import SessionStore

/// One window's numbers, the ones a client may have seen and a worker must never hand out
/// twice: the seq its worker holds (`applied`), the highest seq a reply showed (`shown`), the
/// floor its worker numbers above (`floor`), the highest tab id shown (`tab`), the seqs lost
/// with a worker (`lost`), and from them the ceiling `handed-out` must cover (`ceiling`).
///
/// Every change goes through a method that checks the book's invariants after it: `shown`,
/// `floor` and `tab` never go down, every lost seq lies at or below the floor (each range was
/// named lost between a restored seq and the floor of the worker that restored it), and a
/// spawned worker's floor is at or above every seq shown. The last is a `precondition`: a
/// worker numbering at or below a seq a client saw hands that seq out again, for another
/// command, and a durable wait for the first then answers for the second.
struct SeqBook: Equatable {
    /// The window's seq as its worker holds it (replies, shared memory): what durable waits
    /// wait for. A restarted worker's is the seq it restored.
    private(set) var applied: UInt64 = 0
    /// The highest seq a reply showed: no reply shows a lower one (`show`).
    private(set) var shown: UInt64 = 0
    /// The seq floor the worker now serving was given (`WorkerFloor`): it numbers changes above
    /// it. Raised at each spawn to every seq a client may have seen; the first worker a
    /// supervisor starts gets the window's `handed-out` ceiling, above every seq a dead
    /// supervisor may have shown.
    private(set) var floor: UInt64 = 0
    /// The highest tab id a reply carried (at first, the `handed-out` ceiling): a restarted
    /// worker never hands out one up to it.
    private(set) var tab: Int64 = 0
    /// Seqs replied to and then lost with the worker that applied them (killed before they
    /// were durable), oldest first: no durable answer covers them (`durableReply`).
    private(set) var lost = LostSeqs()

    init() {}

    /// The book of a window `handed-out` has an entry for: its first worker numbers above the
    /// entry's ceilings, and the seqs it names lost stay lost.
    init(handedOut record: HandedOutWindow) {
        floor = record.ceiling.seq
        tab = record.ceiling.tab
        lost = record.lost
        checkInvariants()
    }

    /// The highest seq the window has: applied by its worker, or shown by a reply.
    var highest: UInt64 { max(applied, shown) }

    /// The highest seq and tab id anything showed of the window, given the seq its worker last
    /// published (`status` shows it): what `handed-out` must cover. The floor covers what a
    /// supervisor before showed.
    func ceiling(published: UInt64) -> HandedOutCeiling {
        HandedOutCeiling(seq: max(floor, shown, applied, published), tab: tab)
    }

    /// The worker's seq, from a reply or its stats: it only rises while one worker serves.
    mutating func apply(_ seq: UInt64) {
        applied = max(applied, seq)
        assert(applied >= seq, "the worker's seq only rises while it serves")
        checkInvariants()
    }

    /// A worker restored `seq`: below the seqs the last worker applied if it lost them (the
    /// floor keeps them from being handed out again).
    mutating func restored(_ seq: UInt64) {
        applied = seq
        assert(floor >= shown, "a restore lowers applied, never the floor above what was shown")
        checkInvariants()
    }

    /// The seq a reply shows for a worker's `applied`: the window's place in its order of
    /// commands. It is the worker's own but after a restart that lost replied commands (their
    /// seqs are above what it restored), when a command that changes nothing shows the highest
    /// seq shown before, so no reply shows a seq below one before. Raises `shown`.
    mutating func show(_ applied: UInt64) -> UInt64 {
        shown = max(shown, applied)
        checkInvariants()
        return shown
    }

    /// A reply showed tab id `id`.
    mutating func showTab(_ id: Int64) {
        tab = max(tab, id)
        checkInvariants()
    }

    /// Before a worker is spawned: its floor rises to every seq a client may have seen,
    /// replied, or shown by `status` (`published`: the dead worker's last words included).
    mutating func raiseFloorForSpawn(published: UInt64) {
        floor = max(floor, shown, applied, published)
        precondition(
            floor >= shown && floor >= applied, "a new worker numbers above every seq shown: none is handed out twice")
        checkInvariants()
    }

    /// A floor probe answered (`probeFloors`): both floors `jump` above what the window
    /// restored and every floor before, capped at their maximums.
    mutating func jumpFloors(restoredSeq: UInt64, restoredTab: Int64, by jump: UInt64) {
        let (floorBefore, tabBefore) = (floor, tab)
        floor = min(max(floor, restoredSeq).saturatingAdd(jump), Limits.maxCommandSeq)
        // Both at most 2^53 - 1: the sum cannot overflow.
        tab = min(max(tab, restoredTab) + Int64(jump), Limits.maxWebStateID)
        assert(floor >= floorBefore && tab >= tabBefore, "a probe only raises the floors")
        checkInvariants()
    }

    /// Once a worker restored `applied`: the seqs above it up to the floor were shown and are
    /// gone with the worker before, and are named lost. The range named, or nil when nothing
    /// shown was lost.
    mutating func loseAboveRestored() -> ClosedRange<UInt64>? {
        guard floor > applied else { return nil }
        let range = (applied + 1)...floor
        lost.insert(range)
        checkInvariants()
        return range
    }

    /// Forgets a lost range the window's own state contradicts (it restored a seq in it).
    mutating func forgetLost(_ range: ClosedRange<UInt64>) {
        lost.remove(range)
        checkInvariants()
    }

    /// Takes `seq` alone out of the lost ranges (an adopted session restored it).
    mutating func forgetLost(seq: UInt64) {
        lost.remove(seq: seq)
        checkInvariants()
    }

    /// What holds after every change. `shown`, `floor` and `tab` rising is checked where
    /// each one changes (each takes a `max`).
    private func checkInvariants() {
        assert(tab >= 0, "tab ids are positive")
        assert(
            lost.ranges.last.map { $0.upperBound <= floor } ?? true,
            "every lost seq lies at or below the floor: \(lost.ranges) over \(floor)")
        assert(
            zip(lost.ranges, lost.ranges.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound },
            "lost ranges ordered and apart")
    }
}
