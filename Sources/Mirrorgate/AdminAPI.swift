import AlgoliaGateway
import Foundation
import GatewayConfig
import HTTPCore
import JSONCore
import ODataGateway
import Upstream

/// The admin API (`/_mirrorgate/…`, SPEC §5): the probes answer without a token; every other route
/// needs `Authorization: Bearer <admin.token>` when one is set (401 before anything else, so a caller
/// without it learns nothing about the routes); a known route asked with another method gets 405 with
/// `Allow`, an unknown one 404; errors are `{"message","status"}`.
extension Router {
    static let algoliaIndices = "/_mirrorgate/algolia/indices/"
    static let odataServices = "/_mirrorgate/odata/services/"

    func admin(_ request: HTTPRequest, _ services: ServiceSet, _ out: any Responder) {
        let path = request.path
        if path == "/_mirrorgate/live" || path == "/_mirrorgate/ready" {
            guard request.method == "GET" || request.method == "HEAD" else {
                out.respond(Self.methodNotAllowed(request, allow: "GET, HEAD"))
                return
            }
            out.respond(path == "/_mirrorgate/live" ? .json(200, #"{"status":"live"}"#) : readiness())
            return
        }
        if let token = services.configuration.admin.token {
            let given = request.headers["Authorization"] ?? ""
            guard constantTimeEqual(given, "Bearer " + token) else {
                var r = Self.adminError(401, "admin API needs Authorization: Bearer <admin.token>")
                r.headers.set("WWW-Authenticate", "Bearer")
                out.respond(r)
                return
            }
        }
        if path.hasPrefix("/_mirrorgate/odata/"), !path.hasPrefix(Self.odataServices) {
            // An OData service of its own: reads, and DELETE of an ErrorArchive entry.
            let allow = path.contains("ErrorArchive(") ? "GET, HEAD, DELETE" : "GET, HEAD"
            if !allow.split(separator: ",").contains(where: {
                $0.trimmingCharacters(in: .whitespaces) == request.method
            }) {
                var r = ODataServiceError.response(
                    405, code: "MethodNotAllowed", "method \(request.method) not allowed on \(path)",
                    version: .v4)
                r.headers.set("Allow", allow)
                out.respond(r)
                return
            }
            if odataArchiveService(request, out) { return }
        }
        if path.hasPrefix("/_mirrorgate/policies/") {
            policyAdmin(request, out)
            return
        }
        guard let allowed = Self.adminMethods(path) else {
            out.respond(Self.adminError(404, "no admin route \(request.method) \(path)"))
            return
        }
        guard request.method == allowed else {
            out.respond(Self.methodNotAllowed(request, allow: allowed))
            return
        }
        let waitValue = request.queryValue("wait")
        guard waitValue == nil || waitValue == "true" || waitValue == "false" else {
            out.respond(Self.adminError(400, "wait must be true or false"))
            return
        }
        switch path {
        case "/_mirrorgate/health":
            out.respond(.json(200, #"{"status":"ok","version":"\#(mirrorgateVersion)"}"#))
        case "/_mirrorgate/status":
            out.respond(.json(200, status(services).serialized()))
        case "/_mirrorgate/events":
            let stream = ResponseStream(timeout: .seconds(86400 * 365))
            out.respond(
                HTTPResponse(
                    status: 200,
                    headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-store"],
                    body: .stream(stream)))
            stream.write(Array(": mirrorgate events\n\n".utf8))
            _ = events.subscribe { text in stream.writeNonBlocking(Array(text.utf8)) }
        case "/_mirrorgate/reload":
            reload(out)
        case _ where path.hasPrefix(Self.algoliaIndices) && path.hasSuffix("/failedWrites"):
            let name = Self.name(path, after: Self.algoliaIndices, before: "/failedWrites")
            if let list = services.algolia.failedWrites(name) {
                out.respond(.json(200, list.serialized()))
            } else {
                out.respond(Self.adminError(404, "no mirrored index named \(name)"))
            }
        case _ where path.hasPrefix(Self.algoliaIndices) && path.hasSuffix("/build"):
            services.algolia.build(
                Self.name(path, after: Self.algoliaIndices, before: "/build"), body: request.body, out)
        case _ where path.hasPrefix(Self.algoliaIndices):
            sync(
                services.algolia, Self.name(path, after: Self.algoliaIndices, before: "/sync"),
                wait: request.queryValue("wait") == "true", out)
        case _ where path.hasSuffix("/upload"):
            odataUpload(request, services, out)
        default:
            odataDownload(request, services, out)
        }
    }

    /// The one method of each admin route (nil: no such route).
    static func adminMethods(_ path: Substring) -> String? {
        switch path {
        case "/_mirrorgate/health", "/_mirrorgate/status", "/_mirrorgate/events": return "GET"
        case "/_mirrorgate/reload": return "POST"
        default: break
        }
        for (prefix, suffixes) in [
            (algoliaIndices, ["/sync", "/build", "/failedWrites"]),
            (odataServices, ["/upload", "/download"]),
        ] where path.hasPrefix(prefix) {
            for suffix in suffixes where path.hasSuffix(suffix) {
                let name = path.dropFirst(prefix.count).dropLast(suffix.count)
                if !name.isEmpty && !name.contains("/") { return suffix == "/failedWrites" ? "GET" : "POST" }
            }
        }
        return nil
    }

    /// The percent-decoded name in `{prefix}{name}{suffix}`.
    static func name(_ path: Substring, after prefix: String, before suffix: String) -> String {
        FormCodec.percentDecode(path.dropFirst(prefix.count).dropLast(suffix.count))
    }

    /// `GET /_mirrorgate/ready`: 200 when the configuration is loaded, the stores answer and the listener is
    /// up, else 503; the body names each check with `ok` or `failed` and nothing else.
    func readiness() -> HTTPResponse {
        let listener = serving.load(ordering: .acquiring)
        let storage = storageCheck()
        let ready = listener && storage
        let checks: JSON = [
            "configuration": "ok", "storage": .string(storage ? "ok" : "failed"),
            "listener": .string(listener ? "ok" : "failed"),
        ]
        let body: JSON = ["status": .string(ready ? "ready" : "not ready"), "checks": checks]
        return .json(ready ? 200 : 503, body.serialized())
    }

    /// `POST /_mirrorgate/reload`: 200 and what changed, 400 and the configuration's errors (the running
    /// configuration kept), 409 while another reload runs, 500 when a service could not be rebuilt. The
    /// reload runs on a thread of its own (it may open stores and load indices).
    func reload(_ out: any Responder) {
        guard let run = reloader.withLock({ $0 }) else {
            out.respond(Self.adminError(503, "the gateway is still starting"))
            return
        }
        let thread = Thread {
            let outcome = run()
            out.respond(.json(outcome.status, outcome.json.serialized()))
        }
        thread.name = "mg-reload"
        thread.start()
    }

    private func sync(_ algolia: AlgoliaService, _ name: String, wait: Bool, _ out: any Responder) {
        let completion: (@Sendable (Result<SyncStats, SyncError>) -> Void)? =
            wait ? waitedRun(out, json: \.json) : nil
        switch algolia.sync(name, completion: completion) {
        case .unknownIndex:
            out.respond(Self.adminError(404, "no mirrored index named \(name)"))
        case .alreadyRunning:
            out.respond(Self.adminError(409, "a sync of \(name) is already running"))
        case .started:
            if !wait { out.respond(.json(202, #"{"status":"started"}"#)) }
        }
    }

    func status(_ services: ServiceSet) -> JSON {
        var upstreams = JSONObject()
        if let upstream = services.algolia.upstream {
            upstreams["algolia"] = tracker(upstream.reachability)
        }
        for s in services.odata.sorted(by: { $0.settings.name < $1.settings.name }) {
            upstreams["odata:\(s.settings.name)"] = tracker(s.reachability)
        }
        var result = JSONObject()
        result["version"] = .string(mirrorgateVersion)
        result["startedAt"] = .string(rfc3339(startedAt))
        result["upstreams"] = .object(upstreams)
        result["algolia"] = ["indices": services.algolia.indexStatus()]
        result["odata"] = odataStatus(services)
        result["policies"] = replication.policiesStatus()
        return .object(result)
    }

    /// `reachable` is `null` until the upstream was probed or used (the gateway knows nothing yet).
    private func tracker(_ t: ReachabilityTracker) -> JSON {
        var o = JSONObject()
        o["reachable"] = t.knownReachability.map { .bool($0) } ?? .null
        o["since"] = .string(rfc3339(t.since))
        return .object(o)
    }
}

/// The completion of an admin run started with `?wait=true`: `200` and its statistics, or `502` and
/// `{"message","status"}` when it failed.
func waitedRun<Stats, Failure: Error & CustomStringConvertible>(
    _ out: any Responder, json: @escaping @Sendable (Stats) -> JSON
) -> @Sendable (Result<Stats, Failure>) -> Void {
    { result in
        switch result {
        case .success(let stats):
            out.respond(.json(200, json(stats).serialized()))
        case .failure(let error):
            out.respond(Router.adminError(502, error.description))
        }
    }
}
