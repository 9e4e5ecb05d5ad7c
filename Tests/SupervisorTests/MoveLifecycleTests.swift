import Foundation
import HostControl
import Testing

@testable import Supervisor

/// A move's course (`MoveLifecycle`) against docs/recovery.md's table, row by row and pair by
/// pair: a transition added, changed or removed in one and not the other fails here, and so
/// does any path from a committed state back to an uncommitted one.
@Suite struct MoveLifecycleTests {
    typealias State = MoveLifecycle.State
    typealias Event = MoveLifecycle.Event

    static let seq: UInt64 = 7

    /// The doc's table: (state, event, next, action) as spelled there.
    static func documentedRows() throws -> [[String]] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/recovery.md").standardizedFileURL
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let section = text.components(separatedBy: "### The course of a move").dropFirst().first else {
            Issue.record("docs/recovery.md has no section \"The course of a move\"")
            return []
        }
        let rows = section.split(separator: "\n").prefix { !$0.hasPrefix("Every other pair") }
            .filter { $0.hasPrefix("| ") && !$0.hasPrefix("| state") }
        return rows.map { row in
            row.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast().map {
                $0.trimmingCharacters(in: .whitespaces)
            }
        }
    }

    static func name(_ state: State) -> String {
        switch state {
        case .exporting: "exporting"
        case .importing: "importing"
        case .committing: "committing(s)"
        case .dropping: "dropping"
        case .settling: "settling(s)"
        case .awaitingDestination: "awaitingDestination"
        case .asking: "asking"
        case .awaitingSource: "awaitingSource"
        case .settled: "settled"
        case .undone: "undone"
        }
    }

    static func name(_ event: Event) -> String {
        switch event {
        case .exported: "exported"
        case .refused: "refused"
        case .applied: "applied(s)"
        case .uncertain: "uncertain"
        case .held: "held(s)"
        case .notHeld: "notHeld"
        case .durable(let side, _): "durable(\(side == .source ? "source" : "destination"), d ≥ s)"
        case .died(let side): "died(\(side == .source ? "source" : "destination"))"
        case .ready(let side): "ready(\(side == .source ? "source" : "destination"))"
        }
    }

    static func name(_ action: MoveLifecycle.Action) -> String {
        switch action {
        case .recordAndImport: "recordAndImport"
        case .askHeld: "askHeld"
        case .drop: "drop"
        case .finish: "finish"
        case .undo: "undo"
        }
    }

    /// Every state, reached from a new or a resumed move by events alone (seqs `seq`).
    static func reach(_ name: String) -> MoveLifecycle? {
        let paths: [String: (resumed: Bool, [Event])] = [
            "exporting": (false, []),
            "importing": (false, [.exported]),
            "committing(s)": (false, [.exported, .applied(seq: seq)]),
            "dropping": (false, [.exported, .applied(seq: seq), .durable(.destination, seq: seq)]),
            "settling(s)": (
                false, [.exported, .applied(seq: seq), .durable(.destination, seq: seq), .applied(seq: seq)]
            ),
            "awaitingDestination": (true, []),
            "asking": (true, [.ready(.destination)]),
            "awaitingSource": (
                false, [.exported, .applied(seq: seq), .durable(.destination, seq: seq), .died(.source)]
            ),
            "settled": (
                false,
                [
                    .exported, .applied(seq: seq), .durable(.destination, seq: seq), .applied(seq: seq),
                    .durable(.source, seq: seq),
                ]
            ),
            "undone": (false, [.refused]),
        ]
        guard let (resumed, events) = paths[name] else { return nil }
        var course = MoveLifecycle(resumed: resumed)
        for event in events { _ = course.handle(event) }
        return Self.name(course.state) == name ? course : nil
    }

    static let stateNames = [
        "exporting", "importing", "committing(s)", "dropping", "settling(s)", "awaitingDestination", "asking",
        "awaitingSource", "settled", "undone",
    ]

    /// Every event, with the seq and durable seq `seq`.
    static let events: [Event] = [
        .exported, .refused, .applied(seq: seq), .uncertain, .held(seq: seq), .notHeld,
        .durable(.source, seq: seq), .durable(.destination, seq: seq), .died(.source), .died(.destination),
        .ready(.source), .ready(.destination),
    ]

    @Test func everyStateIsReachedAndTheDocumentsRowsAreTheCodes() throws {
        for name in Self.stateNames { #expect(Self.reach(name) != nil, "state \(name) is reached") }
        let rows = try Self.documentedRows()
        #expect(rows.count == 19, "the doc's table has its 19 rows")
        for row in rows {
            try #require(row.count == 4, "a row of four cells: \(row)")
            let course = try #require(Self.reach(row[0]), "the doc names state \(row[0])")
            let event = try #require(Self.events.first { Self.name($0) == row[1] }, "the doc names event \(row[1])")
            var moved = course
            let actions = moved.handle(event)
            #expect(Self.name(moved.state) == row[2], "\(row[0]) on \(row[1])")
            #expect(actions.map(Self.name).joined(separator: ", ") == row[3], "\(row[0]) on \(row[1])")
        }
    }

    @Test func everyOtherPairChangesNothingAndADurableSeqBelowTheStepsWaits() throws {
        let documented = Set(try Self.documentedRows().map { "\($0[0]) / \($0[1])" })
        for name in Self.stateNames {
            let course = try #require(Self.reach(name))
            for event in Self.events where !documented.contains("\(name) / \(Self.name(event))") {
                var moved = course
                #expect(
                    moved.handle(event).isEmpty && moved == course, "\(name) on \(Self.name(event)) changes nothing")
            }
            for side in [MoveLifecycle.Side.source, .destination] {
                var moved = course
                #expect(moved.handle(.durable(side, seq: Self.seq - 1)).isEmpty && moved == course, "d < s waits")
            }
        }
    }

    /// From every committed state, no sequence of events leads to an uncommitted one: a random
    /// walk of 20,000 steps from each, with seqs around the step's.
    @Test func aCommittedMoveIsNeverUndone() throws {
        var generator = SystemRandomNumberGenerator()
        for name in ["dropping", "settling(s)", "awaitingSource", "settled"] {
            var course = try #require(Self.reach(name))
            #expect(course.state.isCommitted)
            for _ in 0..<20_000 {
                let seq = Self.seq - 1 + UInt64.random(in: 0...2, using: &generator)
                let events: [Event] =
                    Self.events + [.applied(seq: seq), .held(seq: seq), .durable(.source, seq: seq)]
                let actions = course.handle(events.randomElement(using: &generator)!)
                #expect(course.state.isCommitted, "\(name) stays committed")
                #expect(!actions.contains(.undo) && !actions.contains(.recordAndImport) && !actions.contains(.askHeld))
            }
        }
    }

    /// The stages a kill can be aimed at (`ctl kill --aim-move`) are the states of those names,
    /// as `status` spells them, and no other state is one.
    @Test func eachMoveStageIsTheStateOfItsName() throws {
        var staged: [String] = []
        for name in Self.stateNames {
            let state = try #require(Self.reach(name)).state
            if let stage = state.stage {
                #expect(stage.rawValue == state.name, "\(name)")
                staged.append(stage.rawValue)
            }
        }
        #expect(staged == MoveStage.allCases.map(\.rawValue))
    }

    @Test func aMoveTakenUpFromTheLogStartsByAskingItsDestination() {
        var course = MoveLifecycle(resumed: true)
        #expect(course.state == .awaitingDestination)
        #expect(course.handle(.ready(.source)).isEmpty, "the source alone settles nothing")
        #expect(course.handle(.ready(.destination)) == [.askHeld])
        #expect(course.handle(.held(seq: 3)).isEmpty)
        #expect(course.handle(.durable(.destination, seq: 3)) == [.drop])
        #expect(course.handle(.died(.source)).isEmpty && course.state == .awaitingSource)
        #expect(course.handle(.ready(.source)) == [.drop])
        #expect(course.handle(.applied(seq: 9)).isEmpty)
        #expect(course.handle(.durable(.source, seq: 9)) == [.finish] && course.state.isOver)
    }
}
