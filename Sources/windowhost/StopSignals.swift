import ArgumentParser
import Foundation
import Glibc
import Supervisor
import Synchronization

/// What asks a command to stop: Ctrl-C (SIGINT), `kill` (SIGTERM) and a closed terminal
/// (SIGHUP). `demo`, `stress` and `bench` make temporary roots; taking these signals instead of
/// dying, they stop at their next step and remove what they made, files and keys.
enum StopSignals {
    static let numbers: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    private static let received = Atomic<Int32>(0)

    /// Handles `numbers` and unblocks them: a mask inherited from whatever started the
    /// command (a test runner, a service manager) would otherwise hold them pending forever.
    static func install() {
        var set = sigset_t()
        sigemptyset(&set)
        for number in numbers {
            signal(number) { StopSignals.received.store($0, ordering: .relaxed) }
            sigaddset(&set, number)
        }
        let unblocked = pthread_sigmask(SIG_UNBLOCK, &set, nil)
        assert(unblocked == 0, "SIG_UNBLOCK of valid signals cannot fail")
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
        FileHandle.standardError.write(Data("windowhost \(command): stopped by SIG\(SignalName.name(number))\n".utf8))
        throw ExitCode(128 + number)
    }
}
