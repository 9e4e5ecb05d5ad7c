import SystemPackage

/// Why the ring could not do what was asked. Every case carries the kernel's own errno.
public enum IOUringError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kernel or the sandbox refuses io_uring altogether (`EPERM` from
    /// `kernel.io_uring_disabled` or a seccomp profile, `ENOSYS` from an old kernel).
    /// Callers fall back to blocking I/O.
    case unavailable(Errno)
    /// `io_uring_setup` failed for another reason (bad size, out of memory, too many rings).
    case setupFailed(Errno)
    /// `io_uring_enter` failed with an error that retrying cannot cure.
    case submitFailed(Errno)
    /// The kernel's probe says it does not implement an operation this code needs.
    case operationUnsupported(String)

    /// Maps the errno of a failed `io_uring_setup`: refusals become `.unavailable`.
    public init(setupErrno errno: Errno) {
        switch errno {
        case .notPermitted, .noFunction: self = .unavailable(errno)
        default: self = .setupFailed(errno)
        }
    }

    /// `io_uring_setup` ran short (EAGAIN for want of locked memory or rings, ENOMEM, EMFILE):
    /// the ring may be had later, so a caller that needs one says "try again", not "unavailable".
    public var isResourceShortage: Bool {
        if case .setupFailed(let errno) = self { errno.isResourceShortage } else { false }
    }

    public var description: String {
        switch self {
        case .unavailable(let errno): "io_uring unavailable: \(errno) (kernel or sandbox refuses it)"
        case .setupFailed(let errno): "io_uring setup failed: \(errno)"
        case .submitFailed(let errno): "io_uring submit failed: \(errno)"
        case .operationUnsupported(let name): "io_uring: the kernel does not support \(name)"
        }
    }
}
