import Foundation
import HTTPCore
import JSONCore
import ODataCore
import Storage

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
            DELETE FROM "_mg_keyref" WHERE id NOT IN (SELECT id FROM "_mg_queue");
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

    /// Number of queued requests waiting for credentials the upstream accepts.
    public func waitingCount() -> Int { credentials.waitingCount() }

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

    /// Inside the enqueueing transaction: keeps the request's `OfflineOData.CustomTag` header (SAP's name),
    /// shown as `CustomTag` in the RequestQueue and the ErrorArchive, and with `keepCookie` its `Cookie`
    /// header, replayed on upload.
    func recordExtras(_ headers: HTTPHeaders, requestID: String, keepCookie: Bool, in db: Database) throws {
        if let tag = headers["OfflineOData.CustomTag"], !tag.isEmpty {
            try db.run(
                #"INSERT OR REPLACE INTO "_mg_customtag" (requestID, tag) VALUES (?, ?)"#,
                [.text(requestID), .text(tag)])
        }
        if keepCookie, let cookie = headers["Cookie"], !cookie.isEmpty {
            try db.run(
                #"INSERT OR REPLACE INTO "_mg_cookie" (requestID, cookie) VALUES (?, ?)"#,
                [.text(requestID), .text(cookie)])
        }
    }

    /// Inside the archiving transaction: records the entity (`Set(key)`) the archived request changed.
    func recordAffectedEntity(_ entity: String, requestID: String, in db: Database) throws {
        try db.run(
            #"UPDATE "_mg_ErrorArchive" SET AffectedEntity = ? WHERE RequestID = ?"#,
            [.text(entity), .text(requestID)])
    }

    /// What a revert of ErrorArchive entry `requestID` took out, in one fsynced transaction: the entry
    /// (with `individual`) or every entry, and every queued request for which `goes` says so (given the
    /// request and the ErrorArchive entry it is held behind, if any) together with the rest of its
    /// changeset (a changeset stays whole). Nil when no entry has that RequestID.
    func revert(
        _ requestID: String, individual: Bool, goes: (QueuedRequest, _ heldBy: String?) -> Bool
    ) throws -> (removed: [QueuedRequest], archived: Int)? {
        var removed: [QueuedRequest] = []
        var archived = 0
        let found = try pool.write { db -> Bool in
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
                var queued: [(request: QueuedRequest, goes: Bool, changeset: String?)] = []
                var changesets = Set<String>()
                for r in rows {
                    let request = QueuedRequest(
                        id: r[0].int64 ?? 0, entitySet: r[1].string ?? "", method: r[2].string ?? "",
                        url: r[3].string ?? "", body: r[4].bytes ?? [], contentType: nil, authorization: nil,
                        ifMatch: nil, localKey: r[5].string, gatewayRoot: "", requestID: "", firstSent: "",
                        attempts: 0)
                    let going = goes(request, r[6].string)
                    if going, let changeset = r[7].string { changesets.insert(changeset) }
                    queued.append((request, going, r[7].string))
                }
                for q in queued where q.goes || q.changeset.map(changesets.contains) == true {
                    try db.run(#"DELETE FROM "_mg_queue" WHERE id = ?"#, [.integer(q.request.id)])
                    try ODataKeyReferences.drop(id: q.request.id, in: db)
                    removed.append(q.request)
                }
                if individual {
                    archived = 1
                    try db.run(#"DELETE FROM "_mg_ErrorArchive" WHERE RequestID = ?"#, [.text(requestID)])
                } else {
                    archived = try db.scalar(#"SELECT COUNT(*) FROM "_mg_ErrorArchive""#)?.int ?? 0
                    try db.run(#"DELETE FROM "_mg_ErrorArchive""#)
                }
                try Self.dropOrphanTags(db)
                return true
            }
        }
        guard found else { return nil }
        for r in removed { didLeave(r) }
        return (removed, archived)
    }

    // MARK: the archive sets (ErrorArchive, RequestQueue, EventLog) read as OData entity sets

    /// The rows of each set (column names equal the property names, plus `AffectedEntity`). A request
    /// waiting for credentials shows `WaitingFor: credentials` and the upstream's status (`WaitingStatus`),
    /// never whose credentials.
    static func archiveSource(_ set: String) -> String {
        switch set {
        case "EventLog":
            return #"SELECT ID, Type, Time, Details, NULL AS AffectedEntity FROM "_mg_EventLog""#
        case "ErrorArchive":
            return
                #"SELECT RequestID, COALESCE(CustomTag, (SELECT tag FROM "_mg_customtag" c WHERE c.requestID = a.RequestID)) AS CustomTag, HTTPStatusCode, Code, Message, InnerError, Domain, RequestMethod, RequestURL, RequestBody, EntitySet, ArchivedAt, AffectedEntity FROM "_mg_ErrorArchive" a"#
        default:
            return
                #"SELECT requestID AS RequestID, id AS ID, method AS RequestMethod, url AS RequestURL, entitySet AS EntitySet, createdAt AS CreatedAt, CAST(body AS TEXT) AS RequestBody, (SELECT tag FROM "_mg_customtag" c WHERE c.requestID = q.requestID) AS CustomTag, CASE WHEN heldBy IS NULL THEN 0 ELSE 1 END AS Held, heldBy AS HeldBy, transactionID AS TransactionID, nonMergeable AS NonMergeable, removeAfterUpload AS RemoveAfterUpload, CASE WHEN waitingFor IS NULL THEN NULL ELSE 'credentials' END AS WaitingFor, (SELECT status FROM "_mg_credhold" h WHERE h.writer = q.waitingFor) AS WaitingStatus, NULL AS AffectedEntity FROM "_mg_queue" q"#
        }
    }

    /// The default order of a set.
    static func archiveDefaultOrder(_ set: String) -> String {
        set == "ErrorArchive" ? #""t0"."ArchivedAt", "t0"."RequestID""# : #""t0"."ID""#
    }

    /// The rows of archive set `set` matching `condition` (on alias `t0`) in `order` (else the set's
    /// default order), a page of them when `page` is given, with the total count; each row by column name
    /// (the set's properties plus `AffectedEntity`).
    func archiveRows(
        _ set: String, columns: [String], condition: SQLFragment?, order: String?,
        page: (top: Int?, skip: Int?)?
    ) throws -> (total: Int, rows: [[String: SQLValue]]) {
        let whereSQL = condition.map { " WHERE " + $0.sql } ?? ""
        let bindings = condition?.bindings.map(SQLValue.init) ?? []
        let from = "FROM (" + Self.archiveSource(set) + #") AS "t0""#
        let total = try pool.read { db in
            try db.scalar("SELECT COUNT(*) " + from + whereSQL, bindings)?.int ?? 0
        }
        var limit = ""
        var limitValues: [SQLValue] = []
        if let page {
            limit = " LIMIT ? OFFSET ?"
            limitValues = [.integer(Int64(page.top ?? -1)), .integer(Int64(page.skip ?? 0))]
        }
        let ordering = (order.map { $0 + ", " } ?? "") + Self.archiveDefaultOrder(set)
        let rows = try pool.read { db in
            try db.query(
                #"SELECT "t0".* "# + from + whereSQL + " ORDER BY " + ordering + limit, bindings + limitValues
            )
        }
        return (
            total,
            rows.map { r in
                var dict: [String: SQLValue] = [:]
                for (i, n) in columns.enumerated() { dict[n] = r[i] }
                return dict
            }
        )
    }
}
