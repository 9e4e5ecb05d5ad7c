import ArgumentParser
import Glibc
import HostCoordination
import Logging
import SceneWorker
import SystemPackage

/// A spare worker, spawned by the supervisor before any window needs it (`SpareLaunch`): it
/// starts as every worker does, says it is ready over its hand-over socket, and waits there for
/// a window. The window's slot memfd takes the socket's number (closing it), and from then on
/// it is the worker a spawn for that window would be. It holds no window before: what it is
/// handed is input, checked whole (`SpareHandOver.receive`); a refused hand-over is exit 65.
struct SpareWorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: SpareLaunch.subcommand, abstract: "A spare worker (spawned by `windowhost run`).",
        shouldDisplay: false)

    @OptionGroup var shared: SharedWorkerOptions

    func run() throws {
        let logger = try WorkerProcessCommand.begin(supervisor: shared.supervisor)
        let engine = try WorkerProcessCommand.engine(shared.io, logger: logger)
        let handed: WindowAssignment?
        do throws(SpareHandOver.Failure) {
            handed = try Self.takeWindow()
        } catch {
            logger.critical("\(error)")
            throw ExitCode(WorkerExit.handOverRefused.status)
        }
        // Sent away with no window: there is nothing to save.
        guard let assignment = handed else { throw ExitCode(WorkerExit.disconnected.status) }
        // The assignment's floors were checked against the same limits.
        guard let floor = WorkerFloor(seq: assignment.seqFloor, tab: assignment.tabFloor) else {
            preconditionFailure("a checked assignment's floors are within Limits")
        }
        try WorkerProcessCommand.serve(
            WorkerLaunch(shared.launch, assignment: assignment), floor: floor, engine: engine, logger: logger)
    }

    /// Says it is ready, waits for its window, and puts the window's memfd where a worker
    /// spawned for it holds its slot's memory: the hand-over socket there is closed by that.
    /// Nil when the supervisor sent it away without one.
    private static func takeWindow() throws(SpareHandOver.Failure) -> WindowAssignment? {
        let socket = SpareLaunch.handOverDescriptor.rawValue
        try SpareHandOver.sayReady(over: socket)
        guard let (assignment, memory) = try SpareHandOver.receive(on: socket) else { return nil }
        guard dup2(memory, WorkerLaunch.Descriptor.slotMemory.rawValue) >= 0 else {
            throw .system("dup2 the slot's memfd", Errno(rawValue: errno))
        }
        close(memory)
        return assignment
    }
}
