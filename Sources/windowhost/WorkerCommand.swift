import ArgumentParser
import CLinuxShims
import Foundation
import Glibc
import HostCoordination
import IOUring
import Logging
import SceneWorker
import SessionStore
import SystemPackage

/// One scene's worker, spawned by the supervisor with its own slot's memory (and no other
/// window's) at descriptor 3, its command doorbell at 4, the supervisor's doorbell at 5, and
/// `supervisor.lock` (read-only) at 6, held until the worker's last thread is gone: a new
/// supervisor starts only once no worker of the one before can still write.
struct WorkerProcessCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker", abstract: "One scene's worker (spawned by `windowhost run`).", shouldDisplay: false)

    @Option var slot: Int
    @Option var generation: UInt32
    @Option var window: UUID
    @Option var root: String
    @Option var saveDelay: UInt64
    @Option var supervisor: Int32
    @Option var compactAfter: Int?
    /// The highest seq and tab id clients of the supervisor may have seen for the window
    /// (`WorkerFloor`): the worker numbers above them.
    @Option var seqFloor: UInt64 = 0
    @Option var tabFloor: Int64 = 0
    @OptionGroup var io: IOOptions

    func validate() throws {
        guard floor != nil else {
            throw ValidationError("--seq-floor \(seqFloor) or --tab-floor \(tabFloor) is beyond what a window reaches (Limits)")
        }
    }

    private var floor: WorkerFloor? { WorkerFloor(seq: seqFloor, tab: tabFloor) }

    func run() throws {
        // The supervisor dying kills the worker; checked against the pid it was given after
        // setting, since the parent may have died before.
        guard wh_set_parent_death_signal(SIGKILL) == 0, getppid() == supervisor else {
            throw ExitCode(WorkerExit.orphaned.rawValue)
        }
        Logs.bootstrap()
        let logger = Logger(label: "windowhost.worker")
        do {
            let memory = try SlotMemory(attaching: FileDescriptor(rawValue: 3))
            let loop = try WorkerLoop(
                identity: WorkerIdentity(slot: slot, generation: generation, windowID: window, supervisorPID: supervisor),
                memory: memory, commands: Doorbell(descriptor: FileDescriptor(rawValue: 4)),
                supervisor: Doorbell(descriptor: FileDescriptor(rawValue: 5)), root: FilePath(root),
                engine: try io.makeEngine(quietly: true),
                options: compactAfter.map { StoreOptions(compactAfterRecords: $0) } ?? StoreOptions(), saveDelayMilliseconds: saveDelay,
                floor: floor ?? .none, logger: logger)
            throw ExitCode(loop.run().rawValue)
        } catch let error as RegionError {
            logger.critical("\(error)")
            throw ExitCode(WorkerExit.refused.rawValue)
        } catch let failure as WorkerFailure {
            logger.critical("\(failure)")
            throw ExitCode(failure.exit.rawValue)
        }
    }
}
