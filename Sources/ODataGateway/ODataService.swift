import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import Storage
import Synchronization
import Upstream

/// What an ``ODataService`` mirrors and how it routes reads (mapped from `odata.services.NAME`).
public struct ODataMirrorSettings: Sendable {
    /// One defining request: a name and a query relative to the service root.
    public struct DefiningRequest: Sendable {
        /// Unique name.
        public var name: String
        /// Relative read URL, e.g. `Customers?$filter=Country eq 'Germany'`.
        public var query: String
        /// Creates one.
        public init(name: String, query: String) {
            self.name = name
            self.query = query
        }
    }
    /// `routing: localFirst`: reads are always answered from the mirror.
    public var localFirst: Bool
    /// The defining requests.
    public var definingRequests: [DefiningRequest]
    /// Server-driven page size of local responses.
    public var pageSize: Int?
    /// `bootstrap.metadata` file.
    public var bootstrapMetadata: String?
    /// `bootstrap.data`: entity set → JSON file.
    public var bootstrapData: [String: String]
    /// Interval between scheduled downloads.
    public var interval: Duration
    /// Path of the mirror file.
    public var databasePath: String
    /// `storeEncryptionKey`: encrypts the mirror file (mirror, queue, archive, queued credentials).
    public var storeEncryption: StoreEncryption?
    /// `enableRepeatableRequests`: uploaded modifications carry repeatability headers.
    public var enableRepeatableRequests = true
    /// `repeatabilityHeaders`: OASIS, SAP or both header names.
    public var repeatabilityHeaders: RepeatabilityHeaders = .both
    /// `upstreamSupportsRepeatability`: whether a request in doubt may be re-sent with the same
    /// repeatability headers (`auto`: once a `Repeatability-Result` header was seen).
    public var upstreamSupportsRepeatability: RepeatabilitySupport = .auto
    /// `uploadIfMatch`: the If-Match an uploaded write gets when its client sent none.
    public var uploadIfMatch: UploadIfMatch = .mirror
    /// `uploadCredentials`: `client` replays the writer's Authorization, `service` sends only the
    /// service's custom headers and cookies.
    public var uploadCredentials: UploadCredentials = .client
    /// `enableIndividualErrorArchiveDeletion`: deleting an ErrorArchive entry reverts only it and the
    /// requests depending on it (else every entry and every held request).
    public var enableIndividualErrorArchiveDeletion = false

    /// Creates settings.
    public init(
        localFirst: Bool, definingRequests: [DefiningRequest], pageSize: Int?, bootstrapMetadata: String?,
        bootstrapData: [String: String], interval: Duration, databasePath: String
    ) {
        self.localFirst = localFirst
        self.definingRequests = definingRequests
        self.pageSize = pageSize
        self.bootstrapMetadata = bootstrapMetadata
        self.bootstrapData = bootstrapData
        self.interval = interval
        self.databasePath = databasePath
    }
}

/// The result of one download.
public struct ODataDownloadStats: Sendable {
    /// Rows stored per entity set (over all defining requests).
    public var entitySets: [String: Int]
    /// Wall time.
    public var durationMs: Int
    /// `{"entitySets": {NAME: rows}, "durationMs": N}`.
    public var json: JSON {
        var sets = JSONObject()
        for (k, v) in entitySets.sorted(by: { $0.key < $1.key }) { sets[k] = .int(Int64(v)) }
        return ["entitySets": .object(sets), "durationMs": .int(Int64(durationMs))]
    }
}

struct DownloadState {
    var running = false
    var lastError: String?
    var lastDurationMs: Int?
    var nextSyncAt: Date?
    var stopped = false
}

