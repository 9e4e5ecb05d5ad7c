import Foundation
import Testing

@testable import Supervisor

/// docs/architecture.md's lifecycle tables name the states and events `WindowLifecycle` has, and
/// every one of them: a state or event added, renamed or removed in one and not the other fails
/// here.
@Suite struct LifecycleDocumentTests {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/architecture.md").standardizedFileURL

    /// A state's name as the doc spells it. Exhaustive: a new state does not compile until it
    /// is named here, and then the doc must name it too.
    static func name(_ state: WindowLifecycle.State) -> String {
        switch state {
        case .reserved: "reserved"
        case .spawning: "spawning"
        case .starting: "starting"
        case .ready: "ready"
        case .disconnecting: "disconnecting"
        case .restartPending: "restartPending"
        case .stopped: "stopped"
        case .gone: "gone"
        }
    }

    static func name(_ event: WindowLifecycle.Event) -> String {
        switch event {
        case .spawnBegan: "spawnBegan"
        case .spawned: "spawned"
        case .spawnFailed: "spawnFailed"
        case .becameReady: "becameReady"
        case .workerDied: "workerDied"
        case .setAsideDone: "setAsideDone"
        case .setAsideFailed: "setAsideFailed"
        case .restartTimerFired: "restartTimerFired"
        case .disconnectRequested: "disconnectRequested"
        case .disconnectFailed: "disconnectFailed"
        case .sceneChanged: "sceneChanged"
        case .killRequested: "killRequested"
        case .killAbandoned: "killAbandoned"
        case .watchdogFired: "watchdogFired"
        case .misbehaved: "misbehaved"
        case .probeAsked: "probeAsked"
        case .floorsProbed: "floorsProbed"
        case .adoptionEnded: "adoptionEnded"
        case .reapFailed: "reapFailed"
        case .shutdownDeadlinePassed: "shutdownDeadlinePassed"
        case .shutdownBegan: "shutdownBegan"
        }
    }

    static let states: [WindowLifecycle.State] = [
        .reserved, .spawning, .starting, .ready, .disconnecting(saving: true), .restartPending(at: 0, .crash),
        .stopped(shown: .free), .gone,
    ]
    static let events: [WindowLifecycle.Event] = [
        .spawnBegan, .spawned, .spawnFailed(shortage: false), .becameReady,
        .workerDied(cleanExit: false, noFault: false), .setAsideDone,
        .setAsideFailed, .restartTimerFired, .disconnectRequested, .disconnectFailed, .sceneChanged(.foreground),
        .killRequested,
        .killAbandoned, .watchdogFired, .misbehaved, .probeAsked, .floorsProbed, .adoptionEnded, .reapFailed,
        .shutdownDeadlinePassed, .shutdownBegan,
    ]

    /// The cells of the table whose header row is `header`, row by row.
    private func table(_ header: String, in text: String) throws -> [[String]] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex(of: header), "no table headed '\(header)'")
        return lines[(start + 2)...].prefix { $0.hasPrefix("|") }.map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast().map {
                $0.trimmingCharacters(in: .whitespaces)
            }
        }
    }

    /// The names a cell lists: comma- or slash-separated, qualifiers in parentheses and words
    /// after the name ("workerDied, any other") left out; "any…" names none.
    private func names(in cell: String) -> [String] {
        let bare = cell.replacingOccurrences(of: #"\([^)]*\)"#, with: "", options: .regularExpression)
        return bare.split(whereSeparator: { $0 == "," || $0 == "/" }).compactMap { part in
            let word = part.split(separator: " ").first.map(String.init) ?? ""
            return word.isEmpty || word == "any" || word.first?.isLowercase == false ? nil : word
        }
    }

    @Test func theTransitionTableNamesEveryStateAndEventAndNoOther() throws {
        let rows = try table(
            "| state | event | next state | actions |", in: String(contentsOf: Self.document, encoding: .utf8))
        #expect(rows.count >= Self.events.count)
        let stateNames = Set(Self.states.map(Self.name))
        let eventNames = Set(Self.events.map(Self.name))
        let documentedStates = rows.flatMap { names(in: $0[0]) }
        let documentedEvents = rows.flatMap { names(in: $0[1]) }
        #expect(
            Set(documentedStates).subtracting(stateNames).isEmpty,
            "not states: \(Set(documentedStates).subtracting(stateNames))")
        #expect(
            Set(documentedEvents).subtracting(eventNames).isEmpty,
            "not events: \(Set(documentedEvents).subtracting(eventNames))")
        #expect(
            stateNames.subtracting(documentedStates).subtracting(["gone"]).isEmpty,
            "states no row starts from: \(stateNames.subtracting(documentedStates))")
        #expect(
            eventNames.subtracting(documentedEvents).isEmpty,
            "events no row takes: \(eventNames.subtracting(documentedEvents))")
    }

    /// The shown table has a row for each state, and for no other.
    @Test func theShownTableNamesEveryState() throws {
        let rows = try table("| state | shown |", in: String(contentsOf: Self.document, encoding: .utf8))
        let stateNames = Set(Self.states.map(Self.name))
        let documented = Set(rows.flatMap { names(in: $0[0]) })
        #expect(documented == stateNames, "documented \(documented.sorted()), the states \(stateNames.sorted())")
    }
}
