import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import Synchronization
import Upstream

/// The outcome of one upload run.
public struct ODataUploadStats: Sendable {
    /// Requests the upstream accepted (2xx).
    public var uploaded = 0
    /// Requests moved to the ErrorArchive with the upstream's error.
    public var failed = 0
    /// Requests held in the ErrorArchive because their outcome is unknown (`MG_IN_DOUBT`).
    public var inDoubt = 0
    /// Requests still queued after the run.
    public var remaining = 0
    /// Wall time.
    public var durationMs = 0
    /// True when the run stopped because the upstream could not be reached (or answered 502/503/504/429).
    public var interrupted = false
    /// True when the run stopped because its replication run had to (budget, pause, shutdown).
    public var stopped = false
    /// Requests that wait for credentials the upstream accepts (refused with 401/403 in this run, or
    /// depending on such a request).
    public var waitingForCredentials = 0
    /// Queued requests when the run started, before the queue was prepared (optimisation, undo, transactions).
    public var requestsBefore = 0
    /// Queued requests after the preparation (equal to ``requestsBefore`` when no option rewrote the queue).
    public var requestsAfter = 0
    /// What the preparation did, when an option that rewrites the queue is on.
    public var preparation: ODataQueuePreparation?
    /// `{uploaded, failed, inDoubt, waitingForCredentials, remaining, requestsBefore, requestsAfter,
    /// durationMs}`.
    public var json: JSON {
        [
            "uploaded": .int(Int64(uploaded)), "failed": .int(Int64(failed)), "inDoubt": .int(Int64(inDoubt)),
            "waitingForCredentials": .int(Int64(waitingForCredentials)), "remaining": .int(Int64(remaining)),
            "requestsBefore": .int(Int64(requestsBefore)), "requestsAfter": .int(Int64(requestsAfter)),
            "durationMs": .int(Int64(durationMs)),
        ]
    }
}

struct UploadState: ExclusiveRunState {
    var running = false
    var lastUploadAt: String?
    var repeatabilitySeen = false
    /// The outcome of the last run that had something to upload.
    var last: ODataUploadStats?
}

/// The uploader: sends the request queue to the upstream, FIFO, one unit at a time — a single request,
/// or a changeset as one multipart `$batch` changeset (V2: split where a `$N` needs a server key first) —
/// through one send-and-classify path, and records each outcome durably: uploaded (removed, server keys
/// replacing local ones), archived in the ErrorArchive with the upstream's error, held in doubt
/// (`MG_IN_DOUBT`), held behind an archived entry, or left queued when the upstream is unavailable.
///
/// Promises: a unit is marked sent (fsynced) before it goes out; a failure after request bytes were
/// written (``UpstreamError/outcomeUnknown``) or a unit found marked sent after a restart is in doubt
/// and never re-sent — unless the unit is idempotent (only PUT/DELETE) or the upstream honours
/// repeatability (configured, or learned from a `Repeatability-Result`); a `500` is retried twice; each
/// send uses a fresh connection (libcurl re-sends silently on a reused dead one). It may touch the
/// queue, the mirror (through ``MirrorWriter``), the CSRF sessions and the upstream; after a complete
/// run it starts a download.
final class ODataUploader: ODataServicePart {
    let context: ODataServiceContext
    let downloader: ODataDownloader
    let stopSignal: StopSignal
    let state = Mutex(UploadState())
    private let listeners = Mutex<[@Sendable (ODataUploadStats?) -> Void]>([])

    init(context: ODataServiceContext, downloader: ODataDownloader, stopSignal: StopSignal) {
        self.context = context
        self.downloader = downloader
        self.stopSignal = stopSignal
    }

    /// Registers a listener for uploads: called with nil when a run starts, then with its outcome.
    func onUpload(_ body: @escaping @Sendable (ODataUploadStats?) -> Void) {
        listeners.withLock { $0.append(body) }
    }

    /// Runs `body` while no upload can run (a revert of the ErrorArchive); nil when an upload runs.
    func exclusively<T>(_ body: () throws -> T) rethrows -> T? {
        guard state.withLock({ $0.claim() }) else { return nil }
        defer { state.withLock { $0.running = false } }
        return try body()
    }

