import AlgoliaGateway
import Foundation
import GatewayAdmin
import GatewayConfig
import JSONCore
import ODataGateway
import Observability

/// What `/metrics` computes at each scrape besides the registry: the OData gauges, build information,
/// the process, how old each mirror's data is and how long the oldest queued OData request has waited.
extension Router {
    /// Refreshes the gauges and renders the exposition.
    func renderMetrics(_ services: ServiceSet) -> [UInt8] {
        for s in services.odata {
            ODataAssembly.recordQueue(s, name: s.settings.name)
        }
        var build = ScrapeFamily(
            name: "mirrorgate_build_info", type: "gauge",
            help: "Always 1; the labels say which build runs.")
        build.samples = [([("version", mirrorgateVersion)], 1)]
        return metrics.render(extra: [build] + ProcessMetrics.families() + dataAges(services))
    }

    /// `mirrorgate_mirror_data_age_seconds{mirror}` (since the last successful sync of a mirrored index,
    /// the last download of an OData service; absent while a mirror has never synced) and
    /// `mirrorgate_odata_queue_oldest_age_seconds{service}` (0 when nothing is queued).
    func dataAges(_ services: ServiceSet, now: Date = Date()) -> [ScrapeFamily] {
        var ages = ScrapeFamily(
            name: "mirrorgate_mirror_data_age_seconds", type: "gauge",
            help: "Seconds since a mirror's data was last synced or downloaded successfully.")
        var oldest = ScrapeFamily(
            name: "mirrorgate_odata_queue_oldest_age_seconds", type: "gauge",
            help: "Seconds the oldest request queued for upload has waited (0 when none is queued).")
        let indices = services.algolia.indexStatus().objectValue ?? JSONObject()
        for (name, status) in indices where status["mirrored"]?.boolValue == true {
            if let text = status["lastSuccessfulSyncAt"]?.stringValue, let at = Self.parseRFC3339(text) {
                ages.samples.append(([("mirror", "algolia:\(name)")], max(0, now.timeIntervalSince(at))))
            }
        }
        for s in services.odata.sorted(by: { $0.settings.name < $1.settings.name }) {
            let service = s
            if let text = service.mirror.lastDownloadAt, let at = Self.parseRFC3339(text) {
                ages.samples.append(
                    ([("mirror", "odata:\(s.settings.name)")], max(0, now.timeIntervalSince(at))))
            }
            let age = service.queue.oldestCreatedAt().flatMap(Self.parseRFC3339).map {
                max(0, now.timeIntervalSince($0))
            }
            oldest.samples.append(([("service", s.settings.name)], age ?? 0))
        }
        ages.samples.sort { $0.labels[0].1 < $1.labels[0].1 }
        return [ages, oldest]
    }

    /// `2026-11-22T05:00:00.000Z` (fraction optional) as a date.
    static func parseRFC3339(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        if let d = plain.date(from: text) { return d }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)
    }

    /// Counts mirror runs from the admin events and passes every event on to the SSE subscribers.
    static func publisher(_ events: EventBus, _ metrics: GatewayMetrics) -> @Sendable (String, JSON) -> Void {
        { name, data in
            switch name {
            case "syncDidFinish":
                if let index = data["index"]?.stringValue {
                    metrics.observe(event: name, failed: data["error"] != nil, mirror: "algolia:\(index)")
                }
            case "downloadDidFinish":
                if let service = data["service"]?.stringValue {
                    metrics.observe(event: name, failed: data["error"] != nil, mirror: "odata:\(service)")
                }
            default: break
            }
            events.publish(name, data)
        }
    }
}
