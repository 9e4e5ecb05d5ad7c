import Foundation
import HostLimits

/// A reply longer than one reply-ring message (the dump of a big window) travels as
/// consecutive `ReplyPart` messages of its request, whose chunks concatenate to the serialized
/// reply: the worker splits (`messages`), the supervisor assembles (`ReplyAssembly`). No reply
/// the worker may send is refused for its size; `Limits.maxWorkerReplyBytes` bounds them all.
public enum ReplyParts {
    /// The bytes one part carries: a quarter of the ring, so the worker writes the next part
    /// while the supervisor reads one, and a part with its framing always fits a message.
    public static let chunkBytes = SlotLayout.replyRingCapacity / 4

    /// Room for a part's fields besides its chunk: the request, the total and the offset (11
    /// bytes each at most) and the tags and lengths around them.
    static let partOverheadBytes = 64

    /// The ring messages carrying `reply`: itself when it fits in `maximumMessage` bytes, else
    /// its parts of `chunkBytes`. Nil when it is longer than `Limits.maxWorkerReplyBytes`, which
    /// the supervisor refuses: the worker answers a failure instead.
    public static func messages(_ reply: WorkerReply, maximumMessage: Int, chunkBytes: Int = chunkBytes) -> [[UInt8]]? {
        precondition(chunkBytes > 0 && chunkBytes + partOverheadBytes <= maximumMessage, "a part fits one message")
        let whole: [UInt8] = (try? reply.serializedBytes()) ?? []
        if whole.count <= maximumMessage { return [whole] }
        guard whole.count <= Limits.maxWorkerReplyBytes else { return nil }
        return stride(from: 0, to: whole.count, by: chunkBytes).map { offset in
            var part = ReplyPart()
            part.totalBytes = UInt64(whole.count)
            part.offset = UInt64(offset)
            part.chunk = Data(whole[offset..<min(offset + chunkBytes, whole.count)])
            var message = WorkerReply()
            message.request = reply.request
            message.part = part
            let bytes: [UInt8] = (try? message.serializedBytes()) ?? []
            assert(bytes.count <= maximumMessage, "a part of \(bytes.count) bytes fits one message")
            return bytes
        }
    }
}

/// One window's replies as the supervisor takes them from its worker's ring, parts assembled.
/// The worker is untrusted: a part must belong to a request sent and not answered, declare a
/// total within `Limits.maxWorkerReplyBytes`, come at the offset the parts before reached,
/// never pass its total, and not interleave with another reply; the assembled bytes must decode
/// to a whole reply (not a part) of the same request. Anything else is a `Violation`, which
/// the supervisor handles as it does every protocol violation (`misbehaved`). It holds at most
/// `Limits.maxWorkerReplyBytes`, for the one reply being assembled.
public struct ReplyAssembly: Sendable {
    /// Why a ring message broke the protocol.
    public struct Violation: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    private struct Assembling: Sendable {
        let request: UInt64
        let total: Int
        var bytes: [UInt8]
    }

    private var assembling: Assembling?

    public init() {}

    /// The bytes held for the reply being assembled.
    public var heldBytes: Int { assembling?.bytes.count ?? 0 }

    /// Takes the next message of the ring; `pending`: whether its request was sent to this
    /// worker and not answered. The whole reply it completes (or is), nil while parts are due.
    public mutating func take(_ message: WorkerReply, pending: Bool) throws(Violation) -> WorkerReply? {
        guard case .part(let part) = message.outcome else {
            if let assembling {
                throw Violation(
                    description:
                        "a whole reply to request \(message.request) while request \(assembling.request) is in parts")
            }
            return message
        }
        var current = try start(assembling, message.request, part, pending: pending)
        // Held by `current` alone while it grows: appended in place, not copied at each part.
        assembling = nil
        guard part.offset == UInt64(current.bytes.count) else {
            throw Violation(
                description:
                    "a part of request \(current.request) at offset \(part.offset), where \(current.bytes.count) bytes have come"
            )
        }
        guard !part.chunk.isEmpty, part.chunk.count <= current.total - current.bytes.count else {
            throw Violation(
                description:
                    "a part of \(part.chunk.count) bytes at \(part.offset) of a reply declared \(current.total) bytes")
        }
        current.bytes += part.chunk
        assert(
            current.bytes.count <= current.total && current.total <= Limits.maxWorkerReplyBytes,
            "a reply in parts never grows past its declared size")
        guard current.bytes.count == current.total else {
            assembling = current
            return nil
        }
        assembling = nil
        return try whole(current)
    }

    /// The reply a part belongs to: the one being assembled, or a new one it starts.
    private func start(_ assembling: Assembling?, _ request: UInt64, _ part: ReplyPart, pending: Bool) throws(Violation)
        -> Assembling
    {
        if let assembling {
            guard request == assembling.request, part.totalBytes == UInt64(assembling.total) else {
                throw Violation(
                    description:
                        "a part of request \(request) (\(part.totalBytes) bytes) while request \(assembling.request) "
                        + "(\(assembling.total) bytes) is in parts")
            }
            return assembling
        }
        guard pending else {
            throw Violation(description: "a part of request \(request), which it was not sent or has answered")
        }
        guard part.totalBytes <= UInt64(Limits.maxWorkerReplyBytes) else {
            throw Violation(
                description:
                    "a reply of \(part.totalBytes) bytes, past the \(Limits.maxWorkerReplyBytes) a worker sends (Limits.maxWorkerReplyBytes)"
            )
        }
        return Assembling(request: request, total: Int(part.totalBytes), bytes: [])
    }

    private func whole(_ assembled: Assembling) throws(Violation) -> WorkerReply {
        guard let reply = try? WorkerReply(serializedBytes: assembled.bytes) else {
            throw Violation(description: "a reply of \(assembled.total) bytes in parts that does not decode")
        }
        guard reply.request == assembled.request else {
            throw Violation(
                description: "parts of request \(assembled.request) that make a reply to request \(reply.request)")
        }
        if case .part = reply.outcome {
            throw Violation(description: "parts of request \(assembled.request) that make another part")
        }
        return reply
    }
}
