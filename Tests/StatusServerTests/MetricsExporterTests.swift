import Foundation
import TestSupport
import Testing

@testable import HostControl
@testable import HostCoordination
@testable import StatusServer
@testable import Supervisor

/// The exporter and the live feed against a real shared region, with no supervisor process:
/// what workers publish is counted once, whatever they write, and only for the window a slot
/// holds.
@Suite struct MetricsExporterTests {
    let window = UUID()

    /// A region whose slot 0 holds `window`, and an exporter reading it through a status that
    /// says so (as the supervisor's loop publishes it).
    func setUp(states: [String] = ["foreground"], applied: UInt64 = 7, durable: UInt64 = 5) throws -> (
        SharedRegion, MetricsExporter
    ) {
        let region = try SharedRegion(slotCount: 2, supervisorPID: getpid())
        region.slot(0).windowID = window
        let exporter = MetricsExporter(maxSamplesPerScrape: 1000)
        exporter.hostObservation.attach(region, startedAt: 0)
        exporter.hostObservation.publish(try status(states: states, applied: applied, durable: durable))
        return (region, exporter)
    }

    func status(states: [String], applied: UInt64, durable: UInt64) throws -> StatusReply {
        let windows = states.enumerated().map { index, state in
            let uuid = index == 0 ? window.uuidString : UUID().uuidString
            return """
                {"uuid":"\(uuid)","state":"\(state)","slot":\(index),"pid":1,"generation":1,"tabs":3,"regular_tabs":3,"incognito_tabs":0,
                "applied_seq":\(applied),"durable_seq":\(durable),"digest":"0","saves":0,"save_failures":0,"compaction_failures":0,
                "failing":null,"restarts":0,"saving_seq":0,"lost_seqs":[]}
                """
        }
        let json =
            #"{"supervisor_pid":1,"root":"/r","socket":"/s","set_aside":[],"order":[],"windows":["#
            + windows.joined(separator: ",") + "]}"
        return try ReplyCoding.decoder().decode(StatusReply.self, from: Data(json.utf8))
    }

    func scrape(_ exporter: MetricsExporter) throws -> PrometheusScrape { PrometheusScrape(text: exporter.render()) }