/// One OData service: its SQLite mirror filled by defining requests (or bootstrap files), the routing of
/// reads (`onlineFirst`: forwarded while reachable, answered locally when the upstream is down or a
/// forwarded read cannot reach it; `localFirst`: always local), function imports forwarded (503 with
/// an OData error offline), and downloads at start when never downloaded, when the upstream becomes
/// reachable again, on demand and on an interval.
///
/// Promises: `handle` never blocks (local work runs on the service's worker pool, forwarding on the curl
/// loop); every response carries `X-Mirrorgate-Origin: remote|local`; at most one download runs at a time.
public final class ODataService: Sendable {
    /// Forwarding and reachability.
    public let forwarder: ODataForwarder
    /// The mirror.
    public let mirror: ODataMirror
    /// Mirror and routing settings.
    public let settings: ODataMirrorSettings
    let engine: LocalQueryEngine
    let pool: WorkerPool
    let client: UpstreamClient
    let logger: Logger
    /// The gateway's CSRF tokens and its upstream sessions.
    public let csrf = ODataCSRF()
    let state = Mutex(DownloadState())
    let uploadState = Mutex(UploadState())
    let uploadListeners = Mutex<[@Sendable (ODataUploadStats?) -> Void]>([])
    /// The durable request queue (offline writes) and the ErrorArchive.
    public let queue: ODataRequestQueue
    /// Stopped by `stop`: ends the scheduler's interval wait and any upload backoff at once.
    let stopSignal = StopSignal()
    /// Called after every download with its outcome (for events).
    private let listeners = Mutex<[@Sendable (Result<ODataDownloadStats, MirrorError>) -> Void]>([])

    /// Opens the mirror (creating it) and attaches to `forwarder`.
    public init(
        forwarder: ODataForwarder, settings: ODataMirrorSettings, client: UpstreamClient, pool: WorkerPool,
        logger: Logger
    ) throws {
        self.forwarder = forwarder
        self.settings = settings
        self.client = client
        self.pool = pool
        self.logger = logger
        mirror = try ODataMirror(path: settings.databasePath, encryption: settings.storeEncryption)
        if mirror.model == nil, let file = settings.bootstrapMetadata,
            let bytes = FileManager.default.contents(atPath: file)
        {
            try mirror.install(metadata: [UInt8](bytes))
        }
        engine = LocalQueryEngine(mirror: mirror)
        queue = try ODataRequestQueue(pool: mirror.pool)
        forwarder.attach(self)
    }

    /// The service's version (configured, else from the mirrored `$metadata`, else V4).
    public var version: ODataVersion { forwarder.settings.version ?? mirror.model?.version ?? .v4 }

    /// Registers a listener for uploads: called with nil when a run starts, then with its outcome.
    public func onUpload(_ body: @escaping @Sendable (ODataUploadStats?) -> Void) {
        uploadListeners.withLock { $0.append(body) }
    }

    /// Registers a listener for download outcomes.
    public func onDownload(_ body: @escaping @Sendable (Result<ODataDownloadStats, MirrorError>) -> Void) {
        listeners.withLock { $0.append(body) }
    }

    // MARK: routing

    /// Routes one request without blocking.
    public func handle(_ original: HTTPRequest, _ originalResponder: any Responder) {
        var adjusted = original
        var answer = originalResponder
        if adjusted.headers["X-CSRF-Token"]?.lowercased() == "fetch" {
            adjusted.headers.remove("X-CSRF-Token")
            answer = CSRFTokenResponder(inner: answer, token: csrf.gatewayToken)
        }
        if let resolved = resolvingUploadedLocalKey(adjusted) { adjusted = resolved }
        if answerArchiveAtMount(adjusted, answer) { return }
        route(adjusted, answer)
    }

    /// A request addressing `Set(localKey)` of an entity created offline and since uploaded, readdressed
    /// to the server's key (the old local URL keeps resolving); nil when nothing changes.
    func resolvingUploadedLocalKey(_ request: HTTPRequest) -> HTTPRequest? {
        let target = request.target
        guard target.contains("(-") || target.contains("local-") else { return nil }
        let (path, query) = relative(request)
        guard let open = path.firstIndex(of: "("), let close = path[open...].firstIndex(of: ")") else {
            return nil
        }
        let set = String(path[..<open])
        let raw = String(path[open...close])
        let local = raw.removingPercentEncoding ?? raw
        guard local.hasPrefix("(-") || local.hasPrefix("('local-"),
            let server = queue.serverKey(set: set, local: local)
        else { return nil }
        var resolved = request
        resolved.target =
            forwarder.settings.mount + set + server + String(path[path.index(after: close)...])
            + (query.isEmpty ? "" : "?" + query)
        return resolved
    }

