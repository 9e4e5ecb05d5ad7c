import Foundation
import HostControl
import HostCoordination
import HostLimits
import IOUring
import SessionStore

/// One open window as the supervisor keeps it: its lifecycle, the worker serving it, its seqs
/// (`SeqBook`), and the clients waiting on it (replies, readiness, durability, its exit). One
/// per slot, held by reference in `Supervisor.windows`, so a change is made once where it is
/// made, never copied out and written back.
///
/// What it decides alone, with no process, descriptor or file behind it, is here and tested
/// so (`WindowControllerTests`): which waiters a save or a death answers, what a new worker
/// starts from. The supervisor carries out what needs the world: spawns, signals, replies.
final class WindowController {
    typealias ClientID = ControlServer.ClientID

    let id: UUID
    let slot: Int
    /// Its state, restarts and deaths: the only place either changes (`dispatch`).
    var lifecycle: WindowLifecycle
    var configured = false
    /// The worker serving it, from its spawn until its death is handled (`workerDied`).
    var worker: WorkerProcess?
    var generation: UInt32 = 0
    var spawnedAt: UInt64 = 0
    var reservedAt: UInt64
    var diedAt: UInt64?
    var lastRecoveryNanoseconds: UInt64?
    /// Its seqs and tab ids: applied, shown, floor, lost (`SeqBook`, which checks them).
    var seqs = SeqBook()
    /// The last worker's restore failed on a storage error (`WorkerExit.restoreFailed`, or
    /// `restoreStorageUnavailable` when the file system failed as a whole), until a worker restores: the file system refuses the window's session, so a request
    /// waiting on a save answers 74 at once, not 75 (a retry would meet the same storage).
    var restoreFailedOnStorage: String?
    /// The slot's heartbeat word as the supervisor last saw it, and when (its own clock) it
    /// saw that word change: the watchdog trusts no value a worker writes, only that it moves.
    var heartbeatSeen: UInt64 = 0
    var heartbeatChangedAt: UInt64 = 0
    var lastStats = WorkerStats()
    /// Requests sent to the worker and not yet answered.
    var pending: [UInt64: Pending] = [:]
    /// The worker's reply coming in parts, if one is (`drainReplies`); dropped with the worker.
    var assembly = ReplyAssembly()
    var readyWaiters: [ReadyWaiter] = []
    var exitWaiters: [ClientID] = []
    var durableWaiters: [DurableWaiter] = []
    /// The first command whose effect was only in a memory-only incognito Browser, from any
    /// of the window's workers: durable answers covering it are exit 71.
    var memoryOnlySince: UInt64?
    /// The set-aside entry this window brings back, until it has restored and saved.
    var adoption: Adoption?
    /// The `close-window` client this window's disconnect answers, once it is deleted.
    var closingForGood: ClientID?
    /// Why shutdown could not save the window's changes, each time it could not: named at the
    /// end, and the exit status is then 75.
    var keptUnsaved: [String] = []
    /// `kill --aim`s waiting for the slot to show a save in flight (`retryAimedKills`).
    var aimedKills: [AimedKill] = []

    var isLive: Bool { worker != nil }
    /// Killed for breaking the protocol: nothing more it publishes is read.
    var killedForMisbehaving: Bool { lifecycle.kills.contains(.misbehaved) }
    /// The supervisor's watchdog killed the worker now serving: its restart says so.
    var killedByWatchdog: Bool { lifecycle.kills.contains(.watchdog) }
    /// The floor probe its worker is to answer, if any (`WindowLifecycle.FloorProbe`).
    var floorProbe: WindowLifecycle.FloorProbe? { lifecycle.floorProbe }
    /// The worker's pid, 0 while none serves.
    var pid: Int32 { worker?.pid ?? 0 }
    var state: SlotState { lifecycle.shown }
    /// Whether the scene is in the background (kept across restarts).
    var inBackground: Bool { lifecycle.scene == .background }
    var history: RestartPolicy.History { lifecycle.history }
    var restartAt: UInt64? { lifecycle.restartAt }

    /// Serving: the lifecycle says ready (only `becameReady` leads there; a failed disconnect
    /// leads back only from a worker that was ready) and its worker is not yet seen dead.
    var isReady: Bool { isLive && lifecycle.state == .ready }
    /// The live worker, or the last one, restored the window (`WindowLifecycle.workerRestored`).
    var workerRestored: Bool { lifecycle.workerRestored }

