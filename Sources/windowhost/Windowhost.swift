import ArgumentParser

@main
struct Windowhost: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "windowhost",
        abstract: "A multi-process window host that keeps every window's tabs safe across sudden termination.",
        discussion: """
            Exit codes (sysexits(3)): 0 ok, 1 a check failed, 64 bad arguments, 65 corrupt data or an
            unknown window or tab, 66 no such input, 69 a required service unavailable (io_uring, or
            no supervisor at the socket), 73 cannot create the control socket (something that is not a
            socket at its path), 74 an I/O error, 75 temporary (a worker restarting, another
            supervisor on the root or at the socket): retry, 77 a root (or a fixed entry under it) that is
            someone else's, open to others, or not what the host needs there.
            """,
        version: "0.1.0",
        subcommands: [RunCommand.self, ControlCommand.self, StressCampaignCommand.self, DemoCommand.self, InspectCommand.self, BenchCommand.self, SaveLoopCommand.self, WorkerProcessCommand.self, BenchWorkerCommand.self, BenchEchoCommand.self]
    )
}

/// Exit codes scripts can test, after sysexits(3). Bad arguments exit 64 through ArgumentParser.
enum ExitStatus {
    static let checkFailed = ExitCode(1)
    static let usage = ExitCode(64)
    static let dataError = ExitCode(65)
    static let noInput = ExitCode(66)
    static let unavailable = ExitCode(69)
    /// EX_CANTCREAT: something not ours is where the host would create its control socket.
    static let cantCreate = ExitCode(73)
    static let ioError = ExitCode(74)
    static let temporary = ExitCode(75)
    /// EX_NOPERM: a root another user owns or can write, or whose fixed entries (`RootLayout`)
    /// are not what the host needs there.
    static let permission = ExitCode(77)
}
