import Foundation
import Glibc
import HostControl
import HostCoordination
import Logging
import Platform
import SystemPackage
import Testing

@testable import Supervisor

/// A host with no process, socket or file behind it: what a window's controller asks of it is
/// recorded, and a worker never starts (`launchFailure`).
final class RecordingHost: WindowHost {
    let configuration = SupervisorConfiguration(
        root: FilePath("/nonexistent"), scenes: 0, socketPath: FilePath("/nonexistent/ctl.sock"),
        saveDelayMilliseconds: 0, io: "posix", executable: "/nonexistent")
    let logger = Logger(label: "test")
    var isStopping = false
    let region: SharedRegion
    var held: [Int: WindowController] = [:]
    var answers: [(client: ControlServer.ClientID, reply: ControlReply)] = []
    var nextRequest: UInt64 = 1
    var launchFailure = WorkerProcess.SpawnFailure(call: "posix_spawn", errno: .noSuchFileOrDirectory)
    var setAsideFailure: String?
    var setAsides: [String] = []
    var released: [(window: UUID, clean: Bool)] = []

    init() throws {
        region = try SharedRegion(slotCount: 4, supervisorPID: getpid())
    }

    /// A window held in `slot`, as `openWindow` makes it.
    func open(slot: Int = 1, policy: RestartPolicy = RestartPolicy()) -> WindowController {
        let window = WindowController(id: UUID(), slot: slot, policy: policy, reservedAt: 0)
        held[slot] = window
        return window
    }

    func codes(for client: ControlServer.ClientID) -> [ControlCode] {
        answers.filter { $0.client == client }.map(\.reply.code)
    }

    func sharedSlot(_ index: Int) -> WindowSlot { region.slot(index) }
    func holds(_ window: WindowController) -> Bool { held[window.slot] === window }
    func answer(_ client: ControlServer.ClientID, _ reply: ControlReply) { answers.append((client, reply)) }
    func isConnected(_ client: ControlServer.ClientID) -> Bool { true }
    func takeRequestID() -> UInt64 {
        defer { nextRequest += 1 }
        return nextRequest
    }
    func recordHandedOut(_ window: WindowController, covering needed: HandedOutCeiling) -> String? { nil }
    func launchWorker(for window: WindowController) throws(WorkerProcess.SpawnFailure) -> WorkerProcess {
        throw launchFailure
    }
    func killStrays(leftBy window: WindowController) {}
    func configured(_ window: WindowController) {}
    func setAside(_ window: WindowController, reason: String) -> String? {
        setAsides.append(reason)
        return setAsideFailure
    }
    func abandonAdoption(_ window: WindowController, why: String) {}
    func release(_ window: WindowController, cleanExit: Bool, description: String) {
        held[window.slot] = nil
        released.append((window.id, cleanExit))
    }
    func secondsSinceStart(_ now: UInt64) -> Double { 0 }
    func moveStepAnswered(_ window: WindowController, _ step: MoveStep, _ outcome: MoveStepOutcome) {}
    func moveWorkerDied(_ window: WindowController) {}
    func movesTake(_ request: WindowRequest, to window: WindowController, from client: ControlServer.ClientID) -> Bool {
        false
    }
}

/// The window's halves of spawn, death, requests and shutdown, driven through a host with no
/// process behind it: every action the lifecycle returns is carried out by `dispatch`.
@Suite struct WindowControllerHostTests {
    /// A spawn short of the supervisor's own resources waits for its backoff and counts
    /// nothing; the slot shows the window starting.
    @Test func aSpawnShortOfResourcesWaitsAndCountsNothing() throws {
        let host = try RecordingHost()
        host.launchFailure = WorkerProcess.SpawnFailure(call: "posix_spawn", errno: .tooManyOpenFiles)
        let window = host.open()
        window.spawn(in: host)
        guard case .restartPending(_, .spawnShortage) = window.lifecycle.state else {
            Issue.record("\(window.lifecycle.state)")
            return
        }
        #expect(window.history.shortages == 1 && window.history.failedStarts == 0)
        #expect(host.region.slot(1).state == .starting && window.generation == 1 && !window.isLive)
    }

    /// Spawns that fail for no shortage are failed starts: at the limit the session is set
    /// aside; when that fails too, the client waiting to connect is told why, not left waiting.
    @Test func failedStartsSetTheSessionAsideOrTellTheConnectWaiter() throws {
        let host = try RecordingHost()
        host.setAsideFailure = "the root is read-only"
        var policy = RestartPolicy()
        policy.failedStartLimit = 2
        let window = host.open(policy: policy)
        window.readyWaiters = [.connect(7)]
        window.spawn(in: host)
        var now = monotonicNanoseconds()
        while host.setAsides.isEmpty, let at = window.restartAt {
            now = max(now, at)
            window.dispatch(.restartTimerFired, now: now, in: host)
        }
        #expect(host.setAsides.count == 1 && host.setAsides[0].contains("2 times in a row"))
        #expect(host.codes(for: 7) == [.ioError], "the connect waiter is told the window cannot start")
        #expect(window.readyWaiters.isEmpty)
        guard case .restartPending(_, .setAside) = window.lifecycle.state else {
            Issue.record("\(window.lifecycle.state)")
            return
        }
    }