    private func route(_ request: HTTPRequest, _ responder: any Responder) {
        let isRead = request.method == "GET" || request.method == "HEAD" || request.method == "OPTIONS"
        if !isRead {
            if let given = request.headers["X-CSRF-Token"], given != csrf.gatewayToken {
                var r = ODataError.response(
                    403, code: "CSRFTokenRequired",
                    "CSRF token validation failed; fetch one with X-CSRF-Token: Fetch",
                    version: version)
                r.headers.set("X-CSRF-Token", "Required")
                OriginResponder(inner: responder, origin: "local").respond(r)
                return
            }
            var stripped = request
            stripped.headers.remove("X-CSRF-Token")
            let write = stripped
            if isBatch(write), mirror.model != nil {
                pool.submit { [self] in
                    // A batch with changes follows the rule of single writes (ordering behind the queue).
                    if !forwarder.reachability.isReachable
                        || ((settings.localFirst || queue.count > 0) && batchHasChanges(write))
                    {
                        answerLocally(write, responder, mayForward: false)
                    } else {
                        forwardWrite(write, responder, retried: false)
                    }
                }
                return
            }
            if !isBatch(write), mirror.model != nil,
                settings.localFirst || !forwarder.reachability.isReachable || queue.count > 0
            {
                pool.submit { [self] in answerWriteLocally(write, responder) }
                return
            }
            pool.submit { [self] in forwardWrite(write, responder, retried: false) }
            return
        }
        guard mirror.model != nil else {
            forwarder.forward(request, OriginResponder(inner: responder, origin: "remote"))
            return
        }
        let target = request.target
        let localToken = target.contains("skiptoken=" + LocalSkipToken.prefix)
        if settings.localFirst || localToken || !forwarder.reachability.isReachable || readsQueuedSet(request)
        {
            let r = responder
            pool.submit { [self] in answerLocally(request, r, mayForward: true) }
            return
        }
        let r = responder
        forwarder.forward(
            request, OriginResponder(inner: r, origin: "remote"),
            fallback: { [self] _ in
                pool.submit { [self] in answerLocally(request, r, mayForward: false) }
                return true
            })
    }

    /// Blocking (on the pool): forwards a write with the upstream's CSRF token; a `$batch` that cannot
    /// reach the upstream is answered locally (its changesets applied and queued) when it only reads or was
    /// never sent.
    func forwardWrite(_ request: HTTPRequest, _ responder: any Responder, retried: Bool) {
        let prepared = csrf.prepare(request, settings: forwarder.settings, client: client)
        var retry: (@Sendable () -> Void)?
        if !retried {
            retry = { [self] in pool.submit { [self] in forwardWrite(request, responder, retried: true) } }
        }
        var relayed: any Responder = OriginResponder(inner: responder, origin: "remote")
        if mirror.model != nil, !isBatch(request) {
            relayed = ReflectingResponder(inner: relayed) { [self] location in
                pool.submit { [self] in reflectForwardedWrite(request, location: location) }
            }
        }
        let watcher = CSRFRetryResponder(
            inner: relayed, retry: retry,
            forget: { [self] in csrf.forget(request) })
        var fallback: (@Sendable (UpstreamError) -> Bool)?
        if isBatch(request), mirror.model != nil {
            fallback = { [self] error in
                // A batch with changes that may have reached the upstream is not applied a second time.
                if error.kind != .refused, error.kind != .dns, batchHasChanges(request) { return false }
                pool.submit { [self] in answerLocally(request, responder, mayForward: false) }
                return true
            }
        } else if mirror.model != nil {
            // Never sent (nothing listens): safe to queue; other failures may have reached the upstream.
            fallback = { [self] error in
                guard error.kind == .refused || error.kind == .dns else { return false }
                pool.submit { [self] in answerWriteLocally(request, responder) }
                return true
            }
        }
        forwarder.forward(prepared, watcher, fallback: fallback)
    }