    /// Starts an upload of the queue on a background thread (then a download unless the run was
    /// interrupted or stopped: what remains is held or waits for credentials, and keeps its local version);
    /// false when one is already running. (Scheduled uploads are the replication runs' push,
    /// ``push(shouldStop:)``; a run interrupted by the upstream is retried by the scheduler.)
    @discardableResult
    func upload(completion: (@Sendable (ODataUploadStats) -> Void)?) -> Bool {
        guard state.withLock({ $0.claim() }) else { return false }
        startThread(named: "mg-odata-upload") { [self] in
            let stats = claimedRun(shouldStop: { stopSignal.isStopped })
            // A complete run (what remains is held or waits for credentials) is followed by a download: queued
            // local changes keep their local version through it.
            if !stats.interrupted, !stats.stopped { _ = downloader.download(completion: nil) }
            completion?(stats)
        }
        return true
    }

    /// The push of a replication run (blocking): uploads until the queue is empty, the upstream is
    /// unavailable, or `shouldStop` says so between two units. Nil when an upload is already running.
    func push(shouldStop: @escaping () -> Bool) -> ODataUploadStats? {
        guard state.withLock({ $0.claim() }) else { return nil }
        return claimedRun(shouldStop: shouldStop)
    }

    /// One upload run whose claim is held; releases it.
    private func claimedRun(shouldStop: () -> Bool) -> ODataUploadStats {
        let begin = Date()
        // Events only for runs with something to upload.
        let listeners = queue.count > 0 ? listeners.withLock { $0 } : []
        for l in listeners { l(nil) }
        var stats = runUpload(shouldStop: shouldStop)
        stats.durationMs = Int(Date().timeIntervalSince(begin) * 1000)
        stats.remaining = queue.count
        state.withLock { s in
            s.running = false
            if stats.uploaded > 0 || stats.failed > 0 { s.lastUploadAt = iso8601Now() }
            if stats.requestsBefore > 0 { s.last = stats }
        }
        if stats.uploaded + stats.failed + stats.inDoubt > 0 || stats.remaining > 0 {
            logger.info(
                "odata upload",
                metadata: [
                    "service": "\(settings.name)", "uploaded": "\(stats.uploaded)",
                    "failed": "\(stats.failed)", "inDoubt": "\(stats.inDoubt)",
                    "remaining": "\(stats.remaining)",
                ])
        }
        for l in listeners { l(stats) }
        return stats
    }

    /// Blocking: prepares the queue (``ODataQueuePreparer``), then sends queued requests FIFO until the queue
    /// is empty, the upstream is unavailable, or `shouldStop` says so before a unit; requests waiting for
    /// credentials are passed over (a writer's newer credentials, when offered, are tried on its oldest
    /// waiting request in its turn).
    func runUpload(shouldStop: () -> Bool = { false }) -> ODataUploadStats {
        var stats = ODataUploadStats()
        stats.requestsBefore = queue.count
        stats.requestsAfter = stats.requestsBefore
        do {
            if let prepared = try ODataQueuePreparer(context: context).prepare() {
                stats.preparation = prepared
                stats.requestsBefore = prepared.before
                stats.requestsAfter = prepared.after
            }
        } catch {
            logger.error(
                "odata upload: cannot prepare the queue",
                metadata: ["service": "\(settings.name)", "error": "\(error)"])
            stats.interrupted = true
            return stats
        }
        while true {
            if shouldStop() {
                stats.stopped = true
                return stats
            }
            let unit: UploadUnit
            do {
                guard let (request, credentials) = try nextToSend() else { break }
                if credentials == nil, let waiting = try waitIfBehindHold(request) {
                    stats.waitingForCredentials += waiting
                    continue
                }
                if let changeset = request.changeset {
                    if try holdChangesetIfBlocked(changeset) { continue }
                    unit = changesetUnit(request, changeset, credentials: credentials)
                } else {
                    if try holdIfBlocked(request) { continue }
                    unit = singleUnit(request, credentials: credentials)
                }
            } catch {
                stats.interrupted = true  // the store failed: never send what may be blocked
                return stats
            }
            let n = unit.rows.count
            switch send(unit) {
            case .done: stats.uploaded += n
            case .failed: stats.failed += n
            case .inDoubt: stats.inDoubt += n
            case .waiting:
                stats.waitingForCredentials += n
                continue
            case .stop:
                stats.interrupted = true
                return stats
            }
            // Requests left the queue: pages a stopped download staged before may predate them (a download
            // running now sees that itself, and reads again).
            context.checkpoints.clear()
        }
        return stats
    }

    enum SendOutcome { case done, failed, inDoubt, waiting, stop }

    /// What the upstream's answer to a unit says.
    enum Verdict {
        /// Every request took effect: each with the body and location its answer carried.
        case accepted([(request: QueuedRequest, body: [UInt8], location: String?)])
        /// The unit failed with this status and error body.
        case rejected(status: Int, body: [UInt8])
        /// The upstream accepted the call but its answer does not say what became of the unit.
        case unclear([UInt8])
    }

