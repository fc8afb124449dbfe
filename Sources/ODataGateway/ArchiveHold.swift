import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore
import Storage

/// What a revert of the ErrorArchive removed.
public struct ErrorArchiveRevert: Sendable {
    /// ErrorArchive entries removed.
    public var archived = 0
    /// Held (or blocked) queued requests removed.
    public var held = 0
    /// Affected entities (`Set(key)`) restored from the upstream or removed from the mirror.
    public var entities: [String] = []
}

/// A revert cannot run while an upload of the same service runs (it would race the request in flight).
public struct ErrorArchiveBusy: Error, CustomStringConvertible {
    /// Why.
    public var description: String { "an upload is running; retry when it has finished" }
}

extension ODataRequestQueue {
    /// Appends one entry to the EventLog (the newest 1000 are kept).
    public func logEvent(_ type: String, details: JSON) {
        try? pool.write { db in
            try db.run(
                #"INSERT INTO "_mg_EventLog" (Type, Time, Details) VALUES (?, ?, ?)"#,
                [.text(type), .text(iso8601Now()), .text(details.serialized())])
            try db.run(
                #"DELETE FROM "_mg_EventLog" WHERE ID <= (SELECT MAX(ID) - 1000 FROM "_mg_EventLog")"#)
        }
    }

    /// Forgets the custom tags of requests neither queued nor archived.
    static func dropOrphanTags(_ db: Database) throws {
        try db.execute(
            """
            DELETE FROM "_mg_customtag" WHERE requestID NOT IN (SELECT requestID FROM "_mg_queue")
              AND requestID NOT IN (SELECT RequestID FROM "_mg_ErrorArchive");
            DELETE FROM "_mg_cookie" WHERE requestID NOT IN (SELECT requestID FROM "_mg_queue");
            """)
    }

    /// The writer's `Cookie` header of a queued request (never logged).
    func clientCookie(_ requestID: String) -> String? {
        ((try? pool.read { db in
            try db.scalar(#"SELECT cookie FROM "_mg_cookie" WHERE requestID = ?"#, [.text(requestID)])
        }) ?? nil)?.string
    }

    /// Number of queued requests held behind an ErrorArchive entry.
    public func heldCount() -> Int {
        ((try? pool.read { db in try db.scalar(#"SELECT COUNT(*) FROM "_mg_queue" WHERE heldBy IS NOT NULL"#)
        })
            ?? nil)?.int ?? 0
    }

    /// `(RequestID, AffectedEntity)` of every ErrorArchive entry that names its entity.
    func archivedEntities() throws -> [(String, String)] {
        try pool.read { db in
            try db.query(
                #"SELECT RequestID, AffectedEntity FROM "_mg_ErrorArchive" WHERE AffectedEntity IS NOT NULL"#
            ).compactMap { r in r[0].string.flatMap { id in r[1].string.map { (id, $0) } } }
        }
    }

    /// Marks queued request `id` as held behind ErrorArchive entry `requestID` (fsynced).
    func hold(_ id: Int64, by requestID: String) throws {
        try pool.write { db in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            try db.run(#"UPDATE "_mg_queue" SET heldBy = ? WHERE id = ?"#, [.text(requestID), .integer(id)])
        }
    }
}

extension ODataService {
    /// `Set(key)` (as the client addressed it, or the gateway-minted key of a create) of the entity a
    /// queued request changes; nil when it names none (e.g. a create whose key the server assigns).
    func affectedEntity(_ request: QueuedRequest) -> String? {
        if let local = request.localKey { return request.entitySet + local }
        var path = Substring(request.url)
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        if path.hasPrefix(request.entitySet + "("),
            let key = Self.keyPredicateText(path.dropFirst(request.entitySet.count))
        {
            return request.entitySet + "(" + key + ")"
        }
        guard request.method == "POST", let m = mirror.model, let layout = m.layouts[request.entitySet],
            let json = try? RawJSON.parse(request.body)
        else { return nil }
        var object = json
        if let d = json["d"], json.members?.count == 1 { object = d }
        guard let members = object.members else { return nil }
        let keys = m.model.keyProperties(of: layout.entityType)
        guard !keys.isEmpty, keys.allSatisfy({ k in members.contains { $0.0 == k.name } }) else { return nil }
        return request.entitySet + Self.keyPredicate(members, keys, version: m.version)
    }

    /// The text between the parentheses at the start of `text` (`(…)`), honouring quoted strings.
    static func keyPredicateText(_ text: Substring) -> String? {
        guard text.first == "(" else { return nil }
        var inQuote = false
        var i = text.index(after: text.startIndex)
        while i < text.endIndex {
            let c = text[i]
            if c == "'" { inQuote.toggle() }
            if c == ")", !inQuote { return String(text[text.index(after: text.startIndex)..<i]) }
            i = text.index(after: i)
        }
        return nil
    }

    /// A comparable form of `Set(key)`: key values typed by the model (so `(2)`, `(ProductID=2)` and
    /// `(%32)` compare equal); the text itself when it does not parse.
    func canonicalEntity(_ entity: String) -> String {
        guard let open = entity.firstIndex(of: "("), let key = Self.keyPredicateText(entity[open...]),
            let m = mirror.model
        else { return entity }
        let set = String(entity[..<open])
        let decoded = key.removingPercentEncoding ?? key
        guard let layout = m.layouts[set],
            let parsed = try? ODataKey.parse(decoded, entityType: layout.entityType, model: m.model)
        else { return entity }
        return set + "|" + parsed.values.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
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
                "service": "\(forwarder.settings.name)", "method": "\(request.method)",
                "heldBy": "\(blocker)",
            ])
        return true
    }

    /// The RequestID of the ErrorArchive entry that changed the entity `request` changes, if any.
    func blocker(of request: QueuedRequest) throws -> String? {
        guard let entity = affectedEntity(request) else { return nil }
        let archived = try queue.archivedEntities()
        guard !archived.isEmpty else { return nil }
        let mine = canonicalEntity(entity)
        return archived.first(where: { canonicalEntity($0.1) == mine })?.0
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
            metadata: ["service": "\(forwarder.settings.name)", "heldBy": "\(blocker)"])
        return true
    }

    /// Inside the enqueueing transaction: keeps the request's `OfflineOData.CustomTag` header (SAP's name),
    /// shown as `CustomTag` in the RequestQueue and the ErrorArchive, and with `uploadCredentials: client`
    /// its `Cookie` header, replayed on upload.
    func recordRequestExtras(_ headers: HTTPHeaders, requestID: String, in db: Database) throws {
        if let tag = headers["OfflineOData.CustomTag"], !tag.isEmpty {
            try db.run(
                #"INSERT OR REPLACE INTO "_mg_customtag" (requestID, tag) VALUES (?, ?)"#,
                [.text(requestID), .text(tag)])
        }
        if settings.uploadCredentials == .client, let cookie = headers["Cookie"], !cookie.isEmpty {
            try db.run(
                #"INSERT OR REPLACE INTO "_mg_cookie" (requestID, cookie) VALUES (?, ?)"#,
                [.text(requestID), .text(cookie)])
        }
    }

    /// Inside the archiving transaction: records the entity the archived request changed.
    func recordAffectedEntity(_ request: QueuedRequest, in db: Database) throws {
        guard let entity = affectedEntity(request) else { return }
        try db.run(
            #"UPDATE "_mg_ErrorArchive" SET AffectedEntity = ? WHERE RequestID = ?"#,
            [.text(entity), .text(request.requestID)])
    }

    /// `DELETE …/ErrorArchive('<RequestID>')`: removes every ErrorArchive entry and every queued request
    /// held behind one (or changing an archived entity) in one fsynced transaction, then restores the
    /// affected entities in the mirror from the upstream (an entity created locally disappears). With
    /// `enableIndividualErrorArchiveDeletion`, only that entry and the requests depending on it (held
    /// behind it, or changing the same entity) go. Nil when
    /// no entry has that RequestID. Throws ``ErrorArchiveBusy`` while an upload runs (and keeps uploads
    /// from starting while it runs).
    public func revertErrorArchive(_ requestID: String) throws -> ErrorArchiveRevert? {
        let exclusive = uploadState.withLock { s -> Bool in
            if s.running { return false }
            s.running = true
            return true
        }
        guard exclusive else { throw ErrorArchiveBusy() }
        let revert: ErrorArchiveRevert?
        do {
            revert = try revertExclusively(requestID)
        } catch {
            uploadState.withLock { $0.running = false }
            throw error
        }
        uploadState.withLock { $0.running = false }
        if revert != nil, forwarder.reachability.isReachable {
            // What was not held goes up now (the upload then downloads); with nothing left, a download.
            if queue.count > 0 { upload(completion: nil) } else { _ = download(completion: nil) }
        }
        return revert
    }

    private func revertExclusively(_ requestID: String) throws -> ErrorArchiveRevert? {
        let individual = settings.enableIndividualErrorArchiveDeletion
        let archivedEntities = try queue.archivedEntities().filter { !individual || $0.0 == requestID }
        let canonical = Set(archivedEntities.map { canonicalEntity($0.1) })
        var removed: [QueuedRequest] = []
        var revert = ErrorArchiveRevert()
        let found = try mirror.pool.write { db -> Bool in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            return try db.transaction(.immediate) { () -> Bool in
                guard
                    try db.scalar(
                        #"SELECT 1 FROM "_mg_ErrorArchive" WHERE RequestID = ?"#, [.text(requestID)]) != nil
                else { return false }
                let rows = try db.query(
                    #"SELECT id, entitySet, method, url, body, localKey, heldBy, changeset FROM "_mg_queue" ORDER BY id"#
                )
                var queued: [(request: QueuedRequest, entity: String?, goes: Bool, changeset: String?)] = []
                var changesets = Set<String>()
                for r in rows {
                    let request = QueuedRequest(
                        id: r[0].int64 ?? 0, entitySet: r[1].string ?? "", method: r[2].string ?? "",
                        url: r[3].string ?? "", body: r[4].bytes ?? [], contentType: nil, authorization: nil,
                        ifMatch: nil, localKey: r[5].string, gatewayRoot: "", requestID: "", firstSent: "",
                        attempts: 0)
                    let entity = affectedEntity(request)
                    let blocked = entity.map { canonical.contains(canonicalEntity($0)) } ?? false
                    let held = individual ? r[6].string == requestID : r[6].string != nil
                    if held || blocked, let changeset = r[7].string { changesets.insert(changeset) }
                    queued.append((request, entity, held || blocked, r[7].string))
                }
                // A changeset stays whole: when one of its requests goes, all of them go.
                for q in queued where q.goes || q.changeset.map(changesets.contains) == true {
                    try db.run(#"DELETE FROM "_mg_queue" WHERE id = ?"#, [.integer(q.request.id)])
                    removed.append(q.request)
                    if let entity = q.entity { revert.entities.append(entity) }
                }
                if individual {
                    revert.archived = 1
                    try db.run(#"DELETE FROM "_mg_ErrorArchive" WHERE RequestID = ?"#, [.text(requestID)])
                } else {
                    revert.archived =
                        try db.scalar(#"SELECT COUNT(*) FROM "_mg_ErrorArchive""#)?.int ?? 0
                    try db.run(#"DELETE FROM "_mg_ErrorArchive""#)
                }
                try ODataRequestQueue.dropOrphanTags(db)
                return true
            }
        }
        guard found else { return nil }
        queue.logEvent(
            "ErrorArchiveDeletion",
            details: [
                "RequestID": .string(requestID), "archived": .int(Int64(revert.archived)),
                "held": .int(Int64(removed.count)),
            ])
        for r in removed { queue.didLeave(r) }
        revert.held = removed.count
        var seen = Set<String>()
        revert.entities = (archivedEntities.map(\.1) + revert.entities).filter {
            seen.insert(canonicalEntity($0)).inserted
        }
        for entity in revert.entities { restoreFromUpstream(entity) }
        logger.info(
            "odata: ErrorArchive reverted",
            metadata: [
                "service": "\(forwarder.settings.name)", "archived": "\(revert.archived)",
                "held": "\(revert.held)", "entities": "\(revert.entities.count)",
            ])
        return revert
    }

    /// Puts the upstream's version of `entity` (`Set(key)`) into the mirror, or removes the row when the
    /// upstream has none (404) or the key was minted locally; leaves it when the upstream cannot tell.
    func restoreFromUpstream(_ entity: String) {
        guard let m = mirror.model, let open = entity.firstIndex(of: "("),
            let keyText = Self.keyPredicateText(entity[open...])
        else { return }
        let set = String(entity[..<open])
        guard let layout = m.layouts[set],
            let key = try? ODataKey.parse(
                keyText.removingPercentEncoding ?? keyText, entityType: layout.entityType, model: m.model)
        else { return }
        var fetched: [(String, RawJSON)]?
        var etag: String?
        let local = keyText.hasPrefix("-") || keyText.hasPrefix("'local-")
        if !local {
            guard let r = try? upstreamGET(forwarder.settings.upstream + set + "(" + keyText + ")") else {
                return
            }
            if r.status == 200, let json = try? RawJSON.parse(r.body) {
                var object = json
                if let d = json["d"] { object = d["results"] ?? d }
                var rows: [String: [MirrorEntity]] = [:]
                if let members = object.members {
                    Self.ingest(members, set: set, type: layout.entityType, model: m, into: &rows)
                }
                fetched = rows[set]?.first?.properties
                etag = rows[set]?.first?.etag ?? r.header("ETag")
                if fetched == nil { return }
            } else if r.status != 404 {
                return
            }
        }
        let table = q(layout.set.name)
        let (whereSQL, values) = m.keyPredicate(key, in: layout)
        do {
            try mirror.pool.write { db in
                try db.transaction(.immediate) {
                    let previous = try db.query("SELECT \"_dr\" FROM \(table) WHERE \(whereSQL)", values)
                        .first?[0]
                        .string
                    try db.run("DELETE FROM \(table) WHERE \(whereSQL)", values)
                    guard let fetched else { return }
                    let scope = try db.scalar(
                        #"SELECT request FROM "_mg_scope" WHERE entitySet = ? ORDER BY request LIMIT 1"#,
                        [.text(set)])?.string
                    let dr = (previous == "local" ? nil : previous) ?? scope ?? "local"
                    let names = [#""_json""#, #""_etag""#, #""_dr""#] + layout.columns.map { q($0.name) }
                    let row: [SQLValue] =
                        [.text(RawJSON.object(fetched).serialized()), SQLValue(etag), .text(dr)]
                        + layout.columns.map {
                            ODataMirror.columnValue(ODataMirror.lookup(fetched, $0.path), $0.type, m.version)
                        }
                    try db.run(
                        "INSERT OR REPLACE INTO \(table) (\(names.joined(separator: ", "))) VALUES ("
                            + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")", row)
                }
            }
        } catch {
            logger.error(
                "odata: cannot restore an entity after a revert",
                metadata: ["service": "\(forwarder.settings.name)", "error": "\(error)"])
        }
    }
}
