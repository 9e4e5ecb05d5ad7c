import Foundation
import HostControl
import Supervisor
import Testing

/// `ctl` builds a typed request, so what the supervisor would refuse as it decodes a request
/// (a window that is no UUID, an unknown signal) is refused before connecting, with the same
/// code and message. Before, `ctl` sent the text and only a running supervisor refused it: with
/// none at the socket, the caller learnt only that (69), not that its arguments were wrong.
@Suite struct ControlCommandRefusalTests {
    static let noSupervisor = NSTemporaryDirectory() + "windowhost-no-supervisor-\(getpid()).sock"

    @Test func aWindowThatIsNoUUIDIsRefusedBeforeConnecting() throws {
        for arguments in [
            ["dump", "--window", "nope"],
            ["open", "--window", "6F1D3C1E-2B7A-4C55-9D0E-8A3F2B1C4D5E-", "--url", "https://a.example/"],
        ] {
            let run = try runWindowhost(["ctl", "--socket", Self.noSupervisor] + arguments)
            #expect(
                run.status == 64 && run.output.contains("is not a UUID"), "\(arguments): \(run.status) \(run.output)")
        }
    }

    @Test func anUnknownSignalIsRefusedBeforeConnecting() throws {
        let run = try runWindowhost([
            "ctl", "--socket", Self.noSupervisor, "kill", "--window", UUID().uuidString, "--signal", "NOPE",
        ])
        #expect(run.status == 64 && run.output.contains("unknown signal 'NOPE'"), "\(run.status) \(run.output)")
    }

    /// Every signal name `ctl kill --help` lists is one `--signal` takes: the help named TSTP,
    /// TTIN, TTOU, CHLD, URG and WINCH, which were refused as unknown (64), only their numbers
    /// working. The names now come from `SignalName`'s one table.
    @Test func everySignalTheKillHelpNamesIsTaken() throws {
        let help = try runWindowhost(["ctl", "kill", "--help"]).output
        // The --signal option's paragraph, up to the next option.
        let paragraph =
            try #require(help.range(of: "  --signal <signal>").map { help[$0.upperBound...] }).split(
                separator: "\n  --"
            ).first ?? ""
        let names = Set(
            paragraph.split { !$0.isLetter && !$0.isNumber }.filter { $0.count > 1 && $0.allSatisfy(\.isUppercase) }
                .map(String.init))
        #expect(
            names.isSuperset(of: ["KILL", "STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "URG", "WINCH"]),
            "\(names): \(paragraph)")
        for name in names.subtracting(["SIG"]) {
            let run = try runWindowhost([
                "ctl", "--socket", Self.noSupervisor, "kill", "--window", UUID().uuidString, "--signal", name,
            ])
            #expect(
                run.status == 69,
                "\(name) is taken, so only the missing supervisor stops it: \(run.status) \(run.output)")
        }
    }

    /// Each verb of the wire is a `ctl` subcommand of the same name.
    @Test(arguments: Verb.allCases) func everyVerbIsASubcommand(_ verb: Verb) throws {
        let help = try runWindowhost(["ctl", verb.rawValue, "--help"])
        #expect(help.status == 0 && help.output.contains("ctl \(verb.rawValue)"), "\(verb.rawValue): \(help.output)")
    }
}