    /// One upload call: the queued requests it carries and how it goes out.
    struct UploadUnit {
        /// The requests, in queue order (one, or a changeset's).
        var rows: [QueuedRequest]
        /// `request` or `changeset`, for messages.
        var noun: String
        var method: String
        /// Relative to the service root.
        var url: String
        /// The unit's own headers (the credentials, CSRF token and custom headers are added per attempt).
        var headers: [(name: String, value: String)]
        var body: [UInt8]
        /// The request whose writer's credentials the unit carries.
        var writer: QueuedRequest
        /// Newer credentials of the writer to try instead of its own (its requests wait for credentials).
        var credentials: WriterCredentials? = nil
        /// Reads the upstream's answer.
        var verdict: (UpstreamResponse) -> Verdict
        /// Only PUT/DELETE: sending it twice does no harm.
        var idempotent: Bool { rows.allSatisfy { $0.method == "PUT" || $0.method == "DELETE" } }
    }

    /// One queued request outside a changeset (sent with `credentials` instead of its own when given).
    func singleUnit(_ request: QueuedRequest, credentials: WriterCredentials? = nil) -> UploadUnit {
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let ct = request.contentType { headers.append(("Content-Type", ct)) }
        headers += ODataVersionHeaders.upload(version, batch: false)
        if let ifMatch = request.ifMatch { headers.append(("If-Match", ifMatch)) }
        if mirrorSettings.enableRepeatableRequests {
            if mirrorSettings.repeatabilityHeaders != .sap {
                headers.append(("Repeatability-Request-ID", request.requestID))
                headers.append(("Repeatability-First-Sent", request.firstSent))
            }
            if mirrorSettings.repeatabilityHeaders != .oasis {
                headers.append(("RequestID", request.requestID))
                headers.append(("RepeatabilityCreation", request.firstSent))
            }
        }
        let map = ODataURLMap(gatewayRoot: request.gatewayRoot, upstreamRoot: settings.upstream)
        // A DELETE sent before whose answer was lost: the entity being gone is its success.
        let resentDelete = request.sentAt != nil && request.method == "DELETE"
        return UploadUnit(
            rows: [request], noun: "request", method: request.method, url: request.url, headers: headers,
            body: request.body.isEmpty ? [] : map.toUpstream.apply(request.body), writer: request,
            credentials: credentials
        ) { response in
            guard (200..<300).contains(response.status) || (resentDelete && response.status == 404) else {
                return .rejected(status: response.status, body: response.body)
            }
            let location = response.header("Location") ?? response.header("OData-EntityId")
            return .accepted([(request, response.body, location)])
        }
    }

    /// The queued requests of changeset `id` (starting with `first`) as one multipart `$batch` changeset.
    /// Repeatability: the first request's ID and First-Sent, OASIS headers on each request of the
    /// changeset (a `$batch` carrying them must be rejected), SAP headers on the `$batch` request.
    func changesetUnit(_ first: QueuedRequest, _ id: String, credentials: WriterCredentials? = nil)
        -> UploadUnit
    {
        var rows = (try? queue.changeset(id)).flatMap { $0.isEmpty ? nil : $0 } ?? [first]
        if version == .v2 {
            // V2 (SAP Gateway) resolves no `$N` references: a request that needs the key of an entity created
            // earlier in the changeset goes in a later changeset, sent once that key is known (the remainder
            // keeps its changeset id and is picked up next, rewritten with the server key).
            rows = Array(rows.prefix(Self.v2ChangesetCut(rows)))
        }
        let map = ODataURLMap(gatewayRoot: first.gatewayRoot, upstreamRoot: settings.upstream)
        let boundary = "batch_" + UUID().uuidString.lowercased()
        let changesetBoundary = "changeset_" + UUID().uuidString.lowercased()
        var repeatability: [(String, String)] = []
        if mirrorSettings.enableRepeatableRequests, mirrorSettings.repeatabilityHeaders != .sap {
            repeatability = [
                ("Repeatability-Request-ID", first.requestID), ("Repeatability-First-Sent", first.firstSent),
            ]
        }
        var parts = Self.uploadParts(rows, map: map, upstreamRoot: settings.upstream)
        for i in parts.indices { parts[i].headers += repeatability }
        var headers: [(name: String, value: String)] = [
            ("Accept", "multipart/mixed"), ("Content-Type", "multipart/mixed; boundary=\(boundary)"),
        ]
        headers += ODataVersionHeaders.upload(version, batch: true)
        if mirrorSettings.enableRepeatableRequests, mirrorSettings.repeatabilityHeaders != .oasis {
            headers.append(("RequestID", first.requestID))
            headers.append(("RepeatabilityCreation", first.firstSent))
        }
        let sent = rows
        return UploadUnit(
            rows: rows, noun: "changeset", method: "POST", url: "$batch", headers: headers,
            body: ODataBatchCodec.changesetBody(
                parts, boundary: boundary, changesetBoundary: changesetBoundary),
            writer: first, credentials: credentials
        ) { response in
            guard (200..<300).contains(response.status) else {
                return .rejected(status: response.status, body: response.body)
            }
            let items = ODataBatchCodec.responses(
                response.body, contentType: response.header("Content-Type") ?? "")
            if let parts = items?.first, parts.count == sent.count, parts.allSatisfy({ $0.status < 300 }) {
                // Parts are matched by the Content-ID the upstream echoes, else by position.
                var byID: [String: ODataBatchCodec.PartResponse] = [:]
                for p in parts { if let id = p.headers["content-id"] { byID[id] = p } }
                return .accepted(
                    sent.enumerated().map { i, row in
                        let part = row.contentID.flatMap { byID[$0] } ?? parts[i]
                        return (row, part.body, part.headers["location"] ?? part.headers["odata-entityid"])
                    })
            }
            if let failure = items?.first?.first(where: { $0.status >= 300 }) {
                return .rejected(status: failure.status, body: failure.body)
            }
            return .unclear(response.body)
        }
    }

