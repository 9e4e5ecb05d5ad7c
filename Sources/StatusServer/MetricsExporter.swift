import Foundation
import HostControl
import HostCoordination
import HostLimits
import Prometheus
import Synchronization

/// `GET /metrics`: the Prometheus text format, rendered by swift-prometheus's registry.
///
/// Two sources feed it. The supervisor's loop counts commands, restarts and recovery times
/// itself, through swift-metrics into this registry (`factory`, given to its
/// `HostObservation`). Everything workers publish is read here, at each scrape, from the shared
/// region and the status the loop last published: each window's save and failure counters and
/// latency buckets (what rose since the last scrape is added to the window's counters and
/// histogram), and the gauges (windows by state, durable lag, tabs).
///
/// Workers are untrusted: a counter that falls (a compromised worker writing it down) counts
/// from zero again, and one scrape records at most `maxSamplesPerScrape` latency samples of each
/// window (the rest wait for the next scrapes, never dropped), so a worker writing huge counts
/// costs a scrape a bounded time and delays no other window's samples.
public final class MetricsExporter: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let observation: HostObservation
    /// One scrape at a time: each rise is added once.
    private let scrape = Mutex(Scrape())
    private let windowsByState: [SlotState: Prometheus.Gauge]

    struct Scrape {
        var windows: [String: WindowSeries] = [:]
    }

    /// One window's series, and what its counters held at the last scrape.
    struct WindowSeries {
        let saves: Prometheus.Counter
        let failures: Prometheus.Counter
        let latency: DurationHistogram
        let lag: Prometheus.Gauge
        let tabs: Prometheus.Gauge
        /// What the worker's counters held at the last scrape, and what the series show.
        var savesSeen: UInt64 = 0
        var savesShown: UInt64 = 0
        var failuresSeen: UInt64 = 0
        var failuresShown: UInt64 = 0
        /// Samples recorded so far, per bucket: what the next scrape records above.
        var latencyRecorded: [UInt64] = []
    }

    /// Request to durable, from 50 µs (a tmpfs save) to 10 s (a stalled disk).
    static let saveBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
        .microseconds(2500),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]
    /// From a worker's death to its successor's readiness: a restore of a small window takes
    /// milliseconds, a backoff up to 30 s.
    static let recoveryBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]
    /// A move is three synced writes in a row (the log's lane, the import, the drop): about a
    /// millisecond on a fast disk, seconds when a window restarts in the middle.
    static let moveBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1), .seconds(10),
    ]
    /// How many latency samples one scrape records of one window at most. At about 40 ns a
    /// sample (release), 64 windows claiming the most cost a scrape about 0.2 s.
    let maxSamplesPerScrape: UInt64

    public init(maxSamplesPerScrape: UInt64 = 1 << 16) {
        self.maxSamplesPerScrape = maxSamplesPerScrape
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[HostObservation.recoveryMetric] = Self.recoveryBuckets
        factory.durationHistogramBuckets[HostObservation.moveDurationMetric] = Self.moveBuckets
        observation = HostObservation(
            factory: DescribedMetricsFactory(
                inner: factory,
                help: [
                    HostObservation.commandsMetric: "Control requests received, by verb",
                    HostObservation.restartsMetric:
                        "Workers started again after a death, by reason (crash, watchdog, kill)",
                    HostObservation.recoveryMetric: "From a worker's death to its successor's readiness",
                    HostObservation.movesMetric:
                        "Moves of tabs between windows over, by outcome (settled: in the other window; undone: in its own)",
                    HostObservation.moveDurationMetric:
                        "A settled move, from its request to durable on both sides",
                ]))
        windowsByState = Dictionary(
            uniqueKeysWithValues: SlotState.allCases.filter { $0 != .free }.map { [registry] state in
                (state, registry.makeGauge(descriptor: Self.windows, labels: [("state", state.description)]))
            })
    }

    /// What the supervisor is configured with, so its counts land here.
    public var hostObservation: HostObservation { observation }

    /// The whole exposition, after reading what workers published.
    public func render() -> String {
        scrape.withLock { scrape in
            update(&scrape)
            return registry.emitToString()
        }
    }

    private func update(_ scrape: inout Scrape) {
        let status = observation.status()
        let region = observation.region
        let windows = status?.windows ?? []
        var byState: [SlotState: Int] = [:]
        for window in windows {
            if let state = SlotState.allCases.first(where: { $0.description == window.state }) {
                byState[state, default: 0] += 1
            }
            var series = scrape.windows[window.uuid] ?? makeSeries(window.uuid)
            series.lag.set(Double(window.appliedSeq >= window.durableSeq ? window.appliedSeq - window.durableSeq : 0))
            series.tabs.set(Double(window.tabs))
            if let slot = region?.slot(holding: window) {
                Self.add(slot.savesCompleted, seen: &series.savesSeen, shown: &series.savesShown, to: series.saves)
                Self.add(
                    slot.saveFailures, seen: &series.failuresSeen, shown: &series.failuresShown, to: series.failures)
                record(slot.latency.counts(), into: &series)
            }
            scrape.windows[window.uuid] = series
        }
        for (state, gauge) in windowsByState { gauge.set(Double(byState[state] ?? 0)) }
        // A window gone is gone from the exposition too: a host that opens and closes windows
        // for hours keeps a bounded set of series.
        let open = Set(windows.map(\.uuid))
        for (uuid, series) in scrape.windows where !open.contains(uuid) {
            registry.unregisterCounter(series.saves)
            registry.unregisterCounter(series.failures)
            registry.unregisterDurationHistogram(series.latency)
            registry.unregisterGauge(series.lag)
            registry.unregisterGauge(series.tabs)
            scrape.windows[uuid] = nil
        }
    }

    /// Records in the window's histogram what its buckets rose by since the samples recorded,
    /// at most `maxSamplesPerScrape` (the rest in later scrapes); a bucket that fell counts
    /// from zero again.
    private func record(_ counts: LatencyCounts, into series: inout WindowSeries) {
        if series.latencyRecorded.count != counts.perBucket.count {
            series.latencyRecorded = Array(repeating: 0, count: counts.perBucket.count)
        }
        var budget = maxSamplesPerScrape
        for (index, count) in counts.perBucket.enumerated() where budget > 0 && count != series.latencyRecorded[index] {
            if count < series.latencyRecorded[index] { series.latencyRecorded[index] = 0 }
            let recorded = min(count - series.latencyRecorded[index], budget)
            budget -= recorded
            series.latencyRecorded[index] += recorded
            let value = Duration.microseconds(Int64(clamping: LatencyBuckets.representative(of: index)))
            for _ in 0..<recorded { series.latency.record(value) }
        }
    }

    /// Adds to `counter` the rise of a counter a worker publishes since `seen` (all of it, if it
    /// fell). What it shows stops at 2⁵³ − 1, exact in a float, however a worker makes its
    /// counter fall and rise: it never wraps to a negative value.
    private static func add(_ now: UInt64, seen: inout UInt64, shown: inout UInt64, to counter: Prometheus.Counter) {
        let rise = min(now >= seen ? now - seen : now, Limits.maxCommandSeq - shown)
        seen = now
        shown += rise
        counter.increment(by: Int64(rise))
    }

    private func makeSeries(_ uuid: String) -> WindowSeries {
        let labels = [("window", uuid)]
        return WindowSeries(
            saves: registry.makeCounter(descriptor: Self.saves, labels: labels),
            failures: registry.makeCounter(descriptor: Self.saveFailures, labels: labels),
            latency: registry.makeDurationHistogram(
                descriptor: Self.saveDuration, labels: labels, buckets: Self.saveBuckets),
            lag: registry.makeGauge(descriptor: Self.durableLag, labels: labels),
            tabs: registry.makeGauge(descriptor: Self.tabs, labels: labels))
    }

    // The series read from workers; docs/observability.md lists every metric.
    static var windows: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "windowhost", metricName: "windows", unitName: "", helpText: "Open windows, by state")
    }
    static var saves: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "windowhost", metricName: "saves", unitName: "total", helpText: "Saves made durable")
    }
    static var saveFailures: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "windowhost", metricName: "save_failures", unitName: "total",
            helpText: "Saves that failed (the window keeps its changes and tries again)")
    }
    static var saveDuration: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "windowhost", metricName: "save_duration", unitName: "seconds",
            helpText: "Save latency, from the request to durable")
    }
    static var durableLag: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "windowhost", metricName: "durable_lag", unitName: "",
            helpText: "Commands applied and not yet durable (applied seq minus durable seq)")
    }
    static var tabs: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "windowhost", metricName: "tabs", unitName: "",
            helpText: "Tabs open in the window, regular and incognito")
    }
}
