import GatewaySupport
import HTTPCore
import Logging
import ODataCore
import Upstream

/// The router of one OData service: decides, for each request under the mount, who answers it — the
/// forwarder (the upstream), the local reader, the offline writer or the error archive — and does the
/// gateway's CSRF (its own token for clients, the upstream's handshake for forwarded writes).
///
/// Reads (`onlineFirst`): forwarded while the upstream is reachable, answered locally when it is down,
/// when a forwarded read cannot reach it, for the gateway's own `$skiptoken`, and for entity sets with
/// queued changes (read-your-writes); `localFirst`: always local. Writes: forwarded while the upstream is
/// reachable and the queue is empty (then reflected into the mirror), otherwise applied and queued
/// offline; a write that was never sent (nothing listens) is queued, one that may have reached the
/// upstream is not. Function imports are forwarded (503 offline).
///
/// Promises: ``handle(_:_:)`` never blocks (local work runs on the worker pool, forwarding on the curl
/// loop); every response carries `X-Mirrorgate-Origin: remote|local`. It owns its forwarder, uses the
/// service's CSRF sessions (shared with the uploader through the context) and holds the parts it hands
/// requests to; none of them holds it.
struct ODataRouter: ODataServicePart {
    let context: ODataServiceContext
    let forwarder: ODataForwarder
    let reader: ODataLocalReader
    let writer: ODataOfflineWriter
    let archive: ODataErrorArchive
    let uploader: ODataUploader
    let pool: WorkerPool

    var downloader: ODataDownloader { uploader.downloader }
    var localFirst: Bool { mirrorSettings.localFirst }
    var isReachable: Bool { reachability.isReachable }

    /// Routes one request without blocking.
    func handle(_ original: HTTPRequest, _ originalResponder: any Responder) {
        var request = original
        var responder = originalResponder
        if request.headers["X-CSRF-Token"]?.lowercased() == "fetch" {
            request.headers.remove("X-CSRF-Token")
            responder = CSRFTokenResponder(inner: responder, token: csrf.gatewayToken)
        }
        if let resolved = resolvingUploadedLocalKey(request) { request = resolved }
        if mirrorSettings.uploadCredentials == .client, queue.credentials.any {
            let credentials = WriterCredentials(
                authorization: request.headers["Authorization"], cookie: request.headers["Cookie"])
            pool.submit { [self] in offerNewerCredentials(credentials) }
        }
        let (path, _) = mount.relative(request)
        if archive.isArchivePath(path) {
            let root = mount.gatewayRoot(for: request)
            local(responder) { [archive, request] in
                archive.response(request, path: path, serviceRoot: root, entityRoot: root, isService: false)
            }
            return
        }
        let isRead = request.method == "GET" || request.method == "HEAD" || request.method == "OPTIONS"
        if isRead { routeRead(request, responder) } else { routeWrite(request, responder) }
    }

    /// Answers on the pool with what `answer` computes, tagged as local.
    func local(_ responder: any Responder, _ answer: @escaping @Sendable () -> HTTPResponse) {
        pool.submit { OriginResponder(inner: responder, origin: "local").respond(answer()) }
    }

    /// Forwards, tagged as remote.
    func remote(
        _ request: HTTPRequest, _ responder: any Responder,
        fallback: (@Sendable (UpstreamError) -> Bool)? = nil
    ) {
        forwarder.forward(request, OriginResponder(inner: responder, origin: "remote"), fallback: fallback)
    }

    /// A request addressing `Set(localKey)` of an entity created offline and since uploaded, readdressed
    /// to the server's key (the old local URL keeps resolving); nil when nothing changes.
    func resolvingUploadedLocalKey(_ request: HTTPRequest) -> HTTPRequest? {
        let target = request.target
        guard target.contains("(-") || target.contains("local-") else { return nil }
        let (path, query) = mount.relative(request)
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
            mount.path + set + server + String(path[path.index(after: close)...])
            + (query.isEmpty ? "" : "?" + query)
        return resolved
    }

    // MARK: reads