    /// Whether a read touches an entity set with queued changes (read-your-writes: answered from the mirror).
    func readsQueuedSet(_ request: HTTPRequest) -> Bool {
        let n = queue.count
        guard n > 0 else { return false }
        let (path, query) = relative(request)
        if query.contains("expand") { return true }
        let first = path.prefix { $0 != "(" && $0 != "/" }
        return queue.holds(String(first))
    }

    /// The path under the mount (percent-encoded, no leading `/`) and the raw query.
    func relative(_ request: HTTPRequest) -> (String, String) {
        var path = Substring(request.path)
        let mount = forwarder.settings.mount
        if path.hasPrefix(mount) { path = path.dropFirst(mount.count) } else { path = "" }
        return (String(path), request.query.map(String.init) ?? "")
    }

    func isBatch(_ request: HTTPRequest) -> Bool {
        request.method == "POST" && (request.path.hasSuffix("/$batch") || request.path.hasSuffix("/%24batch"))
    }

    func answerLocally(_ request: HTTPRequest, _ responder: any Responder, mayForward: Bool) {
        let out = OriginResponder(inner: responder, origin: "local")
        let (path, _) = relative(request)
        if isBatch(request) {
            out.respond(batchResponse(request))
            return
        }
        if mayForward, forwarder.reachability.isReachable {
            var forward = mirror.model == nil
            if let m = mirror.model, let parsed = try? ODataResourcePath.parse(path, model: m.model),
                case .operationImport = parsed.target
            {
                forward = true
            }
            if forward {
                forwarder.forward(request, OriginResponder(inner: responder, origin: "remote"))
                return
            }
        }
        out.respond(localResponse(request))
    }

    /// The local answer to one read (an OData error response when it cannot be answered).
    func localResponse(_ request: HTTPRequest) -> HTTPResponse {
        let version = self.version
        let (path, query) = relative(request)
        if let m = mirror.model, let parsed = try? ODataResourcePath.parse(path, model: m.model) {
            switch parsed.target {
            case .operationImport, .batch:
                return ODataError.response(
                    503, code: "UpstreamUnavailable",
                    "the upstream is unreachable; function imports and actions are not answered offline",
                    version: version)
            default: break
            }
        }
        var format = ODataFormat(version: version)
        let accept = (request.headers["Accept"] ?? "") + ";" + (request.queryValue("$format") ?? "")
        let lower = accept.lowercased()
        if lower.contains("odata.metadata=full") {
            format.metadata = .full
        } else if lower.contains("odata.metadata=none") {
            format.metadata = .none
        }
        if lower.contains("ieee754compatible=true") { format.ieee754Compatible = true }
        var pageSize = settings.pageSize
        var preferApplied: String?
        if let prefer = request.headers["Prefer"], let range = prefer.range(of: "odata.maxpagesize=") {
            let digits = prefer[range.upperBound...].prefix { $0.isNumber }
            if let n = Int(digits), n > 0 {
                pageSize = min(pageSize ?? n, n)
                preferApplied = "odata.maxpagesize=\(n)"
            }
        }
        let root = forwarder.urlMap(for: request).gatewayRoot
        let local = LocalReadRequest(
            path: path, query: query, serviceRoot: root, format: format, pageSize: pageSize)
        do {
            let answer = try engine.read(local)
            var headers = HTTPHeaders()
            headers.set("Content-Type", answer.contentType)
            if version == .v4 {
                headers.set("OData-Version", "4.0")
            } else {
                headers.set("DataServiceVersion", "2.0")
            }
            if let preferApplied { headers.set("Preference-Applied", preferApplied) }
            if let etag = answer.etag { headers.set("ETag", etag) }
            return HTTPResponse(
                status: answer.status, headers: headers,
                body: .bytes(request.method == "HEAD" ? [] : answer.body))
        } catch {
            return ODataError.response(error.status, code: error.code, error.message, version: version)
        }
    }

