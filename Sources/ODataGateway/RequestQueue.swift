import Foundation
import ODataCore
import Storage
import Synchronization

/// One modification waiting in the request queue.
public struct QueuedRequest: Sendable {
    /// Position in the queue (FIFO order).
    public var id: Int64
    /// The entity set the request changes.
    public var entitySet: String
    /// `POST`, `PUT`, `PATCH`, `MERGE` or `DELETE`.
    public var method: String
    /// Path and query relative to the service root (percent-encoded), e.g. `Products(-1)`.
    public var url: String
    /// The body exactly as the client sent it (later rewritten when a local key is replaced).
    public var body: [UInt8]
    /// The client's `Content-Type`.
    public var contentType: String?
    /// The writer's `Authorization` header (never logged).
    public var authorization: String?
    /// `If-Match` to send: the client's own, else the mirror's ETag at enqueue time.
    public var ifMatch: String?
    /// For a create with a gateway-minted key: the key predicate, e.g. `(-1)` or `('local-…')`.
    public var localKey: String?
    /// The gateway root the client used (to map URLs in the body to the upstream).
    public var gatewayRoot: String
    /// Repeatability request ID, fixed at enqueue time.
    public var requestID: String
    /// Repeatability first-sent time (IMF-fixdate), fixed at enqueue time.
    public var firstSent: String
    /// Upload attempts so far that ended with a `500`.
    public var attempts: Int
    /// Set (durably) just before the request is sent and cleared when it is known not to have taken effect:
    /// a request found with it set was sent and its outcome is unknown (e.g. the gateway was killed).
    public var sentAt: String? = nil
    /// The changeset this request was queued with (all of them are uploaded together as one `$batch`
    /// changeset), else nil.
    public var changeset: String? = nil
    /// The request's `Content-ID` inside its changeset.
    public var contentID: String? = nil
    /// Deep insert: the nested entities created locally, as JSON `[{"set","key","nav","index"}]`.
    public var nested: String? = nil
    /// `OfflineOData.TransactionID`: with `enableTransactionBuilder`, the requests carrying the same ID are
    /// uploaded together as one changeset.
    public var transactionID: String? = nil
    /// `OfflineOData.NonMergeable: true` (SAP's unmodifiable request): never combined with another request.
    public var nonMergeable = false
    /// `OfflineOData.RemoveAfterUpload: true`: the entity leaves the mirror once the request is uploaded.
    public var removeAfterUpload = false
    /// Who wrote the request (``ODataWriterIdentity``), kept with `uploadCredentials: client`.
    public var writer: String? = nil
    /// While the request waits for credentials the upstream accepts: the writer whose hold it waits behind.
    public var waitingFor: String? = nil
}

/// The durable request queue and the ErrorArchive of one OData service, stored in the service's mirror
/// file (`_mg_queue`, `_mg_ErrorArchive`, `_mg_keymap`).
///
/// Promises: a queued request is appended in the same transaction as its effect on the mirror, with
/// `synchronous=FULL` for that transaction (fsynced before the caller answers); rows leave the queue only
/// by ``remove(_:in:)`` (after a 2xx) or ``archive(_:status:code:message:body:in:)`` (in one transaction
/// with the ErrorArchive insert); the pending count per entity set is kept in memory for routing.
public final class ODataRequestQueue: Sendable {
    let pool: DatabasePool
    private let pending = Mutex<[String: Int]>([:])
    /// Writers whose requests wait for credentials the upstream accepts.
    let credentials: ODataCredentialHolds