    /// A disconnect of a window with no worker frees its slot through the host and answers
    /// every exit waiter and aimed kill; nothing more of it is carried out once it is gone.
    @Test func aDisconnectWithNoWorkerReleasesTheWindowAndAnswersItsWaiters() throws {
        let host = try RecordingHost()
        let window = host.open()
        window.exitWaiters = [3]
        window.aimedKills = [
            WindowController.AimedKill(
                request: WindowController.KillRequest(signal: SIGKILL, wait: false, aim: .save), client: 4, deadline: 0)
        ]
        window.handle(.scene(.disconnect), from: 5, in: host)
        #expect(window.lifecycle.state == .gone && !host.holds(window))
        #expect(host.released.map(\.clean) == [true])
        #expect(host.codes(for: 3) == [.ok] && host.codes(for: 5) == [.ok])
        #expect(host.codes(for: 4) == [.temporary] && window.aimedKills.isEmpty)
        window.dispatch(.restartTimerFired, in: host)
        #expect(host.released.count == 1, "a window gone is never carried out again")
    }

    /// A request to a window with no worker is refused with 75, a kill too; `wait-durable`
    /// answers from the window's seqs: 65 for a seq it never had, 0 once durable.
    @Test func requestsWithoutAWorkerAreRefusedAndDurableWaitsAnsweredFromTheSeqs() throws {
        let host = try RecordingHost()
        let window = host.open()
        window.handle(.dump, from: 1, in: host)
        window.handle(.kill(signal: SIGKILL, wait: false, aim: nil), from: 2, in: host)
        window.handle(.waitDurable(seq: 9), from: 3, in: host)
        window.seqs.apply(9)
        var stats = WorkerStats()
        (stats.appliedSeq, stats.durableSeq) = (9, 9)
        window.accept(stats)
        window.handle(.waitDurable(seq: 9), from: 4, in: host)
        #expect(host.codes(for: 1) == [.temporary] && host.codes(for: 2) == [.temporary])
        #expect(host.codes(for: 3) == [.badData] && host.codes(for: 4) == [.ok])
        #expect(window.durableWaiters.isEmpty && window.pending.isEmpty, "nothing was sent: no worker")
    }

    /// Shutdown tells an adoption's client and a close for good that they will not end, and
    /// stops a window with no worker; a later deadline kills nothing.
    @Test func shutdownAnswersWhatWillNotEndAndStopsAWindowWithNoWorker() throws {
        let host = try RecordingHost()
        host.launchFailure = WorkerProcess.SpawnFailure(call: "posix_spawn", errno: .tooManyOpenFiles)
        let window = host.open()
        window.spawn(in: host)
        window.closingForGood = 6
        host.isStopping = true
        window.beginShutdown(in: host)
        #expect(host.codes(for: 6) == [.temporary] && window.closingForGood == nil)
        #expect(window.lifecycle.stopping && window.restartAt == nil)
        guard case .stopped = window.lifecycle.state else {
            Issue.record("\(window.lifecycle.state)")
            return
        }
        window.shutdownDeadlinePassed(in: host)
        #expect(window.keptUnsaved.isEmpty, "no worker: nothing was left unsaved")
    }

    /// A disconnect whose save failed while stopping: the window goes on (killed, as the
    /// supervisor stops), its unsaved changes are named, and the close-for-good client and the
    /// disconnect's own are told it stays whole.
    @Test func aFailedDisconnectWhileStoppingIsKeptUnsavedAndTold() throws {
        let host = try RecordingHost()
        let window = host.open()
        for event in [WindowLifecycle.Event.spawnBegan, .spawned, .becameReady, .disconnectRequested] {
            _ = window.handle(event, now: 0)
        }
        window.closingForGood = 8
        host.isStopping = true
        var failure = CommandFailure()
        failure.kind = .io
        failure.message = "no space left on device"
        var reply = WorkerReply()
        reply.request = 1
        reply.outcome = .failure(failure)
        let asked = WindowController.Pending(client: 9, kind: .scene(.disconnect), failuresBefore: 0)
        window.handleReply(reply, asked, in: host)
        #expect(window.keptUnsaved == ["no space left on device"])
        #expect(window.lifecycle.state == .ready && window.closingForGood == nil)
        #expect(host.codes(for: 9) == [.ioError] && host.codes(for: 8) == [.ioError])
    }
}
