import ArgumentParser
import Foundation
import Glibc
import HostControl
import Stress
import Supervisor
import Synchronization

/// What asks a command to stop: Ctrl-C (SIGINT), `kill` (SIGTERM), a closed terminal (SIGHUP)
/// and a reader gone (SIGPIPE: `| head`). `demo`, `stress` and `bench` make temporary roots;
/// taking these signals instead of dying, they stop at their next step and remove what they
/// made, files and keys.
enum StopSignals {
    static let numbers: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGPIPE]
    private static let received = Atomic<Int32>(0)

    /// Handles `numbers` and unblocks them: a mask inherited from whatever started the
    /// command (a test runner, a service manager) would otherwise hold them pending forever.
    /// A signal the command was started ignoring (`nohup`, a background job's SIGINT) stays
    /// ignored: whoever started it asked for that.
    static func install() {
        var handled = sigset_t()
        sigemptyset(&handled)
        for number in numbers where !isIgnored(number) {
            signal(number) { StopSignals.received.store($0, ordering: .relaxed) }
            sigaddset(&handled, number)
        }
        let unblocked = pthread_sigmask(SIG_UNBLOCK, &handled, nil)
        assert(unblocked == 0, "SIG_UNBLOCK of valid signals cannot fail")
    }

    private static func isIgnored(_ number: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(number, nil, &current) == 0 else { return false }
        // Handlers are C function pointers, compared by address.
        return current.__sigaction_handler.sa_handler.map { unsafeBitCast($0, to: Int.self) }
            == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    /// The signal that asked to stop, once one came.
    static var receivedSignal: Int32? {
        let number = received.load(ordering: .relaxed)
        return number == 0 ? nil : number
    }

    /// Once a signal came: says so and throws the shell's status for it (128 + its number), so
    /// the caller's cleanup runs on the way out.
    static func stopIfAsked(_ command: String) throws {
        guard let number = receivedSignal else { return }
        StandardStreams.error("windowhost \(command): stopped by SIG\(SignalName.name(number))\n")
        throw ExitCode(128 + number)
    }
}
