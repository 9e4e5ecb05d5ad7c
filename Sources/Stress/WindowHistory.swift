import HostControl

/// What the oracle knows of one window: the model's state after every command sent since the
/// last recovery, and how far the host acknowledged them as durable. After a recovery it
/// decides, in Jepsen's terms, whether anything acknowledged was lost, whether something never
/// sent appeared, or whether the state matches no prefix of the commands at all.
public struct WindowHistory: Sendable {
    /// The state after each command, oldest first; the first is where the last recovery left it.
    public private(set) var states: [(seq: UInt64, window: OracleWindow)]
    /// Every command up to this seq was acknowledged durable.
    public private(set) var acknowledged: UInt64
    /// Every tab id the model has ever held: a restored tab outside it was never sent.
    public private(set) var everSeen: Set<Int64>
    /// A seq acknowledged `afterRecovery`, until `recovered` takes it.
    private var owedAcknowledgement: UInt64?

    public init(start window: OracleWindow, seq: UInt64) {
        states = [(seq, window)]
        acknowledged = seq
        everSeen = window.tabIDs
    }

    public var current: OracleWindow { states[states.count - 1].window }
    public var lastSeq: UInt64 { states[states.count - 1].seq }

    /// Command `seq` was applied and left the window as `window`.
    public mutating func applied(seq: UInt64, window: OracleWindow) {
        states.append((seq, window))
        everSeen.formUnion(window.tabIDs)
    }

    /// The state every acknowledged command left: what no kill may take back.
    public var acknowledgedState: OracleWindow {
        (states.last { $0.seq <= acknowledged } ?? states[0]).window
    }

    /// Each state since the last recovery as `change` leaves it, its seq one further where
    /// `change` takes one there: a move's drop, sent again to a source restarted from any of
    /// them (a drop of a tab the state does not hold changes nothing and takes no seq).
    public mutating func rewrite(_ change: (OracleWindow) -> (window: OracleWindow, takesSeq: Bool)) {
        let acknowledgedIndex = states.lastIndex { $0.seq <= acknowledged } ?? 0
        let before = states.map(\.seq)
        states = states.map { state in
            let (window, takesSeq) = change(state.window)
            return (state.seq + (takesSeq ? 1 : 0), window)
        }
        assert(zip(states, states.dropFirst()).allSatisfy { $0.seq <= $1.seq }, "seqs never fall")
        acknowledged += states[acknowledgedIndex].seq - before[acknowledgedIndex]
        for (_, window) in states { everSeen.formUnion(window.tabIDs) }
    }

    /// The host says every command up to `seq` is durable. Returns how many commands that newly
    /// acknowledges. `afterRecovery`: the seq comes from a worker started after this window's
    /// last one died, not yet judged (a move's reply): that worker numbers above the seqs the
    /// dead one handed out, so commands lost unacknowledged leave a gap below it, and `seq`
    /// acknowledges the state the window restored, known once `recovered` found it.
    @discardableResult
    public mutating func acknowledge(_ seq: UInt64, afterRecovery: Bool = false) -> Int {
        if afterRecovery {
            owedAcknowledgement = max(owedAcknowledgement ?? 0, seq)
            return 0
        }
        guard seq > acknowledged else { return 0 }
        let newly = states.filter { $0.seq > acknowledged && $0.seq <= seq }.count
        acknowledged = seq
        return newly
    }

    public enum Verdict: Equatable, Sendable {
        /// Everything acknowledged is there, and `recovered` commands sent after it too.
        case intact(recovered: Int)
        /// `count` acknowledged commands are missing.
        case lost(count: Int)
        /// Tabs that no command created.
        case unexpected
        /// A state that matches no prefix of the commands.
        case torn
        /// The acknowledged state, but at a seq below the acknowledged one: the next command
        /// would take a seq already reported for another, and the two could not be told apart.
        case wentBack(seq: UInt64)
    }

    /// The window came back showing `digest` (`dump`: what it showed; nil when it did not come
    /// back, as an empty window). The model then goes on from the state it came back as.
    public mutating func recovered(digest: UInt64, dump: DumpReply?, appliedSeq: UInt64) -> Verdict {
        let acknowledgedIndex = states.lastIndex { $0.seq <= acknowledged } ?? 0
        let matches = states.indices.filter { index in
            states[index].window.digest == digest && dump.map { states[index].window.hasHistories(of: $0) } ?? true
        }
        let verdict: Verdict
        let resume: (UInt64, OracleWindow)
        if let match = matches.last(where: { $0 >= acknowledgedIndex }) {
            if appliedSeq < acknowledged {
                verdict = .wentBack(seq: appliedSeq)
                resume = (appliedSeq, states[match].window)
            } else {
                verdict = .intact(recovered: match - acknowledgedIndex)
                resume = (states[match].seq, states[match].window)
            }
        } else if let match = matches.last {
            verdict = .lost(count: acknowledgedIndex - match)
            resume = (states[match].seq, states[match].window)
        } else {
            let shown = dump.map(OracleWindow.init(dump:)) ?? OracleWindow()
            verdict = shown.tabIDs.isSubset(of: everSeen) ? .torn : .unexpected
            resume = (appliedSeq, shown)
        }
        states = [resume]
        acknowledged = max(min(acknowledged, resume.0), owedAcknowledgement ?? 0)
        owedAcknowledgement = nil
        everSeen.formUnion(resume.1.tabIDs)
        return verdict
    }
}
