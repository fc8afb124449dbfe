import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import ODataGateway
import Observability
import Replication
import Storage
import Upstream

/// Builds one ``ODataService`` per configured OData service from its configuration and wires its events,
/// EventLog entries and metrics (``ODataServiceMetrics``).
enum ODataAssembly {
    /// The service for `name`, its runs registered with `replication`.
    static func make(
        name: String, configuration: MirrorgateConfiguration, store: StoreLayout.Store, loop: CurlLoop,
        client: UpstreamClient, pool: WorkerPool, replication: ReplicationScheduler, register: Bool = true,
        events: @escaping @Sendable (String, JSON) -> Void
    ) throws -> ODataService {
        let s = configuration.odata.services[name]!
        let version: ODataVersion? =
            switch s.version {
            case .v2: .v2
            case .v4: .v4
            case .auto: nil
            }
        let settings = ODataServiceSettings(
            name: name, mount: s.mount, upstream: s.upstream, version: version,
            customHeaders: s.customHeaders.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            customCookies: s.customCookies.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            urlSuffix: s.urlSuffix, timeout: s.timeout)
        var mirror = ODataMirrorSettings(
            localFirst: s.routing == .localFirst,
            definingRequests: s.definingRequests.map { .init(name: $0.name, query: $0.query) },
            pageSize: s.pageSize,
            bootstrapMetadata: s.bootstrap.map { configuration.resolve(path: $0.metadata) },
            bootstrapData: (s.bootstrap?.data ?? [:]).mapValues { configuration.resolve(path: $0) },
            databasePath: store.path)
        mirror.storeEncryption = store.encryption
        mirror.enableRepeatableRequests = s.enableRepeatableRequests
        mirror.repeatabilityHeaders = s.repeatabilityHeaders
        mirror.upstreamSupportsRepeatability = s.upstreamSupportsRepeatability
        mirror.uploadIfMatch = s.uploadIfMatch
        mirror.uploadCredentials = s.uploadCredentials
        mirror.enableIndividualErrorArchiveDeletion = s.enableIndividualErrorArchiveDeletion
        mirror.enableRequestQueueOptimization = s.enableRequestQueueOptimization
        mirror.enableUndoLocalCreation = s.enableUndoLocalCreation
        mirror.enableTransactionBuilder = s.enableTransactionBuilder
        let service: ODataService
        do {
            service = try ODataService(
                settings: settings, mirrorSettings: mirror, loop: loop, client: client, pool: pool,
                logger: Logger(label: "mirrorgate.odata"), replication: replication, policy: s.policy,
                register: register)
        } catch {
            throw GatewayStartError(description: "cannot open the OData mirror of \(name): \(error)")
        }
        service.onDownload { [weak service] result in
            switch result {
            case .success(let stats): service?.queue.logEvent("Download", details: stats.json)
            case .failure(let error):
                service?.queue.logEvent("Download", details: ["error": .string(error.description)])
            }
            switch result {
            case .success(let stats):
                var details = stats.json.objectValue ?? JSONObject()
                details["service"] = .string(name)
                events("downloadDidFinish", .object(details))
            case .failure(let error):
                events("downloadDidFinish", ["service": .string(name), "error": .string(error.description)])
            }
        }
        service.onUpload { [weak service] stats in
            if let stats { service?.queue.logEvent("Upload", details: stats.json) }
            if let stats {
                var details = stats.json.objectValue ?? JSONObject()
                details["service"] = .string(name)
                events("uploadDidFinish", .object(details))
            } else {
                events("uploadDidStart", ["service": .string(name)])
            }
        }
        let metrics = ODataServiceMetrics(service: name)
        service.onUpload { stats in
            guard let stats else { return }
            metrics.uploadFinished(
                uploaded: stats.uploaded, failed: stats.failed + stats.inDoubt,
                requestsBefore: stats.requestsBefore, requestsAfter: stats.requestsAfter)
        }
        service.onDownload { result in
            guard case .success(let stats) = result else { return }
            let figures = stats.json
            metrics.downloadFinished(
                kind: stats.kind, changed: Int(figures["changed"]?.intValue ?? 0),
                removed: Int(figures["removed"]?.intValue ?? 0))
        }
        recordQueue(service, name: name)
        return service
    }

    /// Sets the queue gauges of `service` (at its start and whenever `/metrics` is rendered).
    static func recordQueue(_ service: ODataService, name: String) {
        let queue = service.queue
        ODataServiceMetrics.recordQueue(
            service: name, length: queue.count, inDoubt: queue.inDoubtCount(), held: queue.heldCount(),
            waitingForCredentials: queue.waitingCount(), archived: queue.archivedCount())
    }
}