    /// Sends one unit (a `500` retried twice, a CSRF token fetched again once) and records its outcome
    /// durably.
    func send(_ unit: UploadUnit) -> SendOutcome {
        let rows = unit.rows
        let mayResend = mayResendInDoubt()
        if rows.contains(where: { $0.sentAt != nil }), !unit.idempotent, !mayResend {
            // Sent before (the gateway stopped, or the connection broke) with an unknown outcome: re-sending
            // could apply it twice.
            return holdInDoubt(
                unit,
                "the \(unit.noun) was sent but its outcome is unknown; it was not re-sent to avoid applying it twice"
            )
        }
        var attempts = rows.map(\.attempts).max() ?? 0
        var csrfRetried = false
        while true {
            do { try markSent(rows, true) } catch { return .stop }
            let carrier = uploadCarrier(
                method: unit.method, url: unit.url, writer: unit.writer, credentials: unit.credentials)
            let upstream = UpstreamRequest(
                method: unit.method, url: settings.upstreamURL(for: settings.mount + unit.url),
                headers: unit.headers + uploadHeaders(carrier), body: unit.body,
                connectTimeout: settings.connectTimeout, timeout: settings.timeout)
            let response: UpstreamResponse
            do {
                // A fresh connection: libcurl silently re-sends a request once when a reused connection
                // turns out dead with nothing received, which would apply a modification twice.
                response = try UpstreamClient(maxIdleHandles: 0).perform(upstream)
            } catch {
                reachability.reportFailure(error.description)
                let unknown = error.outcomeUnknown
                if !unknown { try? markSent(rows, false) }
                if unknown, !unit.idempotent, !mayResend {
                    return holdInDoubt(
                        unit,
                        "the connection was lost after the \(unit.noun) was sent; its outcome is unknown")
                }
                return .stop
            }
            reachability.reportSuccess()
            noteRepeatabilityResult(response)
            if response.status == 403, !csrfRetried,
                response.header("x-csrf-token")?.lowercased() == "required"
            {
                csrfRetried = true
                csrf.forget(carrier)
                continue
            }
            switch credentialVerdict(unit, response) {
            case .wait: return .waiting
            case .stop: return .stop
            case .proceed: break
            }
            let status: Int
            let errorBody: [UInt8]
            switch unit.verdict(response) {
            case .accepted(let answers):
                finish(answers, what: "an uploaded \(unit.noun)")
                return .done
            case .unclear(let body):
                return holdInDoubt(
                    unit, "the upstream's $batch response does not describe the changeset",
                    body: String(decoding: body.prefix(4096), as: UTF8.self))
            case .rejected(let s, let b):
                status = s
                errorBody = b
            }
            if [502, 503, 504, 429].contains(status) {
                try? markSent(rows, false)
                return .stop
            }
            if status == 500, attempts < 2 {
                for r in rows { try? queue.countAttempt(r) }
                attempts += 1
                // The upstream answered (a definite failure, not in doubt): at shutdown, stop here.
                if !stopSignal.sleep(for: .milliseconds(200 * attempts)) {
                    try? markSent(rows, false)
                    return .stop
                }
                continue
            }
            let (code, message) = Self.errorDetails(errorBody)
            archive(
                rows, status: status, code: code, message: message,
                body: String(decoding: errorBody.prefix(4096), as: UTF8.self), what: unit.noun)
            return .failed
        }
    }

