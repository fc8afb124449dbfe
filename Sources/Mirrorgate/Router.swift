import AlgoliaGateway
import Foundation
import GatewayAdmin
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import ODataGateway
import Observability
import Replication
import Synchronization
import Upstream

/// Routes each request: CORS preflights, the admin API, `/metrics`, `/1/` to Algolia, OData mounts to
/// their services, anything else a JSON 404. Adds CORS headers for allowed origins and strips any an
/// upstream sent, so that no web page reads local answers unless its origin is listed.
final class Router: HTTPHandler {
    private let current: Mutex<ServiceSet>
    /// The one scheduler of every replication (kept across reloads, which give it the new jobs).
    let replication: ReplicationScheduler
    let replicationMetrics: ReplicationMetrics
    let metrics: GatewayMetrics
    let logger: Logger
    /// `/_mirrorgate/…` (readiness and the reload hook are set by the gateway).
    let admin: AdminAPI

    init(
        services: ServiceSet, replication: ReplicationScheduler, replicationMetrics: ReplicationMetrics,
        events: EventBus, metrics: GatewayMetrics, logger: Logger,
        storageCheck: @escaping @Sendable () -> Bool
    ) {
        self.current = Mutex(services)
        self.replication = replication
        self.replicationMetrics = replicationMetrics
        self.metrics = metrics
        self.logger = logger
        self.admin = AdminAPI(
            version: mirrorgateVersion, replication: replication, events: events, storageCheck: storageCheck)
    }

    /// The services in force.
    var services: ServiceSet { current.withLock { $0 } }
    /// The configuration in force.
    var configuration: MirrorgateConfiguration { services.configuration }
    var algolia: AlgoliaService { services.algolia }
    var odata: [ODataService] { services.odata }

    /// Installs the services of a reload; returns the previous ones.
    func replace(_ services: ServiceSet) -> ServiceSet {
        current.withLock { c in
            defer { c = services }
            return c
        }
    }

    func stop() {
        let s = services
        s.algolia.stop()
        for o in s.odata {
            o.reachability.stop()
            o.stop()
        }
    }

    // MARK: routing

    enum Route {
        case algolia
        case odata(ODataService)
        case admin
        case metrics
        case none
    }

    static func route(_ path: Substring, _ services: ServiceSet) -> Route {
        if path.hasPrefix("/1/") || path == "/1" { return .algolia }
        if path.hasPrefix("/_mirrorgate/") || path == "/_mirrorgate" { return .admin }
        if path == "/metrics" { return .metrics }
        for s in services.odata
        where path.hasPrefix(s.settings.mount) || path == s.settings.mount.dropLast() {
            return .odata(s)
        }
        return .none
    }

    func route(_ path: Substring) -> Route { Self.route(path, services) }

    func routeName(_ target: String) -> String {
        var path = Substring(target)
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        switch route(path) {
        case .algolia: return "algolia"
        case .odata(let s): return "odata:\(s.settings.name)"
        case .admin: return "admin"
        case .metrics: return "metrics"
        case .none: return "other"
        }
    }

    /// The server's own errors (framing, limits, timeouts, shutdown, and libmicrohttpd's own refusals) in
    /// the format of the addressed API. Never a 5xx under `/1/`.
    func errorResponse(_ status: Int, _ message: String, target: String) -> HTTPResponse {
        var path = Substring(target)
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        let services = services
        switch Self.route(path, services) {
        case .algolia:
            return services.algolia.errorResponse(status, message)
        case .odata(let service):
            return ODataServiceError.response(
                status, code: Self.odataCode(status), message, version: service.settings.version ?? .v4)
        default:
            return AdminAPI.adminError(status, message)
        }
    }

    /// The OData error code of one of the server's own statuses.
    static func odataCode(_ status: Int) -> String {
        switch status {
        case 400: return "BadRequest"
        case 408: return "RequestTimeout"
        case 413: return "PayloadTooLarge"
        case 414: return "URITooLong"
        case 431: return "RequestHeaderFieldsTooLarge"
        case 501: return "NotImplemented"
        case 503: return "ServiceUnavailable"
        case 504: return "GatewayTimeout"
        case 505: return "HTTPVersionNotSupported"
        default: return "GatewayError"
        }
    }

    /// Nothing blocks here: forwarding runs on the curl loop and local answers (CPU work) are handed to
    /// the local worker pool, so every request is routed on the polling thread.
    func handle(_ request: HTTPRequest, _ responder: any Responder) {
        let services = services
        let origin = request.headers["Origin"]
        let allowed =
            origin.map { services.allowedOrigins.contains($0) || services.allowedOrigins.contains("*") }
            ?? false
        let out: any Responder = CORSResponder(inner: responder, origin: allowed ? origin : nil)
        if let refusal = RequestPath.refusal(request.path) {
            // Before routing: a dot segment would let libcurl or the upstream resolve the path out of the
            // mount (or the API prefix) the request names.
            out.respond(errorResponse(400, refusal, target: request.target))
            return
        }
        let r = Self.route(request.path, services)
        if request.method == "OPTIONS", request.headers["Access-Control-Request-Method"] != nil {
            switch r {
            case .algolia, .odata:
                responder.respond(preflight(request, allowed: allowed))
                return
            default: break
            }
        }
        switch r {
        case .algolia:
            services.algolia.handle(request, out)
        case .odata(let service):
            if odataOpenAPI(request, service, out) { return }
            service.handle(request, out)
        case .admin:
            admin.handle(request, services, out)
        case .metrics:
            guard request.method == "GET" || request.method == "HEAD" else {
                out.respond(AdminAPI.methodNotAllowed(request, allow: "GET, HEAD"))
                return
            }
            replicationMetrics.update(
                paused: replication.policies.keys.map { ($0, replication.isPaused($0)) })
            out.respond(
                HTTPResponse(
                    status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
                    body: .bytes(renderMetrics(services))))
        case .none:
            out.respond(
                errorResponse(404, "no route for \(request.method) \(request.path)", target: request.target))
        }
    }

    private func preflight(_ request: HTTPRequest, allowed: Bool) -> HTTPResponse {
        guard allowed, let origin = request.headers["Origin"] else {
            return errorResponse(403, "origin not allowed (server.cors.allowOrigins)", target: request.target)
        }
        var h = HTTPHeaders()
        h.add("Access-Control-Allow-Origin", origin)
        h.add("Vary", "Origin")
        h.add("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, MERGE, DELETE, OPTIONS")
        if let asked = request.headers["Access-Control-Request-Headers"] {
            h.add("Access-Control-Allow-Headers", asked)
        }
        h.add("Access-Control-Max-Age", "600")
        h.add("Access-Control-Expose-Headers", MirrorgateHeader.origin)
        return HTTPResponse(status: 204, headers: h)
    }

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
