import Foundation
import HostLimits
import Testing

@testable import HostCoordination

/// A reply too long for one ring message goes in parts and comes back whole; the supervisor's
/// assembly refuses every way an untrusted worker could bend the parts.
@Suite struct ReplyPartsTests {
    /// A dump of `tabs` tabs whose URLs are `urlBytes` long, answering `request`.
    private func dump(request: UInt64, tabs: Int, urlBytes: Int) -> WorkerReply {
        var dump = WindowDump()
        dump.regular.tabs = (0..<tabs).map { index in
            var tab = TabDump()
            tab.id = Int64(index + 1)
            tab.url = "https://\(index).example/" + String(repeating: "u", count: urlBytes)
            return tab
        }
        dump.appliedSeq = 7
        var reply = WorkerReply()
        reply.request = request
        reply.dump = dump
        return reply
    }

    private func part(_ request: UInt64, total: Int, offset: Int, _ chunk: [UInt8]) -> WorkerReply {
        var part = ReplyPart()
        (part.totalBytes, part.offset, part.chunk) = (UInt64(total), UInt64(offset), Data(chunk))
        var reply = WorkerReply()
        reply.request = request
        reply.part = part
        return reply
    }

    private func decoded(_ messages: [[UInt8]]) throws -> [WorkerReply] {
        try messages.map { try WorkerReply(serializedBytes: $0) }
    }

    /// The size through the real ring's bound: parts in order make the reply again.
    @Test func aReplyPastTheRingComesBackWholeFromItsParts() throws {
        let reply = dump(request: 3, tabs: 30, urlBytes: 50_000)
        let maximum = SlotLayout.replyRingCapacity - RingLayout.lengthSize
        let messages = try #require(ReplyParts.messages(reply, maximumMessage: maximum))
        #expect(messages.count == 6, "1.5 MB in parts of \(ReplyParts.chunkBytes)")
        #expect(messages.allSatisfy { $0.count <= maximum })
        var assembly = ReplyAssembly()
        var whole: [WorkerReply] = []
        for message in try decoded(messages) {
            if let done = try assembly.take(message, pending: true) { whole.append(done) }
        }
        #expect(whole == [reply])
        #expect(assembly.heldBytes == 0)
    }

    /// A reply that fits goes as itself, and passes through the assembly untouched.
    @Test func aReplyThatFitsIsOneMessage() throws {
        let reply = dump(request: 1, tabs: 2, urlBytes: 10)
        let messages = try #require(ReplyParts.messages(reply, maximumMessage: 4096, chunkBytes: 100))
        #expect(try decoded(messages) == [reply])
        var assembly = ReplyAssembly()
        #expect(try assembly.take(reply, pending: true) == reply)
    }

    /// Longer than any reply a worker may send: no parts; the worker answers a failure.
    @Test func aReplyPastTheWorkersBoundIsNotSplit() {
        let reply = dump(request: 1, tabs: 1, urlBytes: Limits.maxWorkerReplyBytes)
        #expect(ReplyParts.messages(reply, maximumMessage: 1 << 20) == nil)
    }

