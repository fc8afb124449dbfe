import AlgoliaGateway
import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataGateway
import Upstream

/// Routes each request: CORS preflights, the admin API, `/metrics`, `/1/` to Algolia, OData mounts to
/// their services, anything else a JSON 404. Adds CORS headers for allowed origins and strips any an
/// upstream sent, so that no web page reads local answers unless its origin is listed.
final class Router: HTTPHandler {
    let configuration: MirrorgateConfiguration
    let algolia: AlgoliaService
    let odata: [ODataService]
    let events: EventBus
    let metrics: GatewayMetrics
    let logger: Logger
    private let allowedOrigins: Set<String>
    private let startedAt = Date()

    init(
        configuration: MirrorgateConfiguration, algolia: AlgoliaService, odata: [ODataService],
        events: EventBus, metrics: GatewayMetrics, logger: Logger
    ) {
        self.configuration = configuration
        self.algolia = algolia
        self.events = events
        self.odata = odata
        self.metrics = metrics
        self.logger = logger
        self.allowedOrigins = Set(configuration.server.cors.allowOrigins)
    }

    func stop() {
        algolia.stop()
        for s in odata {
            s.reachability.stop()
            s.stop()
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

    func route(_ path: Substring) -> Route {
        if path.hasPrefix("/1/") || path == "/1" { return .algolia }
        if path.hasPrefix("/_mirrorgate/") || path == "/_mirrorgate" { return .admin }
        if path == "/metrics" { return .metrics }
        for s in odata where path.hasPrefix(s.settings.mount) || path == s.settings.mount.dropLast() {
            return .odata(s)
        }
        return .none
    }

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

    /// The server's own errors (413, timeouts, shutdown) in the format of the addressed API. Never a 5xx
    /// under `/1/`.
    func errorResponse(_ status: Int, _ message: String, target: String) -> HTTPResponse {
        var path = Substring(target)
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        switch route(path) {
        case .algolia:
            return algolia.errorResponse(status, message)
        case .odata(let service):
            return ODataServiceError.response(
                status,
                code: status == 413 ? "PayloadTooLarge" : status == 400 ? "BadRequest" : "GatewayError",
                message,
                version: service.settings.version ?? .v4)
        default:
            return .json(status, #"{"message":\#(JSON.string(message).serialized()),"status":\#(status)}"#)
        }
    }

    /// Nothing blocks here: forwarding runs on the curl loop and local answers (CPU work) are handed to
    /// the local worker pool, so every request is routed on the polling thread.
    func handle(_ request: HTTPRequest, _ responder: any Responder) {
        let origin = request.headers["Origin"]
        let allowed = origin.map { allowedOrigins.contains($0) || allowedOrigins.contains("*") } ?? false
        let out: any Responder = CORSResponder(inner: responder, origin: allowed ? origin : nil)
        if let refusal = RequestPath.refusal(request.path) {
            // Before routing: a dot segment would let libcurl or the upstream resolve the path out of the
            // mount (or the API prefix) the request names.
            out.respond(errorResponse(400, refusal, target: request.target))
            return
        }
        let r = route(request.path)
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
            algolia.handle(request, out)
        case .odata(let service):
            service.handle(request, out)
        case .admin:
            admin(request, out)
        case .metrics:
            updateODataMetrics()
            out.respond(
                HTTPResponse(
                    status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
                    body: .bytes(metrics.render())))
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

    // MARK: admin

    private func admin(_ request: HTTPRequest, _ out: any Responder) {
        if let token = configuration.admin.token {
            let given = request.headers["Authorization"] ?? ""
            guard constantTimeEqual(given, "Bearer " + token) else {
                var r = errorResponse(
                    401, "admin API needs Authorization: Bearer <admin.token>", target: request.target)
                r.headers.set("WWW-Authenticate", "Bearer")
                out.respond(r)
                return
            }
        }
        let path = request.path
        switch (request.method, path) {
        case ("GET", "/_mirrorgate/health"):
            out.respond(.json(200, #"{"status":"ok","version":"\#(mirrorgateVersion)"}"#))
        case ("GET", "/_mirrorgate/status"):
            out.respond(.json(200, status().serialized()))
        case ("GET", "/_mirrorgate/events"):
            let stream = ResponseStream(timeout: .seconds(86400 * 365))
            out.respond(
                HTTPResponse(
                    status: 200,
                    headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-store"],
                    body: .stream(stream)))
            stream.write(Array(": mirrorgate events\n\n".utf8))
            _ = events.subscribe { text in stream.writeNonBlocking(Array(text.utf8)) }
        case ("POST", _)
        where path.hasPrefix(Self.algoliaIndices) && path.hasSuffix("/build")
            && path.count > Self.algoliaIndices.count + "/build".count:
            algolia.build(Self.indexName(path, before: "/build"), body: request.body, out)
        case (_, _) where path.hasPrefix("/_mirrorgate/odata/"):
            odataAdmin(request, out)
        case ("GET", _)
        where path.hasPrefix(Self.algoliaIndices) && path.hasSuffix("/failedWrites")
            && path.count > Self.algoliaIndices.count + "/failedWrites".count:
            let name = Self.indexName(path, before: "/failedWrites")
            if let list = algolia.failedWrites(name) {
                out.respond(.json(200, list.serialized()))
            } else {
                out.respond(errorResponse(404, "no mirrored index named \(name)", target: request.target))
            }
        case ("POST", _) where path.hasPrefix(Self.algoliaIndices) && path.hasSuffix("/sync"):
            sync(
                Self.indexName(path, before: "/sync"), wait: request.queryValue("wait") == "true",
                target: request.target, out)
        case (_, "/_mirrorgate/health"), (_, "/_mirrorgate/status"):
            out.respond(
                errorResponse(405, "method \(request.method) not allowed on \(path)", target: request.target))
        default:
            out.respond(
                errorResponse(404, "no admin route \(request.method) \(path)", target: request.target))
        }
    }

    private static let algoliaIndices = "/_mirrorgate/algolia/indices/"

    /// The index named in `/_mirrorgate/algolia/indices/{i}{suffix}`.
    private static func indexName(_ path: Substring, before suffix: String) -> String {
        FormCodec.percentDecode(path.dropFirst(algoliaIndices.count).dropLast(suffix.count))
    }

    private func sync(_ name: String, wait: Bool, target: String, _ out: any Responder) {
        let completion: (@Sendable (Result<SyncStats, SyncError>) -> Void)? =
            wait ? waitedRun(out, json: \.json) : nil
        switch algolia.sync(name, completion: completion) {
        case .unknownIndex:
            out.respond(errorResponse(404, "no mirrored index named \(name)", target: target))
        case .alreadyRunning:
            out.respond(errorResponse(409, "a sync of \(name) is already running", target: target))
        case .started:
            if !wait { out.respond(.json(202, #"{"status":"started"}"#)) }
        }
    }

    private func status() -> JSON {
        var upstreams = JSONObject()
        if let upstream = algolia.upstream {
            upstreams["algolia"] = tracker(upstream.reachability)
        }
        for s in odata.sorted(by: { $0.settings.name < $1.settings.name }) {
            upstreams["odata:\(s.settings.name)"] = tracker(s.reachability)
        }
        var result = JSONObject()
        result["version"] = .string(mirrorgateVersion)
        result["startedAt"] = .string(rfc3339(startedAt))
        result["upstreams"] = .object(upstreams)
        result["algolia"] = ["indices": algolia.indexStatus()]
        result["odata"] = odataStatus()
        return .object(result)
    }

    private func tracker(_ t: ReachabilityTracker) -> JSON {
        var o = JSONObject()
        o["reachable"] = .bool(t.isReachable)
        o["since"] = .string(rfc3339(t.since))
        return .object(o)
    }
}

/// The completion of an admin run started with `?wait=true`: `200` and its statistics, or `502` and
/// `{"message"}` when it failed.
func waitedRun<Stats, Failure: Error & CustomStringConvertible>(
    _ out: any Responder, json: @escaping @Sendable (Stats) -> JSON
) -> @Sendable (Result<Stats, Failure>) -> Void {
    { result in
        switch result {
        case .success(let stats):
            out.respond(.json(200, json(stats).serialized()))
        case .failure(let error):
            let body: JSON = ["message": .string(error.description)]
            out.respond(.json(502, body.serialized()))
        }
    }
}

func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    var diff = UInt8(x.count == y.count ? 0 : 1)
    for i in 0..<max(x.count, y.count) {
        diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
    }
    return diff == 0
}
