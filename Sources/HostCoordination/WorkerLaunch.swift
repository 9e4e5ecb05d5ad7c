import Foundation
import SystemPackage

/// The contract between the supervisor and the worker it starts, in one place: what the
/// worker is told on its command line (`arguments`), which descriptors it inherits at which
/// numbers (`Descriptor`), and what its exit status means (`WorkerExit`). The supervisor builds
/// one and spawns it; `windowhost worker` parses its options back into one.
public struct WorkerLaunch: Equatable, Sendable {
    /// The descriptors a worker inherits, at fixed numbers. The spawn hands `inherit[i]` over
    /// as descriptor 3 + i (`spawnProcess`), so the cases are in that order, from 3 up.
    public enum Descriptor: Int32, CaseIterable, Sendable {
        /// Its own slot's memfd, and no other window's (`SharedRegion.descriptor(ofSlot:)`).
        case slotMemory = 3
        /// The doorbell the supervisor rings when a command waits in the slot's ring.
        case commands = 4
        /// The doorbell the worker rings after publishing (readiness, replies, stats).
        case supervisorBell = 5
        /// `supervisor.lock`, read-only, held until the worker's last thread is gone: a new
        /// supervisor starts only once no worker of the one before can still write.
        case supervisorLock = 6

        public var fileDescriptor: FileDescriptor { FileDescriptor(rawValue: rawValue) }
    }

    /// The subcommand of the `windowhost` binary that runs a worker.
    public static let subcommand = "worker"

    public var slot: Int
    /// The generation its slot shows: a worker refuses a slot of another (`WorkerExit.refused`).
    public var generation: UInt32
    public var window: UUID
    public var root: FilePath
    public var saveDelayMilliseconds: UInt64
    /// The I/O engine (`--io`); nil leaves it to the worker's `WINDOWHOST_IO`, else auto.
    public var io: String?
    /// The pid its parent must have: the worker exits at once if the supervisor is gone.
    public var supervisorPID: Int32
    /// The highest seq and tab id clients of the supervisor may have seen for the window
    /// (`WorkerFloor`): the worker numbers above them. Checked when heard (`violation`,
    /// `handleReply`): within `Limits`, as the worker checks again.
    public var seqFloor: UInt64
    public var tabFloor: Int64
    /// Compact a journal past this many records (the store's default when nil).
    public var compactAfterRecords: Int?
    /// The scene is in the background: the restored window displays no tab (none is realized)
    /// until the scene comes to the foreground.
    public var inBackground: Bool

    public init(
        slot: Int, generation: UInt32, window: UUID, root: FilePath, saveDelayMilliseconds: UInt64, io: String?,
        supervisorPID: Int32, seqFloor: UInt64, tabFloor: Int64, compactAfterRecords: Int?, inBackground: Bool = false
    ) {
        self.slot = slot
        self.generation = generation
        self.window = window
        self.root = root
        self.saveDelayMilliseconds = saveDelayMilliseconds
        self.io = io
        self.supervisorPID = supervisorPID
        self.seqFloor = seqFloor
        self.tabFloor = tabFloor
        self.compactAfterRecords = compactAfterRecords
        self.inBackground = inBackground
    }

    /// A spare's launch handed `assignment`: what a worker spawned for that window is told.
    public init(_ spare: SpareLaunch, assignment: WindowAssignment) {
        self.init(
            slot: assignment.slot, generation: assignment.generation, window: assignment.window, root: spare.root,
            saveDelayMilliseconds: spare.saveDelayMilliseconds, io: spare.io, supervisorPID: spare.supervisorPID,
            seqFloor: assignment.seqFloor, tabFloor: assignment.tabFloor,
            compactAfterRecords: spare.compactAfterRecords, inBackground: assignment.inBackground)
    }

    /// What every worker of the supervisor is told alike: a spare's whole launch.
    public var spare: SpareLaunch {
        SpareLaunch(
            root: root, saveDelayMilliseconds: saveDelayMilliseconds, io: io, supervisorPID: supervisorPID,
            compactAfterRecords: compactAfterRecords)
    }

    /// What is the window's own: what a spare is handed (`WindowAssignment`).
    public var assignment: WindowAssignment {
        WindowAssignment(
            slot: slot, generation: generation, window: window, seqFloor: seqFloor, tabFloor: tabFloor,
            inBackground: inBackground)
    }

