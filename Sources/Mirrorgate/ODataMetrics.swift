import CoreMetrics
import Foundation
import GatewaySupport
import HTTPCore
import ODataGateway

/// The OData write-path metrics: `mirrorgate_odata_uploaded_total{service}` and
/// `mirrorgate_odata_upload_failures_total{service}` (counted per upload run),
/// `mirrorgate_odata_requests_combined_total{service}` (requests the queue preparation removed: combined
/// by request-queue optimisation or undone), the gauge `mirrorgate_odata_last_upload_requests{service,stage}`
/// (the last upload's queued requests `before` and `after` the queue was prepared), and the gauges
/// `mirrorgate_odata_queue_length`, `mirrorgate_odata_in_doubt`, `mirrorgate_odata_held`,
/// `mirrorgate_odata_waiting_for_credentials` and `mirrorgate_odata_error_archive` (`{service}`, read from
/// the queue whenever `/metrics` is rendered); for downloads `mirrorgate_odata_downloads_total{service,kind}`
/// (`full`, `delta`, `mixed`) and the gauge `mirrorgate_odata_last_download_entities{service,change}`
/// (`changed`, `removed`: the last successful download's entities).
enum ODataMetrics {
    /// Creates the counters of `service` at 0 and counts every finished upload run.
    static func observe(_ service: ODataService, name: String) {
        let uploaded = CoreMetrics.Counter(
            label: "mirrorgate_odata_uploaded_total", dimensions: [("service", name)])
        let failures = CoreMetrics.Counter(
            label: "mirrorgate_odata_upload_failures_total", dimensions: [("service", name)])
        let combined = CoreMetrics.Counter(
            label: "mirrorgate_odata_requests_combined_total", dimensions: [("service", name)])
        let before = Gauge(
            label: "mirrorgate_odata_last_upload_requests",
            dimensions: [("service", name), ("stage", "before")])
        let after = Gauge(
            label: "mirrorgate_odata_last_upload_requests",
            dimensions: [("service", name), ("stage", "after")])
        uploaded.increment(by: 0)
        failures.increment(by: 0)
        combined.increment(by: 0)
        before.record(0)
        after.record(0)
        service.onUpload { stats in
            guard let stats else { return }
            if stats.uploaded > 0 { uploaded.increment(by: stats.uploaded) }
            if stats.failed + stats.inDoubt > 0 { failures.increment(by: stats.failed + stats.inDoubt) }
            if stats.requestsBefore > stats.requestsAfter {
                combined.increment(by: stats.requestsBefore - stats.requestsAfter)
            }
            if stats.requestsBefore > 0 {
                before.record(stats.requestsBefore)
                after.record(stats.requestsAfter)
            }
        }
        for kind in ["full", "delta", "mixed"] {
            CoreMetrics.Counter(
                label: "mirrorgate_odata_downloads_total", dimensions: [("service", name), ("kind", kind)]
            ).increment(by: 0)
        }
        service.onDownload { result in
            guard case .success(let stats) = result else { return }
            CoreMetrics.Counter(
                label: "mirrorgate_odata_downloads_total",
                dimensions: [("service", name), ("kind", stats.kind)]
            ).increment()
            let figures = stats.json
            for change in ["changed", "removed"] {
                Gauge(
                    label: "mirrorgate_odata_last_download_entities",
                    dimensions: [("service", name), ("change", change)]
                ).record(Int(figures[change]?.intValue ?? 0))
            }
        }
        update(service, name: name)
    }

    /// Sets the gauges of `service` from its queue.
    static func update(_ service: ODataService, name: String) {
        let queue = service.queue
        let values: [(String, Int)] = [
            ("mirrorgate_odata_queue_length", queue.count),
            ("mirrorgate_odata_in_doubt", queue.inDoubtCount()),
            ("mirrorgate_odata_held", queue.heldCount()),
            ("mirrorgate_odata_waiting_for_credentials", queue.waitingCount()),
            ("mirrorgate_odata_error_archive", queue.archivedCount()),
        ]
        for (label, value) in values {
            Gauge(label: label, dimensions: [("service", name)]).record(value)
        }
    }
}

extension Router {
    /// `GET /_mirrorgate/odata/{service}/…` (not `services/…`): the service's ErrorArchive and
    /// RequestQueue as a separate OData service; false when the path names no such service.
    func odataArchiveService(_ request: HTTPRequest, _ out: any Responder) -> Bool {
        let prefix = "/_mirrorgate/odata/"
        let rest = request.path.dropFirst(prefix.count)
        let name = String(rest.prefix { $0 != "/" })
        guard name != "services", !name.isEmpty,
            let service = odata.first(where: { $0.settings.name == FormCodec.percentDecode(Substring(name)) })
        else { return false }
        var path = rest.dropFirst(name.count)
        if path.hasPrefix("/") { path = path.dropFirst() }
        let host = request.headers["Host"] ?? "127.0.0.1"
        service.answerArchiveService(
            request, path: String(path), serviceRoot: "http://\(host)\(prefix)\(name)/", out)
        return true
    }
}
