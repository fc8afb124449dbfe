import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore
import Storage
import Upstream

extension ODataService {
    /// Sends the queued requests of changeset `id` (starting with `first`) to the upstream as one
    /// multipart `$batch` changeset and records the outcome for all of them at once: uploaded (removed,
    /// server keys applied, in one transaction), archived (the changeset failed), held in doubt, or left
    /// queued (`.stop`). Returns the outcome and the number of requests it concerns. Repeatability: the
    /// first request's ID and First-Sent, OASIS headers on each request of the changeset, SAP headers on
    /// the `$batch` request.
    func sendChangeset(_ first: QueuedRequest, _ id: String) -> (SendOutcome, Int) {
        var rows = (try? queue.changeset(id)).flatMap { $0.isEmpty ? nil : $0 } ?? [first]
        if version == .v2 {
            // V2 (SAP Gateway) resolves no `$N` references: a request that needs the key of an entity created
            // earlier in the changeset goes in a later changeset, sent once that key is known (the remainder
            // keeps its changeset id and is picked up next, rewritten with the server key).
            rows = Array(rows.prefix(Self.v2ChangesetCut(rows)))
        }
        let n = rows.count
        let s = forwarder.settings
        let mayResend = mayResendInDoubt()
        let idempotent = rows.allSatisfy { $0.method == "PUT" || $0.method == "DELETE" }
        if rows.contains(where: { $0.sentAt != nil }), !idempotent, !mayResend {
            archiveAll(
                rows, status: 0, code: "MG_IN_DOUBT",
                message:
                    "the changeset was sent but its outcome is unknown; it was not re-sent to avoid applying it twice",
                body: nil)
            return (.inDoubt, n)
        }
        let map = ODataURLMap(gatewayRoot: first.gatewayRoot, upstreamRoot: s.upstream)
        let boundary = "batch_" + UUID().uuidString.lowercased()
        let changesetBoundary = "changeset_" + UUID().uuidString.lowercased()
        // OASIS Repeatable Requests: the headers go on every request of the changeset, all with the same ID
        // and First-Sent (a `$batch` carrying them must be rejected); SAP's go on the `$batch` itself.
        var repeatability: [(String, String)] = []
        if settings.enableRepeatableRequests, settings.repeatabilityHeaders != .sap {
            repeatability = [
                ("Repeatability-Request-ID", first.requestID), ("Repeatability-First-Sent", first.firstSent),
            ]
        }
        var parts = Self.uploadParts(rows, map: map, upstreamRoot: s.upstream)
        for i in parts.indices { parts[i].headers += repeatability }
        let batchBody = BatchChanges.changesetBody(
            parts, boundary: boundary, changesetBoundary: changesetBoundary)
        var attempts = rows.map(\.attempts).max() ?? 0
        var csrfRetried = false
        while true {
            do { try markAllSent(rows, true) } catch { return (.stop, n) }
            var headers: [(name: String, value: String)] = [
                ("Accept", "multipart/mixed"), ("Content-Type", "multipart/mixed; boundary=\(boundary)"),
            ]
            if version == .v4 {
                headers.append(("OData-Version", "4.0"))
                headers.append(("OData-MaxVersion", "4.0"))
            } else {
                headers.append(("DataServiceVersion", "2.0"))
            }
            if settings.enableRepeatableRequests, settings.repeatabilityHeaders != .oasis {
                headers.append(("RequestID", first.requestID))
                headers.append(("RepeatabilityCreation", first.firstSent))
            }
            let carrier = uploadCarrier(method: "POST", url: "$batch", writer: first)
            headers += uploadHeaders(carrier)
            let upstream = UpstreamRequest(
                method: "POST", url: forwarder.upstreamURL(for: s.mount + "$batch"), headers: headers,
                body: batchBody, connectTimeout: s.connectTimeout, timeout: s.timeout)
            let response: UpstreamResponse
            do {
                response = try UpstreamClient(maxIdleHandles: 0).perform(upstream)
            } catch {
                forwarder.reachability.reportFailure(error.description)
                let unknown = error.outcomeUnknown
                if !unknown { try? markAllSent(rows, false) }
                if unknown, !idempotent, !mayResend {
                    archiveAll(
                        rows, status: 0, code: "MG_IN_DOUBT",
                        message:
                            "the connection was lost after the changeset was sent; its outcome is unknown",
                        body: nil)
                    return (.inDoubt, n)
                }
                return (.stop, n)
            }
            forwarder.reachability.reportSuccess()
            noteRepeatabilityResult(response)
            var status = response.status
            var errorBody = response.body
            if status == 403, !csrfRetried, response.header("x-csrf-token")?.lowercased() == "required" {
                csrfRetried = true
                csrf.forget(carrier)
                continue
            }
            if (200..<300).contains(status) {
                let items = BatchChanges.responses(
                    response.body, contentType: response.header("Content-Type") ?? "")
                if let parts = items?.first, parts.count == rows.count, parts.allSatisfy({ $0.status < 300 })
                {
                    finishAll(rows, parts)
                    return (.done, n)
                }
                if let failure = items?.first?.first(where: { $0.status >= 300 }) {
                    status = failure.status
                    errorBody = failure.body
                } else {
                    // The upstream accepted the batch but its answer does not say what became of the changeset.
                    archiveAll(
                        rows, status: 0, code: "MG_IN_DOUBT",
                        message: "the upstream's $batch response does not describe the changeset",
                        body: String(decoding: response.body.prefix(4096), as: UTF8.self))
                    return (.inDoubt, n)
                }
            }
            if [502, 503, 504, 429].contains(status) {
                try? markAllSent(rows, false)
                return (.stop, n)
            }
            if status == 500, attempts < 2 {
                for r in rows { try? queue.countAttempt(r) }
                attempts += 1
                // The upstream answered (a definite failure, not in doubt): at shutdown, stop here.
                if !stopSignal.sleep(for: .milliseconds(200 * attempts)) {
                    try? markAllSent(rows, false)
                    return (.stop, n)
                }
                continue
            }
            let (code, message) = Self.errorDetails(errorBody)
            archiveAll(
                rows, status: status, code: code, message: message,
                body: String(decoding: errorBody.prefix(4096), as: UTF8.self))
            return (.failed, n)
        }
    }