    /// Moves the unit's requests to the ErrorArchive as held in doubt (`MG_IN_DOUBT`): never re-sent.
    private func holdInDoubt(_ unit: UploadUnit, _ message: String, body: String? = nil) -> SendOutcome {
        archive(unit.rows, status: 0, code: "MG_IN_DOUBT", message: message, body: body, what: unit.noun)
        return .inDoubt
    }

    private func markSent(_ rows: [QueuedRequest], _ sent: Bool) throws {
        for r in rows { try queue.markSent(r, sent) }
    }

    /// Whether a request sent before with an unknown outcome may be sent again: the upstream honours
    /// repeatability (configured so, or with `auto` learned from its answers, see ``repeatabilityLearned()``).
    func mayResendInDoubt() -> Bool {
        switch mirrorSettings.upstreamSupportsRepeatability {
        case .yes: return mirrorSettings.enableRepeatableRequests
        case .no: return false
        case .auto: return mirrorSettings.enableRepeatableRequests && repeatabilityLearned()
        }
    }

    /// `auto`: an answer with a repeatability result other than SAP's `unsupported` teaches (durably) that
    /// the upstream supports repeatability.
    func noteRepeatabilityResult(_ response: UpstreamResponse) {
        let result = response.header("Repeatability-Result") ?? response.header("RepeatabilityResult")
        if Self.showsRepeatabilitySupport(result) { learnRepeatability() }
    }

    /// Whether a repeatability result header's value shows support (SAP's `unsupported` does not).
    static func showsRepeatabilitySupport(_ result: String?) -> Bool {
        guard let result else { return false }
        return result.lowercased() != "unsupported"
    }

    /// `auto`: whether this upstream answered with a repeatability result (other than SAP's `unsupported`),
    /// in this run or, for the same upstream URL, before a restart (`_mg_meta`): the request found in
    /// doubt after a crash is the one that needs it.
    func repeatabilityLearned() -> Bool {
        if state.withLock({ $0.repeatabilitySeen }) { return true }
        guard mirror.meta("repeatabilitySeen") == settings.upstream else { return false }
        state.withLock { $0.repeatabilitySeen = true }
        return true
    }

    func learnRepeatability() {
        let first = state.withLock { s -> Bool in
            defer { s.repeatabilitySeen = true }
            return !s.repeatabilitySeen
        }
        guard first else { return }
        try? mirror.setMeta("repeatabilitySeen", settings.upstream)
    }

    /// `(code, message)` of a V2/V4 OData error body.
    static func errorDetails(_ body: [UInt8]) -> (String?, String?) {
        guard let json = try? RawJSON.parse(body), let e = json["error"] else { return (nil, nil) }
        let message = e["message"]?.string ?? e["message"]?["value"]?.string
        return (e["code"]?.string, message)
    }

    /// What an upload of `writer`'s request to `url` (relative to the mount) is sent as, for the CSRF
    /// handshake: with `uploadCredentials: client`, the writer's `Authorization` and `Cookie` (or the newer
    /// `credentials` being tried for it).
    func uploadCarrier(
        method: String, url: String, writer: QueuedRequest, credentials: WriterCredentials? = nil
    ) -> HTTPRequest {
        var carrier = HTTPRequest(method: method, target: settings.mount + url)
        if mirrorSettings.uploadCredentials == .client {
            let given = credentials ?? writerCredentials(writer)
            if let auth = given.authorization { carrier.headers.set("Authorization", auth) }
            if let cookie = given.cookie { carrier.headers.set("Cookie", cookie) }
        }
        return carrier
    }

    /// The headers an upload carries besides the request's own: `carrier`'s credentials with the upstream's
    /// CSRF token and session cookies (the gateway's own handshake), `customHeaders` and `customCookies`.
    func uploadHeaders(_ carrier: HTTPRequest) -> [(name: String, value: String)] {
        let s = settings
        let prepared = csrf.prepare(carrier, settings: s, client: client)
        var headers: [(name: String, value: String)] = prepared.headers.map {
            (name: $0.name, value: $0.value)
        }
        headers += s.customHeaders.map { (name: $0.0, value: $0.1) }
        if let cookie = s.customCookie, prepared.headers["Cookie"] == nil {
            headers.append(("Cookie", cookie))
        }
        return headers
    }
}
