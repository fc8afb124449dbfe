import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import ODataGateway
import Replication
import Upstream

/// Builds one ``ODataService`` per configured OData service from its configuration, wires its events,
/// EventLog entries and metrics, and answers the OData admin routes.
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
        ODataMetrics.observe(service, name: name)
        return service
    }
}

extension Router {
    /// `POST /_mirrorgate/odata/services/{s}/download[?wait=true]`: 202, or with `wait` 200 and
    /// `{entitySets, durationMs}` (502 and `{message,status}` when it failed); 409 while one runs; 404 for
    /// an unknown service.
    func odataDownload(_ request: HTTPRequest, _ services: ServiceSet, _ out: any Responder) {
        let name = Self.name(request.path, after: Self.odataServices, before: "/download")
        guard let service = services.odata.first(where: { $0.settings.name == name }) else {
            out.respond(Self.adminError(404, "no OData service named \(name)"))
            return
        }
        let wait = request.queryValue("wait") == "true"
        let completion: (@Sendable (Result<ODataDownloadStats, MirrorError>) -> Void)? =
            wait ? waitedRun(out, json: \.json) : nil
        guard service.download(completion: completion) else {
            out.respond(Self.adminError(409, "a download of \(name) is already running"))
            return
        }
        if !wait { out.respond(.json(202, #"{"status":"started"}"#)) }
    }

    /// `POST /_mirrorgate/odata/services/{s}/upload[?wait=true]`: 202, or with `wait` 200 and
    /// `{uploaded, failed, inDoubt, remaining, durationMs}`; 409 while one runs; 503 when the upstream
    /// cannot be reached (with `wait`: when the run stopped on it without uploading anything).
    func odataUpload(_ request: HTTPRequest, _ services: ServiceSet, _ out: any Responder) {
        let name = Self.name(request.path, after: Self.odataServices, before: "/upload")
        guard let service = services.odata.first(where: { $0.settings.name == name }) else {
            out.respond(Self.adminError(404, "no OData service named \(name)"))
            return
        }
        let wait = request.queryValue("wait") == "true"
        if !wait, !service.reachability.isReachable {
            out.respond(Self.adminError(503, "the upstream of \(name) is unreachable"))
            return
        }
        var completion: (@Sendable (ODataUploadStats) -> Void)?
        if wait {
            let unreachable = Self.adminError(503, "the upstream of \(name) is unreachable")
            completion = { stats in
                if stats.interrupted, stats.uploaded + stats.failed + stats.inDoubt == 0 {
                    out.respond(unreachable)
                } else {
                    out.respond(.json(200, stats.json.serialized()))
                }
            }
        }
        guard service.upload(completion: completion) else {
            out.respond(Self.adminError(409, "an upload of \(name) is already running"))
            return
        }
        if !wait { out.respond(.json(202, #"{"status":"started"}"#)) }
    }

    /// `odata.services` of `/_mirrorgate/status`.
    func odataStatus(_ services: ServiceSet) -> JSON {
        var result = JSONObject()
        for s in services.odata.sorted(by: { $0.settings.name < $1.settings.name }) {
            var entry = s.status()
            if var o = entry.objectValue {
                o["reachable"] = s.reachability.knownReachability.map { .bool($0) } ?? .null
                entry = .object(o)
            }
            result[s.settings.name] = entry
        }
        return ["services": .object(result)]
    }
}

extension Router {
    /// `GET {mount}/$openapi`: the mount described as OpenAPI 3, generated from the cached `$metadata`
    /// (``ODataOpenAPI``); 503 while no `$metadata` was ever cached, 405 (with `Allow`) for other methods.
    /// False when the request is not addressed to it.
    func odataOpenAPI(_ request: HTTPRequest, _ forwarder: ODataService, _ out: any Responder) -> Bool {
        let mount = forwarder.settings.mount
        guard request.path == mount + "$openapi" || request.path == mount + "%24openapi" else { return false }
        let version = forwarder.settings.version ?? .v4
        guard request.method == "GET" || request.method == "HEAD" else {
            var r = ODataServiceError.response(
                405, code: "MethodNotAllowed", "use GET for $openapi", version: version)
            r.headers.set("Allow", "GET, HEAD")
            out.respond(r)
            return true
        }
        guard let model = forwarder.mirror.model?.model else {
            out.respond(
                ODataServiceError.response(
                    503, code: "NoMetadata",
                    "no $metadata of this service is cached yet: it is fetched when the upstream first answers",
                    version: version))
            return true
        }
        let host = request.headers["Host"] ?? "127.0.0.1"
        let doc = ODataOpenAPI.document(
            model: model, serviceRoot: "http://\(host)\(mount)",
            title: "\(forwarder.settings.name) (Mirrorgate)")
        out.respond(.json(200, doc.serialized()))
        return true
    }
}
