import HostControl

/// The spare worker's lifecycle, the one place it moves (as `WindowLifecycle` is a window's):
/// the supervisor keeps one worker started and waiting with no window, and a restart, a
/// `connect` or an adoption hands it a window instead of spawning one. `handle` takes an event
/// and returns what the loop is to carry out; it decides alone, with no process behind it.
///
/// - `none`: no spare; the next starts once `startAt` has passed and no window's worker is
///   restoring (a spawn costs the supervisor's loop milliseconds that a restore is waiting
///   through), or `quietWaitNanoseconds` later regardless.
/// - `starting`: spawned, not yet said ready; killed as hung past its deadline.
/// - `waiting`: ready to be handed a window.
/// - `handed`: its process went to a window, whose worker it now is; the next spare starts as
///   from `none`, once that window's restore no longer waits on the loop.
/// - `stopping`: killed (hung, breaking the protocol, a hand-over it could not take, shutdown);
///   its death is awaited, and counts as a failure.
///
/// A spare that dies before it is handed a window is replaced after a backoff that doubles with
/// each death in a row (`RestartPolicy.steppedBackoff`), so one that keeps dying cannot spin
/// the CPU; it counts against no window. One handed over resets the count, as does one that
/// waited a whole restart period before it died.
struct SpareLifecycle: Sendable, Equatable {
    enum State: Sendable, Equatable {
        case none(startAt: UInt64)
        case starting(deadline: UInt64)
        case waiting(since: UInt64)
        case handed(at: UInt64)
        case stopping
    }

    enum Event: Sendable, Equatable {
        /// The loop's turn ends; `windowsStarting`: some window's worker is restoring.
        case tick(windowsStarting: Bool)
        case spawned
        case spawnFailed
        /// It sent its ready byte.
        case saidReady
        /// It broke the protocol: sent anything but one ready byte, or closed its socket.
        case misbehaved
        /// Its process has ended (reaped).
        case died
        case handedOver
        /// The hand-over could not be sent: the spare is gone or going.
        case handOverFailed
        case shutdown
    }

    enum Action: Sendable, Equatable {
        case spawn
        case kill
    }

    private(set) var state: State
    /// Spares in a row that died (or could not be spawned) before they were handed a window.
    private(set) var failures = 0
    private(set) var shuttingDown = false
    let policy: RestartPolicy

    /// How long a spare may take to say it is ready before it is killed as hung.
    static let startTimeoutNanoseconds: UInt64 = 10_000_000_000
    /// How long a spare due waits for the windows' restores to be done before it starts anyway.
    static let quietWaitNanoseconds: UInt64 = 1_000_000_000

    /// The first spare starts once the initial windows are restored, or a `quietWait` after `now`.
    init(policy: RestartPolicy, now: UInt64) {
        self.policy = policy
        state = .none(startAt: now)
    }

    /// Whether a process of the spare's is running (or not yet reaped).
    var hasProcess: Bool {
        switch state {
        case .starting, .waiting, .stopping: true
        case .none, .handed: false
        }
    }

    var isWaiting: Bool {
        if case .waiting = state { return true }
        return false
    }

    /// What `status` shows.
    var shown: SpareStatus {
        switch state {
        case .none: .none
        case .starting: .starting
        case .waiting: .waiting
        case .handed: .handed
        case .stopping: .stopping
        }
    }

    mutating func handle(_ event: Event, now: UInt64) -> [Action] {
        let before = hasProcess
        let actions = transition(event, now: now)
        assert(
            before == hasProcess || [.spawned, .died, .handedOver].contains(event),
            "only a spawn, a death or a hand-over changes whether the spare has a process")
        assert(!shuttingDown || !actions.contains(.spawn), "no spare starts once shutdown began")
        return actions
    }

    private mutating func transition(_ event: Event, now: UInt64) -> [Action] {
        switch (event, state) {
        case (.tick(let windowsStarting), .none(let at)), (.tick(let windowsStarting), .handed(let at)):
            let due = !shuttingDown && now >= at && (!windowsStarting || now &- at >= Self.quietWaitNanoseconds)
            return due ? [.spawn] : []
        case (.tick, .starting(let deadline)) where now > deadline:
            state = .stopping
            return [.kill]
        case (.tick, _):
            return []
        case (.spawned, .none), (.spawned, .handed):
            state = .starting(deadline: now &+ Self.startTimeoutNanoseconds)
        case (.spawnFailed, .none), (.spawnFailed, .handed):
            failed(now: now)
        case (.saidReady, .starting):
            state = .waiting(since: now)
        case (.saidReady, .waiting), (.misbehaved, .starting), (.misbehaved, .waiting), (.handOverFailed, .waiting):
            state = .stopping
            return [.kill]
        case (.died, .waiting(let since)) where now &- since >= policy.periodNanoseconds:
            // It served its purpose for a whole period: no crash loop.
            failures = 0
            failed(now: now)
        case (.died, .starting), (.died, .waiting), (.died, .stopping):
            failed(now: now)
        case (.handedOver, .waiting):
            failures = 0
            state = .handed(at: now)
        case (.shutdown, _):
            shuttingDown = true
            guard hasProcess else {
                state = .none(startAt: .max)
                return []
            }
            guard state == .stopping else {
                state = .stopping
                return [.kill]
            }
        default:
            assertionFailure("spare event \(event) in state \(state)")
        }
        return []
    }

    /// A spare gone before it was handed a window: the next after the backoff.
    private mutating func failed(now: UInt64) {
        failures += 1
        let delay = policy.steppedBackoff(after: failures, upTo: policy.maximumBackoffNanoseconds)
        state = .none(startAt: shuttingDown ? .max : now &+ delay)
    }
}