    /// A read-only `$batch` answered locally: multipart (V2 `202`, V4 `200`) or V4 JSON.
    func batchResponse(_ request: HTTPRequest) -> HTTPResponse {
        let version = self.version
        let contentType = request.headers["Content-Type"] ?? ""
        let isJSON = contentType.lowercased().hasPrefix("application/json")
        let reads: [BatchRead]
        do {
            reads =
                isJSON
                ? try LocalBatch.jsonReads(request.body)
                : try LocalBatch.multipartReads(request.body, contentType: contentType)
        } catch {
            switch error {
            case .notReadOnly:
                return batchWriteResponse(request)
            case .malformed(let why):
                return ODataError.response(
                    400, code: "BadRequest", "invalid $batch: \(why)", version: version)
            }
        }
        let gatewayRoot = forwarder.urlMap(for: request).gatewayRoot
        let mount = forwarder.settings.mount
        let answers = reads.map {
            ($0, localResponse(.batchPart($0, outer: request, mount: mount, gatewayRoot: gatewayRoot)))
        }
        func bodyBytes(_ r: HTTPResponse) -> [UInt8] {
            if case .bytes(let b) = r.body { return b }
            return []
        }
        if isJSON {
            var items: [RawJSON] = []
            for (i, (read, r)) in answers.enumerated() {
                var headers: [(String, RawJSON)] = []
                for (k, v) in r.headers where k.lowercased() != "x-mirrorgate-origin" {
                    headers.append((k.lowercased(), .string(v)))
                }
                let bytes = bodyBytes(r)
                let body: RawJSON =
                    (try? RawJSON.parse(bytes)) ?? .string(String(decoding: bytes, as: UTF8.self))
                items.append(
                    .object([
                        ("id", .string(read.id ?? String(i + 1))), ("status", .number(String(r.status))),
                        ("headers", .object(headers)), ("body", body),
                    ]))
            }
            var out: [UInt8] = []
            RawJSON.object([("responses", .array(items))]).write(to: &out)
            var h = HTTPHeaders()
            h.set("Content-Type", "application/json")
            h.set("OData-Version", "4.0")
            return HTTPResponse(status: 200, headers: h, body: .bytes(out))
        }
        let boundary = "batchresponse_mg"
        var out = ""
        for (_, r) in answers {
            out +=
                "--\(boundary)\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
            out += "HTTP/1.1 \(r.status) \(HTTPStatus.reasonPhrase(r.status))\r\n"
            for (k, v) in r.headers where k.lowercased() != "x-mirrorgate-origin" { out += "\(k): \(v)\r\n" }
            let bytes = bodyBytes(r)
            out += "Content-Length: \(bytes.count)\r\n\r\n"
            out += String(decoding: bytes, as: UTF8.self) + "\r\n"
        }
        out += "--\(boundary)--\r\n"
        var h = HTTPHeaders()
        h.set("Content-Type", "multipart/mixed; boundary=\(boundary)")
        if version == .v4 {
            h.set("OData-Version", "4.0")
        } else {
            h.set("DataServiceVersion", "2.0")
        }
        return HTTPResponse(status: version == .v2 ? 202 : 200, headers: h, body: .bytes(Array(out.utf8)))
    }

    // MARK: downloads

    /// Starts the scheduler: a download now when the mirror was never downloaded, then every
    /// `settings.interval`, and whenever the upstream becomes reachable again.
    public func start() {
        forwarder.reachability.onChange { [self] up in
            // Upload first; the upload starts the download when it leaves the queue empty.
            if up { upload(completion: nil) }
        }
        let thread = Thread { [self] in schedulerLoop() }
        thread.name = "mg-odata-\(forwarder.settings.name)"
        thread.start()
    }

    /// Stops the scheduler.
    public func stop() {
        state.withLock { $0.stopped = true }
        stopSignal.stop()
    }

    private func schedulerLoop() {
        if mirror.lastDownloadAt == nil {
            _ = download(completion: nil)
        } else if queue.count > 0 {
            // Changes queued before a restart: upload them (the upload then downloads).
            upload(completion: nil)
        }
        while true {
            let interval = settings.interval
            state.withLock { $0.nextSyncAt = Date().addingTimeInterval(interval.seconds) }
            if !stopSignal.sleep(for: max(interval, .seconds(1))) { return }
            if forwarder.reachability.isReachable {
                if queue.count > 0 { upload(completion: nil) } else { _ = download(completion: nil) }
            }
        }
    }

