import CLinuxShims
import Glibc
import Testing

@Suite struct ShimTests {
    @Test func futexWaitReturnsAtOnceWhenTheWordDiffers() {
        let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        defer { word.deallocate() }
        word.pointee = 5
        #expect(wh_futex_wait_shared(word, 4, 1_000_000_000) == -1)
        #expect(errno == EAGAIN)
    }

    @Test func futexWaitTimesOutWhenNobodyWakes() {
        let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        defer { word.deallocate() }
        word.pointee = 0
        #expect(wh_futex_wait_shared(word, 0, 2_000_000) == -1)
        #expect(errno == ETIMEDOUT)
        #expect(wh_futex_wake_shared(word, 1) == 0)
    }

    @Test func futexWakesAWaiterOnASharedMapping() throws {
        let raw = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)
        #expect(raw != MAP_FAILED)
        guard let raw, raw != MAP_FAILED else { return }
        defer { munmap(raw, 4096) }
        let word = raw.assumingMemoryBound(to: UInt32.self)
        word.pointee = 0
        // A MAP_SHARED word, as the supervisor's region is: the wake must not use the private
        // (per-process) futex hash, or a waiter in another process would never hear it.
        var thread = pthread_t()
        let box = Unmanaged.passRetained(WordBox(word))
        let created = pthread_create(&thread, nil, { argument in
            let box = Unmanaged<WordBox>.fromOpaque(argument!).takeRetainedValue()
            usleep(20_000)
            box.word.pointee = 1
            _ = wh_futex_wake_shared(box.word, 1)
            return nil
        }, box.toOpaque())
        #expect(created == 0)
        var result: Int32 = 0
        repeat {
            result = wh_futex_wait_shared(word, 0, 5_000_000_000)
        } while result == -1 && errno == EINTR && word.pointee == 0
        #expect(word.pointee == 1)
        pthread_join(thread, nil)
    }

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

private final class WordBox {
    let word: UnsafeMutablePointer<UInt32>
    init(_ word: UnsafeMutablePointer<UInt32>) { self.word = word }
}
