import Foundation
import Testing

@testable import HostControl
@testable import Supervisor

/// Firefox for iOS's WindowManagerTests, ported: the assertions `ANCHORS.md` lists, and the
/// rules of the window-management document around them.
@Suite struct WindowRegistryTests {
    let a = UUID(uuidString: "AAAAAAAA-0000-4000-8000-000000000001")!
    let b = UUID(uuidString: "BBBBBBBB-0000-4000-8000-000000000002")!
    let c = UUID(uuidString: "CCCCCCCC-0000-4000-8000-000000000003")!

    @Test func twoRequestsWithNothingOnDiskGiveDifferentUUIDs() {
        var registry = WindowRegistry(onDisk: [], savedOrder: [])
        let first = registry.reserve()
        let second = registry.reserve()
        #expect(first != second)
        #expect(!WindowRegistry.sentinels.contains(first) && !WindowRegistry.sentinels.contains(second))
    }

    @Test func savedUUIDsComeBackFirstInTheirOrderThenNewOnes() {
        var registry = WindowRegistry(onDisk: [a, b, c], savedOrder: [c, a, b])
        #expect(registry.reserve() == c)
        #expect(registry.reserve() == a)
        #expect(registry.reserve() == b)
        let fresh = registry.reserve()
        #expect(![a, b, c].contains(fresh))
    }

    @Test func windowsOnDiskTheOrderDoesNotNameFollowSorted() {
        var registry = WindowRegistry(onDisk: [c, b, a], savedOrder: [b, UUID()])
        #expect([registry.reserve(), registry.reserve(), registry.reserve()] == [b, a, c])
    }

    @Test func aReservedUUIDIsNeverHandedOutTwice() {
        var registry = WindowRegistry(onDisk: [a], savedOrder: [a])
        var seen: Set<UUID> = []
        for _ in 0..<50 { #expect(seen.insert(registry.reserve()).inserted) }
        // Even a generator that keeps proposing a UUID already reserved, or a sentinel.
        var proposals = [
            a, WindowRegistry.unavailable, WindowRegistry.unitTestDefault, WindowRegistry.uiTestDefault, b,
        ]
        let next = registry.reserve { proposals.removeFirst() }
        #expect(next == b)
    }

    /// A fresh UUID reserved for a scene that has not saved yet is on no disk and in no order:
    /// only the reservation keeps it from being handed out again, and then while its window is
    /// open and still unsaved.
    @Test func aReservedUUIDNotYetOnDiskIsNeverHandedOutAgain() {
        var registry = WindowRegistry(onDisk: [], savedOrder: [])
        #expect(registry.reserve { a } == a)
        #expect(registry.order.isEmpty && registry.reserved == [a], "reserved, nowhere else")
        var proposals = [a, a, b]
        #expect(registry.reserve { proposals.removeFirst() } == b, "the generator proposed the reserved UUID again")
        registry.configured(a)
        proposals = [a, c]
        #expect(registry.reserve { proposals.removeFirst() } == c, "open and unsaved: still taken")
        registry.release(b)
        proposals = [b]
        #expect(registry.reserve { proposals.removeFirst() } == b, "a released reservation is free again")
    }

    @Test func closingWindowsTwoThenOneReopensOneThenTwo() {
        var registry = WindowRegistry(onDisk: [], savedOrder: [])
        let one = registry.reserve()
        registry.configured(one)
        let two = registry.reserve()
        registry.configured(two)
        registry.close(two, hasSession: true)
        registry.close(one, hasSession: true)
        #expect(registry.order == [one, two])
        #expect(registry.reserve() == one)
        #expect(registry.reserve() == two)
    }

    @Test func aClosedWindowGoesJustAfterTheOpenOnes() {
        var registry = WindowRegistry(onDisk: [a, b, c], savedOrder: [a, b, c])
        for _ in 0..<3 { registry.configured(registry.reserve()) }
        registry.close(c, hasSession: true)
        #expect(registry.order == [a, b, c])
        registry.close(a, hasSession: true)
        #expect(registry.order == [b, a, c], "most recently closed first after the open one")
    }

    @Test func aReleasedReservationIsHandedOutAgainAndAnUnsavedWindowIsForgotten() {
        var registry = WindowRegistry(onDisk: [a], savedOrder: [a])
        #expect(registry.reserve() == a)
        registry.release(a)
        #expect(registry.reserve() == a, "released before it configured: free again")
        registry.configured(a)
        let empty = registry.reserve()
        registry.configured(empty)
        registry.close(empty, hasSession: false)
        #expect(registry.order == [a])
        #expect(registry.reserve() != empty, "nothing of it on disk: it does not reopen")
    }

    /// Every order in which three saved windows can finish restoring: the saved order stays
    /// (the window that finished last used to move first, and `windows.order` was rewritten so).
    @Test func savedWindowsKeepTheirOrderWhateverOrderTheyFinishConfiguring() {
        for finishing in permutations([a, b, c]) {
            var registry = WindowRegistry(onDisk: [a, b, c], savedOrder: [a, b, c])
            #expect([registry.reserve(), registry.reserve(), registry.reserve()] == [a, b, c])
            for id in finishing {
                registry.configured(id)
                #expect(registry.order == [a, b, c], "finishing \(finishing)")
            }
        }
    }

    /// New windows (a first start) take the order they were reserved in, whatever order they
    /// finish configuring; a window reserved while saved ones still restore goes after them.
    @Test func newWindowsTakeTheOrderTheyWereReservedIn() {
        var registry = WindowRegistry(onDisk: [a], savedOrder: [a])
        #expect(registry.reserve() == a)
        var proposals = [b, c]
        let first = registry.reserve { proposals.removeFirst() }
        let second = registry.reserve { proposals.removeFirst() }
        #expect([first, second] == [b, c])
        #expect(registry.order == [a], "a new window is named only once open")
        registry.configured(c)
        registry.configured(b)
        #expect(registry.order == [a, b, c], "in the places they were reserved in")
        registry.configured(a)
        #expect(registry.order == [a, b, c])
    }

    /// A reservation released among others (its worker could not start) goes back to the first
    /// closed place; the ones around it keep theirs; an adopted session's UUID is placed when
    /// reserved, after the active windows.
    @Test func aReleaseOrAnAdoptionAmongRestoringWindowsMovesNoOtherWindow() {
        var registry = WindowRegistry(onDisk: [a, b, c], savedOrder: [a, b, c])
        for _ in 0..<3 { _ = registry.reserve() }
        let adopted = UUID(uuidString: "DDDDDDDD-0000-4000-8000-000000000004")!
        #expect(registry.reserve(returning: adopted) == adopted)
        registry.configured(adopted)
        registry.release(b)
        registry.configured(c)
        registry.configured(a)
        #expect(registry.order == [a, c, adopted, b])
        #expect(registry.reserve() == b, "the released window is the first free again")
        registry.configured(b)
        #expect(registry.order == [a, c, adopted, b])
        registry.close(c, hasSession: true)
        #expect(registry.order == [a, adopted, b, c])
    }

    private func permutations(_ items: [UUID]) -> [[UUID]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { index in
            var rest = items
            let head = rest.remove(at: index)
            return permutations(rest).map { [head] + $0 }
        }
    }

    @Test func sentinelsOnDiskAreNeverWindows() {
        var registry = WindowRegistry(
            onDisk: [WindowRegistry.unavailable, a], savedOrder: [WindowRegistry.unavailable, a])
        #expect(registry.order == [a])
        #expect(registry.reserve() == a)
    }
}

@Suite struct RestartPolicyTests {
    let second: UInt64 = 1_000_000_000

