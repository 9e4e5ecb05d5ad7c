import Glibc
import Platform
import Testing

@testable import Supervisor

/// How the supervisor finds its children (`Strays`): by the ppid after the last `)` of
/// /proc/<pid>/stat, whatever the comm field holds.
@Suite struct StraysTests {
    @Test func theParentIsReadAfterTheLastParenthesisOfTheCommand() {
        let stat = Array("4242 (a) 1 (b) S 99 4242 4242 0 -1 4194560".utf8)
        #expect(Strays.parentPID(inStat: stat[...]) == 99)
        #expect(Strays.parentPID(inStat: Array("4242 (no close S 99".utf8)[...]) == nil)
        #expect(Strays.parentPID(inStat: Array("4242 (x) S".utf8)[...]) == nil)
    }

    @Test func aChildOfThisProcessIsFoundUntilItIsReaped() throws {
        let pid = try spawnProcess(["/bin/sleep", "5"]).get()
        #expect(try Strays.children(of: getpid()).contains(pid))
        #expect(kill(pid, SIGKILL) == 0)
        #expect(waitpid(pid, nil, 0) == pid)
        #expect(try !Strays.children(of: getpid()).contains(pid))
    }
}