    /// Starts a download on a background thread; false when one is already running.
    public func download(completion: (@Sendable (Result<ODataDownloadStats, MirrorError>) -> Void)?) -> Bool {
        let started = state.withLock { s -> Bool in
            if s.running { return false }
            s.running = true
            return true
        }
        guard started else { return false }
        let thread = Thread { [self] in
            let begin = Date()
            let result: Result<ODataDownloadStats, MirrorError>
            do {
                var stats = try runDownload()
                stats.durationMs = Int(Date().timeIntervalSince(begin) * 1000)
                result = .success(stats)
            } catch let e as MirrorError {
                result = .failure(e)
            } catch {
                result = .failure(MirrorError("\(error)"))
            }
            state.withLock { s in
                s.running = false
                switch result {
                case .success(let st):
                    s.lastError = nil
                    s.lastDurationMs = st.durationMs
                case .failure(let e): s.lastError = e.description
                }
            }
            if case .failure(let e) = result {
                logger.warning(
                    "odata download failed",
                    metadata: ["service": "\(forwarder.settings.name)", "error": "\(e)"])
            }
            for l in listeners.withLock({ $0 }) { l(result) }
            completion?(result)
        }
        thread.name = "mg-odata-download"
        thread.start()
        return true
    }

    func upstreamGET(
        _ url: String, accept: String = "application/json", extraHeaders: [(name: String, value: String)] = []
    ) throws(MirrorError) -> UpstreamResponse {
        let s = forwarder.settings
        var headers: [(name: String, value: String)] = [("Accept", accept)] + extraHeaders
        // Data in the 4.0 JSON shape; `$metadata` as the upstream serves it by default.
        if s.version != .v2, accept == "application/json" { headers.append(("OData-MaxVersion", "4.0")) }
        headers += s.customHeaders.map { (name: $0.0, value: $0.1) }
        if !s.customCookies.isEmpty {
            headers.append(("Cookie", s.customCookies.map { "\($0.0)=\($0.1)" }.joined(separator: "; ")))
        }
        var full = url
        if let suffix = s.urlSuffix, !suffix.isEmpty, !url.contains(suffix) {
            full += (url.contains("?") ? "&" : "?") + suffix
        }
        do {
            let r = try client.perform(
                UpstreamRequest(
                    method: "GET", url: full, headers: headers, connectTimeout: s.connectTimeout,
                    timeout: s.timeout))
            forwarder.reachability.reportSuccess()
            return r
        } catch {
            forwarder.reachability.reportFailure(error.description)
            throw MirrorError("upstream unreachable: \(error)")
        }
    }

    func runDownload() throws -> ODataDownloadStats {
        let s = forwarder.settings
        let queued = queue.count
        if queued > 0, mirror.lastDownloadAt != nil {
            throw MirrorError(
                "\(queued) local changes wait for upload; the mirror is downloaded after the upload")
        }
        var metadataError: MirrorError?
        do {
            let r = try upstreamGET(s.upstream + "$metadata", accept: "application/xml")
            guard r.status == 200 else { throw MirrorError("$metadata answered \(r.status)") }
            try mirror.install(metadata: r.body)
        } catch let e as MirrorError {
            metadataError = e
        } catch {
            metadataError = MirrorError("$metadata does not parse: \(error)")
        }
        if let metadataError {
            if mirror.model == nil, let file = settings.bootstrapMetadata {
                guard let bytes = FileManager.default.contents(atPath: file) else {
                    throw MirrorError("cannot read bootstrap metadata \(file)")
                }
                try mirror.install(metadata: [UInt8](bytes))
            }
            if mirror.lastDownloadAt == nil, !settings.bootstrapData.isEmpty {
                return try loadBootstrap()
            }
            throw metadataError
        }
        var total: [String: Int] = [:]
        for request in settings.definingRequests {
            let (rows, links) = try fetchDefiningRequest(request)
            let stored = try mirror.replace(
                request: request.name, query: request.query, rows: rows, links: links, unlessQueued: true)
            for (k, v) in stored { total[k, default: 0] += v }
        }
        if !settings.definingRequests.isEmpty { try mirror.dropBootstrap() }
        return ODataDownloadStats(entitySets: total, durationMs: 0)
    }

