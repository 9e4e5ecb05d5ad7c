/// Save requests not yet durable, oldest first: each command applied with no save delay makes
/// one, so under load thousands wait at once. The front goes by an index, and the array is
/// shifted only once the part done is half of it: a save that makes requests durable costs
/// what it finishes, not the backlog behind it.
struct SaveRequests {
    private var requests: [(seq: UInt64, at: UInt64)] = []
    private var start = 0

    var isEmpty: Bool { start == requests.count }
    var count: Int { requests.count - start }
    var last: (seq: UInt64, at: UInt64)? { isEmpty ? nil : requests[requests.count - 1] }

    mutating func append(seq: UInt64, at: UInt64) {
        assert(last.map { $0.seq <= seq } ?? true, "requests come in seq order")
        requests.append((seq, at))
    }

    /// Removes the requests up to `seq`, telling `body` when each was made, oldest first.
    mutating func removeThrough(_ seq: UInt64, _ body: (_ at: UInt64) -> Void) {
        while start < requests.count, requests[start].seq <= seq {
            body(requests[start].at)
            start += 1
        }
        assert(
            start == requests.count || requests[start].seq > seq, "every request through seq is answered, none after it"
        )
        if start == requests.count {
            requests.removeAll(keepingCapacity: true)
            start = 0
        } else if start * 2 >= requests.count {
            requests.removeFirst(start)
            start = 0
        }
    }
}
