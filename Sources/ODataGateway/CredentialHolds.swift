import Foundation
import JSONCore
import Storage
import Synchronization

/// Credentials a writer sent: its `Authorization` and `Cookie` headers (never logged).
struct WriterCredentials: Sendable, Equatable {
    var authorization: String?
    var cookie: String? = nil

    /// A fingerprint to tell two sets of credentials apart without keeping them (FNV-1a, 64 bits, hex).
    var fingerprint: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in Array((authorization ?? "").utf8) + [0] + Array((cookie ?? "").utf8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}

/// Who wrote a request, as far as its credentials tell: the user name of `Basic` credentials, the issuer and
/// subject of a JWT bearer token (read, not verified: the upstream verifies), else only the scheme
/// (`bearer` for opaque tokens: writers with opaque tokens cannot be told apart and count as one), or
/// `anonymous` without an `Authorization` header. Requests of one writer wait together when the upstream
/// refuses their credentials at upload, and newer credentials of the same writer release them.
enum ODataWriterIdentity {
    static func of(_ credentials: WriterCredentials) -> String {
        guard let auth = credentials.authorization?.trimmingCharacters(in: .whitespaces), !auth.isEmpty else {
            return "anonymous"
        }
        let parts = auth.split(separator: " ", maxSplits: 1)
        let scheme = parts[0].lowercased()
        let value = parts.count > 1 ? String(parts[1]).trimmingCharacters(in: .whitespaces) : ""
        switch scheme {
        case "basic":
            if let decoded = Data(base64Encoded: value).map({ String(decoding: $0, as: UTF8.self) }),
                let colon = decoded.firstIndex(of: ":")
            {
                return "basic:" + decoded[..<colon]
            }
        case "bearer":
            if let claims = jwtClaims(value), let subject = claims["sub"]?.string {
                return "jwt:" + (claims["iss"]?.string ?? "") + "|" + subject
            }
        default: break
        }
        return scheme
    }

