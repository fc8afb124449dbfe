import AlgoliaGateway
import Foundation
import GatewayConfig
import HTTPCore
import JSONCore
import ODataGateway
import Observability
import Replication
import Synchronization
import Upstream

/// The admin API (`/_mirrorgate/…`, SPEC §5): the probes answer without a token; every other route
/// needs `Authorization: Bearer <admin.token>` when one is set (401 before anything else, so a caller
/// without it learns nothing about the routes); a known route asked with another method gets 405 with
/// `Allow`, an unknown one 404; errors are `{"message","status"}`.
///
/// Promises: every answer is JSON (the events stream excepted); runs started here are the same runs
/// the scheduler starts; nothing here changes the services in force (a reload is the gateway's).
public final class AdminAPI: Sendable {
    static let algoliaIndices = "/_mirrorgate/algolia/indices/"
    static let odataServices = "/_mirrorgate/odata/services/"
    /// The version `health` and `status` report.
    let version: String
    let startedAt = Date()
    /// The one scheduler of every replication (policies, their pauses and status).
    let replication: ReplicationScheduler
    /// What `GET /_mirrorgate/events` streams.
    let events: EventBus
    /// Readiness (`GET /_mirrorgate/ready`): set once the listener is up, cleared when stopping.
    public let serving = Atomic<Bool>(false)
    /// Whether the stores answer (`/ready`).
    let storageCheck: @Sendable () -> Bool
    /// Runs a reload (`POST /_mirrorgate/reload`); set by the gateway once it exists.
    public let reloader = Mutex<(@Sendable () -> ReloadOutcome)?>(nil)

    /// The admin API of a gateway reporting `version`, with its scheduler, event bus and store check.
    public init(
        version: String, replication: ReplicationScheduler, events: EventBus,
        storageCheck: @escaping @Sendable () -> Bool
    ) {
        self.version = version
        self.replication = replication
        self.events = events
        self.storageCheck = storageCheck
    }

    /// Answers `request` (its path under `/_mirrorgate/`) with the services in force.
    public func handle(_ request: HTTPRequest, _ services: ServiceSet, _ out: any Responder) {
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
            if odataArchiveService(request, services, out) { return }
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
            out.respond(.json(200, #"{"status":"ok","version":"\#(version)"}"#))
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
        result["version"] = .string(version)
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

    /// `POST /_mirrorgate/policies/{p}/pause` and `…/resume`: `200 {"policy","paused"}`, 404 for an
    /// unknown policy, 405 for another method.
    func policyAdmin(_ request: HTTPRequest, _ out: any Responder) {
        let prefix = "/_mirrorgate/policies/"
        let path = request.path
        let action = path.hasSuffix("/pause") ? "pause" : path.hasSuffix("/resume") ? "resume" : nil
        guard let action, path.count > prefix.count + action.count + 1 else {
            out.respond(Self.adminError(404, "no admin route \(request.method) \(path)"))
            return
        }
        guard request.method == "POST" else {
            out.respond(Self.methodNotAllowed(request, allow: "POST"))
            return
        }
        let name = FormCodec.percentDecode(path.dropFirst(prefix.count).dropLast(action.count + 1))
        let known = action == "pause" ? replication.pause(name) : replication.resume(name)
        guard known else {
            out.respond(Self.adminError(404, "no policy named \(name)"))
            return
        }
        let body: JSON = ["policy": .string(name), "paused": .bool(replication.isPaused(name))]
        out.respond(.json(200, body.serialized()))
    }

    /// `GET /_mirrorgate/odata/{service}/…` (not `services/…`): the service's ErrorArchive and
    /// RequestQueue as a separate OData service; false when the path names no such service.
    func odataArchiveService(_ request: HTTPRequest, _ services: ServiceSet, _ out: any Responder) -> Bool {
        let prefix = "/_mirrorgate/odata/"
        let rest = request.path.dropFirst(prefix.count)
        let name = String(rest.prefix { $0 != "/" })
        guard name != "services", !name.isEmpty,
            let service = services.odata.first(where: {
                $0.settings.name == FormCodec.percentDecode(Substring(name))
            })
        else { return false }
        var path = rest.dropFirst(name.count)
        if path.hasPrefix("/") { path = path.dropFirst() }
        let host = request.headers["Host"] ?? "127.0.0.1"
        service.answerArchiveService(
            request, path: String(path), serviceRoot: "http://\(host)\(prefix)\(name)/", out)
        return true
    }

    /// The OData service `{s}` of `…/odata/services/{s}{action}` names, with its name; nil after a 404
    /// when there is no such service.
    private func odataService(
        _ request: HTTPRequest, _ services: ServiceSet, action: String, _ out: any Responder
    ) -> (String, ODataService)? {
        let name = Self.name(request.path, after: Self.odataServices, before: action)
        guard let service = services.odata.first(where: { $0.settings.name == name }) else {
            out.respond(Self.adminError(404, "no OData service named \(name)"))
            return nil
        }
        return (name, service)
    }

    /// `POST /_mirrorgate/odata/services/{s}/download[?wait=true]`: 202, or with `wait` 200 and
    /// `{entitySets, durationMs}` (502 and `{message,status}` when it failed); 409 while one runs; 404 for
    /// an unknown service.
    func odataDownload(_ request: HTTPRequest, _ services: ServiceSet, _ out: any Responder) {
        guard let (name, service) = odataService(request, services, action: "/download", out) else { return }
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
        guard let (name, service) = odataService(request, services, action: "/upload", out) else { return }
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

    /// `{"message","status"}`, the admin API's error body.
    public static func adminError(_ status: Int, _ message: String) -> HTTPResponse {
        .json(status, #"{"message":\#(JSON.string(message).serialized()),"status":\#(status)}"#)
    }

    /// 405 with `Allow`.
    public static func methodNotAllowed(_ request: HTTPRequest, allow: String) -> HTTPResponse {
        var r = adminError(405, "method \(request.method) not allowed on \(request.path) (allowed: \(allow))")
        r.headers.set("Allow", allow)
        return r
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
            out.respond(AdminAPI.adminError(502, error.description))
        }
    }
}
