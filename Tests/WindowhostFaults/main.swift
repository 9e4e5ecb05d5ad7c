import ArgumentParser
import Foundation
import Glibc
import IOUring
import WindowhostCLI

/// `windowhost-faults`: the command line as shipped, plus `save-loop`, with the fault switches
/// tests set in its environment. Tests only: no product ships it. Workers are spawned from
/// /proc/self/exe, so a host run from it has workers of it too.
struct WindowhostFaults: ParsableCommand {
    static let configuration = Windowhost.configuration(adding: [SaveLoopCommand.self])
}

/// Set to 1, the `powercut` engine acknowledges saves before the sync: a deliberate bug the
/// stress oracle must catch.
let acknowledgeBeforeSyncVariable = "WINDOWHOST_FAULT_ACK_BEFORE_SYNC"
/// A worker whose window is this UUID aborts after restoring something and before saying it is
/// ready, as a session that crashes every restore would. Once the session is set aside, the
/// window restores empty and starts.
let abortWhileRestoringVariable = "WINDOWHOST_FAULT_ABORT_RESTORE"

let environment = ProcessInfo.processInfo.environment
let acknowledgeBeforeSync = environment[acknowledgeBeforeSyncVariable] == "1"
let abortWhileRestoring = environment[abortWhileRestoringVariable]

Windowhost.start(
    WindowhostFaults.self,
    faults: CommandFaults(
        engine: { made, choice in
            acknowledgeBeforeSync && choice == .powercut ? AcknowledgingBeforeSyncEngine(made) : made
        },
        restored: { window in
            guard window.uuidString == abortWhileRestoring else { return }
            FileHandle.standardError.write(Data("aborting while restoring (\(abortWhileRestoringVariable))\n".utf8))
            abort()
        }))
