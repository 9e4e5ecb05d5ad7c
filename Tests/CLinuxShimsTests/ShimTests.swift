import CLinuxShims
import Glibc
import Testing

@Suite struct ShimTests {
    @Test func pidfdSignalsAndSubreaperAndDeathSignalAreAccepted() throws {
        // A pidfd on ourselves: signal 0 checks deliverability without sending anything.
        let pidfd = wh_pidfd_open(getpid())
        #expect(pidfd >= 0)
        #expect(wh_pidfd_send_signal(pidfd, 0) == 0)
        close(pidfd)
        #expect(wh_pidfd_open(-1) == -1)
        #expect(errno == EINVAL)

        #expect(wh_set_child_subreaper(1) == 0)
        #expect(wh_set_child_subreaper(0) == 0)

        #expect(wh_set_parent_death_signal(0) == 0)
        #expect(wh_set_parent_death_signal(10_000) == -1)
        #expect(errno == EINVAL)
    }
}
