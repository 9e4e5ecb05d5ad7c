import Glibc

/// `call` again while it fails with EINTR (a signal came before it did anything): its first
/// result that is not that failure. The one retry-on-interrupt loop of the host.
public func retryingOnInterrupt<Result: BinaryInteger>(_ call: () -> Result) -> Result {
    while true {
        let result = call()
        if result >= 0 || errno != EINTR { return result }
    }
}