    /// Small parts of a small ring, for the refusals below.
    private func parts(request: UInt64 = 5) throws -> (reply: WorkerReply, parts: [WorkerReply], total: Int) {
        let reply = dump(request: request, tabs: 3, urlBytes: 100)
        let parts = try decoded(try #require(ReplyParts.messages(reply, maximumMessage: 200, chunkBytes: 100)))
        let total = (try reply.serializedBytes() as [UInt8]).count
        try #require(parts.count >= 4)
        return (reply, parts, total)
    }

    /// Feeds `messages`; the violation the first refused one raised, if any.
    private func violation(_ messages: [WorkerReply], pending: (UInt64) -> Bool = { _ in true }) -> String? {
        var assembly = ReplyAssembly()
        for message in messages {
            do {
                _ = try assembly.take(message, pending: pending(message.request))
            } catch {
                #expect(assembly.heldBytes <= Limits.maxWorkerReplyBytes)
                return error.description
            }
        }
        return nil
    }

    @Test func partsOutOfOrderAreAViolation() throws {
        let (_, parts, _) = try parts()
        var swapped = parts
        swapped.swapAt(1, 2)
        #expect(violation(swapped)?.contains("at offset") == true)
        // Repeated or skipped, the offset gives it away too.
        #expect(violation([parts[0], parts[0]])?.contains("at offset") == true)
        #expect(violation([parts[0], parts[2]])?.contains("at offset") == true)
        // A first part that does not start at 0.
        #expect(violation([parts[1]])?.contains("at offset") == true)
    }

    @Test func aPartPastItsDeclaredTotalIsAViolation() throws {
        let (_, parts, total) = try parts()
        let long = part(5, total: total, offset: 0, [UInt8](repeating: 1, count: total + 1))
        #expect(violation([long])?.contains("declared \(total) bytes") == true)
        // The last part running over the end.
        var last = parts[parts.count - 1]
        last.part.chunk.append(0)
        #expect(violation(Array(parts.dropLast()) + [last])?.contains("declared") == true)
        // A part that changes the total it declared.
        var changed = parts[1]
        changed.part.totalBytes += 1
        #expect(violation([parts[0], changed])?.contains("is in parts") == true)
        // An empty part, which makes no progress.
        #expect(violation([part(5, total: total, offset: 0, [])])?.contains("0 bytes") == true)
    }

    @Test func aTotalPastTheBoundIsAViolationBeforeAnythingIsHeld() {
        let past = part(5, total: Limits.maxWorkerReplyBytes + 1, offset: 0, [1, 2, 3])
        #expect(violation([past])?.contains("Limits.maxWorkerReplyBytes") == true)
        // At the bound it is taken (and held until the rest comes).
        var assembly = ReplyAssembly()
        #expect(
            (try? assembly.take(part(5, total: Limits.maxWorkerReplyBytes, offset: 0, [1, 2, 3]), pending: true))
                == .some(nil))
        #expect(assembly.heldBytes == 3)
    }

    @Test func anotherReplyInterleavedWithPartsIsAViolation() throws {
        let (_, parts, _) = try parts()
        let other = try self.parts(request: 6).parts
        #expect(violation([parts[0], other[0]])?.contains("request 5") == true)
        // A whole reply, even to another request, in the middle.
        let whole = dump(request: 6, tabs: 0, urlBytes: 0)
        #expect(violation([parts[0], whole])?.contains("while request 5 is in parts") == true)
        // One after the other, both come whole.
        var assembly = ReplyAssembly()
        var done: [UInt64] = []
        for message in parts + other {
            if let reply = try assembly.take(message, pending: true) { done.append(reply.request) }
        }
        #expect(done == [5, 6])
    }

    @Test func aPartOfARequestNotPendingIsAViolation() throws {
        let (reply, parts, _) = try parts()
        // Never sent, or answered already: a part after the whole.
        var answered: Set<UInt64> = []
        var assembly = ReplyAssembly()
        for message in parts {
            if try assembly.take(message, pending: !answered.contains(message.request)) != nil {
                answered.insert(message.request)
            }
        }
        #expect(answered == [reply.request])
        #expect(
            violation([parts[0]], pending: { !answered.contains($0) })?.contains("not sent or has answered") == true)
    }

    @Test func partsThatAssembleIntoAPartOrAnotherRequestAreAViolation() throws {
        // The whole, decoded, is itself a part.
        let inner = try part(5, total: 10, offset: 0, [1]).serializedBytes() as [UInt8]
        let nested = stride(from: 0, to: inner.count, by: 4).map {
            part(5, total: inner.count, offset: $0, Array(inner[$0..<min($0 + 4, inner.count)]))
        }
        #expect(violation(nested)?.contains("make another part") == true)
        // The whole answers another request.
        let other = try dump(request: 9, tabs: 1, urlBytes: 10).serializedBytes() as [UInt8]
        #expect(violation([part(5, total: other.count, offset: 0, other)])?.contains("reply to request 9") == true)
        // The whole does not decode.
        let junk = [UInt8](repeating: 0xFF, count: 16)
        #expect(violation([part(5, total: junk.count, offset: 0, junk)])?.contains("does not decode") == true)
    }
}