    init(
        id: UUID, slot: Int, policy: RestartPolicy, reservedAt: UInt64, probingFloors: Bool = false,
        adoption: Adoption? = nil
    ) {
        self.id = id
        self.slot = slot
        self.lifecycle = WindowLifecycle(policy: policy, probingFloors: probingFloors, adopting: adoption != nil)
        self.reservedAt = reservedAt
        self.adoption = adoption
    }

    /// The adoption, taken out as it ends; the lifecycle's `adoptionEnded` follows.
    func endAdoption() -> Adoption? {
        defer { adoption = nil }
        return adoption
    }

    /// Feeds the lifecycle `event`: the actions it returns are the caller's to carry out.
    func handle(_ event: WindowLifecycle.Event, now: UInt64) -> [WindowLifecycle.Action] {
        lifecycle.handle(event, now: now)
    }

    /// Takes a worker's checked stats as the window's latest. The first memory-only seq is kept
    /// across the window's workers: those changes are gone with the one that held them, and no
    /// durable answer may cover them (`durableAnswer`), whichever read saw the word first.
    func accept(_ stats: WorkerStats) {
        assert(stats.violation == nil, "only checked stats are accepted")
        lastStats = stats
        guard stats.memoryOnlySince != 0 else { return }
        memoryOnlySince = min(memoryOnlySince ?? stats.memoryOnlySince, stats.memoryOnlySince)
    }

    /// Before a worker is spawned for the window: a new generation, numbering above every seq
    /// a client may have seen (the lifecycle's `spawnBegan` clears the last worker's kills).
    func prepareSpawn() {
        assert(worker == nil, "a window has one worker at a time")
        seqs.raiseFloorForSpawn(published: lastStats.appliedSeq)
        generation += 1
        assert(
            lastStats.durableSeq <= seqs.floor,
            "durable < the next seq a worker may take: the new worker numbers above every seq applied")
    }

    /// The durable waits a look at the slot ends: `done`, covered by `durable`; `failed`, asked
    /// before the slot's failed-save count passed theirs while saves fail. The others wait on.
    func takeDurableWaiters(durable: UInt64, saveFailures failures: UInt64, failing: Bool) -> (
        done: [DurableWaiter], failed: [DurableWaiter]
    ) {
        var done: [DurableWaiter] = []
        var failed: [DurableWaiter] = []
        var waiting: [DurableWaiter] = []
        for waiter in durableWaiters {
            if waiter.seq <= durable {
                done.append(waiter)
            } else if failing, failures > waiter.failuresBefore {
                failed.append(waiter)
            } else {
                waiting.append(waiter)
            }
        }
        assert(done.count + failed.count + waiting.count == durableWaiters.count, "every waiter is answered or waits")
        durableWaiters = waiting
        return (done, failed)
    }

    /// The durable waits for seqs above `seq`, which no save of this window will cover now.
    func takeDurableWaiters(above seq: UInt64) -> [DurableWaiter] {
        let stale = durableWaiters.filter { $0.seq > seq }
        durableWaiters.removeAll { $0.seq > seq }
        assert(durableWaiters.allSatisfy { $0.seq <= seq }, "no wait is left for a seq no save covers")
        return stale
    }

    /// The clients waiting for the window to connect.
    func takeConnectWaiters() -> [ClientID] {
        var connecting: [ClientID] = []
        readyWaiters.removeAll { waiter in
            guard case .connect(let client) = waiter else { return false }
            connecting.append(client)
            return true
        }
        assert(
            !readyWaiters.contains { if case .connect = $0 { true } else { false } }, "every connect waiter is taken")
        return connecting
    }

    /// Every `kill` waiting for the window's restart (a shutdown: none follows).
    func takeRestartWaiters() -> [ReadyWaiter] {
        var waiting: [ReadyWaiter] = []
        readyWaiters.removeAll { waiter in
            guard case .restart = waiter else { return false }
            waiting.append(waiter)
            return true
        }
        assert(!waitsForRestart, "every kill waiting for a restart is taken")
        return waiting
    }

    /// The `kill`s whose wait ended by `now` while the worker they signalled still serves: the
    /// signal did not kill. Whether a kill still waits is then `waitsForRestart`.
    func takeExpiredKillWaiters(now: UInt64) -> [ReadyWaiter] {
        var expired: [ReadyWaiter] = []
        let (pid, isLive) = (pid, isLive)
        readyWaiters.removeAll { waiter in
            guard case .restart(_, let killed, _, let deadline) = waiter, deadline <= now, isLive,
                pid == killed.killedPid
            else { return false }
            expired.append(waiter)
            return true
        }
        return expired
    }

