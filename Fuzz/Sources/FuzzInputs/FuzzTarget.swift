import Foundation
import HostLimits
import SessionFormat

/// The kinds of untrusted input, one fuzz target each. `run` is the whole check of one input:
/// it must end in a typed refusal or a state that keeps every promise the reader makes. A crash,
/// a trap, a hang or an allocation above the limits is a defect, and so is a `FuzzFinding`.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// Framing alone: file headers and records, followed from record to record.
    case frame
    /// A snapshot: metadata, restore into a list, every tab realized, written again and read back.
    case snapshot
    /// A journal: scanned as recovery scans it, its committed records replayed onto a list.
    case journal
    /// `windows.order`, read by the supervisor and turned into its window registry.
    case windowsOrder = "windows-order"
    /// `handed-out`: each window's seq and tab id ceilings and lost seqs, as the supervisor
    /// parses them, encoded again and raised.
    case handedOut = "handed-out"
    /// One line a control client sends the supervisor.
    case controlRequest = "control-request"
    /// The supervisor's reply as `windowhost ctl` reads it.
    case controlReply = "control-reply"

    public func run(_ bytes: [UInt8]) throws(FuzzFinding) {
        switch self {
        case .frame: SessionFileInputs.frames(bytes)
        case .snapshot: try SessionFileInputs.snapshot(bytes)
        case .journal: try SessionFileInputs.journal(bytes)
        case .windowsOrder: try SupervisorInputs.windowsOrder(bytes)
        case .handedOut: try SupervisorInputs.handedOut(bytes)
        case .controlRequest: try SupervisorInputs.controlRequest(bytes)
        case .controlReply: SupervisorInputs.controlReply(bytes)
        }
    }

    /// libFuzzer's `LLVMFuzzerTestOneInput`: a finding stops the run like a crash, so libFuzzer
    /// saves the input.
    public func fuzz(_ input: UnsafeBufferPointer<UInt8>) {
        do {
            try run(Array(input))
        } catch {
            fatalError("fuzz-\(rawValue): \(error)")
        }
    }

    /// The largest single allocation a valid input may need, in MiB: one record's payload at
    /// the format's limit (its 12-byte header included), plus slack for the copy the protobuf
    /// decoder makes of a string or bytes field. scripts/fuzz.sh asks a target for this number
    /// (it is printed when `-malloc_limit_mb` is missing) and passes it back, so the format owns it.
    public static let allocationLimitMiB = (Limits.maxRecordPayloadBytes >> 20) + 32

    /// Before libFuzzer starts: says what `-malloc_limit_mb` the format calls for when
    /// none is given, and refuses any other (below it valid records are flagged; above it,
    /// allocations sized by a file's claim pass unnoticed).
    public func checkFlags(_ arguments: [String]) {
        let flag = "-malloc_limit_mb="
        guard let given = arguments.last(where: { $0.hasPrefix(flag) }).map({ Int($0.dropFirst(flag.count)) }) else {
            FileHandle.standardError.write(
                Data("fuzz-\(rawValue): the format allows \(Self.allocationLimitMiB) MiB\n".utf8))
            return
        }
        guard given == Self.allocationLimitMiB else {
            fatalError(
                "fuzz-\(rawValue): -malloc_limit_mb=\(given.map(String.init) ?? "?"), the format allows \(Self.allocationLimitMiB)"
            )
        }
    }
}

/// An input the reader accepted into a state that breaks a promise it makes.
public struct FuzzFinding: Error, CustomStringConvertible {
    public let description: String
}

/// Throws a finding unless `condition` holds.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzFinding) {
    guard condition else { throw FuzzFinding(description: message()) }
}
