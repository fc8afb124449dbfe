import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import Proxying
import Storage
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
    /// `{uploaded, failed, inDoubt, remaining, durationMs}`.
    public var json: JSON {
        [
            "uploaded": .int(Int64(uploaded)), "failed": .int(Int64(failed)), "inDoubt": .int(Int64(inDoubt)),
            "remaining": .int(Int64(remaining)), "durationMs": .int(Int64(durationMs)),
        ]
    }
}

struct UploadState {
    var running = false
    var lastUploadAt: String?
    var backoff: Double = 0
    var retryScheduled = false
    var repeatabilitySeen = false
}

extension ODataService {
    /// Starts an upload of the queue on a background thread (then a download when anything was uploaded
    /// or the queue is empty); false when one is already running.
    @discardableResult
    public func upload(completion: (@Sendable (ODataUploadStats) -> Void)?) -> Bool {
        let started = uploadState.withLock { s -> Bool in
            if s.running { return false }
            s.running = true
            return true
        }
        guard started else { return false }
        let thread = Thread { [self] in
            let begin = Date()
            // Events only for runs with something to upload.
            let listeners = queue.count > 0 ? uploadListeners.withLock { $0 } : []
            for l in listeners { l(nil) }
            var stats = runUpload()
            stats.durationMs = Int(Date().timeIntervalSince(begin) * 1000)
            stats.remaining = queue.count
            let retryIn = uploadState.withLock { s -> Double? in
                s.running = false
                if stats.uploaded > 0 || stats.failed > 0 { s.lastUploadAt = iso8601Now() }
                if stats.interrupted, stats.remaining > 0 {
                    s.backoff = min(60, max(1, s.backoff * 2))
                    if s.retryScheduled { return nil }
                    s.retryScheduled = true
                    return s.backoff
                }
                s.backoff = 0
                return nil
            }
            if stats.uploaded + stats.failed + stats.inDoubt > 0 || stats.remaining > 0 {
                logger.info(
                    "odata upload",
                    metadata: [
                        "service": "\(forwarder.settings.name)", "uploaded": "\(stats.uploaded)",
                        "failed": "\(stats.failed)", "inDoubt": "\(stats.inDoubt)",
                        "remaining": "\(stats.remaining)",
                    ])
            }
            if let retryIn {
                let delay = retryIn * Double.random(in: 0.8...1.2)
                Scheduler.shared.schedule(after: .seconds(delay)) { [self] in
                    uploadState.withLock { $0.retryScheduled = false }
                    if queue.count > 0, !(state.withLock { $0.stopped }) { upload(completion: nil) }
                }
            }
            for l in listeners { l(stats) }
            if !stats.interrupted, stats.remaining == 0 { _ = download(completion: nil) }
            completion?(stats)
        }
        thread.name = "mg-odata-upload"
        thread.start()
        return true
    }

    /// Blocking: sends queued requests FIFO until the queue is empty or the upstream is unavailable.
    func runUpload() -> ODataUploadStats {
        var stats = ODataUploadStats()
        while let request = try? queue.first() {
            if let changeset = request.changeset {
                do {
                    if try holdChangesetIfBlocked(changeset) { continue }
                } catch {
                    stats.interrupted = true  // the store failed: never send what may be blocked
                    return stats
                }
                let (outcome, n) = sendChangeset(request, changeset)
                switch outcome {
                case .done: stats.uploaded += n
                case .failed: stats.failed += n
                case .inDoubt: stats.inDoubt += n
                case .stop:
                    stats.interrupted = true
                    return stats
                }
                continue
            }
            do {
                if try holdIfBlocked(request) { continue }
            } catch {
                stats.interrupted = true
                return stats
            }
            switch send(request) {
            case .done: stats.uploaded += 1
            case .failed: stats.failed += 1
            case .inDoubt: stats.inDoubt += 1
            case .stop:
                stats.interrupted = true
                return stats
            }
        }
        return stats
    }

    enum SendOutcome { case done, failed, inDoubt, stop }

