import Foundation
import HostLimits
import SystemPackage

// `SupervisorFiles` (how windows.order is read) is internal:
// testable import reaches them without widening the product's API for a test.
@testable import HostControl
@testable import Supervisor

/// The supervisor's inputs: `windows.order` under its root, and the JSON lines on its control
/// socket (and the replies `ctl` reads back).
enum SupervisorInputs {
    /// `windows.order` read from a real file, as the supervisor reads it, then the registry it
    /// seeds: every window on disk named once, no sentinel, and each handed out once.
    static func windowsOrder(_ bytes: [UInt8]) throws(FuzzFinding) {
        let saved: [UUID]
        do {
            saved = try withScratchRoot { root in
                let files = SupervisorFiles(root: root)
                let fd = try FileDescriptor.open(
                    files.order, .writeOnly, options: [.create, .exclusiveCreate], permissions: .ownerReadWrite)
                try fd.closeAfter { _ = try fd.writeAll(bytes) }
                return try files.savedOrder()
            }
        } catch {
            fatalError("fuzz-windows-order: no scratch file: \(error)")
        }
        let notNamed = UUID(uuidString: "00000000-0000-4000-8000-000000000001")!
        let onDisk = Array(saved.prefix(8)) + [notNamed, WindowRegistry.unavailable]
        let expected = Set(onDisk).subtracting(WindowRegistry.sentinels)
        var registry = WindowRegistry(onDisk: onDisk, savedOrder: saved)
        try expect(
            registry.order.count == expected.count && Set(registry.order) == expected,
            "order \(registry.order) for \(expected)")
        var handedOut: Set<UUID> = []
        for _ in 0...expected.count {
            let id = registry.reserve()
            try expect(
                !WindowRegistry.sentinels.contains(id) && handedOut.insert(id).inserted, "\(id) handed out twice")
            registry.configured(id)
        }
    }

    /// `handed-out` as the supervisor parses it: a typed error, or windows that encode to a file
    /// that parses back the same, whose ceilings cover their lost seqs and rise by a block
    /// without passing the maxima.
    static func handedOut(_ bytes: [UInt8]) throws(FuzzFinding) {
        guard let windows = try? HandedOut.parseFile(bytes) else { return }
        try expect(
            (try? HandedOut.parse(HandedOut.encode(windows))) == windows,
            "encoded again, it does not parse back the same")
        if let file = try? HandedOut.encodeFile(windows) {
            try expect((try? HandedOut.parseFile(file)) == windows, "written as a file, it does not read back the same")
        }
        for (id, window) in windows {
            try expect(
                window.lost.ranges.allSatisfy { $0.lowerBound >= 1 && $0.upperBound <= window.ceiling.seq },
                "\(id): lost seqs above the ceiling")
            let next = HandedOutCeiling(
                seq: min(window.ceiling.seq + 1, Limits.maxCommandSeq),
                tab: min(window.ceiling.tab + 1, Limits.maxWebStateID))
            guard let raised = try? window.ceiling.covering(next) else {
                throw FuzzFinding(description: "\(id): cannot raise \(window.ceiling)")
            }
            try expect(
                raised.seq >= next.seq && raised.tab >= next.tab && Limits.isValidCommandSeq(raised.seq)
                    && raised.tab <= Limits.maxWebStateID,
                "\(id): \(window.ceiling) raised to \(raised) for \(next)")
        }
    }

    /// One request line, decoded as the supervisor decodes it (the bytes before the first
    /// newline): refused with a typed error (a `ControlFailure`, or the decoder's own for a line
    /// of the wrong shape), or a request that encodes to a line decoding to the same request.
    static func controlRequest(_ bytes: [UInt8]) throws(FuzzFinding) {
        let line = bytes.prefix { $0 != UInt8(ascii: "\n") }
        _ = ControlServer.loneSurrogateEscape(in: Array(line))
        // The top-level keys the duplicate check scans are the keys a full parser reads.
        if let keys = ControlRequest.topLevelKeys(in: Array(line)), ControlRequest.repeatedKey(in: Array(line)) == nil,
            let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any]
        {
            try expect(
                keys.count == object.count && Set(keys) == Set(object.keys),
                "top-level keys \(keys), a parser's \(object.keys.sorted())")
        }
        let request: ControlRequest
        do {
            request = try JSONDecoder().decode(ControlRequest.self, from: Data(line))
        } catch is ControlFailure {
            return
        } catch is DecodingError {
            return
        } catch {
            throw FuzzFinding(description: "a request line refused with \(error), no typed refusal")
        }
        let again = (try? JSONEncoder().encode(request)).flatMap {
            try? JSONDecoder().decode(ControlRequest.self, from: $0)
        }
        try expect(again == request, "\(request) re-encoded reads as \(String(describing: again))")
    }

    /// A reply as `ctl` reads it: decoded as each verb's reply type (a typed error when it is
    /// not one), and every value read through `JSONValue`'s accessors, which tests still use.
    static func controlReply(_ bytes: [UInt8]) {
        guard let reply = try? JSONDecoder().decode(ControlReply.self, from: Data(bytes)) else { return }
        _ = try? reply.decode(StatusReply.self)
        _ = try? reply.decode(StatsReply.self)
        _ = try? reply.decode(DumpReply.self)
        _ = try? reply.decode(CommandReply.self)
        _ = try? reply.decode(DurableReply.self)
        _ = try? reply.decode(KillReply.self)
        _ = try? reply.decode(ConnectReply.self)
        _ = try? reply.decode(ShutdownReply.self)
        var values = reply.result.map { [$0] } ?? []
        while let value = values.popLast() {
            _ = (value.int, value.number, value.string, value.bool)
            values += value.array ?? []
            if case .object(let object) = value { values += object.values }
        }
        _ = reply.result?.line
    }

    /// A fresh private directory for one input, removed with what it holds.
    private static func withScratchRoot<T>(_ body: (FilePath) throws -> T) throws -> T {
        var template = Array((NSTemporaryDirectory() + "windowhost-fuzz-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw Errno(rawValue: errno) }
        let root = FilePath(String(cString: made))
        defer { try? FileManager.default.removeItem(atPath: root.string) }
        return try body(root)
    }
}
