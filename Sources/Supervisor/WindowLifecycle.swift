import HostCoordination

/// One window's lifecycle, as a pure state machine: what state it is in and, for each event the
/// supervisor sees, the next state and what the supervisor must do (`Action`). It decides; the
/// supervisor carries out (spawns, signals, moves files, answers clients). Restart decisions are
/// `RestartPolicy`'s. Like s6-supervise's action table, every transition is in one table:
///
/// | state                  | event                       | next state                    | actions                 |
/// |------------------------|-----------------------------|-------------------------------|-------------------------|
/// | reserved, restartPending | spawnBegan                | spawning                      |                         |
/// | spawning               | spawned                     | starting                      |                         |
/// | spawning               | spawnFailed(shortage)       | restartPending(shortage backoff, .spawnShortage) |      |
/// | spawning               | spawnFailed(not shortage)   | as workerDied before ready    |                         |
/// | starting               | becameReady                 | ready                         |                         |
/// | starting               | workerDied(no fault)        | restartPending(shortage backoff, .workerShortage) | |
/// | starting, ready        | workerDied                  | `RestartPolicy.decide`: restartPending(now, .crash) | spawn |
/// |                        |                             | or restartPending(now + backoff, .crash) |              |
/// |                        |                             | or restartPending(now + delay, .setAside) | setAside, or abandonAdoption when adopting |
/// | restartPending(.setAside) | setAsideDone             | (same)                        | spawn if due            |
/// | restartPending(.setAside) | setAsideFailed           | restartPending(now + maximumBackoff) | reportCannotStart |
/// | restartPending         | restartTimerFired (due)     | (same)                        | spawn                   |
/// | starting               | disconnectRequested         | disconnecting(saving: false)  | kill                    |
/// | ready                  | disconnectRequested         | disconnecting(saving: true)   |                         |
/// | disconnecting          | disconnectRequested         | (same)                        | kill                    |
/// | reserved, restartPending, stopped | disconnectRequested | gone                       | finishDisconnect(clean) |
/// | disconnecting          | workerDied                  | gone                          | finishDisconnect(clean if it exited 0 or had restored nothing) |
/// | ready, disconnecting   | disconnectFailed            | ready                         | kill while stopping     |
/// | any but gone           | sceneChanged(scene)         | (same; a ready window shows it) |                       |
/// | a live worker's state  | killRequested, killAbandoned | (same; the next death counts or not) |                  |
/// | any                    | adoptionEnded               | (same; not adopting)          |                         |
/// | starting, ready        | watchdogFired               | (same; the death says so)     | kill (once)             |
/// | a live worker's state  | misbehaved                  | (same; nothing more it publishes is read) | kill (once) |
/// | starting (probe needed) | probeAsked                 | (same; probe asked)           |                         |
/// | a live worker's state  | reapFailed                  | (same; its death follows)     | kill                    |
/// | a live worker's state (stopping) | shutdownDeadlinePassed | (same)                 | kill                    |
/// | starting (probe asked) | floorsProbed                | (same; no probe; a requested kill) | kill               |
/// | ready                  | shutdownBegan               | (same, stopping)              | sendShutdownDisconnect  |
/// | starting, disconnecting(saving: false) | shutdownBegan | (same, stopping)           | terminate               |
/// | restartPending, reserved, spawning | shutdownBegan   | stopped                       |                         |
/// | disconnecting(saving: true) | shutdownBegan          | (same, stopping)              |                         |
/// | any, already stopping  | shutdownBegan               | (same)                        |                         |
/// | starting, ready (stopping) | workerDied              | stopped                       |                         |
///
/// Any other pair is an invariant violation: `assertionFailure` naming the state and the event
/// in debug builds, nothing at all in release builds (the events come from workers' deaths and
/// publications, which must never trap the supervisor). `docs/architecture.md` draws the same
/// table ("The lifecycle table").
struct WindowLifecycle: Sendable, Equatable {
    enum Scene: Sendable, Equatable { case foreground, background }

    /// Why no worker runs while a restart waits.
    enum Wait: Sendable, Equatable {
        /// The supervisor could not start one for want of its own resources.
        case spawnShortage
        /// The worker exited before it was ready with a status that says nothing of the session.
        case workerShortage
        /// The worker died; `RestartPolicy` chose when it comes back.
        case crash
        /// The worker failed to start `failedStartLimit` times in a row: its session goes to
        /// `set-aside/` and it starts empty.
        case setAside
    }

