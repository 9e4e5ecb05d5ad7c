import CLinuxShims
import Glibc
import SystemPackage

/// The two messages of a spare worker's hand-over socket (`wh_seqpacket_pair`, made at its
/// spawn): the spare's one byte saying it is ready, then the supervisor's `WindowAssignment`
/// with the window's slot memfd (`SCM_RIGHTS`). Each side reads the other's as input.
public enum SpareHandOver {
    /// Why a hand-over was not taken: each is the spare's exit `WorkerExit.handOverRefused`.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case refused(WindowAssignment.Refusal)
        /// The message came with this many descriptors, not one.
        case descriptors(Int)
        /// The message or its descriptors did not fit what a hand-over is.
        case truncated
        case system(String, Errno)

        public var description: String {
            switch self {
            case .refused(let refusal): "the hand-over is refused: \(refusal)"
            case .descriptors(let count): "the hand-over came with \(count) descriptors, not the slot's memfd alone"
            case .truncated: "the hand-over is longer than a window's assignment, or came with too many descriptors"
            case .system(let call, let errno): "\(call): \(errno)"
            }
        }
    }

    /// The spare says it is ready to be handed a window.
    public static func sayReady(over socket: Int32) throws(Failure) {
        var byte = SpareLaunch.readyByte
        guard wh_send_with_descriptor(socket, &byte, 1, -1) == 1 else {
            throw .system("send the ready byte", Errno(rawValue: errno))
        }
    }

    /// What the supervisor heard from a spare that has not been handed a window.
    public enum Heard: Equatable {
        case ready
        /// Its end is closed: it has died, or is dying.
        case closed
        /// Anything else: a spare breaking the protocol, killed.
        case misbehaved(String)
    }

    /// Reads what a spare sent; call when its socket polls readable. Descriptors it sent are
    /// closed: the supervisor takes none from a worker.
    public static func hear(on socket: Int32) -> Heard {
        var bytes = [UInt8](repeating: 0, count: 2)
        var descriptors = [Int32](repeating: -1, count: 1)
        var count: Int32 = 0
        var truncated: Int32 = 0
        let received = wh_receive_with_descriptors(socket, &bytes, bytes.count, &descriptors, 1, &count, &truncated)
        for descriptor in descriptors.prefix(Int(count)) { close(descriptor) }
        if received == 0 { return .closed }
        guard received > 0 else {
            let error = Errno(rawValue: errno)
            return error == .connectionReset ? .closed : .misbehaved("recvmsg: \(error)")
        }
        guard received == 1, bytes[0] == SpareLaunch.readyByte, count == 0, truncated == 0 else {
            return .misbehaved("a message of \(received) bytes and \(count) descriptors, not the ready byte")
        }
        return .ready
    }

    /// Hands `assignment` and its slot's memfd over: false when the spare is gone (or its
    /// socket full: a spare that sent nothing it was asked cannot fill it).
    public static func send(_ assignment: WindowAssignment, memory: Int32, over socket: Int32) -> Bool {
        let bytes = assignment.bytes
        return wh_send_with_descriptor(socket, bytes, bytes.count, memory) == bytes.count
    }

    /// The spare waits for its window: the assignment, checked, and the memfd received (the
    /// caller's to place). Nil when the supervisor closed the socket without handing one over.
    public static func receive(on socket: Int32) throws(Failure) -> (assignment: WindowAssignment, memory: Int32)? {
        // One byte more than a hand-over, and one descriptor more: a longer message is refused,
        // not cut to fit.
        var bytes = [UInt8](repeating: 0, count: WindowAssignment.byteCount + 1)
        var descriptors = [Int32](repeating: -1, count: 2)
        var count: Int32 = 0
        var truncated: Int32 = 0
        let received = wh_receive_with_descriptors(
            socket, &bytes, bytes.count, &descriptors, Int32(descriptors.count), &count, &truncated)
        guard received >= 0 else { throw .system("recvmsg", Errno(rawValue: errno)) }
        let taken = Array(descriptors.prefix(Int(count)))
        func refuse(_ failure: Failure) -> Failure {
            for descriptor in taken { close(descriptor) }
            return failure
        }
        if received == 0, taken.isEmpty { return nil }
        guard truncated == 0 else { throw refuse(.truncated) }
        guard taken.count == 1 else { throw refuse(.descriptors(taken.count)) }
        do {
            return (try WindowAssignment(bytes: Array(bytes.prefix(received))), taken[0])
        } catch {
            throw refuse(.refused(error))
        }
    }
}