    @Test func eachSaveIsCountedOnceAcrossScrapes() throws {
        let (region, exporter) = try setUp()
        let slot = region.slot(0)
        for microseconds in [80, 300, 300, 4000] as [UInt64] { slot.recordSave(microseconds: microseconds) }
        slot.recordSaveFailure()
        let first = try scrape(exporter)
        #expect(first.value("windowhost_saves_total", ["window": window.uuidString]) == 4)
        #expect(first.value("windowhost_save_failures_total", ["window": window.uuidString]) == 1)
        #expect(first.value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 4)
        #expect(
            first.value("windowhost_save_duration_seconds_bucket", ["window": window.uuidString, "le": "0.0001"]) == 1)
        #expect(
            first.value("windowhost_save_duration_seconds_bucket", ["window": window.uuidString, "le": "0.0005"]) == 3)
        #expect(first.value("windowhost_durable_lag", ["window": window.uuidString]) == 2)
        #expect(first.value("windowhost_windows", ["state": "foreground"]) == 1)
        #expect(first.value("windowhost_windows", ["state": "crashed"]) == 0)
        // Nothing new: nothing added.
        #expect(
            try scrape(exporter).value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 4)
        slot.recordSave(microseconds: 20_000)
        let third = try scrape(exporter)
        #expect(third.value("windowhost_saves_total", ["window": window.uuidString]) == 5)
        #expect(third.value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 5)
        #expect(
            third.value("windowhost_save_duration_seconds_bucket", ["window": window.uuidString, "le": "0.01"]) == 4)
    }

    /// Counters that fall (cleared, or written down by a compromised worker) count from zero
    /// again: the exposition's counters never go down.
    @Test func countersThatFallCountFromZeroAndNeverGoDown() throws {
        let (region, exporter) = try setUp()
        let slot = region.slot(0)
        for _ in 0..<3 { slot.recordSave(microseconds: 500) }
        #expect(try scrape(exporter).value("windowhost_saves_total", ["window": window.uuidString]) == 3)
        slot.resetWorkerFields(keepingCounters: false)
        slot.windowID = window
        slot.recordSave(microseconds: 500)
        let after = try scrape(exporter)
        #expect(after.value("windowhost_saves_total", ["window": window.uuidString]) == 4)
        #expect(after.value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 4)
    }

    /// A worker that makes its save counter leap and fall, scrape after scrape: what the
    /// exposition shows only rises, and stops at 2⁵³ − 1 instead of wrapping negative.
    @Test func aLeapingCounterNeverWrapsOrFalls() throws {
        let (region, exporter) = try setUp()
        let word = region.slot(0).base + SlotLayout.savesCompleted.offset
        var last = 0.0
        for round in 0..<40 {
            word.storeBytes(of: round % 2 == 0 ? UInt64.max : 0, as: UInt64.self)
            let shown = try #require(
                try scrape(exporter).value("windowhost_saves_total", ["window": window.uuidString]))
            #expect(shown >= last && shown <= Double((1 << 53) - 1), "round \(round): \(shown) after \(last)")
            last = shown
        }
        #expect(last == Double((1 << 53) - 1))
    }

    /// A worker claiming 2⁴⁰ saves in one bucket costs a scrape at most its sample budget; the
    /// rest wait for later scrapes, none dropped.
    @Test func hugeCountsCostAScrapeABoundedNumberOfSamples() throws {
        let (region, exporter) = try setUp()
        let buckets = region.slot(0).latency
        (buckets.base + LatencyBuckets.index(of: 700) * 8).storeBytes(of: UInt64(1) << 40, as: UInt64.self)
        let first = try scrape(exporter)
        #expect(first.value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 1000)
        #expect(
            try scrape(exporter).value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 2000)
    }

    /// More saves between two scrapes than one scrape records: all of them reach the histogram
    /// over the next scrapes, in their buckets.
    @Test func samplesPastTheBudgetAreRecordedLater() throws {
        let (region, exporter) = try setUp()
        for _ in 0..<1500 { region.slot(0).recordSave(microseconds: 80) }
        for _ in 0..<700 { region.slot(0).recordSave(microseconds: 3000) }
        #expect(
            try scrape(exporter).value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 1000)
        #expect(
            try scrape(exporter).value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 2000)
        let last = try scrape(exporter)
        #expect(last.value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 2200)
        #expect(
            last.value("windowhost_save_duration_seconds_bucket", ["window": window.uuidString, "le": "0.0001"]) == 1500
        )
    }

    /// A slot that no longer holds the window the status names (freed and taken by another
    /// since the status was published) is not read for it.
    @Test func aSlotHoldingAnotherWindowIsNotRead() throws {
        let (region, exporter) = try setUp()
        region.slot(0).windowID = UUID()
        region.slot(0).recordSave(microseconds: 900)
        let scraped = try scrape(exporter)
        #expect(scraped.value("windowhost_saves_total", ["window": window.uuidString]) == 0)
        #expect(scraped.value("windowhost_save_duration_seconds_count", ["window": window.uuidString]) == 0)
    }

    /// A window gone from the status is gone from the exposition.
    @Test func aClosedWindowsSeriesAreDropped() throws {
        let (region, exporter) = try setUp(states: ["foreground", "background"])
        region.slot(0).recordSave(microseconds: 900)
        #expect(try scrape(exporter).text.contains(window.uuidString))
        exporter.hostObservation.publish(try status(states: [], applied: 0, durable: 0))
        let after = try scrape(exporter)
        #expect(!after.text.contains("window=\""))
        #expect(after.value("windowhost_windows", ["state": "foreground"]) == 0)
    }

    @Test func movesAreCountedByOutcomeAndTimedWhenSettled() throws {
        let (_, exporter) = try setUp()
        let observation = exporter.hostObservation
        observation.moveSettled(nanoseconds: 1_500_000)
        observation.moveSettled(nanoseconds: 40_000_000)
        observation.moveUndone()
        let scraped = try scrape(exporter)
        #expect(scraped.value("windowhost_moves_total", ["outcome": "settled"]) == 2)
        #expect(scraped.value("windowhost_moves_total", ["outcome": "undone"]) == 1)
        #expect(scraped.value("windowhost_move_duration_seconds_bucket", ["le": "0.002"]) == 1)
        #expect(scraped.value("windowhost_move_duration_seconds_bucket", ["le": "0.05"]) == 2)
        #expect(scraped.value("windowhost_move_duration_seconds_count", [:]) == 2)
        #expect(scraped.text.contains("# HELP windowhost_moves_total Moves of tabs between windows over"))
    }

    @Test func restartsAndRecoveriesAreCountedAndMarked() throws {
        let (_, exporter) = try setUp()
        let observation = exporter.hostObservation
        observation.restarting(window, .watchdog, at: 1.5)
        observation.recovered(window, nanoseconds: 30_000_000, at: 1.53)
        observation.counted(.open)
        let scraped = try scrape(exporter)
        #expect(scraped.value("windowhost_worker_restarts_total", ["reason": "watchdog"]) == 1)
        #expect(scraped.value("windowhost_worker_restarts_total", ["reason": "crash"]) == 0)
        #expect(scraped.value("windowhost_recovery_duration_seconds_bucket", ["le": "0.05"]) == 1)
        #expect(scraped.value("windowhost_recovery_duration_seconds_bucket", ["le": "0.025"]) == 0)
        #expect(scraped.value("windowhost_commands_total", ["verb": "open"]) == 1)
        let (events, last) = observation.events(after: 0)
        #expect(events.map(\.kind) == [.watchdog, .recovered] && last == 2)
        #expect(observation.events(after: 1).events.map(\.id) == [2])
    }

    @Test func eventsKeepTheNewestWithinCapacity() throws {
        let (_, exporter) = try setUp()
        for index in 0..<(HostObservation.eventCapacity + 10) {
            exporter.hostObservation.restarting(window, .crash, at: Double(index))
        }
        let (events, last) = exporter.hostObservation.events(after: 0)
        #expect(events.count == HostObservation.eventCapacity)
        #expect(events.first?.id == 11 && events.last?.id == last && last == UInt64(HostObservation.eventCapacity + 10))
    }

    /// The live feed: each interval's point holds the saves made in it, once.
    @Test func liveFeedPointsHoldEachIntervalsSaves() throws {
        let (region, exporter) = try setUp()
        let feed = LiveFeed(observation: exporter.hostObservation)
        region.slot(0).recordSave(microseconds: 2000)
        region.slot(0).recordSave(microseconds: 2000)
        let first = feed.advance()
        #expect(first.point.saves == 2)
        #expect(first.point.p99Milliseconds.map { abs($0 - 2.0) < 0.1 } == true)
        #expect(first.latency[window.uuidString] != nil)
        let quiet = feed.advance()
        #expect(quiet.point.saves == 0 && quiet.point.p99Milliseconds == nil)
        region.slot(0).recordSave(microseconds: 9000)
        #expect(feed.advance().point.saves == 1)
        #expect(feed.current().points.map(\.saves) == [2, 0, 1])
    }

    @Test(arguments: [
        ("127.0.0.1:9100", "127.0.0.1", 9100), ("9100", "127.0.0.1", 9100), ("0.0.0.0:0", "0.0.0.0", 0),
        ("[::1]:8080", "::1", 8080), ("localhost:1", "localhost", 1),
    ])
    func addressesParse(text: String, host: String, port: Int) throws {
        let address = try HTTPAddress(parsing: text)
        #expect(address.host == host && address.port == port)
        #expect(address.description == (host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"))
    }

    @Test(arguments: ["", ":80", "host:", "host:65536", "host:-1", "::1:80", "[::1]80", "[::1", "a:b:c", "host:80x"])
    func badAddressesAreRefused(text: String) {
        #expect(throws: StatusServerError.self) { try HTTPAddress(parsing: text) }
    }
}