    enum State: Sendable, Equatable {
        /// A slot and a UUID, no worker yet.
        case reserved
        /// A worker is being spawned (the slot shows `starting` before the process exists).
        case spawning
        /// A worker runs and restores the window.
        case starting
        /// The worker restored the window and serves it.
        case ready
        /// The window goes: `saving`, its worker was ready and saves before it exits; else it
        /// was killed before it was ready.
        case disconnecting(saving: Bool)
        /// No worker; one is spawned at `at` (monotonic nanoseconds).
        case restartPending(at: UInt64, Wait)
        /// Shutting down and no worker is left: nothing more happens but a disconnect.
        case stopped(shown: SlotState)
        /// Disconnected: the window has no slot any more.
        case gone
    }

    enum Event: Sendable, Equatable {
        case spawnBegan
        case spawned
        /// `shortage`: the supervisor's own (`RestartPolicy.isShortage`).
        case spawnFailed(shortage: Bool)
        case becameReady
        /// `cleanExit`: exited 0. `noFault`: `RestartPolicy.diedOfNoFaultOfTheSession`.
        case workerDied(cleanExit: Bool, noFault: Bool)
        case setAsideDone
        case setAsideFailed
        case restartTimerFired
        case disconnectRequested
        /// The worker could not save for a disconnect (or the shutdown's) and goes on serving.
        case disconnectFailed
        case sceneChanged(Scene)
        /// The worker was killed on purpose (`ctl kill`, a floor probe): its death says
        /// nothing about the window.
        case killRequested
        /// A requested kill did not kill (the signal was caught or ignored).
        case killAbandoned
        /// The supervisor's watchdog found the worker hung (no heartbeat) or not restored in time.
        case watchdogFired
        /// The worker broke the protocol: it is killed, its death a crash.
        case misbehaved
        /// The worker restored the window while its floors are to be probed: it was asked what
        /// it restored (a dump), and is not ready.
        case probeAsked
        /// The probe answered and the window's floors were raised above it: its worker makes
        /// way for one numbering above them (a requested kill).
        case floorsProbed
        /// The set-aside entry the window brought back was adopted for good or given back.
        case adoptionEnded
        /// The worker's pidfd cannot be waited on: it cannot be watched, so it goes (its death
        /// is handled at once, as a crash).
        case reapFailed
        /// Stopping, and the shutdown's deadline passed with the worker still running.
        case shutdownDeadlinePassed
        case shutdownBegan
    }

    /// Why the live worker dies, as far as the supervisor did it: cleared when the next worker
    /// is spawned (a requested kill, when the death is judged).
    struct Kills: OptionSet, Sendable, Equatable {
        let rawValue: UInt8
        /// Killed on purpose (`ctl kill`, a floor probe): its death says nothing about the window.
        static let requested = Kills(rawValue: 1 << 0)
        /// Killed by the supervisor's watchdog: its restart says so.
        static let watchdog = Kills(rawValue: 1 << 1)
        /// Killed for breaking the protocol: nothing more it publishes is read.
        static let misbehaved = Kills(rawValue: 1 << 2)
    }

    /// The window's `handed-out` entry went with a damaged file (or an adopted session's record
    /// is gone): its first worker only says what it restored, then makes way for one numbering
    /// `HandedOutCeiling.fallbackJump` above that.
    enum FloorProbe: Sendable, Equatable { case needed, asked }

    enum Action: Sendable, Equatable {
        /// Spawn a worker now (`spawnBegan` follows).
        case spawn
        /// Move the session to `set-aside/`; answer `setAsideDone` or `setAsideFailed`.
        case setAside
        /// The adopted session does not start either: it goes back to its entry, and the window
        /// it was to be goes (answer `adoptionEnded`, then `disconnectRequested`).
        case abandonAdoption
        /// The session could not be set aside: tell whoever waits to connect, retried after
        /// `retryNanoseconds`.
        case reportCannotStart(retryNanoseconds: UInt64)
        /// Free the slot and answer the disconnect's waiters: `clean`, with success.
        case finishDisconnect(clean: Bool)
        /// SIGKILL the worker.
        case kill
        /// SIGTERM the worker (stopping before it restored anything: nothing is unsaved).
        case terminate
        /// Ask the ready worker to save and exit.
        case sendShutdownDisconnect
    }

    let policy: RestartPolicy
    private(set) var state: State = .reserved
    /// Kept across restarts.
    private(set) var scene: Scene = .foreground
    /// Set at `shutdownBegan`: no restart from then on.
    private(set) var stopping = false
    /// Why the live worker is being killed, if the supervisor kills it.
    private(set) var kills: Kills = []
    /// The live worker, or the last one, restored the window (`becameReady`): cleared when the
    /// next is spawned. Ready is `state == .ready`; this says what a death or a disconnect
    /// follows (a death after a restore is no failed start; an adoption restored completes).
    private(set) var workerRestored = false
    /// The floor probe still to be asked, or asked and not answered; nil once answered (or when
    /// none is needed).
    private(set) var floorProbe: FloorProbe?
    /// The window's recent deaths, `RestartPolicy`'s to judge.
    private(set) var history = RestartPolicy.History()

