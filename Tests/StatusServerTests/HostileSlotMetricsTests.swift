import Foundation
import TestSupport
import Testing

@testable import HostControl
@testable import HostCoordination
@testable import StatusServer
@testable import Supervisor

/// Issue 15, attacked: a compromised worker writes its slot's counters and latency buckets
/// between scrapes. The exposition's counters must never go down or below zero, and another
/// window's series must not change for it.
@Suite struct HostileSlotMetricsTests {
    let hostile = UUID()
    let honest = UUID()

    /// A region whose slot 0 holds `hostile` and slot 1 `honest`, and an exporter reading it
    /// through a status that says so, as the supervisor's loop publishes it.
    func setUp(maxSamplesPerScrape: UInt64 = 1000) throws -> (SharedRegion, MetricsExporter) {
        let region = try SharedRegion(slotCount: 2, supervisorPID: getpid())
        region.slot(0).windowID = hostile
        region.slot(1).windowID = honest
        let exporter = MetricsExporter(maxSamplesPerScrape: maxSamplesPerScrape)
        exporter.hostObservation.attach(region, startedAt: 0)
        let windows = [hostile, honest].enumerated().map { index, uuid in
            """
            {"uuid":"\(uuid.uuidString)","state":"foreground","slot":\(index),"pid":1,"generation":1,"tabs":0,"regular_tabs":0,"incognito_tabs":0,
            "applied_seq":0,"durable_seq":0,"digest":"0","saves":0,"save_failures":0,"compaction_failures":0,
            "failing":null,"restarts":0,"saving_seq":0,"lost_seqs":[]}
            """
        }
        let json =
            #"{"supervisor_pid":1,"root":"/r","socket":"/s","set_aside":[],"order":[],"windows":["#
            + windows.joined(separator: ",") + "]}"
        exporter.hostObservation.publish(try ReplyCoding.decoder().decode(StatusReply.self, from: Data(json.utf8)))
        return (region, exporter)
    }

    /// The worker's own store into its slot, as a compromised worker makes it.
    func write(_ value: UInt64, _ field: SharedField, of slot: WindowSlot) {
        (slot.base + field.offset).storeBytes(of: value, as: UInt64.self)
    }

    /// A worker flipping its save counter between 2⁶⁴−1 and 2⁵³−1 makes each scrape add the
    /// most one rise may add (2⁵³−1): about 1024 scrapes (seconds, for anyone who can GET
    /// /metrics, the worker included) take the Int64 counter past 2⁶³, where it wraps negative.
    /// Seen failing at 4cdde3f: the counter reads −9.2e18 at scrape 1024.
    @Test func aCounterAWorkerFlipsNeverGoesDownOrNegative() throws {
        try expectNeverDownOrNegative(SlotLayout.savesCompleted, "windowhost_saves_total")
    }

    /// The same for the failure counter, which the same code path counts.
    @Test func aFailureCounterAWorkerFlipsNeverGoesDownOrNegative() throws {
        try expectNeverDownOrNegative(SlotLayout.saveFailures, "windowhost_save_failures_total")
    }

    /// 1100 scrapes while the worker flips `field` between 2⁶⁴−1 and 2⁵³−1: what `family`
    /// shows never goes down nor below 0.
    func expectNeverDownOrNegative(_ field: SharedField, _ family: String) throws {
        let (region, exporter) = try setUp()
        let slot = region.slot(0)
        var last = 0.0
        for scrape in 0..<1100 {
            write(scrape.isMultiple(of: 2) ? UInt64.max : (1 << 53) - 1, field, of: slot)
            let value = try #require(
                PrometheusScrape(text: exporter.render()).value(family, ["window": hostile.uuidString]))
            guard value >= last, value >= 0 else {
                Issue.record("scrape \(scrape): \(family) went from \(last) to \(value)")
                return
            }
            last = value
        }
    }

    /// The per-scrape sample budget is shared by every window, in slot order: a worker in a
    /// lower slot whose buckets rise by the whole budget at each scrape takes it all, and the
    /// honest window's saves are marked seen without being recorded. Its histogram then holds
    /// fewer saves than its `saves_total`, for good. Seen failing at 4cdde3f (count 0, not 5).
    @Test func aHostileWindowsBucketsDoNotStarveAnotherWindowsHistogram() throws {
        let (region, exporter) = try setUp(maxSamplesPerScrape: 1000)
        let bucket = LatencyBuckets.index(of: 700)
        for scrape in 0..<3 {
            // Falls, then rises: each scrape sees a fresh 1000 (or 999) samples.
            write(
                1000 - UInt64(scrape % 2),
                SharedField("bucket", at: SlotLayout.latency.offset + bucket * 8, UInt64.self), of: region.slot(0))
            for _ in 0..<5 { region.slot(1).recordSave(microseconds: 300) }
            let scraped = PrometheusScrape(text: exporter.render())
            let saves = scraped.value("windowhost_saves_total", ["window": honest.uuidString])
            let histogram = scraped.value("windowhost_save_duration_seconds_count", ["window": honest.uuidString])
            #expect(saves == Double(5 * (scrape + 1)))
            #expect(
                histogram == saves,
                "scrape \(scrape): the honest window's histogram holds \(histogram ?? -1) of its \(saves ?? -1) saves")
        }
    }
}