    /// Why the watchdog kills the live worker, if it does.
    enum Hang: Equatable {
        /// Ready, and its heartbeat word has not moved for this long.
        case silent(nanoseconds: UInt64)
        /// Starting, and not restored within the start timeout.
        case notRestored
    }

    /// The watchdog's count starts at `now`, from whatever the heartbeat word holds.
    func startWatching(heartbeat: UInt64, now: UInt64) {
        assert(now >= heartbeatChangedAt, "the supervisor's clock only rises")
        heartbeatSeen = heartbeat
        heartbeatChangedAt = now
    }

    /// The watchdog's look at the live worker (`runTimers`), its slot's heartbeat word `heartbeat`:
    /// a ready one is hung once the word has not moved for `watchdogNanoseconds`, one starting
    /// once it has not restored `startTimeoutNanoseconds` after its spawn. Only whether the word
    /// moves counts, timed by the supervisor's clock: a value written once (0, or one in the
    /// future) and left there is no heartbeat. Notes the word when it moved. Nil once the
    /// watchdog has killed this worker.
    func watch(heartbeat: UInt64, now: UInt64, watchdogNanoseconds: UInt64, startTimeoutNanoseconds: UInt64) -> Hang? {
        // Its kill is sent: the death, not another look, comes next (a worker in uninterruptible
        // sleep may take a while to die, and is neither killed nor logged again meanwhile).
        guard !killedByWatchdog else { return nil }
        guard lifecycle.state == .ready else {
            guard !lifecycle.workerRestored, now - spawnedAt > startTimeoutNanoseconds else { return nil }
            return .notRestored
        }
        guard heartbeat == heartbeatSeen else {
            startWatching(heartbeat: heartbeat, now: now)
            return nil
        }
        guard now > heartbeatChangedAt, now - heartbeatChangedAt > watchdogNanoseconds else { return nil }
        return .silent(nanoseconds: now - heartbeatChangedAt)
    }

    /// Whether a `kill` waits for the window's restart.
    var waitsForRestart: Bool { readyWaiters.contains { if case .restart = $0 { true } else { false } } }

    struct Pending {
        let client: ClientID?
        let kind: Kind
        /// The slot's failed-save count when the request was sent: a `save --wait` fails on
        /// a failure after it.
        let failuresBefore: UInt64

        /// What was asked, which decides how its reply is answered.
        enum Kind: Equatable {
            case tab(TabCommand)
            case scene(SceneChange)
            /// Shutdown's disconnect, no client's: its failure is noted as kept unsaved.
            case shutdownDisconnect
            /// `wait`: a `save --wait`, answered once the save is durable.
            case save(wait: Bool)
            case dump
            /// The dump of the lifecycle's floor probe (`WindowLifecycle.FloorProbe`): never a client's.
            case floorProbe
            /// The save an adopted window makes once restored (`WindowController.afterRestore`).
            case adoptionSave
            /// A step of a move between windows: its reply goes to the `MoveCoordinator`.
            case move(MoveStep)

            /// What the worker's ring carries for it.
            var command: WindowCommand {
                switch self {
                case .tab(let command): .tab(command)
                case .scene(let change): .scene(change)
                case .shutdownDisconnect: .scene(.disconnect)
                case .save, .adoptionSave: .save
                case .dump: .dump
                case .floorProbe: .probe
                case .move(let step): .move(step)
                }
            }

            var isDisconnect: Bool { self == .scene(.disconnect) || self == .shutdownDisconnect }

            /// Whether the worker may number it with the window's next seq: a tab command, or a
            /// foreground, which stamps the active tabs (`SceneWindow`).
            var mayTakeSeq: Bool {
                switch self {
                case .tab, .scene(.foreground), .move(.import), .move(.drop): true
                default: false
                }
            }

            var createsTab: Bool {
                switch self {
                case .tab(let command): command.createsTab
                case .move(.import): true
                default: false
                }
            }
        }
    }

    /// A client waiting until every command up to `seq` is durable. A save failing after it
    /// asked (the slot's failure count passing `failuresBefore`) answers it with 74 at once.
    struct DurableWaiter {
        let seq: UInt64
        let client: ClientID
        let failuresBefore: UInt64
    }

    enum ReadyWaiter {
        case connect(ClientID)
        /// A `kill` waiting for the worker it signalled to be replaced, with its reply as at the
        /// signal; answered 75 at `deadline` if that worker is still alive then (the signal was
        /// caught or ignored).
        case restart(ClientID, reply: KillReply, signal: String, deadline: UInt64)
    }
}