    /// The parts of the upload changeset: URLs and bodies mapped to the upstream, and a local key created
    /// by an earlier request of the changeset replaced by that request's `$Content-ID`.
    static func uploadParts(
        _ rows: [QueuedRequest], map: ODataURLMap, upstreamRoot: String
    ) -> [(method: String, url: String, headers: [(String, String)], body: [UInt8], contentID: String)] {
        var references: [(String, String)] = []
        var parts:
            [(method: String, url: String, headers: [(String, String)], body: [UInt8], contentID: String)] =
                []
        for (i, row) in rows.enumerated() {
            let contentID = row.contentID ?? String(i + 1)
            var url = row.url
            var text = row.body.isEmpty ? "" : String(decoding: map.toUpstream.apply(row.body), as: UTF8.self)
            for (local, cid) in references {
                if url == local || url.hasPrefix(local + "/") || url.hasPrefix(local + "?") {
                    url = "$" + cid + url.dropFirst(local.count)
                }
                text = text.replacingOccurrences(of: "\"" + upstreamRoot + local, with: "\"$" + cid)
                text = text.replacingOccurrences(of: "\"" + local, with: "\"$" + cid)
            }
            var headers: [(String, String)] = [("Accept", "application/json")]
            if let ct = row.contentType { headers.append(("Content-Type", ct)) }
            if let ifMatch = row.ifMatch { headers.append(("If-Match", ifMatch)) }
            parts.append((row.method, url, headers, Array(text.utf8), contentID))
            if row.method == "POST", let key = row.localKey {
                references.append((row.entitySet + key, contentID))
            }
        }
        return parts
    }

