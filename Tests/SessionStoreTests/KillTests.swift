import BrowserModel
import IOUring
import TestSupport
import Testing

@testable import SessionStore

/// A worker killed with the power on: every storage operation it made stays, none after. Unlike
/// a power cut, a kill keeps what was never synced, so files half made (a new session's
/// snapshot before its rename, a journal whose snapshot never came) are there for recovery to
/// read. After a kill at every single operation the window must come back as it was after a
/// command between the last acknowledged and the last applied, at that command's seq.
@Suite struct KillTests {
    static let options = StoreOptions(compactAfterRecords: 6, compactAfterBytes: 4 << 10, journalPreallocation: 8 << 10)

    struct Run {
        var states: [WindowContents] = []
        var acknowledged: UInt64 = 0
        var applied: UInt64 = 0
        var operations = 0
        var incognitoDeletions = 0
    }

    static func page(_ url: String) -> NavigationItem {
        NavigationItem(url: url, title: url, timestamp: Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000))
    }

    /// One command: a tab opened in or closed from one Browser. `waits`: the command's save is
    /// waited for (acknowledged) before the next.
    enum Command {
        case open(BrowserKind)
        case closeLast(BrowserKind)
    }

    /// The incognito session deleted when its last tab closes and opened again at once, over
    /// and over, with regular commands between some of them and a compaction now and then.
    static let script: [Command] = [
        .open(.regular), .open(.incognito), .closeLast(.incognito), .open(.incognito), .open(.regular),
        .closeLast(.incognito), .open(.incognito), .open(.incognito), .closeLast(.incognito), .closeLast(.incognito),
        .open(.incognito), .closeLast(.incognito),
    ]

    static func run(engine: FaultEngine, haltAfter: Int?, waitEvery: Int) throws -> Run {
        engine.haltAfter = haltAfter
        let (store, _) = try simulatedWindow(engine, options: options)
        var run = Run()
        run.states.append(try WindowContents(store))
        for (index, command) in script.enumerated() {
            let seq = UInt64(index + 1)
            try store.apply(seq: seq) {
                switch command {
                case .open(let kind):
                    let browser = store.browser(kind)
                    let tab = WebState(id: browser.profile.makeWebStateID(), creationTime: .zero)
                    try tab.commitNavigation(to: page("https://\(kind.rawValue).example/\(seq)"))
                    try browser.webStateList.insert(tab, InsertionParams(activate: true))
                case .closeLast(let kind):
                    let list = store.browser(kind).webStateList
                    try list.detach(at: list.count - 1).destroy()
                }
            }
            run.states.append(try WindowContents(store))
            if index % waitEvery == 0 { try? store.waitUntilDurable(seq) } else { _ = try? store.poll() }
            if let events = try? store.poll() {
                run.incognitoDeletions += events.filter { $0 == .deletedIncognito }.count
            }
        }
        try? store.waitUntilDurable(UInt64(script.count))
        run.acknowledged = store.durableSeq
        run.applied = store.appliedSeq
        run.operations = engine.operationCount
        return run
    }

    @Test(arguments: [1, 3])
    func aKillAtEveryOperationRecoversAStateBetweenAcknowledgedAndApplied(waitEvery: Int) throws {
        let reference = try Self.run(
            engine: FaultEngine(directories: [simulatedRoot]), haltAfter: nil, waitEvery: waitEvery)
        #expect(reference.acknowledged == reference.applied, "without a kill every command is acknowledged")
        #expect(reference.incognitoDeletions >= 3, "the script deletes the incognito session and opens it again")
        for cut in 0...reference.operations {
            let engine = FaultEngine(directories: [simulatedRoot])
            let run = try Self.run(engine: engine, haltAfter: cut, waitEvery: waitEvery)
            engine.processKilled()
            let (restored, recovery) = try simulatedWindow(engine, options: Self.options)
            let got = try WindowContents(restored)
            let matches = (run.acknowledged...run.applied).filter { reference.states[Int($0)] == got }
            #expect(
                !matches.isEmpty,
                "cut \(cut): acknowledged \(run.acknowledged), applied \(run.applied), recovered \(got) \(recovery)")
            #expect(
                recovery.seq >= run.acknowledged && reference.states[Int(recovery.seq)] == got,
                "cut \(cut): came back at seq \(recovery.seq), acknowledged \(run.acknowledged) \(recovery)")
            #expect(recovery.regular.repairError == nil && recovery.incognito.repairError == nil)

            // Killed again at once, after the repairs: the same state, at the same seq. (A
            // repair over what a kill left of a new incognito session wrote snapshots saying
            // seq 0, and this recovery then dropped the acknowledged save that had closed the
            // incognito tabs: same tabs, a seq below the acknowledged one.)
            engine.processKilled()
            let (again, secondRecovery) = try simulatedWindow(engine, options: Self.options)
            #expect(try WindowContents(again) == got, "cut \(cut): a second kill right after recovery")
            #expect(
                secondRecovery.seq == recovery.seq,
                "cut \(cut): came back at seq \(secondRecovery.seq) after a second kill, \(recovery.seq) after the first \(secondRecovery)"
            )
        }
    }
}
