import ArgumentParser

@main
struct Windowhost: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "windowhost",
        abstract: "A multi-process window host that keeps every window's tabs safe across sudden termination.",
        discussion: """
            Exit codes follow sysexits(3): 0 ok, 1 a check failed, 64 usage, 65 bad data, \
            66 no input, 69 unavailable, 75 temporary failure (retry).
            """,
        version: "0.1.0",
        subcommands: [DemoCommand.self]
    )
}

/// Exit codes scripts can test, after sysexits(3).
enum ExitStatus {
    static let checkFailed = ExitCode(1)
    static let usage = ExitCode(64)
    static let dataError = ExitCode(65)
    static let noInput = ExitCode(66)
    static let unavailable = ExitCode(69)
    static let temporaryFailure = ExitCode(75)
}