    /// Sends one queued request (500 retried up to three times) and records its outcome durably.
    func send(_ request: QueuedRequest) -> SendOutcome {
        let s = forwarder.settings
        let map = ODataURLMap(gatewayRoot: request.gatewayRoot, upstreamRoot: s.upstream)
        var attempt = request
        var csrfRetried = false
        let mayResend = mayResendInDoubt()
        let idempotent = request.method == "PUT" || request.method == "DELETE"
        if request.sentAt != nil, !idempotent, !mayResend {
            // Sent before (the gateway stopped, or the connection broke) with an unknown outcome: re-sending
            // could apply it twice.
            archive(
                request, status: 0, code: "MG_IN_DOUBT",
                message:
                    "the request was sent but its outcome is unknown; it was not re-sent to avoid applying it twice",
                body: nil)
            return .inDoubt
        }
        let resent = request.sentAt != nil
        while true {
            do { try queue.markSent(request, true) } catch { return .stop }
            var headers: [(name: String, value: String)] = [("Accept", "application/json")]
            if let ct = request.contentType { headers.append(("Content-Type", ct)) }
            if version == .v4 {
                headers.append(("OData-Version", "4.0"))
                headers.append(("OData-MaxVersion", "4.0"))
            }
            if let ifMatch = request.ifMatch { headers.append(("If-Match", ifMatch)) }
            if settings.enableRepeatableRequests {
                if settings.repeatabilityHeaders != .sap {
                    headers.append(("Repeatability-Request-ID", request.requestID))
                    headers.append(("Repeatability-First-Sent", request.firstSent))
                }
                if settings.repeatabilityHeaders != .oasis {
                    headers.append(("RequestID", request.requestID))
                    headers.append(("RepeatabilityCreation", request.firstSent))
                }
            }
            let carrier = uploadCarrier(method: request.method, url: request.url, writer: request)
            headers += uploadHeaders(carrier)
            let body = request.body.isEmpty ? [] : map.toUpstream.apply(request.body)
            let upstream = UpstreamRequest(
                method: request.method, url: forwarder.upstreamURL(for: s.mount + request.url),
                headers: headers,
                body: body, connectTimeout: s.connectTimeout, timeout: s.timeout)
            let response: UpstreamResponse
            do {
                // A fresh connection: libcurl silently re-sends a request once when a reused connection
                // turns out dead with nothing received, which would apply a modification twice.
                response = try UpstreamClient(maxIdleHandles: 0).perform(upstream)
            } catch {
                forwarder.reachability.reportFailure(error.description)
                let unknown = error.outcomeUnknown
                if !unknown { try? queue.markSent(request, false) }
                if unknown, !idempotent, !mayResend {
                    archive(
                        request, status: 0, code: "MG_IN_DOUBT",
                        message: "the connection was lost after the request was sent; its outcome is unknown",
                        body: nil)
                    return .inDoubt
                }
                return .stop
            }
            forwarder.reachability.reportSuccess()
            noteRepeatabilityResult(response)
            let status = response.status
            if status == 403, !csrfRetried, response.header("x-csrf-token")?.lowercased() == "required" {
                csrfRetried = true
                csrf.forget(carrier)
                continue
            }
            if (200..<300).contains(status) || (resent && request.method == "DELETE" && status == 404) {
                finish(
                    request, body: response.body,
                    location: response.header("Location") ?? response.header("OData-EntityId"))
                return .done
            }
            if [502, 503, 504, 429].contains(status) {
                try? queue.markSent(request, false)
                return .stop
            }
            if status == 500, attempt.attempts < 2 {
                try? queue.countAttempt(attempt)
                attempt.attempts += 1
                // The upstream answered (a definite failure, not in doubt): at shutdown, stop here.
                if !stopSignal.sleep(for: .milliseconds(200 * attempt.attempts)) {
                    try? queue.markSent(request, false)
                    return .stop
                }
                continue
            }
            let (code, message) = Self.errorDetails(response.body)
            archive(
                request, status: status, code: code, message: message,
                body: String(decoding: response.body.prefix(4096), as: UTF8.self))
            return .failed
        }
    }

