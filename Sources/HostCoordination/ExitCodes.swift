/// The exit codes of every `windowhost` command and the supervisor, after sysexits(3): the one
/// table. A control reply carries one, the code `windowhost ctl` exits with; the help texts
/// that list them are checked against it (`ExitCodeHelpTests`).
public enum ControlCode: Int32, Codable, Sendable, CaseIterable {
    case ok = 0
    /// A check the command ran failed (a stress campaign, a bench target, the demo).
    case checkFailed = 1
    case usage = 64
    /// An unknown window or tab, an index out of range; corrupt data, text that is not UTF-8.
    case badData = 65
    /// EX_NOINPUT: no such input (`inspect` of a root that is not there).
    case noInput = 66
    /// No supervisor answers at the socket; a required service (io_uring) is unavailable.
    case unavailable = 69
    case software = 70
    /// EX_OSERR: `wait-durable` or `save --wait` covers a command whose effect is only in an
    /// incognito Browser kept in memory only (the system refused the kernel keyring): the
    /// regular Browser is durable through the seq given, but a kill loses those incognito
    /// changes. Retrying never helps while the keyring is refused.
    case memoryOnly = 71
    /// EX_CANTCREAT: something not ours is where the host would create its control socket.
    case cantCreate = 73
    case ioError = 74
    /// The worker is restarting or the window not ready yet, another supervisor holds the root
    /// or the socket, a shutdown kept unsaved changes: retry.
    case temporary = 75
    /// EX_PROTOCOL: the window has used the highest command seq (`Limits.maxCommandSeq`), which
    /// no window reaches by use, only from crafted or damaged files: it takes no more tab
    /// commands. Retrying never helps; its tabs still read and save (recovery.md says what to do).
    case seqExhausted = 76
    /// EX_NOPERM: a root another user owns or can write, or whose fixed entries (`RootLayout`)
    /// are not what the host needs there.
    case permission = 77
    /// EX_CONFIG: a worker given a slot of another generation or window, or shared memory of
    /// another layout (a binary of another version): it refuses to start (`WorkerExit.refused`).
    case config = 78
}