    private func routeRead(_ request: HTTPRequest, _ responder: any Responder) {
        guard mirror.model != nil else {
            remote(request, responder)
            return
        }
        let localToken = request.target.contains("skiptoken=" + LocalSkipToken.prefix)
        if localFirst || localToken || !isReachable || readsQueuedSet(request) {
            pool.submit { [self] in answerRead(request, responder, mayForward: true) }
            return
        }
        // The upstream unreachable, too slow to answer whole within the budget, failing (429, 502, 503,
        // 504, a 500 that is no OData error: ``ODataForwarder/isUpstreamFailure(status:headers:body:)``):
        // the mirror answers instead. The upstream's own final answer (4xx, 501, its OData error) is relayed.
        let answerLocally: @Sendable () -> Bool = { [self] in
            pool.submit { [self] in answerRead(request, responder, mayForward: false) }
            return true
        }
        // On a failing answer only a mirror that holds downloaded data answers; one with no defining
        // requests or no finished download would answer empty sets, a silent difference: the upstream's
        // answer is relayed.
        forwarder.forward(
            request, OriginResponder(inner: responder, origin: "remote"), fallback: { _ in answerLocally() },
            onUpstreamFailure: { [self] _ in holdsDownloadedData && answerLocally() })
    }

    /// Whether the mirror holds data from a finished download of at least one defining request.
    var holdsDownloadedData: Bool {
        !mirrorSettings.definingRequests.isEmpty && mirror.lastDownloadAt != nil
    }

    /// Whether a read touches an entity set with queued changes (read-your-writes: answered from the mirror).
    func readsQueuedSet(_ request: HTTPRequest) -> Bool {
        guard queue.count > 0 else { return false }
        let (path, query) = mount.relative(request)
        if query.contains("expand") { return true }
        return queue.holds(String(path.prefix { $0 != "(" && $0 != "/" }))
    }

    /// Blocking (on the pool): a read answered from the mirror; with `mayForward`, a function import is
    /// forwarded while the upstream is reachable.
    private func answerRead(_ request: HTTPRequest, _ responder: any Responder, mayForward: Bool) {
        if mayForward, isReachable, let m = mirror.model,
            let parsed = try? ODataResourcePath.parse(mount.relative(request).path, model: m.model),
            case .operationImport = parsed.target
        {
            remote(request, responder)
            return
        }
        if let refusal = SAPClient.refusal(request, settings, mirrorSettings, version: version) {
            OriginResponder(inner: responder, origin: "local").respond(refusal)
            return
        }
        OriginResponder(inner: responder, origin: "local").respond(reader.response(to: request))
    }

    // MARK: writes

    private func routeWrite(_ request: HTTPRequest, _ responder: any Responder) {
        if let given = request.headers["X-CSRF-Token"], given != csrf.gatewayToken {
            var r = ODataServiceError.response(
                403, code: "CSRFTokenRequired",
                "CSRF token validation failed; fetch one with X-CSRF-Token: Fetch",
                version: reader.version)
            r.headers.set("X-CSRF-Token", "Required")
            OriginResponder(inner: responder, origin: "local").respond(r)
            return
        }
        var write = request
        write.headers.remove("X-CSRF-Token")
        let request = write
        if Self.isBatch(request), mirror.model != nil {
            pool.submit { [self] in
                // A batch with changes follows the rule of single writes (ordering behind the queue).
                if !isReachable || ((localFirst || queue.count > 0) && ODataBatchCodec.hasChanges(request)) {
                    answerBatch(request, responder)
                } else {
                    forwardWrite(request, responder, retried: false)
                }
            }
        } else if !Self.isBatch(request), mirror.model != nil, localFirst || !isReachable || queue.count > 0 {
            pool.submit { [self] in answerWrite(request, responder) }
        } else {
            pool.submit { [self] in forwardWrite(request, responder, retried: false) }
        }
    }

    static func isBatch(_ request: HTTPRequest) -> Bool {
        request.method == "POST" && (request.path.hasSuffix("/$batch") || request.path.hasSuffix("/%24batch"))
    }

    /// Blocking (on the pool): a `$batch` answered locally (reads from the mirror, changes queued).
    private func answerBatch(_ request: HTTPRequest, _ responder: any Responder) {
        if let refusal = SAPClient.refusal(request, settings, mirrorSettings, version: version) {
            OriginResponder(inner: responder, origin: "local").respond(refusal)
            return
        }
        OriginResponder(inner: responder, origin: "local").respond(writer.batchResponse(to: request))
    }

    /// Blocking (on the pool): a single write applied and queued offline.
    private func answerWrite(_ request: HTTPRequest, _ responder: any Responder) {
        if let refusal = SAPClient.refusal(request, settings, mirrorSettings, version: version) {
            OriginResponder(inner: responder, origin: "local").respond(refusal)
            return
        }
        OriginResponder(inner: responder, origin: "local").respond(writer.response(to: request))
        // Queued behind other requests (e.g. held ones) while the upstream answers: a run now, if the
        // service's policy allows.
        if !localFirst, isReachable, queue.count > 0 { context.runs.request() }
    }

