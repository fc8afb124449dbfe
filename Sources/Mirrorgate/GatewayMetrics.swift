import CoreMetrics
import Foundation
import Metrics
import Prometheus
import Synchronization

/// The process's metrics: swift-metrics bootstrapped with a Prometheus registry, plus cached handles for
/// the per-request counters (looking a metric up per request would cost a lock and an allocation).
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

    private static let shared = Mutex<GatewayMetrics?>(nil)

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

    /// The Prometheus text exposition.
    public func render() -> [UInt8] { registry.emitToBuffer() }
}
