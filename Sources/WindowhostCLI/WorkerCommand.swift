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

/// One scene's worker, spawned by the supervisor with the descriptors `WorkerLaunch.Descriptor`
/// names (its own slot's memory and no other window's, the two doorbells, `supervisor.lock`).
/// Its options are `WorkerLaunch.arguments`, parsed back into the launch (`launch`).
struct WorkerProcessCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: WorkerLaunch.subcommand, abstract: "One scene's worker (spawned by `windowhost run`).",
        shouldDisplay: false)

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
    /// The scene is in the background: no tab is displayed (realized) until it comes forward.
    @Flag var background = false
    @OptionGroup var io: IOOptions

    func validate() throws {
        guard floor != nil else {
            throw ValidationError(
                "--seq-floor \(seqFloor) or --tab-floor \(tabFloor) is beyond what a window reaches (Limits)")
        }
    }

    private var floor: WorkerFloor? { WorkerFloor(seq: seqFloor, tab: tabFloor) }

    /// What the supervisor launched: the options as one value.
    var launch: WorkerLaunch {
        WorkerLaunch(
            slot: slot, generation: generation, window: window, root: FilePath(root), saveDelayMilliseconds: saveDelay,
            io: io.choice?.rawValue,
            supervisorPID: supervisor, seqFloor: seqFloor, tabFloor: tabFloor, compactAfterRecords: compactAfter,
            inBackground: background)
    }

    func run() throws {
        TerminalStops.ignore()
        let launch = launch
        // The supervisor dying kills the worker; checked against the pid it was given after
        // setting, since the parent may have died before.
        guard wh_set_parent_death_signal(SIGKILL) == 0, getppid() == launch.supervisorPID else {
            throw ExitCode(WorkerExit.orphaned.status)
        }
        Logs.bootstrap()
        let logger = Logger(label: "windowhost.worker")
        do {
            // The supervisor said which engine runs; what this worker's kernel refused of it
            // (registered buffers past the user's locked-memory limit) is the worker's to say.
            let engine = try io.makeEngine(quietly: true)
            for refusal in engine.refusals { logger.notice("io_uring without \(refusal)") }
            let memory = try SlotMemory(attaching: WorkerLaunch.Descriptor.slotMemory.fileDescriptor)
            let loop = try WorkerLoop(
                identity: WorkerIdentity(
                    slot: launch.slot, generation: launch.generation, windowID: launch.window,
                    supervisorPID: launch.supervisorPID),
                memory: memory, commands: Doorbell(descriptor: WorkerLaunch.Descriptor.commands.fileDescriptor),
                supervisor: Doorbell(descriptor: WorkerLaunch.Descriptor.supervisorBell.fileDescriptor),
                root: launch.root,
                engine: engine,
                options: launch.compactAfterRecords.map { StoreOptions(compactAfterRecords: $0) } ?? StoreOptions(),
                saveDelayMilliseconds: launch.saveDelayMilliseconds, floor: floor ?? .none,
                foreground: !launch.inBackground, logger: logger,
                afterRestore: CommandFaults.current.restored)
            throw ExitCode(loop.run().status)
        } catch let error as RegionError {
            logger.critical("\(error)")
            throw ExitCode(WorkerExit.refused.status)
        } catch let failure as WorkerFailure {
            logger.critical("\(failure)")
            throw ExitCode(failure.exit.status)
        }
    }
}