    /// Creates the tables when missing and loads the pending counts.
    public init(pool: DatabasePool) throws {
        self.pool = pool
        try Self.migrator.migrate(pool)
        try pool.write { db in try Self.dropOrphanTags(db) }
        let counts = try pool.read { db in
            try db.query(#"SELECT entitySet, COUNT(*) FROM "_mg_queue" GROUP BY entitySet"#)
        }
        pending.withLock { p in
            for row in counts { if let s = row[0].string { p[s] = row[1].int ?? 0 } }
        }
        credentials = try ODataCredentialHolds(pool: pool)
    }

    /// The queue's tables in the service's mirror file: the queue, the ErrorArchive, the local-to-server
    /// key map, holds, custom tags, cookies and the EventLog. The first migration accepts every schema
    /// the releases before migrations wrote: tables are created when missing and the columns those
    /// releases added later with `ALTER TABLE` are added when missing, in the same order.
    static let migrator = Migrator(
        table: "_mg_migrations_queue",
        [
            Migration("1-queue-archive-holds-eventlog") { db in
                try db.execute(
                    """
                    CREATE TABLE IF NOT EXISTS "_mg_queue" (id INTEGER PRIMARY KEY AUTOINCREMENT,
                      entitySet TEXT NOT NULL, method TEXT NOT NULL, url TEXT NOT NULL, body BLOB NOT NULL,
                      contentType TEXT, authorization TEXT, ifMatch TEXT, localKey TEXT, gatewayRoot TEXT NOT NULL,
                      requestID TEXT NOT NULL, firstSent TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
                      createdAt TEXT NOT NULL, sentAt TEXT);
                    CREATE TABLE IF NOT EXISTS "_mg_ErrorArchive" (RequestID TEXT PRIMARY KEY, CustomTag TEXT,
                      HTTPStatusCode INTEGER NOT NULL, Code TEXT, Message TEXT, InnerError TEXT, Domain TEXT,
                      RequestMethod TEXT NOT NULL, RequestURL TEXT NOT NULL, RequestBody TEXT,
                      EntitySet TEXT NOT NULL, ArchivedAt TEXT NOT NULL);
                    CREATE TABLE IF NOT EXISTS "_mg_keymap" (entitySet TEXT NOT NULL, localKey TEXT NOT NULL,
                      serverKey TEXT NOT NULL, PRIMARY KEY (entitySet, localKey));
                    """)
                try db.addMissingColumns(
                    "_mg_queue",
                    [("changeset", "TEXT"), ("contentID", "TEXT"), ("nested", "TEXT"), ("heldBy", "TEXT")])
                try db.addMissingColumns("_mg_ErrorArchive", [("AffectedEntity", "TEXT")])
                try db.execute(
                    """
                    CREATE TABLE IF NOT EXISTS "_mg_customtag" (requestID TEXT PRIMARY KEY, tag TEXT NOT NULL);
                    CREATE TABLE IF NOT EXISTS "_mg_cookie" (requestID TEXT PRIMARY KEY, cookie TEXT NOT NULL);
                    CREATE TABLE IF NOT EXISTS "_mg_EventLog" (ID INTEGER PRIMARY KEY AUTOINCREMENT,
                      Type TEXT NOT NULL, Time TEXT NOT NULL, Details TEXT);
                    """)
            },
            // Issue 16 (request options, queue optimisation), issue 15 (credentials at upload), issue 19 D7
            // (an index of the local keys queued requests reference, so that an uploaded create rewrites
            // only the requests naming its key; indexes for the next request, changesets and writers).
            Migration("2-options-keyrefs-credential-holds") { db in
                try db.addMissingColumns(
                    "_mg_queue",
                    [
                        ("transactionID", "TEXT"), ("nonMergeable", "INTEGER NOT NULL DEFAULT 0"),
                        ("removeAfterUpload", "INTEGER NOT NULL DEFAULT 0"), ("writer", "TEXT"),
                        ("waitingFor", "TEXT"),
                    ])
                try db.execute(
                    """
                    CREATE TABLE IF NOT EXISTS "_mg_keyref" (ref TEXT NOT NULL, id INTEGER NOT NULL,
                      PRIMARY KEY (ref, id)) WITHOUT ROWID;
                    CREATE INDEX IF NOT EXISTS "_mg_keyref_id" ON "_mg_keyref" (id);
                    CREATE INDEX IF NOT EXISTS "_mg_queue_next" ON "_mg_queue" (id)
                      WHERE heldBy IS NULL AND waitingFor IS NULL;
                    CREATE INDEX IF NOT EXISTS "_mg_queue_changeset" ON "_mg_queue" (changeset)
                      WHERE changeset IS NOT NULL;
                    CREATE INDEX IF NOT EXISTS "_mg_queue_held" ON "_mg_queue" (heldBy) WHERE heldBy IS NOT NULL;
                    CREATE INDEX IF NOT EXISTS "_mg_queue_waiting" ON "_mg_queue" (waitingFor, id)
                      WHERE waitingFor IS NOT NULL;
                    CREATE TABLE IF NOT EXISTS "_mg_credhold" (writer TEXT PRIMARY KEY, status INTEGER NOT NULL,
                      since TEXT NOT NULL, requestID TEXT NOT NULL, rejected TEXT NOT NULL,
                      candidateAuthorization TEXT, candidateCookie TEXT);
                    """)
                let rows = try db.query(
                    #"SELECT q.id, q.url, q.body, q.authorization, c.cookie FROM "_mg_queue" q LEFT JOIN "_mg_cookie" c ON c.requestID = q.requestID"#
                )
                for r in rows {
                    guard let id = r[0].int64 else { continue }
                    try ODataKeyReferences.index(
                        id: id, url: r[1].string ?? "", body: r[2].bytes ?? [], in: db)
                    // Credentials were kept only with `uploadCredentials: client`: the writer they name.
                    if r[3].string != nil || r[4].string != nil {
                        let writer = ODataWriterIdentity.of(
                            WriterCredentials(authorization: r[3].string, cookie: r[4].string))
                        try db.run(
                            #"UPDATE "_mg_queue" SET writer = ? WHERE id = ?"#, [.text(writer), .integer(id)])
                    }
                }
            },
        ])

    /// The columns ``request(_:)`` reads, in its order.
    static let selectColumns = """
        id, entitySet, method, url, body, contentType, authorization, ifMatch, localKey, gatewayRoot, requestID,
          firstSent, attempts, sentAt, changeset, contentID, nested, transactionID, nonMergeable, removeAfterUpload,
          writer, waitingFor
        """

    /// Number of queued requests.
    public var count: Int { pending.withLock { $0.values.reduce(0, +) } }

    /// Inside a transaction on the mirror file: whether any request is queued (for a download that must
    /// not overwrite local changes).
    static func hasQueued(_ db: Database) throws -> Bool {
        try db.scalar(#"SELECT 1 FROM sqlite_master WHERE type='table' AND name='_mg_queue'"#) != nil
            && db.scalar(#"SELECT 1 FROM "_mg_queue" LIMIT 1"#) != nil
    }

    /// Whether requests for `set` are queued.
    public func holds(_ set: String) -> Bool { pending.withLock { ($0[set] ?? 0) > 0 } }

    /// Runs `body` and appends the request it returns (its `id` ignored) in one immediate transaction on the writer
    /// connection with `synchronous=FULL`; returns what `body` returned.
    func append<T>(_ body: (Database) throws -> (QueuedRequest, T)) throws -> T {
        try appendAll { db in
            let (request, result) = try body(db)
            return ([request], result)
        }
    }

    /// Like ``append(_:)`` for several requests (a changeset): all of them or none, in one transaction.
    func appendAll<T>(_ body: (Database) throws -> ([QueuedRequest], T)) throws -> T {
        let (requests, result) = try pool.write { db -> ([QueuedRequest], T) in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            return try db.transaction(.immediate) {
                let (requests, r) = try body(db)
                for request in requests {
                    // Behind its writer's requests that wait for credentials (also when the hold began after
                    // the writer looked).
                    let waiting =
                        request.waitingFor ?? (credentials.isHeld(request.writer) ? request.writer : nil)
                    try db.run(
                        """
                        INSERT INTO "_mg_queue" (entitySet, method, url, body, contentType, authorization, ifMatch,
                          localKey, gatewayRoot, requestID, firstSent, createdAt, changeset, contentID, nested,
                          transactionID, nonMergeable, removeAfterUpload, writer, waitingFor)
                          VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
                        """,
                        [
                            .text(request.entitySet), .text(request.method), .text(request.url),
                            .blob(request.body),
                            SQLValue(request.contentType), SQLValue(request.authorization),
                            SQLValue(request.ifMatch),
                            SQLValue(request.localKey), .text(request.gatewayRoot), .text(request.requestID),
                            .text(request.firstSent), .text(iso8601Now()), SQLValue(request.changeset),
                            SQLValue(request.contentID), SQLValue(request.nested),
                            SQLValue(request.transactionID),
                            .integer(request.nonMergeable ? 1 : 0),
                            .integer(request.removeAfterUpload ? 1 : 0),
                            SQLValue(request.writer), SQLValue(waiting),
                        ])
                    try ODataKeyReferences.index(
                        id: db.lastInsertRowID, url: request.url, body: request.body, in: db)
                }
                return (requests, r)
            }
        }
        pending.withLock { p in for r in requests { p[r.entitySet, default: 0] += 1 } }
        return result
    }

    /// The queued requests (in `db`) that `condition` (constant SQL after `FROM "_mg_queue"`: a `WHERE`,
    /// an order, a limit; user text only in `bindings`) selects.
    static func requests(_ condition: String, _ bindings: [SQLValue] = [], in db: Database) throws
        -> [QueuedRequest]
    {
        try db.query("SELECT " + selectColumns + #" FROM "_mg_queue" "# + condition, bindings).map(request)
    }

    /// The oldest queued request neither held behind an ErrorArchive entry nor waiting for credentials.
    public func first() throws -> QueuedRequest? {
        try pool.read { db in
            try Self.requests("WHERE heldBy IS NULL AND waitingFor IS NULL ORDER BY id LIMIT 1", in: db).first
        }
    }

    /// The requests queued with changeset `id`, in order.
    func changeset(_ id: String) throws -> [QueuedRequest] {
        try pool.read { db in try Self.requests("WHERE changeset = ? ORDER BY id", [.text(id)], in: db) }
    }

    /// The queued request with `id`, if it is still queued.
    func request(id: Int64) throws -> QueuedRequest? {
        try pool.read { db in try Self.requests("WHERE id = ?", [.integer(id)], in: db).first }
    }

    static func request(_ r: Row) -> QueuedRequest {
        QueuedRequest(
            id: r[0].int64 ?? 0, entitySet: r[1].string ?? "", method: r[2].string ?? "",
            url: r[3].string ?? "", body: r[4].bytes ?? [], contentType: r[5].string,
            authorization: r[6].string, ifMatch: r[7].string, localKey: r[8].string,
            gatewayRoot: r[9].string ?? "", requestID: r[10].string ?? "",
            firstSent: r[11].string ?? "",
            attempts: r[12].int ?? 0, sentAt: r[13].string, changeset: r[14].string, contentID: r[15].string,
            nested: r[16].string, transactionID: r[17].string, nonMergeable: (r[18].int ?? 0) != 0,
            removeAfterUpload: (r[19].int ?? 0) != 0, writer: r[20].string, waitingFor: r[21].string)
    }

    /// Counts one more `500` for `request`.
    func countAttempt(_ request: QueuedRequest) throws {
        try pool.write { db in
            try db.run(
                #"UPDATE "_mg_queue" SET attempts = attempts + 1 WHERE id = ?"#, [.integer(request.id)])
        }
    }

    /// Marks `request` as sent (`true`, fsynced before it goes out) or as known not to have taken effect.
    func markSent(_ request: QueuedRequest, _ sent: Bool) throws {
        try pool.write { db in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            try db.run(
                #"UPDATE "_mg_queue" SET sentAt = ? WHERE id = ?"#,
                [sent ? .text(iso8601Now()) : .null, .integer(request.id)])
        }
    }

    /// Removes an uploaded request inside `db`'s current transaction.
    func remove(_ request: QueuedRequest, in db: Database) throws {
        try db.run(#"DELETE FROM "_mg_queue" WHERE id = ?"#, [.integer(request.id)])
        try db.run(#"DELETE FROM "_mg_cookie" WHERE requestID = ?"#, [.text(request.requestID)])
        try ODataKeyReferences.drop(id: request.id, in: db)
    }

    /// Call after the transaction that removed or archived `request` committed.
    func didLeave(_ request: QueuedRequest) {
        pending.withLock { p in
            let n = (p[request.entitySet] ?? 1) - 1
            p[request.entitySet] = n > 0 ? n : nil
        }
    }

    /// Moves `request` to the ErrorArchive inside `db`'s current transaction.
    func archive(
        _ request: QueuedRequest, status: Int, code: String?, message: String?, body: String?, in db: Database
    ) throws {
        try db.run(
            """
            INSERT OR REPLACE INTO "_mg_ErrorArchive" (RequestID, CustomTag, HTTPStatusCode, Code, Message,
              InnerError, Domain, RequestMethod, RequestURL, RequestBody, EntitySet, ArchivedAt)
              VALUES (?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(request.requestID), .integer(Int64(status)), SQLValue(code), SQLValue(message),
                SQLValue(body), .text(status == 0 ? "mirrorgate" : "upstream"), .text(request.method),
                .text(request.url), .text(String(decoding: request.body, as: UTF8.self)),
                .text(request.entitySet), .text(iso8601Now()),
            ])
        try remove(request, in: db)
    }

    /// When the oldest queued request was queued (its `createdAt`, RFC 3339), nil when none is queued.
    public func oldestCreatedAt() -> String? {
        ((try? pool.read { db in try db.scalar(#"SELECT MIN(createdAt) FROM "_mg_queue""#) }) ?? nil)?.string
    }

    /// Number of ErrorArchive entries.
    public func archivedCount() -> Int {
        ((try? pool.read { db in try db.scalar(#"SELECT COUNT(*) FROM "_mg_ErrorArchive""#) }) ?? nil)?.int
            ?? 0
    }

    /// ErrorArchive entries held in doubt (`MG_IN_DOUBT`).
    public func inDoubtCount() -> Int {
        ((try? pool.read { db in
            try db.scalar(#"SELECT COUNT(*) FROM "_mg_ErrorArchive" WHERE Code = 'MG_IN_DOUBT'"#)
        }) ?? nil)?.int ?? 0
    }

    /// ErrorArchive entries as `{RequestID, HTTPStatusCode, Code, Message, RequestMethod, RequestURL}`.
    public func archived() -> [[String: String]] {
        let rows =
            (try? pool.read { db in
                try db.query(
                    #"SELECT RequestID, HTTPStatusCode, Code, Message, RequestMethod, RequestURL FROM "_mg_ErrorArchive" ORDER BY ArchivedAt"#
                )
            }) ?? []
        return rows.map { r in
            [
                "RequestID": r[0].string ?? "", "HTTPStatusCode": String(r[1].int ?? 0),
                "Code": r[2].string ?? "",
                "Message": r[3].string ?? "", "RequestMethod": r[4].string ?? "",
                "RequestURL": r[5].string ?? "",
            ]
        }
    }

    /// The server key predicate that replaced local key predicate `local` of `set` after its upload.
    public func serverKey(set: String, local: String) -> String? {
        ((try? pool.read { db in
            try db.scalar(
                #"SELECT serverKey FROM "_mg_keymap" WHERE entitySet = ? AND localKey = ?"#,
                [.text(set), .text(local)])
        }) ?? nil)?.string
    }
}
