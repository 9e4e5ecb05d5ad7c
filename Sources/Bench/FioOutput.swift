import Foundation

/// The part of fio's `--output-format=json` the bench reads: one job report (the bench asks
/// for `--group_reporting`), its writes.
private struct FioOutput: Decodable {
    struct Job: Decodable {
        let write: Direction
    }

    struct Direction: Decodable {
        let iops: Double
        let totalIOs: UInt64
        /// Milliseconds.
        let runtime: UInt64
        /// Submission → completion (`--lat_percentiles=1`).
        let latency: Latency

        enum CodingKeys: String, CodingKey {
            case iops, runtime
            case totalIOs = "total_ios"
            case latency = "lat_ns"
        }
    }

    struct Latency: Decodable {
        /// Nanoseconds by percentile, keyed as fio prints them ("50.000000").
        let percentile: [String: UInt64]
    }

    let jobs: [Job]
}

/// Each job's error alone: a failed job's report lacks the figures `FioOutput` requires.
private struct FioErrors: Decodable {
    struct Job: Decodable { let error: Int }
    let jobs: [Job]
}

extension FioBench {
    /// More output than fio prints for one grouped job by orders of magnitude.
    static let maxOutputBytes = 4 << 20
    /// A latency past an hour, or a rate past 100 million writes a second, is no disk's.
    static let maxLatencyNanoseconds: UInt64 = 3_600_000_000_000
    static let maxWritesPerSecond = 1e8

    /// fio's JSON (after any lines it printed before it, such as a note or an error) checked:
    /// one job, no error, writes done, a rate that agrees with the count over the runtime, and
    /// percentiles in order.
    public static func parse(_ data: Data) throws(FioError) -> FioMeasurement {
        guard data.count <= maxOutputBytes else { throw .malformed("\(data.count) bytes, more than \(maxOutputBytes)") }
        let output: FioOutput
        do {
            let json = jsonPart(of: data)
            if let failed = try JSONDecoder().decode(FioErrors.self, from: json).jobs.first(where: { $0.error != 0 }) {
                throw FioError.jobFailed(errno: failed.error)
            }
            output = try JSONDecoder().decode(FioOutput.self, from: json)
        } catch let error as FioError {
            throw error
        } catch let error as DecodingError {
            throw .malformed(describe(error))
        } catch {
            throw .malformed("\(error)")
        }
        guard output.jobs.count == 1 else {
            throw .malformed("\(output.jobs.count) job reports, not the one --group_reporting gives")
        }
        let write = output.jobs[0].write
        guard write.totalIOs > 0, write.runtime > 0 else {
            throw .malformed("no writes (\(write.totalIOs) in \(write.runtime) ms)")
        }
        guard write.iops.isFinite, write.iops > 0, write.iops <= maxWritesPerSecond else {
            throw .malformed("writes/s \(write.iops)")
        }
        // fio's iops is total_ios over the runtime (in ms): a rate that disagrees is not fio's.
        let expected = Double(write.totalIOs) * 1000 / Double(write.runtime)
        guard abs(write.iops - expected) <= 0.01 * expected + 1 else {
            throw .malformed("writes/s \(write.iops) against \(write.totalIOs) writes in \(write.runtime) ms")
        }
        guard let p50 = write.latency.percentile["50.000000"], let p99 = write.latency.percentile["99.000000"] else {
            throw .malformed("no 50th or 99th latency percentile")
        }
        guard p50 > 0, p50 <= p99, p99 <= maxLatencyNanoseconds else {
            throw .malformed("latency percentiles 50: \(p50) ns, 99: \(p99) ns")
        }
        return FioMeasurement(writesPerSecond: write.iops, p50: max(1, p50 / 1000), p99: max(1, p99 / 1000))
    }

    /// From the first line that starts with `{`: fio prints notes and errors before its JSON.
    private static func jsonPart(of data: Data) -> Data {
        let bytes = [UInt8](data)
        var lineStart = 0
        while lineStart < bytes.count {
            if bytes[lineStart] == UInt8(ascii: "{") { return Data(bytes[lineStart...]) }
            guard let newline = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            lineStart = newline + 1
        }
        return data
    }

    /// Which key was missing or of the wrong type, briefly.
    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "no \(([path(context)] + [key.stringValue]).filter { !$0.isEmpty }.joined(separator: "."))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context)) is not what fio writes there"
        case .dataCorrupted(let context): return "not JSON\(context.codingPath.isEmpty ? "" : " at \(path(context))")"
        @unknown default: return "undecodable"
        }
    }
}
