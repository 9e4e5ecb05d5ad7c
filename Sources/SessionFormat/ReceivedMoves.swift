import BrowserModel
import HostLimits

/// A move between windows a Browser received: the move's id (never 0) and the tab it made.
public struct ReceivedMove: Sendable, Equatable {
    public let move: UInt64
    public let tab: WebStateID

    public init?(move: UInt64, tab: WebStateID) {
        guard move != 0 else { return nil }
        self.move = move
        self.tab = tab
    }
}

/// The moves a Browser received last, oldest first, at most `Limits.movesRemembered`: what it
/// answers when asked whether it holds a move (a journal's inserts carry them, a snapshot's
/// index holds them).
public struct ReceivedMoves: Sendable, Equatable {
    public private(set) var moves: [ReceivedMove] = []

    public init() {}

    /// Remembers `move`, forgetting the oldest past the bound.
    public mutating func note(_ move: ReceivedMove) {
        moves.append(move)
        if moves.count > Limits.movesRemembered { moves.removeFirst(moves.count - Limits.movesRemembered) }
        assert(moves.count <= Limits.movesRemembered, "a Browser remembers a bounded number of moves")
    }

    /// The tab move `move` made here, if it is remembered.
    public func tab(madeBy move: UInt64) -> WebStateID? { moves.last { $0.move == move }?.tab }
}
