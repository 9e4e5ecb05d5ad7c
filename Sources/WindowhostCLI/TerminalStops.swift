import Glibc

/// A child the host spawns in a process group of its own (a worker, the bench's workers) is
/// in the background of the terminal it writes its log to: with `stty tostop`, its first write
/// would stop it (SIGTTOU) and its window would never be ready. It ignores the terminal's
/// stops: its lines are written, and it never reads the terminal.
enum TerminalStops {
    static func ignore() {
        signal(SIGTTOU, SIG_IGN)
        signal(SIGTTIN, SIG_IGN)
    }
}