    /// The window brings a set-aside entry back (`adopt`), until the adoption ends: a crash
    /// loop then gives the session back instead of setting it aside again.
    private(set) var adopting: Bool

    init(policy: RestartPolicy, probingFloors: Bool = false, adopting: Bool = false) {
        self.policy = policy
        self.floorProbe = probingFloors ? .needed : nil
        self.adopting = adopting
    }

    /// The live worker was killed on purpose: its death is no failure.
    var killRequested: Bool { kills.contains(.requested) }

    /// Whether a worker process exists (spawned and not yet seen dead).
    var hasWorker: Bool {
        switch state {
        case .starting, .ready, .disconnecting: true
        case .reserved, .spawning, .restartPending, .stopped, .gone: false
        }
    }

    /// When the pending restart is due; nil when none waits (or the supervisor is stopping).
    var restartAt: UInt64? {
        guard case .restartPending(let at, _) = state, !stopping else { return nil }
        return at
    }

    /// What the window's slot and `status` show.
    var shown: SlotState {
        switch state {
        case .reserved: .reserved
        case .spawning, .starting: .starting
        case .ready: scene == .background ? .background : .foreground
        case .disconnecting: .disconnecting
        case .restartPending(_, .spawnShortage): .starting
        case .restartPending(_, .workerShortage), .restartPending(_, .crash): .crashed
        case .restartPending(_, .setAside): .setAside
        case .stopped(let shown): shown
        case .gone: .free
        }
    }

    /// The table above. `now`: monotonic nanoseconds.
    mutating func handle(_ event: Event, now: UInt64) -> [Action] {
        let before = state
        let actions = transition(event, now: now)
        assert(invariantsHold, "the window lifecycle broke an invariant: \(before) + \(event) -> \(state)")
        return actions
    }

    /// What the states do not say by themselves (at most one worker, and no restart waiting
    /// while one lives, they do): a requested kill is of a live worker, nothing is spawned
    /// once stopping, a window whose floors are probed is never ready, and a ready window's
    /// worker restored it while a starting one's has not.
    var invariantsHold: Bool {
        !(killRequested && !hasWorker) && !(stopping && state == .spawning) && !(floorProbe != nil && state == .ready)
            && !(state == .ready && !workerRestored) && !((state == .starting || state == .spawning) && workerRestored)
    }

    /// The table, split by the events' concerns; a pair no part has is a violation.
    private mutating func transition(_ event: Event, now: UInt64) -> [Action] {
        if let actions = carriedTransition(event) { return actions }
        guard state != .gone else { return violation(event) }
        let actions: [Action]?
        switch event {
        case .spawnBegan, .spawned, .spawnFailed, .becameReady: actions = startTransition(event, now: now)
        case .workerDied, .setAsideDone, .setAsideFailed, .restartTimerFired: actions = deathTransition(event, now: now)
        case .disconnectRequested, .disconnectFailed: actions = disconnectTransition(event)
        case .shutdownBegan: actions = shutdownTransition()
        default: actions = nil
        }
        return actions ?? violation(event)
    }

    /// A worker spawned, and its restore.
    private mutating func startTransition(_ event: Event, now: UInt64) -> [Action]? {
        switch (state, event) {
        case (.reserved, .spawnBegan), (.restartPending, .spawnBegan):
            guard !stopping else { return nil }
            state = .spawning
            kills = []
            workerRestored = false
            // A probe that died unanswered is asked of the next worker.
            if floorProbe == .asked { floorProbe = .needed }
            return []
        case (.spawning, .spawned):
            state = .starting
            return []
        case (.spawning, .spawnFailed(shortage: true)):
            state = .restartPending(at: now &+ policy.retryAfterShortage(&history), .spawnShortage)
            return []
        case (.spawning, .spawnFailed(shortage: false)):
            return died(beforeReady: true, noFault: false, now: now)
        case (.starting, .becameReady) where floorProbe == nil:
            policy.started(&history)
            state = .ready
            workerRestored = true
            return []
        default:
            return nil
        }
    }

    /// A worker's death, and the restart it leads to.
    private mutating func deathTransition(_ event: Event, now: UInt64) -> [Action]? {
        switch (state, event) {
        case (.starting, .workerDied(_, let noFault)), (.ready, .workerDied(_, let noFault)):
            guard !stopping else {
                kills.remove(.requested)
                state = .stopped(shown: shown)
                return []
            }
            return died(beforeReady: state == .starting, noFault: noFault, now: now)
        case (.disconnecting(let saving), .workerDied(let cleanExit, _)):
            kills.remove(.requested)
            state = .gone
            // Killed before it was ready: nothing of it was unsaved.
            return [.finishDisconnect(clean: cleanExit || !saving)]
        case (.restartPending(let at, .setAside), .setAsideDone):
            return at <= now && !stopping ? [.spawn] : []
        case (.restartPending(_, .setAside), .setAsideFailed):
            // Nothing can start this window until the root is mended: tried at the slowest pace.
            state = .restartPending(at: now &+ policy.maximumBackoffNanoseconds, .setAside)
            return [.reportCannotStart(retryNanoseconds: policy.maximumBackoffNanoseconds)]
        case (.restartPending(let at, _), .restartTimerFired):
            return at <= now && !stopping ? [.spawn] : []
        default:
            return nil
        }
    }

