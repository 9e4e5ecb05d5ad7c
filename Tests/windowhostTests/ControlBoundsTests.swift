import Foundation
import Glibc
import HostLimits
import Supervisor
import Testing

/// What the control plane accepts is one documented bound, checked before a seq is taken:
/// URLs up to `Limits.maxControlURLBytes` go through; longer ones, and indices no list can
/// have, are refused with 65 naming the limit or the number given, and the window goes on.
@Suite(.serialized) struct ControlBoundsTests {
    @Test(.timeLimit(.minutes(10))) func oversizedURLsAndIndicesAreRefusedBeforeASeqIsTaken() throws {
        let root = temporaryRoot("control-bounds")
        defer { removeHostFiles(root) }
        let host = try HostProcess(root: root, scenes: 1)
        let window = try #require(host.windowIDs().first)
        func url(_ bytes: Int) -> String {
            let prefix = "https://long.example/"
            return prefix + String(repeating: "q", count: bytes - prefix.utf8.count)
        }

        // 60 KB, and exactly the bound: applied, seqs 1 and 2.
        let sixty = try host.ctl(["open", "--window", window, "--url", url(60_000), "--json"])
        #expect(sixty.status == 0, "\(sixty.output)")
        let atBound = try host.ctl(["open", "--window", window, "--url", url(Limits.maxControlURLBytes), "--json"])
        #expect(atBound.status == 0 && atBound.output.contains(#""seq":2"#), "\(atBound.output)")

        // 100 KB through ctl: refused by ctl itself, naming the limit (it was a hang-up, 69).
        let hundred = try host.ctl(["open", "--window", window, "--url", url(100_000)])
        #expect(hundred.status == 65 && hundred.output.contains("\(Limits.maxControlURLBytes)"), "\(hundred.output)")
        // Past the bound by one byte, sent raw: the supervisor refuses it the same way.
        let raw = host.call(.open(url(Limits.maxControlURLBytes + 1)), window: window)
        #expect(raw.code == .badData && raw.error?.contains("\(Limits.maxControlURLBytes)") == true, "\(raw)")
        // 3 MiB (more than one argument may be): a raw request is cut off, never hangs.
        let huge = host.call(.open(url(3 << 20)), window: window, timeout: 10)
        #expect(huge.code != .ok && huge.code != .temporary, "\(huge)")

        // An index no list can have: named as given, not clamped to 2147483647.
        for verb in [["open"], ["move", "--tab", "1"]] {
            let index = try host.ctl(verb + ["--window", window, "--index", "99999999999"])
            #expect(
                index.status == 65 && index.output.contains("99999999999") && !index.output.contains("2147483647"),
                "\(index.output)")
        }

        // None of the refusals took a seq, and the window serves on.
        let next = try host.ctl(["open", "--window", window, "--url", "https://after.example/", "--json"])
        #expect(next.status == 0 && next.output.contains(#""seq":3"#), "\(next.output)")
        #expect(host.windows()[window]?.tabs == 3)
    }
}
