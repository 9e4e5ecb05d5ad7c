import Foundation
import HostCoordination
import HostLimits
import Prometheus
import Supervisor
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
/// from zero again, and one scrape records at most `maxSamplesPerScrape` latency samples, so a
/// worker writing huge counts costs a scrape a bounded time.
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
        var latencySeen: LatencyCounts?
    }

    /// Request to durable, from 50 µs (a tmpfs save) to 10 s (a stalled disk).
    static let saveBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2500),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]
    /// From a worker's death to its successor's readiness: a restore of a small window takes
    /// milliseconds, a backoff up to 30 s.
    static let recoveryBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]
    /// How many latency samples one scrape records at most: at 40 ns a sample, the default
    /// costs it about 0.2 s, whatever workers claim.
    let maxSamplesPerScrape: UInt64

    public init(maxSamplesPerScrape: UInt64 = 1 << 22) {
        self.maxSamplesPerScrape = maxSamplesPerScrape
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[HostObservation.recoveryMetric] = Self.recoveryBuckets
        observation = HostObservation(factory: DescribedMetricsFactory(inner: factory, help: [
            HostObservation.commandsMetric: "Control requests received, by verb",
            HostObservation.restartsMetric: "Workers started again after a death, by reason (crash, watchdog, kill)",
            HostObservation.recoveryMetric: "From a worker's death to its successor's readiness",
        ]))
        windowsByState = Dictionary(uniqueKeysWithValues: SlotState.allCases.filter { $0 != .free }.map { [registry] state in
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
        var budget = maxSamplesPerScrape
        for window in windows {
            if let state = SlotState.allCases.first(where: { $0.description == window.state }) { byState[state, default: 0] += 1 }
            var series = scrape.windows[window.uuid] ?? makeSeries(window.uuid)
            series.lag.set(Double(window.appliedSeq >= window.durableSeq ? window.appliedSeq - window.durableSeq : 0))
            series.tabs.set(Double(window.tabs))
            if let slot = region?.slot(holding: window) {
                Self.add(slot.savesCompleted, seen: &series.savesSeen, shown: &series.savesShown, to: series.saves)
                Self.add(slot.saveFailures, seen: &series.failuresSeen, shown: &series.failuresShown, to: series.failures)
                let counts = slot.latency.counts()
                for (microseconds, count) in counts.since(series.latencySeen).samples {
                    let recorded = min(count, budget)
                    budget -= recorded
                    for _ in 0..<recorded { series.latency.record(.microseconds(Int64(clamping: microseconds))) }
                }
                series.latencySeen = counts
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
            latency: registry.makeDurationHistogram(descriptor: Self.saveDuration, labels: labels, buckets: Self.saveBuckets),
            lag: registry.makeGauge(descriptor: Self.durableLag, labels: labels),
            tabs: registry.makeGauge(descriptor: Self.tabs, labels: labels))
    }

    // The series read from workers; docs/observability.md lists every metric.
    static var windows: MetricNameDescriptor { MetricNameDescriptor(namespace: "windowhost", metricName: "windows", unitName: "", helpText: "Open windows, by state") }
    static var saves: MetricNameDescriptor { MetricNameDescriptor(namespace: "windowhost", metricName: "saves", unitName: "total", helpText: "Saves made durable") }
    static var saveFailures: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "windowhost", metricName: "save_failures", unitName: "total", helpText: "Saves that failed (the window keeps its changes and tries again)") }
    static var saveDuration: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "windowhost", metricName: "save_duration", unitName: "seconds", helpText: "Save latency, from the request to durable") }
    static var durableLag: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "windowhost", metricName: "durable_lag", unitName: "", helpText: "Commands applied and not yet durable (applied seq minus durable seq)") }
    static var tabs: MetricNameDescriptor { MetricNameDescriptor(namespace: "windowhost", metricName: "tabs", unitName: "", helpText: "Tabs open in the window, regular and incognito") }
}
