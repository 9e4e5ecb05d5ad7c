import ArgumentParser

@main
struct Windowhost: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "windowhost",
        abstract: "A multi-process window host that keeps every window's tabs safe across sudden termination.",
        discussion: """
            Exit codes: 0 ok, 1 a check failed, 64 bad arguments (sysexits(3) EX_USAGE).
            """,
        version: "0.1.0",
        subcommands: [DemoCommand.self]
    )
}

/// Exit codes scripts can test, after sysexits(3). Bad arguments exit 64 through ArgumentParser.
enum ExitStatus {
    static let checkFailed = ExitCode(1)
}
