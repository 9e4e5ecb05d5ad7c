import HostCoordination
import Testing

@testable import Supervisor

/// The window lifecycle without processes: every row of its table, the stories the supervisor
/// depends on, and its invariants over random event sequences.
@Suite struct WindowLifecycleTests {
    typealias Life = WindowLifecycle
    let policy = RestartPolicy()
    let second: UInt64 = 1_000_000_000

    /// A window driven from `reserved` by `events` at time 0 (each transition in the table).
    func window(after events: [Life.Event], now: UInt64 = 0) -> Life {
        var life = Life(policy: policy)
        for event in events { _ = life.handle(event, now: now) }
        return life
    }

    let starting: [Life.Event] = [.spawnBegan, .spawned]
    var ready: [Life.Event] { starting + [.becameReady] }

    // MARK: every row

    @Test func spawningStartingAndReady() {
        var life = window(after: [])
        #expect(life.state == .reserved && life.shown == .reserved && !life.hasWorker)
        #expect(life.handle(.spawnBegan, now: 0) == [] && life.state == .spawning && life.shown == .starting)
        #expect(life.handle(.spawned, now: 0) == [] && life.state == .starting && life.hasWorker)
        #expect(life.handle(.becameReady, now: 0) == [] && life.state == .ready && life.shown == .foreground)
    }

    @Test func aSpawnFailureIsAShortageOrAFailedStart() {
        var short = window(after: [.spawnBegan])
        #expect(short.handle(.spawnFailed(shortage: true), now: 0) == [])
        #expect(
            short.state == .restartPending(at: policy.initialBackoffNanoseconds, .spawnShortage)
                && short.shown == .starting)
        #expect(short.history.restarts == 0 && short.history.shortages == 1)

