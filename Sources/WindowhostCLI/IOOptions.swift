import ArgumentParser
import Foundation
import IOUring
import Stress

extension IOEngineChoice: ExpressibleByArgument {}

/// `--io auto|uring|sync`, else `WINDOWHOST_IO`, else auto: wherever the CLI writes sessions.
public struct IOOptions: ParsableArguments {
    @Option(
        name: .customLong("io"),
        help:
            "I/O engine: auto (io_uring, else blocking), uring, sync, or powercut (blocking, unsynced writes held in memory: a kill is a power cut). Default: $WINDOWHOST_IO, else auto."
    )
    var choice: IOEngineChoice?

    public init() {}

    /// The engine, and a line saying which one runs and why (stderr, so scripts can read
    /// stdout), unless `quietly` (workers: the supervisor has said it once).
    public func makeEngine(quietly: Bool = false) throws -> any IOEngine {
        let choice: IOEngineChoice
        do {
            choice =
                try self.choice ?? IOEngineChoice.fromEnvironment(ProcessInfo.processInfo.environment["WINDOWHOST_IO"])
        } catch {
            throw ValidationError("\(error)")
        }
        do {
            let (made, fallback) = try choice.makeEngine()
            let engine = CommandFaults.current.engine(made, choice)
            if quietly {
                return engine
            } else if let fallback {
                StandardStreams.error("windowhost: I/O engine sync (io_uring refused: \(fallback))\n")
            } else {
                let without =
                    engine.refusals.isEmpty
                    ? "" : " (the kernel refused, and it runs without: \(engine.refusals.joined(separator: "; ")))"
                StandardStreams.error("windowhost: I/O engine \(engine.name)\(without)\n")
            }
            return engine
        } catch {
            StandardStreams.error("windowhost: \(error)\n")
            // A ring short of locked memory or descriptors may be had later (75: retry; a
            // worker's start is then retried, never counted against its window); io_uring
            // refused or unknown is 69.
            if case .uringUnavailable(let ringError) = error, ringError.isResourceShortage {
                throw ExitCode(.temporary)
            }
            throw ExitCode(.unavailable)
        }
    }
}