    /// Loads `bootstrap.data` files (each a V4 `{"value":[…]}`, a V2 `{"d":{"results":[…]}}` or a bare array).
    func loadBootstrap() throws -> ODataDownloadStats {
        guard let m = mirror.model else { throw MirrorError("no $metadata for the bootstrap data") }
        var total: [String: Int] = [:]
        for (set, file) in settings.bootstrapData.sorted(by: { $0.key < $1.key }) {
            guard let layout = m.layouts[set] else { throw MirrorError("bootstrap: no entity set \(set)") }
            guard let bytes = FileManager.default.contents(atPath: file) else {
                throw MirrorError("cannot read bootstrap data \(file)")
            }
            let body: RawJSON
            do { body = try RawJSON.parse([UInt8](bytes)) } catch { throw MirrorError("\(file): \(error)") }
            var rows: [String: [MirrorEntity]] = [set: []]
            var links: [MirrorLinkRecord] = []
            for item in Self.entities(in: body).items {
                if let members = item.members {
                    Self.ingest(
                        members, set: set, type: layout.entityType, model: m, into: &rows, links: &links)
                }
            }
            let stored = try mirror.replace(request: "bootstrap:" + set, query: set, rows: rows, links: links)
            for (k, v) in stored { total[k, default: 0] += v }
        }
        return ODataDownloadStats(entitySets: total, durationMs: 0)
    }

    static func entities(in body: RawJSON) -> (items: [RawJSON], next: String?) {
        if let a = body.elements { return (a, nil) }
        if let d = body["d"] {
            if let a = d.elements { return (a, nil) }
            if let r = d["results"]?.elements { return (r, d["__next"]?.string) }
            return ([d], nil)
        }
        if let v = body["value"]?.elements { return (v, body["@odata.nextLink"]?.string) }
        return ([body], nil)
    }

    func fetchDefiningRequest(_ request: ODataMirrorSettings.DefiningRequest) throws -> (
        [String: [MirrorEntity]], [MirrorLinkRecord]
    ) {
        guard let m = mirror.model else { throw MirrorError("no $metadata") }
        let s = forwarder.settings
        var pathPart = Substring(request.query)
        if let qi = pathPart.firstIndex(of: "?") { pathPart = pathPart[..<qi] }
        let path: ODataResourcePath
        do { path = try ODataResourcePath.parse(String(pathPart), model: m.model) } catch {
            throw MirrorError("defining request \(request.name): \(error)")
        }
        let type: String
        let set: String
        switch path.target {
        case .entityCollection(let t, let st), .entity(let t, let st):
            type = t
            guard let name = st ?? m.layouts.values.first(where: { $0.entityType == t })?.set.name else {
                throw MirrorError("defining request \(request.name): no entity set for \(t)")
            }
            set = name
        default: throw MirrorError("defining request \(request.name) does not read entities")
        }
        var rows: [String: [MirrorEntity]] = [set: []]
        var links: [MirrorLinkRecord] = []
        var url: String? = s.upstream + Self.encodeQuery(request.query)
        var pages = 0
        while let current = url {
            pages += 1
            guard pages <= 100_000 else {
                throw MirrorError("defining request \(request.name): too many pages")
            }
            let r = try upstreamGET(current)
            guard r.status == 200 else {
                throw MirrorError(
                    "defining request \(request.name) answered \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))"
                )
            }
            let body: RawJSON
            do { body = try RawJSON.parse(r.body) } catch {
                throw MirrorError("defining request \(request.name): \(error)")
            }
            let (items, next) = Self.entities(in: body)
            for item in items {
                if let members = item.members {
                    Self.ingest(members, set: set, type: type, model: m, into: &rows, links: &links)
                }
            }
            if let next, !next.isEmpty {
                url = next.hasPrefix("http://") || next.hasPrefix("https://") ? next : s.upstream + next
            } else {
                url = nil
            }
        }
        return (rows, links)
    }

