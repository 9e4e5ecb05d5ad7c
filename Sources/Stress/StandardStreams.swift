import CLinuxShims
import Glibc
import Platform
import Synchronization

/// Messages, progress and result lines on stdout and stderr that never stop the command:
/// `FileHandle.write` traps on a write error, and a reader gone (`| head`, EPIPE) must let a
/// command that made temporary files stop and remove them (`SIGPIPE` is one of the signals
/// that ask it to), and a supervisor go on serving.
public enum StandardStreams {
    public static func error(_ text: String) { _ = write(text, to: STDERR_FILENO) }

    public static func output(_ text: String) {
        if !write(text, to: STDOUT_FILENO) { outputLost.store(true, ordering: .relaxed) }
    }

    /// Whether standard output took all the command printed, `print`'s buffer flushed now and
    /// every `output` whole. A command's exit must not say 0 for results that went nowhere.
    public static func flushOutput() -> Bool {
        wh_stdout_flushed() == 1 && !outputLost.load(ordering: .relaxed)
    }

    private static let outputLost = Atomic<Bool>(false)

    /// Writes `text` whole, retrying on EINTR; a failure (the reader gone, a full disk under a
    /// redirect) drops the rest, and says so.
    private static func write(_ text: String, to descriptor: Int32) -> Bool {
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let count = retryingOnInterrupt {
                bytes[written...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            }
            guard count > 0 else { return false }
            written += count
        }
        return true
    }
}
