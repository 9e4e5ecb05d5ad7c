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
    /// The highest seq and tab id clients of the supervisor may have seen for the window
    /// (`WorkerFloor`): the worker numbers above them.
    @Option var seqFloor: UInt64 = 0
    @Option var tabFloor: Int64 = 0
    /// The scene is in the background: no tab is displayed (realized) until it comes forward.
    @Flag var background = false
    @OptionGroup var shared: SharedWorkerOptions

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
            shared.launch,
            assignment: WindowAssignment(
                slot: slot, generation: generation, window: window, seqFloor: seqFloor, tabFloor: tabFloor,
                inBackground: background))
    }

    func run() throws {
        let logger = try Self.begin(supervisor: shared.supervisor)
        try Self.serve(launch, floor: floor ?? .none, engine: Self.engine(shared.io, logger: logger), logger: logger)
    }

    /// What every worker does first, a spare too: its terminal stops ignored, its death tied to
    /// the supervisor's (checked against the pid it was given after setting, since the parent
    /// may have died before), its logs.
    static func begin(supervisor: Int32) throws -> Logger {
        TerminalStops.ignore()
        guard wh_set_parent_death_signal(SIGKILL) == 0, getppid() == supervisor else {
            throw ExitCode(WorkerExit.orphaned.status)
        }
        Logs.bootstrap()
        return Logger(label: "windowhost.worker")
    }

    /// The engine the supervisor said runs; what this worker's kernel refused of it (registered
    /// buffers past the user's locked-memory limit) is the worker's to say.
    static func engine(_ io: IOOptions, logger: Logger) throws -> any IOEngine {
        let engine = try io.makeEngine(quietly: true)
        for refusal in engine.refusals { logger.notice("io_uring without \(refusal)") }
        return engine
    }

    /// Restores `launch`'s window from the slot memory at its descriptor and serves it: exits
    /// with the loop's `WorkerExit`.
    static func serve(_ launch: WorkerLaunch, floor: WorkerFloor, engine: any IOEngine, logger: Logger) throws {
        do {
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
                saveDelayMilliseconds: launch.saveDelayMilliseconds, floor: floor,
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

/// What every worker of a supervisor is told alike (`SpareLaunch`): part of a worker's options,
/// and the whole of a spare's.
struct SharedWorkerOptions: ParsableArguments {
    @Option var root: String
    @Option var saveDelay: UInt64
    @Option var supervisor: Int32
    @Option var compactAfter: Int?
    @OptionGroup var io: IOOptions

    var launch: SpareLaunch {
        SpareLaunch(
            root: FilePath(root), saveDelayMilliseconds: saveDelay, io: io.choice?.rawValue, supervisorPID: supervisor,
            compactAfterRecords: compactAfter)
    }
}