    /// The claims of a JWT (`header.payload.signature`, base64url), if `token` is one.
    static func jwtClaims(_ token: String) -> RawJSON? {
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3 else { return nil }
        var payload = segments[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(
            of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        guard let data = Data(base64Encoded: payload), let json = try? RawJSON.parse([UInt8](data)),
            json.members != nil
        else { return nil }
        return json
    }
}

/// A writer whose credentials the upstream refused (401/403) at upload: its requests wait, and so do the
/// requests of other writers that depend on them, until newer credentials of that writer are accepted.
struct CredentialHold: Sendable {
    /// The writer (``ODataWriterIdentity``).
    var writer: String
    /// The upstream's status (401 or 403).
    var status: Int
    /// When the upstream first refused them (ISO-8601).
    var since: String
    /// The request the upstream refused.
    var requestID: String
    /// The fingerprint of the refused credentials.
    var rejected: String
    /// Newer credentials of the writer, not yet tried.
    var candidate: WriterCredentials?
    /// The entities (canonical `Set(key)`) the waiting requests change or name, each with the queue position
    /// of the first waiting request that does, when known.
    var entities: [String: Int64]?
}

/// The credential holds of one service's request queue (stored in its mirror file, `_mg_credhold`, and
/// the queue's `writer`/`waitingFor` columns): which writers wait for credentials the upstream accepts,
/// the newer credentials offered for them, and the requests waiting behind them.
///
/// Promises: a hold, a release and every request marked waiting are fsynced before the call returns;
/// credentials are kept in the mirror file (0600) only, never logged, never shown.
final class ODataCredentialHolds: Sendable {
    let pool: DatabasePool
    private let holds = Mutex<[String: CredentialHold]>([:])

    /// Loads the holds kept in the mirror file (the queue's migrations ran).
    init(pool: DatabasePool) throws {
        self.pool = pool
        var loaded: [String: CredentialHold] = [:]
        let rows = try pool.read { db in
            try db.query(
                #"SELECT writer, status, since, requestID, rejected, candidateAuthorization, candidateCookie FROM "_mg_credhold""#
            )
        }
        for r in rows {
            guard let writer = r[0].string else { continue }
            var candidate: WriterCredentials?
            if r[5].string != nil || r[6].string != nil {
                candidate = WriterCredentials(authorization: r[5].string, cookie: r[6].string)
            }
            loaded[writer] = CredentialHold(
                writer: writer, status: r[1].int ?? 401, since: r[2].string ?? "",
                requestID: r[3].string ?? "",
                rejected: r[4].string ?? "", candidate: candidate, entities: nil)
        }
        holds.withLock { $0 = loaded }
    }

    /// Whether any writer waits for credentials.
    var any: Bool { holds.withLock { !$0.isEmpty } }

    /// The holds, for status.
    func all() -> [CredentialHold] {
        holds.withLock { Array($0.values) }.sorted { $0.since < $1.since }
    }

    /// Whether `writer`'s requests wait for credentials.
    func isHeld(_ writer: String?) -> Bool {
        guard let writer else { return false }
        return holds.withLock { $0[writer] != nil }
    }

    /// Newer `credentials` of `writer`: while its requests wait and these differ from the refused ones (and
    /// from a candidate already known), they become the candidate the next upload tries (kept durably, in
    /// `db`'s transaction when given). True when they are a new candidate.
    @discardableResult
    func offerCredentials(_ credentials: WriterCredentials, writer: String, in db: Database? = nil) throws
        -> Bool
    {
        let fingerprint = credentials.fingerprint
        let isNew = holds.withLock { h -> Bool in
            guard let hold = h[writer], hold.rejected != fingerprint,
                hold.candidate?.fingerprint != fingerprint
            else { return false }
            return true
        }
        guard isNew else { return false }
        let store = { (db: Database) throws in
            try db.run(
                #"UPDATE "_mg_credhold" SET candidateAuthorization = ?, candidateCookie = ? WHERE writer = ?"#,
                [SQLValue(credentials.authorization), SQLValue(credentials.cookie), .text(writer)])
        }
        if let db { try store(db) } else { try pool.write { db in try store(db) } }
        holds.withLock { $0[writer]?.candidate = credentials }
        return true
    }

    /// The writers waiting with a candidate to try, and the candidates.
    func retryableHolds() -> [(writer: String, credentials: WriterCredentials)] {
        holds.withLock { h in h.values.compactMap { c in c.candidate.map { (c.writer, $0) } } }
            .sorted { $0.writer < $1.writer }
    }

    /// The upstream refused `writer`'s `credentials` with `status` for `request`: a new hold (every queued
    /// request of the writer waits), or, for a candidate tried, the candidate is dropped. Fsynced.
    func hold(writer: String, status: Int, request: QueuedRequest, credentials: WriterCredentials) throws {
        let rejected = credentials.fingerprint
        try pool.write { db in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            try db.transaction(.immediate) {
                try db.run(
                    """
                    INSERT INTO "_mg_credhold" (writer, status, since, requestID, rejected) VALUES (?, ?, ?, ?, ?)
                      ON CONFLICT (writer) DO UPDATE SET status = excluded.status, rejected = excluded.rejected,
                      candidateAuthorization = NULL, candidateCookie = NULL
                    """,
                    [
                        .text(writer), .integer(Int64(status)), .text(iso8601Now()), .text(request.requestID),
                        .text(rejected),
                    ])
                try db.run(
                    #"UPDATE "_mg_queue" SET waitingFor = ? WHERE writer = ? AND waitingFor IS NULL"#,
                    [.text(writer), .text(writer)])
            }
        }
        holds.withLock { h in
            if var existing = h[writer] {
                existing.status = status
                existing.rejected = rejected
                existing.candidate = nil
                existing.entities = nil
                h[writer] = existing
            } else {
                h[writer] = CredentialHold(
                    writer: writer, status: status, since: iso8601Now(), requestID: request.requestID,
                    rejected: rejected, candidate: nil, entities: nil)
            }
        }
    }

    /// The upstream accepted `credentials` of `writer`: every request of the writer takes them (the queue
    /// keeps them 0600 as before) and every request waiting behind the writer's hold is released. Fsynced.
    func release(writer: String, with credentials: WriterCredentials) throws {
        try pool.write { db in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            try db.transaction(.immediate) {
                try db.run(
                    #"UPDATE "_mg_queue" SET authorization = ? WHERE writer = ?"#,
                    [SQLValue(credentials.authorization), .text(writer)])
                if let cookie = credentials.cookie {
                    try db.run(
                        #"INSERT OR REPLACE INTO "_mg_cookie" (requestID, cookie) SELECT requestID, ? FROM "_mg_queue" WHERE writer = ?"#,
                        [.text(cookie), .text(writer)])
                } else {
                    try db.run(
                        #"DELETE FROM "_mg_cookie" WHERE requestID IN (SELECT requestID FROM "_mg_queue" WHERE writer = ?)"#,
                        [.text(writer)])
                }
                try db.run(#"UPDATE "_mg_queue" SET waitingFor = NULL WHERE waitingFor = ?"#, [.text(writer)])
                try db.run(#"DELETE FROM "_mg_credhold" WHERE writer = ?"#, [.text(writer)])
            }
        }
        _ = holds.withLock { $0.removeValue(forKey: writer) }
    }

    /// A hold whose writer has no waiting request left (reverted, or released otherwise) ends.
    func dropHold(writer: String) throws {
        try pool.write { db in
            try db.run(#"UPDATE "_mg_queue" SET waitingFor = NULL WHERE waitingFor = ?"#, [.text(writer)])
            try db.run(#"DELETE FROM "_mg_credhold" WHERE writer = ?"#, [.text(writer)])
        }
        _ = holds.withLock { $0.removeValue(forKey: writer) }
    }

    /// Ends every hold (the service's own credentials are used now: `uploadCredentials: service`).
    func dropAll() throws {
        guard any else { return }
        try pool.write { db in
            try db.run(#"UPDATE "_mg_queue" SET waitingFor = NULL WHERE waitingFor IS NOT NULL"#)
            try db.run(#"DELETE FROM "_mg_credhold""#)
        }
        holds.withLock { $0 = [:] }
    }

    /// The oldest request waiting behind `writer`'s hold that is the writer's own.
    func firstWaiting(writer: String) throws -> QueuedRequest? {
        try pool.read { db in
            try ODataRequestQueue.requests(
                "WHERE waitingFor = ? AND writer = ? AND heldBy IS NULL ORDER BY id LIMIT 1",
                [.text(writer), .text(writer)], in: db
            ).first
        }
    }

    /// Marks `rows` (a request and the rest of its changeset) as waiting behind `writer`'s hold (fsynced),
    /// and adds what they touch (`entities`) to the hold's.
    func wait(_ rows: [QueuedRequest], behind writer: String, entities: [String: Int64]) throws {
        try pool.write { db in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            try db.transaction(.immediate) {
                for r in rows {
                    try db.run(
                        #"UPDATE "_mg_queue" SET waitingFor = ? WHERE id = ?"#,
                        [.text(writer), .integer(r.id)])
                }
            }
        }
        holds.withLock { $0[writer]?.entities?.merge(entities) { min($0, $1) } }
    }

    /// The requests waiting behind `writer`'s hold, for what they touch.
    func waiting(behind writer: String) throws -> [QueuedRequest] {
        try pool.read { db in
            try ODataRequestQueue.requests("WHERE waitingFor = ? ORDER BY id", [.text(writer)], in: db)
        }
    }

    /// What `writer`'s hold touches, computed by `compute` once and kept.
    func heldEntities(_ writer: String, compute: () throws -> [String: Int64]) throws -> [String: Int64] {
        if let known = holds.withLock({ $0[writer]?.entities }) { return known }
        let entities = try compute()
        holds.withLock { $0[writer]?.entities = entities }
        return entities
    }

    /// The number of queued requests waiting for credentials.
    func waitingCount() -> Int {
        ((try? pool.read { db in
            try db.scalar(#"SELECT COUNT(*) FROM "_mg_queue" WHERE waitingFor IS NOT NULL"#)
        }) ?? nil)?.int ?? 0
    }
}