    /// The worker's whole command line, `executable` first: what `windowhost worker` parses.
    public func arguments(executable: String) -> [String] {
        [
            executable, Self.subcommand,
            "--slot", "\(slot)", "--generation", "\(generation)", "--window", window.uuidString,
            "--seq-floor", "\(seqFloor)", "--tab-floor", "\(tabFloor)",
        ] + (inBackground ? ["--background"] : []) + spare.options
    }
}

/// A spare worker's launch (`windowhost spare`): what every worker of the supervisor is told
/// alike, and no window. It is started with the descriptors every worker holds but its slot's
/// memory: the hand-over socket sits at `handOverDescriptor` instead, until the window's memfd
/// arrives over it with a `WindowAssignment` and takes its number.
public struct SpareLaunch: Equatable, Sendable {
    /// The subcommand of the `windowhost` binary that runs a spare.
    public static let subcommand = "spare"
    /// Where a spare holds its end of the hand-over socket: the number its slot's memory takes.
    public static let handOverDescriptor = WorkerLaunch.Descriptor.slotMemory
    /// The byte a spare sends once it is ready to be handed a window.
    public static let readyByte: UInt8 = 1

    public var root: FilePath
    public var saveDelayMilliseconds: UInt64
    public var io: String?
    public var supervisorPID: Int32
    public var compactAfterRecords: Int?

    public init(
        root: FilePath, saveDelayMilliseconds: UInt64, io: String?, supervisorPID: Int32, compactAfterRecords: Int?
    ) {
        self.root = root
        self.saveDelayMilliseconds = saveDelayMilliseconds
        self.io = io
        self.supervisorPID = supervisorPID
        self.compactAfterRecords = compactAfterRecords
    }

    /// The options every worker's command line carries.
    var options: [String] {
        ["--root", root.string, "--save-delay", "\(saveDelayMilliseconds)", "--supervisor", "\(supervisorPID)"]
            + (io.map { ["--io", $0] } ?? []) + (compactAfterRecords.map { ["--compact-after", "\($0)"] } ?? [])
    }

    /// The spare's whole command line, `executable` first: what `windowhost spare` parses.
    public func arguments(executable: String) -> [String] { [executable, Self.subcommand] + options }
}

/// How a worker ends, as its exit status: what the supervisor reads from the pidfd. Each
/// status is a code of the one table (`ControlCode`).
public enum WorkerExit: Sendable, CaseIterable {
    /// Disconnected: saved what was unsaved.
    case disconnected
    /// The supervisor is gone (its pid is no longer the parent).
    case orphaned
    /// The window could not be restored (a storage error): counts as a failed start.
    case restoreFailed
    /// The restore ran short of the worker's own descriptors or memory, or the keyring failed
    /// (not refused) when it looked up the incognito key (EX_TEMPFAIL): no fault
    /// of the window's, whose files are left as they were. The supervisor starts it again after
    /// its shortage backoff and never counts it as a failed start
    /// (`RestartPolicy.diedOfNoFaultOfTheSession`), so a good session is never set aside for it.
    case restoreShortOfResources
    /// The restore could not reach the storage: the file system under the root failed as a
    /// whole (`Errno.isStorageUnavailable`: a dead FUSE daemon, a device gone, a full disk).
    /// No fault of the window's, whose files are left as they were: like a shortage, it is
    /// started again after a backoff and never counted as a failed start, so the session is
    /// never set aside for it; meanwhile durable waits on the window answer 74.
    case restoreStorageUnavailable
    /// The slot belongs to another generation or window, or its memory is of another layout.
    case refused
    /// A spare was handed a window in a message it refuses (`WindowAssignment.Refusal`), or
    /// with no slot memfd, or with more than one descriptor (EX_DATAERR).
    case handOverRefused

    public var code: ControlCode {
        switch self {
        case .disconnected: .ok
        case .orphaned: .software
        case .restoreFailed: .ioError
        case .restoreShortOfResources: .temporary
        case .restoreStorageUnavailable: .unavailable
        case .refused: .config
        case .handOverRefused: .badData
        }
    }

    /// The exit status itself.
    public var status: Int32 { code.rawValue }
}