    /// Whether a request sent before with an unknown outcome may be sent again: the upstream honours
    /// repeatability (configured so, or with `auto` learned from its answers, see ``repeatabilityLearned()``).
    func mayResendInDoubt() -> Bool {
        switch settings.upstreamSupportsRepeatability {
        case .yes: return settings.enableRepeatableRequests
        case .no: return false
        case .auto: return settings.enableRepeatableRequests && repeatabilityLearned()
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
        if uploadState.withLock({ $0.repeatabilitySeen }) { return true }
        let stored =
            (try? mirror.pool.read { db in
                try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key='repeatabilitySeen'"#)
            })?.string
        guard stored == forwarder.settings.upstream else { return false }
        uploadState.withLock { $0.repeatabilitySeen = true }
        return true
    }

    func learnRepeatability() {
        let first = uploadState.withLock { s -> Bool in
            defer { s.repeatabilitySeen = true }
            return !s.repeatabilitySeen
        }
        guard first else { return }
        try? mirror.pool.write { db in
            try db.run(
                #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('repeatabilitySeen', ?)"#,
                [.text(forwarder.settings.upstream)])
        }
    }

    /// `(code, message)` of a V2/V4 OData error body.
    static func errorDetails(_ body: [UInt8]) -> (String?, String?) {
        guard let json = try? RawJSON.parse(body), let e = json["error"] else { return (nil, nil) }
        let message = e["message"]?.string ?? e["message"]?["value"]?.string
        return (e["code"]?.string, message)
    }

    /// What an upload of `writer`'s request to `url` (relative to the mount) is sent as, for the CSRF
    /// handshake: with `uploadCredentials: client`, the writer's `Authorization` and `Cookie`.
    func uploadCarrier(method: String, url: String, writer: QueuedRequest) -> HTTPRequest {
        var carrier = HTTPRequest(method: method, target: forwarder.settings.mount + url)
        if settings.uploadCredentials == .client {
            if let auth = writer.authorization { carrier.headers.set("Authorization", auth) }
            if let cookie = queue.clientCookie(writer.requestID) { carrier.headers.set("Cookie", cookie) }
        }
        return carrier
    }

    /// The headers an upload carries besides the request's own: `carrier`'s credentials with the upstream's
    /// CSRF token and session cookies (the gateway's own handshake), `customHeaders` and `customCookies`.
    func uploadHeaders(_ carrier: HTTPRequest) -> [(name: String, value: String)] {
        let s = forwarder.settings
        let prepared = csrf.prepare(carrier, settings: s, client: client)
        var headers: [(name: String, value: String)] = prepared.headers.map {
            (name: $0.name, value: $0.value)
        }
        headers += s.customHeaders.map { (name: $0.0, value: $0.1) }
        if !s.customCookies.isEmpty, prepared.headers["Cookie"] == nil {
            headers.append(("Cookie", s.customCookies.map { "\($0.0)=\($0.1)" }.joined(separator: "; ")))
        }
        return headers
    }

    func archive(_ request: QueuedRequest, status: Int, code: String?, message: String?, body: String?) {
        archiveRows([request], status: status, code: code, message: message, body: body, what: "a request")
        logger.warning(
            "odata upload: request moved to the ErrorArchive",
            metadata: [
                "service": "\(forwarder.settings.name)", "method": "\(request.method)", "status": "\(status)",
                "code": "\(code ?? "")",
            ])
    }

    /// After a 2xx: removes the request; for a create with a local key, the server's key replaces it in
    /// the mirror and in later queued requests.
    func finish(_ request: QueuedRequest, body: [UInt8], location: String?) {
        finishRows([request], what: "an uploaded request") { db in
            try recordUploaded(request, body: body, location: location, in: db)
        }
    }

    /// Moves `rows` (one request, or the requests of a changeset) to the ErrorArchive in one transaction,
    /// each with the entity it affects; logs (naming `what`) when that fails.
    func archiveRows(
        _ rows: [QueuedRequest], status: Int, code: String?, message: String?, body: String?, what: String
    ) {
        finishRows(rows, what: what, verb: "archive") { db in
            for r in rows {
                try queue.archive(r, status: status, code: code, message: message, body: body, in: db)
                try recordAffectedEntity(r, in: db)
            }
        }
    }

    /// Runs `record` (which takes `rows` out of the queue) in one immediate transaction, then updates the
    /// pending counts; logs `cannot <verb> <what>` when that fails (the rows then stay queued).
    func finishRows(
        _ rows: [QueuedRequest], what: String, verb: String = "record",
        _ record: (Database) throws -> Void
    ) {
        do {
            try mirror.pool.write { db in try db.transaction(.immediate) { try record(db) } }
            for r in rows { queue.didLeave(r) }
        } catch {
            logger.error(
                "odata upload: cannot \(verb) \(what)",
                metadata: ["service": "\(forwarder.settings.name)", "error": "\(error)"])
        }
    }

    /// Inside `db`'s transaction: removes an uploaded request; for a create with a local key, the server's
    /// key (from the response body, else `location`) replaces it in the mirror and in later queued requests.
    func recordUploaded(_ request: QueuedRequest, body: [UInt8], location: String?, in db: Database) throws {
        var serverKey: String?
        var serverEntity: [(String, RawJSON)]?
        let m = mirror.model
        if request.localKey != nil, let m, let layout = m.layouts[request.entitySet] {
            let keys = m.model.keyProperties(of: layout.entityType)
            if let json = try? RawJSON.parse(body) {
                var object = json
                if let d = json["d"] { object = d["results"] ?? d }
                if let members = object.members, keys.allSatisfy({ k in members.contains { $0.0 == k.name } })
                {
                    serverEntity = members
                    serverKey = Self.keyPredicate(members, keys, version: m.version)
                }
            }
            if serverKey == nil, let location, let open = location.lastIndex(of: "("), location.hasSuffix(")")
            {
                serverKey = String(location[open...])
            }
        }
        try queue.remove(request, in: db)
        if request.nested != nil, let m { try recordNested(request, body: body, model: m, in: db) }
        guard let old = request.localKey, let new = serverKey, let m,
            let layout = m.layouts[request.entitySet]
        else { return }
        try queue.replaceKey(
            set: request.entitySet, old: old, new: new, stringKey: ODataRequestQueue.unquote(old), in: db)
        try replaceMirrorKey(db, model: m, layout: layout, old: old, new: new, entity: serverEntity)
    }

    /// Rewrites the locally created row: the server's entity when the response carried it, else the local
    /// row with the server's key.
    func replaceMirrorKey(
        _ db: Database, model m: MirrorModel, layout: MirrorSetLayout, old: String, new: String,
        entity: [(String, RawJSON)]?
    ) throws {
        let table = q(layout.set.name)
        let keys = m.model.keyProperties(of: layout.entityType)
        guard keys.count == 1, let oldLiteral = Self.parseKeyLiteral(old, keys[0], m.version),
            let newLiteral = Self.parseKeyLiteral(new, keys[0], m.version)
        else { return }
        let keyColumn = q(keys[0].name)
        let oldValue = SQLValue(m.mapping.binding(for: oldLiteral, type: keys[0].type))
        guard
            let row = try db.query("SELECT \"_json\" FROM \(table) WHERE \(keyColumn) = ?", [oldValue]).first
        else { return }
        var properties = (try? RawJSON.parse(row[0].string ?? "{}"))?.members ?? []
        if let entity {
            properties = entity.filter {
                $0.0 != "__metadata" && !$0.0.contains("@")
                    && m.model.navigationProperty(named: $0.0, in: layout.entityType)
                        == nil
            }
        } else if let i = properties.firstIndex(where: { $0.0 == keys[0].name }) {
            let newValue = SQLValue(m.mapping.binding(for: newLiteral, type: keys[0].type))
            switch newValue {
            case .integer(let n): properties[i].1 = .number(String(n))
            case .text(let t): properties[i].1 = .string(t)
            default: break
            }
        }
        try db.run("DELETE FROM \(table) WHERE \(keyColumn) = ?", [oldValue])
        let names = [#""_json""#, #""_etag""#, #""_dr""#] + layout.columns.map { q($0.name) }
        let values: [SQLValue] =
            [.text(RawJSON.object(properties).serialized()), .null, .text("local")]
            + layout.columns.map {
                ODataMirror.columnValue(ODataMirror.lookup(properties, $0.path), $0.type, m.version)
            }
        try db.run(
            "INSERT OR REPLACE INTO \(table) (\(names.joined(separator: ", "))) VALUES ("
                + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")", values)
    }

    /// `(42)` / `('x')` → the literal of a single-property key.
    static func parseKeyLiteral(_ predicate: String, _ key: EdmProperty, _ version: ODataVersion)
        -> ODataLiteral?
    {
        guard predicate.hasPrefix("("), predicate.hasSuffix(")") else { return nil }
        var inner = String(predicate.dropFirst().dropLast())
        if inner.hasPrefix(key.name + "=") { inner = String(inner.dropFirst(key.name.count + 1)) }
        let decoded = inner.removingPercentEncoding ?? inner
        return try? ODataLiteral.parse(decoded, version: version)
    }
}
