import Glibc

/// CLOCK_MONOTONIC in nanoseconds: the one clock of the host. Its readings cross processes (a
/// worker's heartbeat in shared memory is read against the supervisor's), so every module reads
/// it here.
public func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    // Fails only for a bad clock id or pointer (EINVAL, EFAULT), neither possible here.
    let read = clock_gettime(CLOCK_MONOTONIC, &now)
    assert(read == 0, "clock_gettime(CLOCK_MONOTONIC): \(errno)")
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
