import Testing

@testable import SessionStore

/// The queue of save requests: a save takes exactly the requests it made durable, oldest
/// first, whatever part of the queue was already dropped, and the rest stay in order.
@Suite struct SaveRequestsTests {
    @Test func aSaveTakesTheRequestsUpToItsSeqInOrderAndLeavesTheRest() {
        var requests = SaveRequests()
        for seq in 1...3000 as ClosedRange<UInt64> { requests.append(seq: seq, at: seq * 10) }
        var taken: [UInt64] = []
        requests.removeThrough(1000) { taken.append($0) }
        #expect(taken == (1...1000).map { $0 * 10 } && requests.count == 2000 && requests.last?.seq == 3000)
        taken.removeAll()
        // Past half of the queue done: the front is dropped, and what is left stays as it was.
        requests.removeThrough(2600) { taken.append($0) }
        #expect(taken == (1001...2600).map { $0 * 10 } && requests.count == 400)
        requests.append(seq: 3001, at: 1)
        taken.removeAll()
        requests.removeThrough(2599) { taken.append($0) }
        #expect(taken.isEmpty && requests.count == 401, "nothing at or below a seq already taken")
        requests.removeThrough(3000) { taken.append($0) }
        #expect(taken == (2601...3000).map { $0 * 10 } && requests.last?.seq == 3001 && requests.count == 1)
        requests.removeThrough(.max) { _ in }
        #expect(requests.isEmpty && requests.last == nil && requests.count == 0)
    }
}
