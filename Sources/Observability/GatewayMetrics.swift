import CoreMetrics
import Foundation
import Metrics
import Prometheus
import Synchronization

/// The process's metrics: swift-metrics bootstrapped with a Prometheus registry, plus cached handles for
/// the per-request counters (looking a metric up per request would cost a lock and an allocation).
///
/// `/metrics` is the registry's text with a `# HELP` line before every family's `# TYPE` (from
/// ``help``; swift-prometheus's factory registers metrics without help text), followed by families
/// computed at each scrape (``ScrapeFamilies``): `mirrorgate_build_info`, the `process_*` metrics, data
/// ages and queue ages.
public final class GatewayMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    private struct Key: Hashable {
        let route: String
        let origin: String
        let status: Int
    }
    private let counters = Mutex<[Key: CoreMetrics.Counter]>([:])
    private let timers = Mutex<[String: Metrics.Timer]>([:])
    private let outcomes = Mutex<[String: CoreMetrics.Counter]>([:])

    private static let shared = Mutex<GatewayMetrics?>(nil)

    /// The help text of every family the gateway registers; a family missing here gets a generic one
    /// (and a unit test fails).
    static let help: [String: String] = [
        "mirrorgate_requests_total": "Requests answered, by route, origin (remote, local, none) and status.",
        "mirrorgate_request_duration_seconds": "Time from a request's arrival to its answer, by route.",
        "mirrorgate_upstream_reachable":
            "1 when the upstream answered its last request or probe, 0 when it did not; absent until known.",
        "mirrorgate_upstream_reachability_changes_total": "Changes of an upstream's reachability.",
        "mirrorgate_odata_queue_length": "OData requests queued for upload (held ones included).",
        "mirrorgate_odata_in_doubt":
            "OData requests held in the ErrorArchive because their outcome is unknown.",
        "mirrorgate_odata_held": "Queued OData requests held behind a failed request or missing credentials.",
        "mirrorgate_odata_error_archive": "Entries in an OData service's ErrorArchive.",
        "mirrorgate_odata_uploaded_total": "OData requests uploaded and accepted by the upstream.",
        "mirrorgate_odata_upload_failures_total":
            "OData requests that failed on upload or were held in doubt.",
        "mirrorgate_odata_waiting_for_credentials":
            "Queued OData requests waiting for newer credentials of their writer (uploadCredentials: client).",
        "mirrorgate_odata_requests_combined_total":
            "Queued OData requests removed by the queue preparation (combined by optimisation or undone).",
        "mirrorgate_odata_last_upload_requests":
            "The last OData upload's queued requests before and after the queue was prepared, by stage.",
        "mirrorgate_odata_downloads_total": "Successful OData downloads, by kind (full, delta, mixed).",
        "mirrorgate_odata_last_download_entities":
            "Entities the last successful OData download stored (changed) and removed, by change.",
        "mirrorgate_mirror_runs_total":
            "Finished sync runs of a mirror (algolia:INDEX sync, odata:SERVICE download), by outcome.",
        "mirrorgate_replication_runs_total":
            "Replication runs ended, by mirror and outcome (completed, budgetReached, stopped, failed).",
        "mirrorgate_replication_run_duration_seconds": "How long replication runs took, by mirror.",
        "mirrorgate_replication_paused": "1 while a replication policy is paused, else 0.",
        "mirrorgate_reloads_total": "Configuration reloads (SIGHUP or POST /_mirrorgate/reload), by outcome.",
    ]

    /// The process-wide instance (swift-metrics can be bootstrapped only once).
    public static func bootstrap() -> GatewayMetrics {
        shared.withLock { s in
            if let s { return s }
            let registry = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: registry)
            factory.defaultDurationHistogramBuckets = [
                .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
                .milliseconds(2),
                .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5),
                .seconds(10),
            ]
            MetricsSystem.bootstrap(factory)
            let m = GatewayMetrics(registry: registry)
            s = m
            return m
        }
    }

    private init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    /// Counts one answered request and records its latency.
    public func record(route: String, origin: String, status: Int, durationNanos: UInt64) {
        let key = Key(route: route, origin: origin, status: status)
        let counter = counters.withLock { c in
            if let existing = c[key] { return existing }
            let made = CoreMetrics.Counter(
                label: "mirrorgate_requests_total",
                dimensions: [("route", route), ("origin", origin), ("status", String(status))])
            c[key] = made
            return made
        }
        counter.increment()
        let timer = timers.withLock { t in
            if let existing = t[route] { return existing }
            let made = Metrics.Timer(
                label: "mirrorgate_request_duration_seconds", dimensions: [("route", route)])
            t[route] = made
            return made
        }
        timer.recordNanoseconds(Int64(durationNanos))
    }

    /// Counts an event of `label` with `dimensions` (sync outcomes, reloads).
    public func count(_ label: String, _ dimensions: [(String, String)]) {
        let key = label + "|" + dimensions.map { "\($0.0)=\($0.1)" }.joined(separator: ",")
        let counter = outcomes.withLock { c in
            if let existing = c[key] { return existing }
            let made = CoreMetrics.Counter(label: label, dimensions: dimensions)
            c[key] = made
            return made
        }
        counter.increment()
    }

    /// Counts a mirror run from the admin events (`syncDidFinish`, `downloadDidFinish`): success unless
    /// the event carries an `error`.
    public func observe(event name: String, failed: Bool, mirror: String) {
        count(
            "mirrorgate_mirror_runs_total", [("mirror", mirror), ("outcome", failed ? "failure" : "success")])
    }

    /// The Prometheus text exposition: the registry's families with their help, then `extra`.
    public func render(extra: [ScrapeFamily] = []) -> [UInt8] {
        var text = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        text = Self.addingHelp(to: text)
        for family in extra { text += family.text }
        return Array(text.utf8)
    }

    /// Puts `# HELP name …` before each `# TYPE name …` line that has none.
    static func addingHelp(to text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count + 2048)
        var previous: Substring = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE ") {
                let name = line.dropFirst(7).prefix { $0 != " " }
                if !previous.hasPrefix("# HELP \(name) ") {
                    let h = help[String(name)] ?? "Mirrorgate metric \(name)."
                    out += "# HELP \(name) \(ScrapeFamily.escapeHelp(h))\n"
                }
            }
            out += line
            out += "\n"
            previous = line
        }
        while out.hasSuffix("\n\n") { out.removeLast() }
        return out
    }
}

