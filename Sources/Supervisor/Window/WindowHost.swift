import Foundation
import HostControl
import HostCoordination
import Logging

/// What a window's controller asks of the loop that holds it: the resources no one window owns.
/// The shared region's slot, the control server's clients, request ids, the root's files
/// (`handed-out`, `set-aside/`, `windows.order` through the registry), spawning a process and
/// the strays it leaves. `Supervisor` is the one host; the controller's tests bring their own.
protocol WindowHost: AnyObject {
    var configuration: SupervisorConfiguration { get }
    var logger: Logger { get }
    /// Shutdown began: no restart from now on, and what a window could not save is named.
    var isStopping: Bool { get }

    /// The window's slot in the shared region.
    func sharedSlot(_ index: Int) -> WindowSlot
    /// Whether `window` still holds its slot: once it is gone nothing more of it is carried out.
    func holds(_ window: WindowController) -> Bool
    func answer(_ client: ControlServer.ClientID, _ reply: ControlReply)
    func isConnected(_ client: ControlServer.ClientID) -> Bool
    func takeRequestID() -> UInt64
    /// Raises the window's `handed-out` ceilings to cover `needed`: why it could not, or nil.
    func recordHandedOut(_ window: WindowController, covering needed: HandedOutCeiling) -> String?
    /// Starts the window's worker, given its own slot's memory only.
    func launchWorker(for window: WindowController) throws(WorkerProcess.SpawnFailure) -> WorkerProcess
    /// What the window's dead worker left running is killed, before its next worker starts.
    func killStrays(leftBy window: WindowController)
    /// Its first restore: the window is open in the registry and `windows.order`.
    func configured(_ window: WindowController)
    /// Moves the window's session to `set-aside/`: why it could not be, or nil.
    func setAside(_ window: WindowController, reason: String) -> String?
    /// The adopted session goes back to its entry (`why` told to its client).
    func abandonAdoption(_ window: WindowController, why: String)
    /// The window is gone: its slot freed, its place in the registry given up.
    func release(_ window: WindowController, cleanExit: Bool, description: String)
    func secondsSinceStart(_ now: UInt64) -> Double
    /// A step of a move between windows answered by `window`'s worker (`MoveCoordinator`).
    func moveStepAnswered(_ window: WindowController, _ step: MoveStep, _ outcome: MoveStepOutcome)
    /// `window`'s worker died: the move steps it was sent go unanswered.
    func moveWorkerDied(_ window: WindowController)
    /// Whether the moves take `request` to `window`: refused while a move involves it (75), or
    /// a kill aimed at a move's stage, held until a move enters it (`MoveCoordinator.take`).
    func movesTake(_ request: WindowRequest, to window: WindowController, from client: ControlServer.ClientID) -> Bool
}
