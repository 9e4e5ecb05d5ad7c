import Foundation
import Glibc
import HostControl
import HostCoordination
import Supervisor
import SystemPackage
import Testing

/// The help texts list the exit codes of the one table (`ControlCode`), and read as paragraphs
/// ArgumentParser wraps: no line past 80 columns (hard line breaks in the sources wrapped into
/// a ragged mess before).
@Suite struct ExitCodeHelpTests {
    /// The codes the help of `arguments` lists, in its "Exit codes" paragraph.
    private func listedCodes(_ arguments: [String]) throws -> [Int32] {
        let help = try runWindowhost(arguments + ["--help"]).output
        let paragraph = try #require(
            help.components(separatedBy: "\n\n").first { $0.hasPrefix("Exit codes") },
            "no exit-code paragraph in: \(help)")
        let entries = paragraph.replacingOccurrences(of: "\n", with: " ").drop { $0 != ":" }.dropFirst().split(
            separator: ";")
        return try entries.map { entry in
            try #require(Int32(entry.split(separator: " ").first ?? ""), "'\(entry)' does not start with a code")
        }
    }

    @Test func theTopLevelHelpListsTheWholeTable() throws {
        #expect(try listedCodes([]) == ControlCode.allCases.map(\.rawValue))
    }

    /// Every code a control reply can carry, 70 (a reply that does not decode) among them.
    @Test func ctlsHelpListsEveryCodeItExitsWith() throws {
        let replyCodes: [ControlCode] = [
            .ok, .usage, .badData, .unavailable, .software, .memoryOnly, .ioError, .temporary, .seqExhausted,
        ]
        #expect(try listedCodes(["ctl"]) == replyCodes.map(\.rawValue))
    }

    @Test(arguments: [[], ["ctl"], ["inspect"]])
    func helpFitsEightyColumns(_ arguments: [String]) throws {
        let help = try runWindowhost(arguments + ["--help"]).output
        let long = help.split(separator: "\n").filter { $0.count > 80 }.map(String.init)
        #expect(long.isEmpty, "lines past 80 columns: \(long)")
    }
}

/// A reply `ctl` cannot read as its verb's shape exits 70 and says so. Before, each verb dug in
/// with `result["tab"]?.int ?? 0`: `ctl open` printed tab 0 and exited 0.
@Suite struct UnreadableReplyTests {
    @Test(.timeLimit(.minutes(10))) func aReplyOfAnotherShapeExits70() throws {
        let path = temporaryRoot("ctl-strange").path + ".sock"
        defer { unlink(path) }
        let fd = try boundSocket(path, listening: 4)
        defer { close(fd) }
        // A supervisor that answers every request with a result whose tab is not a number.
        let answering = Thread {
            let reply = Array(#"{"code":0,"result":{"seq":3,"tab":"seven","window":"x"}}"#.utf8) + [UInt8(ascii: "\n")]
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                var request = [UInt8](repeating: 0, count: 1 << 16)
                _ = recv(client, &request, request.count, 0)
                _ = send(client, reply, reply.count, Int32(MSG_NOSIGNAL))
                close(client)
            }
        }
        answering.start()
        let window = UUID().uuidString
        for arguments in [["open", "--window", window], ["--json", "open", "--window", window]] {
            let run = try runWindowhost(["ctl", "--socket", path, "--timeout", "10"] + arguments)
            #expect(
                run.status == 70 && run.output.contains("does not read as CommandReply"),
                "\(arguments): \(run.status) \(run.output)")
        }
        shutdown(fd, Int32(SHUT_RDWR))
    }
}