/// A metric family computed at scrape time, rendered with its HELP and TYPE lines.
public struct ScrapeFamily: Sendable {
    /// The family's name.
    public let name: String
    /// `gauge` or `counter`.
    public let type: String
    /// The help text.
    public let help: String
    /// Samples: labels and value.
    public var samples: [(labels: [(String, String)], value: Double)]

    /// A family with no samples yet.
    public init(
        name: String, type: String, help: String, samples: [(labels: [(String, String)], value: Double)] = []
    ) {
        self.name = name
        self.type = type
        self.help = help
        self.samples = samples
    }

    /// The exposition text (empty when there are no samples).
    var text: String {
        guard !samples.isEmpty else { return "" }
        var out = "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type)\n"
        for sample in samples {
            out += name
            if !sample.labels.isEmpty {
                out += "{"
                out += sample.labels.map { "\($0.0)=\"\(Self.escapeLabel($0.1))\"" }.joined(separator: ",")
                out += "}"
            }
            out += " \(Self.format(sample.value))\n"
        }
        return out
    }

    static func format(_ v: Double) -> String {
        if v.isNaN { return "NaN" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }

    static func escapeHelp(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    static func escapeLabel(_ s: String) -> String {
        escapeHelp(s).replacingOccurrences(of: "\"", with: "\\\"")
    }
}