    /// Percent-encodes spaces and other characters not allowed in a URL, leaving `%XX` escapes as they are.
    static func encodeQuery(_ q: String) -> String { FormCodec.percentEncode(q, keeping: .url) }

    /// Splits one wire entity into its structural properties (stored for `set`) and the entities expanded
    /// inside it (stored for their own sets); the links an expanded navigation without referential
    /// constraints shows go to `links`.
    static func ingest(
        _ object: [(String, RawJSON)], set: String, type: String, model m: MirrorModel,
        into rows: inout [String: [MirrorEntity]], links: inout [MirrorLinkRecord]
    ) {
        var properties: [(String, RawJSON)] = []
        var expanded: [(String, [[(String, RawJSON)]])] = []
        var etag: String?
        for (name, value) in object {
            if name == "__metadata" {
                etag = value["etag"]?.string
                continue
            }
            if name == "@odata.etag" || name == "@etag" {
                etag = value.string
                continue
            }
            if name.hasPrefix("@") || name.contains("@") { continue }
            if let nav = m.model.navigationProperty(named: name, in: type) {
                let setObject = m.layouts[set]?.set
                let targetSet =
                    setObject.flatMap { m.model.targetEntitySet(from: $0, navigationPath: name) }?.name
                    ?? m.layouts.values.first(where: { $0.entityType == nav.target })?.set.name
                guard let targetSet else { continue }
                var items: [RawJSON] = []
                if let a = value.elements {
                    items = a
                } else if let r = value["results"]?.elements {
                    items = r
                } else if value.members != nil, value["__deferred"] == nil {
                    items = [value]
                }
                let deferred = value["__deferred"] != nil
                var related: [[(String, RawJSON)]] = []
                for item in items {
                    if let members = item.members {
                        Self.ingest(
                            members, set: targetSet, type: nav.target, model: m, into: &rows, links: &links)
                        related.append(members)
                    }
                }
                if !deferred { expanded.append((name, related)) }
                continue
            }
            properties.append((name, value))
        }
        rows[set, default: []].append(MirrorEntity(properties: properties, etag: etag))
        for (name, related) in expanded {
            links += ODataMirror.linkRecords(
                model: m, set: set, properties: properties, navigation: name, related: related)
        }
    }

    // MARK: status

    /// `{reachable, pendingRequests, inFlight, inDoubt, errorArchive, lastUploadAt, lastDownloadAt,
    /// nextSyncAt, lastError, downloading, version, entitySets}`.
    public func status() -> JSON {
        let s = state.withLock { $0 }
        var o = JSONObject()
        o["reachable"] = .bool(forwarder.reachability.isReachable)
        let u = uploadState.withLock { $0 }
        o["pendingRequests"] = .int(Int64(queue.count))
        o["inFlight"] = .int(u.running ? 1 : 0)
        o["inDoubt"] = .int(Int64(queue.inDoubtCount()))
        o["held"] = .int(Int64(queue.heldCount()))
        o["errorArchive"] = .int(Int64(queue.archivedCount()))
        o["uploading"] = .bool(u.running)
        o["lastUploadAt"] = u.lastUploadAt.map(JSON.string) ?? .null
        o["lastDownloadAt"] = mirror.lastDownloadAt.map(JSON.string) ?? .null
        if let next = s.nextSyncAt {
            let f = ISO8601DateFormatter()
            o["nextSyncAt"] = .string(f.string(from: next))
        } else {
            o["nextSyncAt"] = .null
        }
        o["lastError"] = s.lastError.map(JSON.string) ?? .null
        o["downloading"] = .bool(s.running)
        o["version"] = mirror.model.map { .string($0.version.rawValue) } ?? .null
        var sets = JSONObject()
        for (k, v) in mirror.rowCounts().sorted(by: { $0.key < $1.key }) { sets[k] = .int(Int64(v)) }
        o["entitySets"] = .object(sets)
        return .object(o)
    }
}