        var failed = window(after: [.spawnBegan])
        #expect(failed.handle(.spawnFailed(shortage: false), now: 0) == [])
        #expect(
            failed.state == .restartPending(at: policy.initialBackoffNanoseconds, .crash) && failed.shown == .crashed)
        #expect(failed.history.restarts == 1)
    }

    @Test func aDeathAfterReadyRestartsAtOnceAndBeforeReadyAfterABackoff() {
        var afterReady = window(after: ready)
        #expect(afterReady.handle(.workerDied(cleanExit: false, noFault: false), now: second) == [.spawn])
        #expect(afterReady.state == .restartPending(at: second, .crash) && !afterReady.hasWorker)
        #expect(afterReady.handle(.spawnBegan, now: second) == [] && afterReady.state == .spawning)

        var beforeReady = window(after: starting)
        #expect(beforeReady.handle(.workerDied(cleanExit: false, noFault: false), now: second) == [])
        #expect(beforeReady.state == .restartPending(at: second + policy.initialBackoffNanoseconds, .crash))
        #expect(beforeReady.restartAt == second + policy.initialBackoffNanoseconds)
        // The timer: nothing before it is due, a spawn when it is.
        #expect(beforeReady.handle(.restartTimerFired, now: second) == [])
        #expect(beforeReady.handle(.restartTimerFired, now: second + policy.initialBackoffNanoseconds) == [.spawn])
    }

    @Test func aWorkerShortOfItsOwnResourcesWhileRestoringBacksOff() {
        var life = window(after: starting)
        #expect(life.handle(.workerDied(cleanExit: false, noFault: true), now: 0) == [])
        #expect(
            life.state == .restartPending(at: policy.initialBackoffNanoseconds, .workerShortage)
                && life.shown == .crashed)
        #expect(life.history.restarts == 0 && life.history.shortages == 1)
        // Ready again: the shortage is over.
        for event in starting + [.becameReady] { _ = life.handle(event, now: second) }
        #expect(life.history.shortages == 0)
    }

    @Test func aSecondFailedStartSetsTheSessionAside() {
        var life = window(after: starting)
        _ = life.handle(.workerDied(cleanExit: false, noFault: false), now: 0)
        for event in starting { _ = life.handle(event, now: second) }
        #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: second) == [.setAside])
        #expect(
            life.state == .restartPending(at: second + policy.initialBackoffNanoseconds, .setAside)
                && life.shown == .setAside)
        // Set aside: it starts empty when its delay is over.
        #expect(life.handle(.setAsideDone, now: second) == [])
        #expect(life.handle(.restartTimerFired, now: second + policy.initialBackoffNanoseconds) == [.spawn])
    }

    /// An adopted session that fails to start as often gives its entry back instead, and the
    /// window it was to be goes; an adoption that ended sets aside as any window does.
    @Test func anAdoptedSessionThatDoesNotStartIsGivenBack() {
        for adoptionEnds in [false, true] {
            var life = Life(policy: policy, adopting: true)
            for event in starting { _ = life.handle(event, now: 0) }
            if adoptionEnds { #expect(life.handle(.adoptionEnded, now: 0) == [] && !life.adopting) }
            _ = life.handle(.workerDied(cleanExit: false, noFault: false), now: 0)
            for event in starting { _ = life.handle(event, now: second) }
            let actions = life.handle(.workerDied(cleanExit: false, noFault: false), now: second)
            #expect(actions == [adoptionEnds ? .setAside : .abandonAdoption])
            #expect(life.shown == .setAside)
            guard !adoptionEnds else { continue }
            #expect(life.handle(.adoptionEnded, now: second) == [] && !life.adopting)
            #expect(
                life.handle(.disconnectRequested, now: second) == [.finishDisconnect(clean: true)]
                    && life.state == .gone)
            #expect(life.handle(.adoptionEnded, now: second) == [], "an adoption may end with its window gone")
        }
    }

    @Test func aSessionThatCannotBeSetAsideIsRetriedAtTheSlowestPace() {
        var life = window(after: starting)
        _ = life.handle(.workerDied(cleanExit: false, noFault: false), now: 0)
        for event in starting { _ = life.handle(event, now: 0) }
        #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: second) == [.setAside])
        #expect(
            life.handle(.setAsideFailed, now: second) == [
                .reportCannotStart(retryNanoseconds: policy.maximumBackoffNanoseconds)
            ])
        #expect(life.restartAt == second + policy.maximumBackoffNanoseconds)
    }

    @Test func aSetAsideWithNoDelaySpawnsWhenDone() {
        var immediate = RestartPolicy()
        immediate.initialBackoffNanoseconds = 0
        var life = WindowLifecycle(policy: immediate)
        for event in starting + [.workerDied(cleanExit: false, noFault: false)] + starting {
            _ = life.handle(event, now: 0)
        }
        #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: 0) == [.setAside])
        #expect(life.handle(.setAsideDone, now: 0) == [.spawn])
    }

    @Test func disconnects() {
        var fromReady = window(after: ready)
        #expect(fromReady.handle(.disconnectRequested, now: 0) == [] && fromReady.state == .disconnecting(saving: true))
        #expect(fromReady.shown == .disconnecting)
        // A second disconnect does not wait for the save.
        #expect(fromReady.handle(.disconnectRequested, now: 0) == [.kill])
        #expect(
            fromReady.handle(.workerDied(cleanExit: true, noFault: false), now: 0) == [.finishDisconnect(clean: true)])
        #expect(fromReady.state == .gone && fromReady.shown == .free)

        var killed = window(after: ready + [.disconnectRequested])
        #expect(
            killed.handle(.workerDied(cleanExit: false, noFault: false), now: 0) == [.finishDisconnect(clean: false)])

        // Before it was ready nothing of it was unsaved: clean however the worker went.
        var fromStarting = window(after: starting)
        #expect(
            fromStarting.handle(.disconnectRequested, now: 0) == [.kill]
                && fromStarting.state == .disconnecting(saving: false))
        #expect(
            fromStarting.handle(.workerDied(cleanExit: false, noFault: false), now: 0) == [
                .finishDisconnect(clean: true)
            ])

        for events: [Life.Event] in [
            [], starting + [.workerDied(cleanExit: false, noFault: false)],
            ready + [.shutdownBegan, .workerDied(cleanExit: true, noFault: false)],
        ] {
            var idle = window(after: events)
            #expect(idle.handle(.disconnectRequested, now: 0) == [.finishDisconnect(clean: true)], "\(events)")
            #expect(idle.state == .gone)
        }
    }

    @Test func aDisconnectThatFailsGoesBackToServing() {
        var life = window(after: ready + [.sceneChanged(.background), .disconnectRequested])
        #expect(life.handle(.disconnectFailed, now: 0) == [])
        #expect(life.state == .ready && life.shown == .background)
        // Its next death is a crash, restarted.
        #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: 0) == [.spawn])
    }

    @Test func theSceneIsKeptAcrossRestartsAndShownOnlyWhenReady() {
        var life = window(after: starting)
        #expect(life.handle(.sceneChanged(.background), now: 0) == [] && life.shown == .starting)
        _ = life.handle(.becameReady, now: 0)
        #expect(life.shown == .background)
        for event in [Life.Event.workerDied(cleanExit: false, noFault: false)] + ready {
            _ = life.handle(event, now: 0)
        }
        #expect(life.shown == .background)
        _ = life.handle(.sceneChanged(.foreground), now: 0)
        #expect(life.shown == .foreground)
    }

    @Test func aRequestedKillRestartsAtOnceAndCountsForNothing() {
        var life = window(after: starting)
        for _ in 0..<10 {
            #expect(life.handle(.killRequested, now: 0) == [] && life.killRequested)
            // Even before ready, twice in a row: no failed start, no backoff.
            #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: 0) == [.spawn])
            #expect(life.state == .restartPending(at: 0, .crash) && !life.killRequested)
            for event in starting { _ = life.handle(event, now: 0) }
        }
        // A kill the worker survived: its later death is its own again.
        _ = life.handle(.killRequested, now: 0)
        _ = life.handle(.killAbandoned, now: 0)
        #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: 0) == [])
        #expect(life.restartAt == policy.initialBackoffNanoseconds)
    }

    // MARK: shutdown

    @Test func shutdownWhileReadyAsksTheWorkerToSaveAndNeverRestartsIt() {
        var life = window(after: ready)
        #expect(life.handle(.shutdownBegan, now: 0) == [.sendShutdownDisconnect] && life.stopping)
        #expect(life.handle(.shutdownBegan, now: 0) == [], "once")
        // It could not save: killed anyway.
        #expect(life.handle(.disconnectFailed, now: 0) == [.kill] && life.state == .ready)
        #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: 0) == [])
        #expect(life.state == .stopped(shown: .foreground) && life.restartAt == nil && !life.hasWorker)
    }

    @Test func shutdownWhileStartingTerminates() {
        var life = window(after: starting)
        #expect(life.handle(.shutdownBegan, now: 0) == [.terminate])
        #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: 0) == [])
        #expect(life.state == .stopped(shown: .starting))
    }

    @Test func shutdownWhileARestartWaitsCancelsIt() {
        var life = window(after: starting + [.workerDied(cleanExit: false, noFault: false)])
        #expect(life.restartAt != nil)
        #expect(life.handle(.shutdownBegan, now: 0) == [])
        #expect(life.state == .stopped(shown: .crashed) && life.restartAt == nil)
    }

    @Test func shutdownWhileDisconnecting() {
        var saving = window(after: ready + [.disconnectRequested])
        #expect(saving.handle(.shutdownBegan, now: 0) == [], "its disconnect is saving: the worker exits when done")
        #expect(saving.handle(.workerDied(cleanExit: true, noFault: false), now: 0) == [.finishDisconnect(clean: true)])
        var killed = window(after: starting + [.disconnectRequested])
        #expect(killed.handle(.shutdownBegan, now: 0) == [.terminate])
    }

    @Test func shutdownBeforeAnyWorkerStopsTheWindowWhereItIs() {
        for (events, shown) in [([], SlotState.reserved), ([.spawnBegan], .starting)] as [([Life.Event], SlotState)] {
            var life = window(after: events)
            #expect(life.handle(.shutdownBegan, now: 0) == [])
            #expect(life.state == .stopped(shown: shown) && life.shown == shown)
            // Only a disconnect moves it now; the scene is kept.
            #expect(life.handle(.sceneChanged(.background), now: 0) == [] && life.shown == shown)
            #expect(life.handle(.disconnectRequested, now: 0) == [.finishDisconnect(clean: true)])
        }
    }

    // MARK: stories

    @Test func aCrashLoopEndsInSetAsideAfterTheFailedStartLimit() {
        var life = window(after: [])
        var now: UInt64 = 0
        var setAsides = 0
        var deaths = 0
        while setAsides == 0, deaths < 10 {
            _ = life.handle(.spawnBegan, now: now)
            _ = life.handle(.spawned, now: now)
            let actions = life.handle(.workerDied(cleanExit: false, noFault: false), now: now)
            deaths += 1
            if actions.contains(.setAside) { setAsides += 1 }
            now = life.restartAt ?? now
        }
        #expect(deaths == policy.failedStartLimit && setAsides == 1)
    }

    @Test func shortagesNeverCountTowardsSettingTheSessionAside() throws {
        var life = window(after: [])
        var now: UInt64 = 0
        for attempt in 0..<50 {
            _ = life.handle(.spawnBegan, now: now)
            if attempt % 2 == 0 {
                #expect(life.handle(.spawnFailed(shortage: true), now: now) == [])
            } else {
                _ = life.handle(.spawned, now: now)
                #expect(life.handle(.workerDied(cleanExit: false, noFault: true), now: now) == [])
            }
            now = try #require(life.restartAt)
        }
        #expect(life.history.restarts == 0)
        #expect(life.handle(.spawnBegan, now: now) == [] && life.handle(.spawned, now: now) == [])
        // The first real failed start is the first: no set-aside.
        #expect(life.handle(.workerDied(cleanExit: false, noFault: false), now: now) == [])
    }

    // MARK: invariants

    /// Seeded random sequences of the events the supervisor can see, the actions carried out as
    /// the supervisor does: at most one worker, a ready window has one, no restart waits while
    /// one lives, and a gone window stays gone.
    @Test(arguments: 0..<40 as Range<UInt64>) func invariantsHoldOverRandomSequences(seed: UInt64) {
        var random = SplitMix(seed: seed)
        var life = Life(policy: policy, probingFloors: seed % 2 == 1, adopting: seed % 4 >= 2)
        var now: UInt64 = 0
        var workers = 0
        var forced: [Life.Event] = [.spawnBegan]
        for _ in 0..<400 {
            now += random.next() % (2 * second)
            let event = forced.isEmpty ? randomEvent(life, &random) : forced.removeFirst()
            guard let event else { break }
            let before = life.state
            let actions = life.handle(event, now: now)
            switch event {
            case .spawned: workers += 1
            case .workerDied: workers -= 1
            default: break
            }
            #expect(workers == (life.hasWorker ? 1 : 0), "\(before) + \(event) -> \(life.state)")
            #expect(life.invariantsHold)
            if life.state == .ready { #expect(workers == 1) }
            if life.restartAt != nil { #expect(workers == 0) }
            if case .disconnecting = before, case .workerDied = event { #expect(life.state == .gone) }
            for action in actions {
                switch action {
                case .spawn:
                    forced += [
                        .spawnBegan, random.next() % 4 == 0 ? .spawnFailed(shortage: random.next() % 2 == 0) : .spawned,
                    ]
                case .setAside:
                    #expect(!life.adopting, "an adopted session is given back, not set aside again")
                    forced.append(random.next() % 3 == 0 ? .setAsideFailed : .setAsideDone)
                case .abandonAdoption:
                    #expect(life.adopting)
                    forced += [.adoptionEnded, .disconnectRequested]
                case .kill, .terminate: forced.append(.workerDied(cleanExit: false, noFault: false))
                case .finishDisconnect: #expect(life.state == .gone)
                case .reportCannotStart, .sendShutdownDisconnect: break
                }
            }
            if life.state == .gone { break }
        }
    }

    /// One event the supervisor could see in `life`'s state (nil when none: the window is gone).
    func randomEvent(_ life: Life, _ random: inout SplitMix) -> Life.Event? {
        let died = Life.Event.workerDied(
            cleanExit: random.next() % 2 == 0, noFault: life.state == .starting && random.next() % 3 == 0)
        let scene = Life.Event.sceneChanged(random.next() % 2 == 0 ? .background : .foreground)
        var choices: [Life.Event]
        switch life.state {
        case .reserved: choices = [.spawnBegan]
        case .spawning: choices = [.spawned, .spawnFailed(shortage: true), .spawnFailed(shortage: false)]
        case .starting:
            let probe: [Life.Event] =
                switch life.floorProbe {
                case nil: [.becameReady]
                case .needed: [.probeAsked]
                case .asked: [.floorsProbed]
                }
            choices =
                probe + [
                    died, .killRequested, .disconnectRequested, .shutdownBegan, scene, .watchdogFired, .misbehaved,
                    .reapFailed,
                ]
        case .ready:
            choices =
                [died, died, .killRequested, .disconnectRequested, .shutdownBegan, scene, .watchdogFired, .misbehaved]
                + (life.stopping ? [.disconnectFailed] : [])
        case .disconnecting(let saving):
            choices =
                [died, .disconnectRequested, .shutdownBegan, scene, .killRequested, .misbehaved]
                + (saving ? [.disconnectFailed] : [])
        case .restartPending:
            choices =
                life.stopping
                ? [.disconnectRequested, scene]
                : [.restartTimerFired, .restartTimerFired, .disconnectRequested, .shutdownBegan, scene]
        case .stopped: choices = [.disconnectRequested, scene, .shutdownBegan]
        case .gone: return nil
        }
        if life.killRequested { choices.append(.killAbandoned) }
        if life.hasWorker, life.stopping { choices.append(.shutdownDeadlinePassed) }
        if life.adopting, random.next() % 8 == 0 { choices.append(.adoptionEnded) }
        return choices[Int(random.next() % UInt64(choices.count))]
    }
}

/// A small seeded generator (SplitMix64): the same sequences on every run.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