    /// How many leading rows can go in one V2 changeset: up to the first that refers to a local key created
    /// by an earlier row.
    static func v2ChangesetCut(_ rows: [QueuedRequest]) -> Int {
        var created: [String] = []
        for (i, row) in rows.enumerated() {
            let body = String(decoding: row.body, as: UTF8.self)
            if created.contains(where: { row.url.hasPrefix($0) || body.contains($0) }) { return max(1, i) }
            if row.method == "POST", let key = row.localKey { created.append(row.entitySet + key) }
        }
        return rows.count
    }

    private func markAllSent(_ rows: [QueuedRequest], _ sent: Bool) throws {
        for r in rows { try queue.markSent(r, sent) }
    }

    /// Moves every request of a changeset to the ErrorArchive in one transaction.
    private func archiveAll(
        _ rows: [QueuedRequest], status: Int, code: String?, message: String?, body: String?
    ) {
        archiveRows(rows, status: status, code: code, message: message, body: body, what: "a changeset")
        logger.warning(
            "odata upload: changeset moved to the ErrorArchive",
            metadata: [
                "service": "\(forwarder.settings.name)", "requests": "\(rows.count)", "status": "\(status)",
                "code": "\(code ?? "")",
            ])
    }

    /// All requests of an uploaded changeset leave the queue in one transaction, each with its server key.
    private func finishAll(_ rows: [QueuedRequest], _ parts: [BatchChanges.PartResponse]) {
        finishRows(rows, what: "an uploaded changeset") { db in
            // Parts are matched by the Content-ID the upstream echoes, else by position.
            var byID: [String: BatchChanges.PartResponse] = [:]
            for p in parts { if let id = p.headers["content-id"] { byID[id] = p } }
            let matched = rows.enumerated().map { i, row in row.contentID.flatMap { byID[$0] } ?? parts[i] }
            for (row, part) in zip(rows, matched) {
                try recordUploaded(
                    row, body: part.body,
                    location: part.headers["location"] ?? part.headers["odata-entityid"], in: db)
            }
        }
    }

    /// After a deep insert: each nested entity created locally gets the server's key when the response
    /// carries it (by position under its navigation property); otherwise its local row is removed (the
    /// download that follows the upload brings the server's).
    func recordNested(_ request: QueuedRequest, body: [UInt8], model m: MirrorModel, in db: Database) throws {
        guard let text = request.nested, let records = try? RawJSON.parse(text).elements else { return }
        var entity = try? RawJSON.parse(body)
        if let d = entity?["d"] { entity = d["results"] ?? d }
        for record in records {
            guard let set = record["set"]?.string, let key = record["key"]?.string,
                let nav = record["nav"]?.string, let index = record["index"]?.string.flatMap({ Int($0) }),
                let layout = m.layouts[set]
            else { continue }
            let keys = m.model.keyProperties(of: layout.entityType)
            var items: [RawJSON] = []
            if let value = entity?[nav] {
                items = value.elements ?? value["results"]?.elements ?? (value.members != nil ? [value] : [])
            }
            if index < items.count, let members = items[index].members,
                keys.allSatisfy({ k in members.contains { $0.0 == k.name } })
            {
                let server = Self.keyPredicate(members, keys, version: m.version)
                try queue.replaceKey(
                    set: set, old: key, new: server, stringKey: ODataRequestQueue.unquote(key), in: db)
                try replaceMirrorKey(db, model: m, layout: layout, old: key, new: server, entity: members)
            } else if keys.count == 1, let literal = Self.parseKeyLiteral(key, keys[0], m.version) {
                let value = SQLValue(m.mapping.binding(for: literal, type: keys[0].type))
                try db.run("DELETE FROM \(q(set)) WHERE \(q(keys[0].name)) = ?", [value])
            }
        }
    }
}