    /// A disconnect asked, and a disconnect whose save failed.
    private mutating func disconnectTransition(_ event: Event) -> [Action]? {
        switch (state, event) {
        case (.starting, .disconnectRequested):
            state = .disconnecting(saving: false)
            return [.kill]
        case (.ready, .disconnectRequested):
            state = .disconnecting(saving: true)
            return []
        case (.disconnecting, .disconnectRequested):
            // A second disconnect does not wait for the first one's save.
            return [.kill]
        case (.reserved, .disconnectRequested), (.restartPending, .disconnectRequested),
            (.stopped, .disconnectRequested):
            state = .gone
            return [.finishDisconnect(clean: true)]
        case (.ready, .disconnectFailed), (.disconnecting, .disconnectFailed):
            // The worker could not save and goes on serving: so does the window; while
            // stopping it goes anyway, and the exit status says what was lost.
            state = .ready
            return stopping ? [.kill] : []
        default:
            return nil
        }
    }

    /// Shutdown began: how the window's worker goes, if it has one.
    private mutating func shutdownTransition() -> [Action] {
        guard !stopping else { return [] }
        stopping = true
        switch state {
        case .ready:
            return [.sendShutdownDisconnect]
        case .starting, .disconnecting(saving: false):
            // Not restored yet: nothing of it is unsaved.
            return [.terminate]
        case .disconnecting(saving: true):
            // Its disconnect is saving: the worker exits when it is done, or says it failed.
            return []
        case .reserved, .spawning, .restartPending:
            state = .stopped(shown: shown)
            return []
        case .stopped, .gone:
            return []
        }
    }

    /// The rows that leave the state as it is and change only what it carries: the scene, the
    /// kills, the floor probe, the adoption. Nil for any other pair, the main table's to judge.
    private mutating func carriedTransition(_ event: Event) -> [Action]? {
        switch (state, event) {
        case (_, .adoptionEnded):
            // Also once gone: an adoption ends with its window's disconnect (`finishDisconnect`).
            adopting = false
            return []
        case (.gone, _):
            return nil
        case (_, .sceneChanged(let scene)):
            self.scene = scene
            return []
        case (.starting, .killRequested), (.ready, .killRequested), (.disconnecting, .killRequested):
            kills.insert(.requested)
            return []
        case (.starting, .killAbandoned), (.ready, .killAbandoned), (.disconnecting, .killAbandoned):
            kills.remove(.requested)
            return []
        case (.starting, .watchdogFired), (.ready, .watchdogFired):
            return kills.insert(.watchdog).inserted ? [.kill] : []
        case (.starting, .reapFailed), (.ready, .reapFailed), (.disconnecting, .reapFailed):
            return [.kill]
        case (_, .shutdownDeadlinePassed) where stopping && hasWorker:
            return [.kill]
        case (.starting, .misbehaved), (.ready, .misbehaved), (.disconnecting, .misbehaved):
            // Killed once, not at every look until it is reaped.
            return kills.insert(.misbehaved).inserted ? [.kill] : []
        case (.starting, .probeAsked) where floorProbe == .needed:
            floorProbe = .asked
            return []
        case (.starting, .floorsProbed) where floorProbe == .asked:
            floorProbe = nil
            kills.insert(.requested)
            return [.kill]
        default:
            return nil
        }
    }

    /// The worker died, or could not be spawned, while not stopping: when it comes back.
    private mutating func died(beforeReady: Bool, noFault: Bool, now: UInt64) -> [Action] {
        if noFault && beforeReady {
            kills.remove(.requested)
            state = .restartPending(at: now &+ policy.retryAfterShortage(&history), .workerShortage)
            return []
        }
        let requested = killRequested
        kills.remove(.requested)
        switch policy.decide(&history, now: now, diedBeforeReady: beforeReady, requested: requested) {
        case .restartNow:
            state = .restartPending(at: now, .crash)
            return [.spawn]
        case .restartAfter(let delay):
            state = .restartPending(at: now &+ delay, .crash)
            return []
        case .setAside(let delay):
            state = .restartPending(at: now &+ delay, .setAside)
            return [adopting ? .abandonAdoption : .setAside]
        }
    }

    private func violation(_ event: Event) -> [Action] {
        assertionFailure("no transition in the window lifecycle for \(event) in state \(state)")
        return []
    }
}