    @Test func requestedKillsRestartAtOnceAndCountForNothing() {
        let policy = RestartPolicy()
        var history = RestartPolicy.History()
        for index in 0..<20 {
            #expect(
                policy.decide(&history, now: UInt64(index) * 1000, diedBeforeReady: index % 2 == 0, requested: true)
                    == .restartNow)
        }
        #expect(history.restarts == 20)
        #expect(policy.decide(&history, now: 30_000, diedBeforeReady: false, requested: false) == .restartNow)
    }

    @Test func twoFailedStartsInARowSetTheSessionAside() {
        let policy = RestartPolicy()
        var history = RestartPolicy.History()
        #expect(
            policy.decide(&history, now: 0, diedBeforeReady: true, requested: false)
                == .restartAfter(nanoseconds: policy.initialBackoffNanoseconds))
        #expect(
            policy.decide(&history, now: second, diedBeforeReady: true, requested: false)
                == .setAside(thenRestartAfter: policy.initialBackoffNanoseconds))
        // A start that succeeds in between resets the count.
        #expect(
            policy.decide(&history, now: 2 * second, diedBeforeReady: true, requested: false)
                == .restartAfter(nanoseconds: policy.initialBackoffNanoseconds))
        #expect(policy.decide(&history, now: 3 * second, diedBeforeReady: false, requested: false) == .restartNow)
        #expect(
            policy.decide(&history, now: 40 * second, diedBeforeReady: true, requested: false)
                == .restartAfter(nanoseconds: policy.initialBackoffNanoseconds))
    }

    @Test func pastTheBudgetRestartsBackOffDoublingToTheCap() {
        let policy = RestartPolicy()
        var history = RestartPolicy.History()
        var decisions: [RestartPolicy.Decision] = []
        for index in 0..<12 {
            decisions.append(
                policy.decide(&history, now: UInt64(index) * 100_000_000, diedBeforeReady: false, requested: false))
        }
        #expect(decisions.prefix(5).allSatisfy { $0 == .restartNow })
        let delays = decisions.dropFirst(5).map { decision -> UInt64 in
            if case .restartAfter(let delay) = decision { return delay }
            return 0
        }
        #expect(delays == [100, 200, 400, 800, 1600, 3200, 5000].map { $0 * 1_000_000 })
        // A window that stays up for a whole period is back within budget.
        #expect(policy.decide(&history, now: 100 * second, diedBeforeReady: false, requested: false) == .restartNow)
    }
}

@Suite struct ControlProtocolTests {
    @Test func requestsAndRepliesRoundTripAsOneLineOfJSON() throws {
        let request = ControlRequest.window(
            UUID(),
            .tab(.open(url: "https://example.com/a b", incognito: true, index: 3, opener: nil, background: false)))
        let decoded = try JSONDecoder().decode(ControlRequest.self, from: JSONEncoder().encode(request))
        #expect(decoded == request)
        let reply = ControlReply.ok(
            .object(["tab": JSONValue(7), "list": .array([.bool(true), .null, .string("x")]), "p": .number(1.5)]))
        let line = try JSONEncoder().encode(reply)
        #expect(!line.contains(UInt8(ascii: "\n")))
        #expect(try JSONDecoder().decode(ControlReply.self, from: line) == reply)
        #expect(reply.result?["tab"]?.int == 7)
    }

    @Test func signalNamesAreTakenWithOrWithoutSIGAndAsNumbers() {
        #expect(
            SignalName.number("KILL") == SIGKILL && SignalName.number("sigterm") == SIGTERM
                && SignalName.number("9") == 9)
        #expect(SignalName.number("NOPE") == nil && SignalName.number("0") == nil && SignalName.number("65") == nil)
    }
}