    /// Blocking (on the pool): a request's credentials, offered to the writer's requests that wait for
    /// credentials the upstream accepts (``ODataCredentialHolds``); new ones are tried by an upload now.
    func offerNewerCredentials(_ credentials: WriterCredentials) {
        let writer = ODataWriterIdentity.of(credentials)
        guard queue.credentials.isHeld(writer) else { return }
        let offered = (try? queue.credentials.offerCredentials(credentials, writer: writer)) ?? false
        if isReachable, offered || !queue.credentials.retryableHolds().isEmpty {
            uploader.upload(completion: nil)
        }
    }

    /// Blocking (on the pool): forwards a write with the upstream's CSRF token within one budget (the
    /// service's `timeout`, from the first attempt: the token fetch, the write and a write re-sent after
    /// a `403 Required` share it); a `$batch` that cannot reach the upstream is answered locally (its
    /// changesets applied and queued) when it only reads or was never sent.
    ///
    /// Promises: no write is sent once the budget is spent or when the token fetch got no answer (the
    /// client gets `504`/`502`, or the write is queued offline when nothing listened); so a client that
    /// got `504` never has its write committed later by a slow upstream.
    func forwardWrite(
        _ request: HTTPRequest, _ responder: any Responder, retried: Bool, deadline: UInt64? = nil
    ) {
        let deadline = deadline ?? forwarder.settings.timeout.fromNow
        let mirrored = mirror.model != nil
        let batch = Self.isBatch(request)
        /// Answers for a write that was never sent: queued offline when nothing listens, else an error.
        let unsent: @Sendable (UpstreamError?) -> Void = { [self] error in
            if let error { reachability.reportFailure(error.description) }
            if mirrored, let error, error.kind == .refused || error.kind == .dns {
                if batch { answerBatch(request, responder) } else { answerWrite(request, responder) }
                return
            }
            let timedOut = error == nil || error?.kind == .timeout
            OriginResponder(inner: responder, origin: "remote").respond(
                ODataServiceError.response(
                    timedOut ? 504 : 502, code: timedOut ? "UpstreamTimeout" : "UpstreamUnavailable",
                    "the write was not sent: "
                        + (error.map { "the upstream's CSRF token could not be fetched: \($0)" }
                            ?? "the request's time budget is spent"),
                    version: forwarder.settings.version ?? .v4))
        }
        guard let budget = Self.remaining(until: deadline) else { return unsent(nil) }
        let prepared: HTTPRequest
        do {
            prepared = try csrf.prepare(
                request, settings: forwarder.settings, client: client, within: budget)
        } catch {
            return unsent(error)
        }
        guard let left = Self.remaining(until: deadline) else { return unsent(nil) }
        var retry: (@Sendable () -> Void)?
        if !retried {
            retry = { [self] in
                pool.submit { [self] in forwardWrite(request, responder, retried: true, deadline: deadline) }
            }
        }
        var relayed: any Responder = OriginResponder(inner: responder, origin: "remote")
        if mirrored, !batch {
            relayed = ReflectingResponder(inner: relayed) { [self] location in
                pool.submit { [self] in reflectForwardedWrite(request, location: location) }
            }
        }
        let watcher = CSRFRetryResponder(
            inner: relayed, retry: retry, forget: { [csrf] in csrf.forget(request) })
        var fallback: (@Sendable (UpstreamError) -> Bool)?
        if mirrored, batch {
            fallback = { [self] error in
                // A batch with changes that may have reached the upstream is not applied a second time.
                if error.kind != .refused, error.kind != .dns, ODataBatchCodec.hasChanges(request) {
                    return false
                }
                pool.submit { [self] in answerBatch(request, responder) }
                return true
            }
        } else if mirrored {
            // Never sent (nothing listens): safe to queue; other failures may have reached the upstream.
            fallback = { [self] error in
                guard error.kind == .refused || error.kind == .dns else { return false }
                pool.submit { [self] in answerWrite(request, responder) }
                return true
            }
        }
        forwarder.forward(prepared, watcher, fallback: fallback, timeout: left)
    }

    /// What is left of a budget ending at the monotonic instant `deadline`; nil when less than a
    /// millisecond is (libcurl's timeouts are whole milliseconds, and 0 would mean none).
    static func remaining(until deadline: UInt64) -> Duration? {
        let now = monotonicNanos()
        guard deadline > now, deadline - now >= 1_000_000 else { return nil }
        return .nanoseconds(Int64(deadline - now))
    }
}
