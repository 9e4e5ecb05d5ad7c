import BrowserModel
import Foundation
import Histogram
import IOUring
import Platform
import SessionStore
import SystemPackage

/// The first save of a fresh window: whatever a window's first files cost (its directories,
/// its journal) is paid here, by the save a user waits for when a window opens.
public struct FirstSaveResult: Codable, Sendable, Equatable {
    public struct Engine: Codable, Sendable, Equatable {
        public var p50: UInt64
        enum CodingKeys: String, CodingKey { case p50 = "p50_us" }
    }

    public var uring: Engine
    public var sync: Engine
}

public enum FirstSaveBench {
    /// `repeats` fresh windows per engine, alternating, each in its own new directory under
    /// `directory`: a new `WindowStore`, one tab opened, timed from the command to durable.
    public static func run(repeats: Int, directory: FilePath) throws -> FirstSaveResult {
        var latencies: [Contender: Histogram<UInt64>] = [:]
        for index in 0..<repeats {
            for contender in [Contender.uring, .sync] {
                let window = directory.appending("first-\(contender.rawValue)-\(index)")
                defer { try? FileManager.default.removeItem(atPath: window.string) }
                let engine: any IOEngine = contender == .uring ? try UringEngine() : SyncEngine()
                let store = WindowStore(root: window, windowID: UUID(), engine: engine, saveDelayMilliseconds: 0)
                _ = try store.recover()
                let browser = store.regular
                let start = monotonicNanoseconds()
                try store.apply(seq: 1) {
                    var history = NavigationHistory()
                    history.commit(
                        NavigationItem(
                            url: "https://example.com/", title: "Example",
                            timestamp: Timestamp(microsecondsSinceEpoch: 1)))
                    _ = try browser.webStateList.insert(
                        WebState(id: browser.profile.makeWebStateID(), creationTime: .zero, history: history),
                        InsertionParams(activate: true))
                }
                try store.waitUntilDurable(1)
                let microseconds = max(1, (monotonicNanoseconds() - start) / 1000)
                var histogram =
                    latencies[contender]
                    ?? Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
                _ = histogram.record(microseconds)
                latencies[contender] = histogram
            }
        }
        func p50(_ contender: Contender) -> FirstSaveResult.Engine {
            FirstSaveResult.Engine(p50: latencies[contender]?.valueAtPercentile(50) ?? 0)
        }
        return FirstSaveResult(uring: p50(.uring), sync: p50(.sync))
    }
}
