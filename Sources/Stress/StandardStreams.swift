import Glibc
import Platform

/// Messages, progress and result lines on stdout and stderr that never stop the command:
/// `FileHandle.write` traps on a write error, and a reader gone (`| head`, EPIPE) must let a
/// command that made temporary files stop and remove them (`SIGPIPE` is one of the signals
/// that ask it to), and a supervisor go on serving.
public enum StandardStreams {
    public static func error(_ text: String) { write(text, to: STDERR_FILENO) }
    public static func output(_ text: String) { write(text, to: STDOUT_FILENO) }

    /// Writes `text` whole, retrying on EINTR; a failure (the reader gone, a full disk under a
    /// redirect) drops the rest: the message had nowhere to go.
    private static func write(_ text: String, to descriptor: Int32) {
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let count = retryingOnInterrupt {
                bytes[written...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            }
            guard count > 0 else { return }
            written += count
        }
    }
}
