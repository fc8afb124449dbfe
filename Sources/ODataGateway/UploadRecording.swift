import Foundation
import HTTPCore
import JSONCore
import Logging
import ODataCore
import Storage

/// What becomes of uploaded, rejected and blocked requests: every outcome is recorded in one immediate
/// transaction on the mirror file (queue rows leave together with their effect on the mirror).
extension ODataUploader {
    /// After a 2xx: the requests leave the queue in one transaction; for a create with a local key, the
    /// server's key (from the response body, else the location) replaces it in the mirror and in later
    /// queued requests.
    func finish(_ answers: [(request: QueuedRequest, body: [UInt8], location: String?)], what: String) {
        finishRows(answers.map(\.request), what: what) { w in
            for a in answers { try recordUploaded(a.request, body: a.body, location: a.location, in: w) }
        }
    }

    /// Moves `rows` (one request, or the requests of a changeset) to the ErrorArchive in one transaction,
    /// each with the entity it affects; logs it (naming `what`).
    func archive(
        _ rows: [QueuedRequest], status: Int, code: String?, message: String?, body: String?, what: String
    ) {
        finishRows(rows, what: "a " + what, verb: "archive") { w in
            for r in rows {
                try queue.archive(r, status: status, code: code, message: message, body: body, in: w.db)
                if let entity = r.affectedEntity(model: w.model) {
                    try queue.recordAffectedEntity(entity, requestID: r.requestID, in: w.db)
                }
            }
        }
        logger.warning(
            "odata upload: \(what) moved to the ErrorArchive",
            metadata: [
                "service": "\(settings.name)", "method": "\(rows.first?.method ?? "")",
                "requests": "\(rows.count)",
                "status": "\(status)", "code": "\(code ?? "")",
            ])
    }

    /// Runs `record` (which takes `rows` out of the queue) in one immediate transaction, then updates the
    /// pending counts; logs `cannot <verb> <what>` when that fails (the rows then stay queued).
    func finishRows(
        _ rows: [QueuedRequest], what: String, verb: String = "record",
        _ record: (MirrorWriter) throws -> Void
    ) {
        do {
            try mirror.write { w in try record(w) }
            for r in rows { queue.didLeave(r) }
        } catch {
            logger.error(
                "odata upload: cannot \(verb) \(what)",
                metadata: ["service": "\(settings.name)", "error": "\(error)"])
        }
    }

    /// Inside `db`'s transaction: removes an uploaded request; for a create with a local key, the server's
    /// key (from the response body, else `location`) replaces it in the mirror and in later queued requests.
    func recordUploaded(_ request: QueuedRequest, body: [UInt8], location: String?, in w: MirrorWriter) throws
    {
        var serverKey: String?
        var serverEntity: [(String, RawJSON)]?
        let m = w.model
        if request.localKey != nil, let layout = m.layouts[request.entitySet] {
            let keys = m.model.keyProperties(of: layout.entityType)
            if let json = try? RawJSON.parse(body) {
                var object = json
                if let d = json["d"] { object = d["results"] ?? d }
                if let members = object.members, keys.allSatisfy({ k in members.contains { $0.0 == k.name } })
                {
                    serverEntity = members
                    serverKey = ODataKeyText.predicate(members, keys, version: m.version)
                }
            }
            if serverKey == nil, let location, let open = location.lastIndex(of: "("), location.hasSuffix(")")
            {
                serverKey = String(location[open...])
            }
        }
        try queue.remove(request, in: w.db)
        if request.nested != nil { try recordNested(request, body: body, in: w) }
        if let old = request.localKey, let new = serverKey, let layout = m.layouts[request.entitySet] {
            try ODataKeyReferences.replaceKey(
                set: request.entitySet, old: old, new: new, stringKey: ODataKeyText.unquote(old), in: w.db)
            try w.replaceKey(layout, old: old, new: new, entity: serverEntity)
        }
        // An uploaded create is the server's now: what it contains there is no longer only what was written.
        if request.method == "POST",
            let entity = request.localKey.map({ request.entitySet + (serverKey ?? $0) })
                ?? request.affectedEntity(model: m),
            let (layout, key) = ODataKeyText.locate(entity, model: m)
        {
            try w.markUploaded(layout, key: key)
        }
        // `OfflineOData.RemoveAfterUpload: true`: the entity leaves the mirror (a later download of a defining
        // request that covers it brings it back).
        if request.removeAfterUpload, request.method != "DELETE",
            let entity = request.localKey.map({ request.entitySet + (serverKey ?? $0) })
                ?? request.affectedEntity(model: m),
            let (layout, key) = ODataKeyText.locate(entity, model: m)
        {
            try w.delete(layout, key: key)
        }
    }

    /// After a deep insert: each nested entity created locally gets the server's key when the response
    /// carries it (by position under its navigation property); otherwise its local row is removed (the
    /// download that follows the upload brings the server's).
    func recordNested(_ request: QueuedRequest, body: [UInt8], in w: MirrorWriter) throws {
        let m = w.model
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
                let server = ODataKeyText.predicate(members, keys, version: m.version)
                try ODataKeyReferences.replaceKey(
                    set: set, old: key, new: server, stringKey: ODataKeyText.unquote(key), in: w.db)
                try w.replaceKey(layout, old: key, new: server, entity: members)
            } else {
                try w.delete(layout, predicate: key)
            }
        }
    }

    /// Before a queued request is sent: when an ErrorArchive entry changed the same entity, the request
    /// is marked held behind it (durably) and true is returned; it stays queued until the entry is deleted.
    /// Throws when the store cannot say or record it (the upload run stops and is retried later).
    func holdIfBlocked(_ request: QueuedRequest) throws -> Bool {
        guard let blocker = try blocker(of: request) else { return false }
        try queue.hold(request.id, by: blocker)
        logger.warning(
            "odata upload: request held behind an ErrorArchive entry",
            metadata: [
                "service": "\(settings.name)", "method": "\(request.method)",
                "heldBy": "\(blocker)",
            ])
        return true
    }

    /// The RequestID of the ErrorArchive entry that changed the entity `request` changes, if any.
    func blocker(of request: QueuedRequest) throws -> String? {
        guard let entity = request.affectedEntity(model: mirror.model) else { return nil }
        let archived = try queue.archivedEntities()
        guard !archived.isEmpty else { return nil }
        let mine = ODataKeyText.canonical(entity, model: mirror.model)
        return archived.first(where: { ODataKeyText.canonical($0.1, model: mirror.model) == mine })?.0
    }

    /// Before a queued changeset is sent: when one of its requests changes an entity an ErrorArchive entry
    /// changed, every request of the changeset is held behind that entry (a changeset stays whole).
    /// Throws when the store cannot say or record it (the upload run stops and is retried later).
    func holdChangesetIfBlocked(_ changeset: String) throws -> Bool {
        let members = try queue.changeset(changeset)
        var blocker: String?
        for r in members where blocker == nil { blocker = try self.blocker(of: r) }
        guard let blocker else { return false }
        for r in members { try queue.hold(r.id, by: blocker) }
        logger.warning(
            "odata upload: changeset held behind an ErrorArchive entry",
            metadata: ["service": "\(settings.name)", "heldBy": "\(blocker)"])
        return true
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

}
