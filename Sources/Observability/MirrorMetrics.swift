import CoreMetrics
import JSONCore
import Metrics
import Synchronization

/// The OData write-path metrics of one service: `mirrorgate_odata_uploaded_total{service}` and
/// `mirrorgate_odata_upload_failures_total{service}` (counted per upload run),
/// `mirrorgate_odata_requests_combined_total{service}` (requests the queue preparation removed: combined
/// by request-queue optimisation or undone), the gauge `mirrorgate_odata_last_upload_requests{service,stage}`
/// (the last upload's queued requests `before` and `after` the queue was prepared), and the gauges
/// `mirrorgate_odata_queue_length`, `mirrorgate_odata_in_doubt`, `mirrorgate_odata_held`,
/// `mirrorgate_odata_waiting_for_credentials` and `mirrorgate_odata_error_archive` (`{service}`, set from
/// the queue whenever `/metrics` is rendered); for downloads `mirrorgate_odata_downloads_total{service,kind}`
/// (`full`, `delta`, `mixed`) and the gauge `mirrorgate_odata_last_download_entities{service,change}`
/// (`changed`, `removed`: the last successful download's entities).
///
/// Promises: every counter of the service exists (at 0) from ``init(service:)`` on; the figures come from
/// the caller, so this type knows the families but not the OData service.
public struct ODataServiceMetrics: Sendable {
    private let service: String
    private let uploaded: CoreMetrics.Counter
    private let failures: CoreMetrics.Counter
    private let combined: CoreMetrics.Counter
    private let before: Gauge
    private let after: Gauge

    /// Creates the counters of `service` at 0.
    public init(service name: String) {
        service = name
        uploaded = CoreMetrics.Counter(
            label: "mirrorgate_odata_uploaded_total", dimensions: [("service", name)])
        failures = CoreMetrics.Counter(
            label: "mirrorgate_odata_upload_failures_total", dimensions: [("service", name)])
        combined = CoreMetrics.Counter(
            label: "mirrorgate_odata_requests_combined_total", dimensions: [("service", name)])
        before = Gauge(
            label: "mirrorgate_odata_last_upload_requests",
            dimensions: [("service", name), ("stage", "before")])
        after = Gauge(
            label: "mirrorgate_odata_last_upload_requests",
            dimensions: [("service", name), ("stage", "after")])
        uploaded.increment(by: 0)
        failures.increment(by: 0)
        combined.increment(by: 0)
        before.record(0)
        after.record(0)
        for kind in ["full", "delta", "mixed"] {
            CoreMetrics.Counter(
                label: "mirrorgate_odata_downloads_total", dimensions: [("service", name), ("kind", kind)]
            ).increment(by: 0)
        }
    }

    /// Counts a finished upload run: requests accepted, requests failed or held in doubt, and the queued
    /// requests before and after the queue was prepared.
    public func uploadFinished(uploaded count: Int, failed: Int, requestsBefore: Int, requestsAfter: Int) {
        if count > 0 { uploaded.increment(by: count) }
        if failed > 0 { failures.increment(by: failed) }
        if requestsBefore > requestsAfter { combined.increment(by: requestsBefore - requestsAfter) }
        if requestsBefore > 0 {
            before.record(requestsBefore)
            after.record(requestsAfter)
        }
    }

    /// Counts a successful download of `kind` and records its entities.
    public func downloadFinished(kind: String, changed: Int, removed: Int) {
        CoreMetrics.Counter(
            label: "mirrorgate_odata_downloads_total", dimensions: [("service", service), ("kind", kind)]
        ).increment()
        for (change, value) in [("changed", changed), ("removed", removed)] {
            Gauge(
                label: "mirrorgate_odata_last_download_entities",
                dimensions: [("service", service), ("change", change)]
            ).record(value)
        }
    }

    /// Sets the queue gauges of `service`.
    public static func recordQueue(
        service name: String, length: Int, inDoubt: Int, held: Int, waitingForCredentials: Int,
        archived: Int
    ) {
        let values: [(String, Int)] = [
            ("mirrorgate_odata_queue_length", length),
            ("mirrorgate_odata_in_doubt", inDoubt),
            ("mirrorgate_odata_held", held),
            ("mirrorgate_odata_waiting_for_credentials", waitingForCredentials),
            ("mirrorgate_odata_error_archive", archived),
        ]
        for (label, value) in values {
            Gauge(label: label, dimensions: [("service", name)]).record(value)
        }
    }
}

/// The replication metrics: `mirrorgate_replication_runs_total{mirror,outcome}` (outcome `completed`,
/// `budgetReached`, `stopped`, `failed`) and `mirrorgate_replication_run_duration_seconds{mirror}` from
/// the run events; `mirrorgate_replication_paused{policy}` set whenever `/metrics` is rendered (the data
/// age of each mirror is a scrape family of its own).
///
/// Promises: one counter per mirror and outcome and one timer per mirror, made on first use; events
/// other than a run's end are ignored.
public final class ReplicationMetrics: Sendable {
    private let counters = Mutex<[String: CoreMetrics.Counter]>([:])
    private let timers = Mutex<[String: Metrics.Timer]>([:])

    /// No run counted yet.
    public init() {}

    /// Counts a run's end from its event.
    public func observe(_ event: String, _ data: JSON) {
        guard let mirror = data["mirror"]?.stringValue else { return }
        let outcome: String
        switch event {
        case "runDidFinish": outcome = data["completed"]?.boolValue == false ? "stopped" : "completed"
        case "runBudgetReached": outcome = "budgetReached"
        case "runDidFail": outcome = "failed"
        default: return
        }
        let key = mirror + "\n" + outcome
        let counter = counters.withLock { c in
            if let existing = c[key] { return existing }
            let made = CoreMetrics.Counter(
                label: "mirrorgate_replication_runs_total",
                dimensions: [("mirror", mirror), ("outcome", outcome)])
            c[key] = made
            return made
        }
        counter.increment()
        if let ms = data["durationMs"]?.intValue {
            let timer = timers.withLock { t in
                if let existing = t[mirror] { return existing }
                let made = Metrics.Timer(
                    label: "mirrorgate_replication_run_duration_seconds", dimensions: [("mirror", mirror)])
                t[mirror] = made
                return made
            }
            timer.recordMilliseconds(ms)
        }
    }

    /// Sets `mirrorgate_replication_paused` of each policy (before `/metrics` is rendered).
    public func update(paused: [(policy: String, paused: Bool)]) {
        for (name, isPaused) in paused {
            Gauge(label: "mirrorgate_replication_paused", dimensions: [("policy", name)]).record(
                isPaused ? 1 : 0)
        }
    }
}
