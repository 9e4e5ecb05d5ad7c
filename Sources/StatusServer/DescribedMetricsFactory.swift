import CoreMetrics
import Prometheus

/// swift-prometheus's factory, with each metric's `# HELP` line: swift-metrics has no help
/// text, and `promtool check metrics` asks for one. Counters and timers named in `help` are
/// made from a descriptor holding theirs; everything else is the inner factory's.
struct DescribedMetricsFactory: MetricsFactory {
    let inner: PrometheusMetricsFactory
    let help: [String: String]

    private func descriptor(_ label: String, _ text: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: text)
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard let text = help[label] else { return inner.makeCounter(label: label, dimensions: dimensions) }
        return inner.registry.makeCounter(descriptor: descriptor(label, text), labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        guard let text = help[label] else { return inner.makeTimer(label: label, dimensions: dimensions) }
        let buckets = inner.durationHistogramBuckets[label] ?? inner.defaultDurationHistogramBuckets
        return inner.registry.makeDurationHistogram(
            descriptor: descriptor(label, text), labels: dimensions, buckets: buckets)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        inner.makeFloatingPointCounter(label: label, dimensions: dimensions)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        inner.makeMeter(label: label, dimensions: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        inner.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
    }

    func destroyCounter(_ handler: any CounterHandler) { inner.destroyCounter(handler) }
    func destroyMeter(_ handler: any MeterHandler) { inner.destroyMeter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        inner.destroyFloatingPointCounter(handler)
    }
    func destroyRecorder(_ handler: any RecorderHandler) { inner.destroyRecorder(handler) }
    func destroyTimer(_ handler: any TimerHandler) { inner.destroyTimer(handler) }
}
