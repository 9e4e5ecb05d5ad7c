import Foundation
import IOUring
import Synchronization

/// What a test build of the command line changes (`windowhost-faults`, built from Tests/ and
/// shipped by no product): the shipped `windowhost` installs `none`, so nothing in it, no
/// environment variable nor hidden command, can weaken durability or a check.
public struct CommandFaults: Sendable {
    /// Wraps every engine a command makes, given the choice it was made for.
    public var engine: @Sendable (_ made: any IOEngine, _ choice: IOEngineChoice) -> any IOEngine
    /// Runs in a worker that restored something of `window`, before it says it is ready.
    public var restored: @Sendable (_ window: UUID) -> Void

    public init(
        engine: @escaping @Sendable (_ made: any IOEngine, _ choice: IOEngineChoice) -> any IOEngine,
        restored: @escaping @Sendable (_ window: UUID) -> Void
    ) {
        self.engine = engine
        self.restored = restored
    }

    /// Engines as made, restores that go on.
    public static let none = CommandFaults(engine: { made, _ in made }, restored: { _ in })

    private static let installed = Mutex(CommandFaults.none)

    /// Set once by `Windowhost.start`, before a command parses.
    static func install(_ faults: CommandFaults) { installed.withLock { $0 = faults } }

    /// What `start` installed.
    static var current: CommandFaults { installed.withLock { $0 } }
}
