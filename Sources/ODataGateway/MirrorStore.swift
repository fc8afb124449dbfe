import Foundation
import JSONCore
import ODataCore
import Storage
import Synchronization

/// The SQLite mirror of one OData service (`dataDir/odata-NAME.sqlite`, mode 0600): the `$metadata`
/// byte-identical, one typed table per entity set (a `_json` column keeps every entity exactly as
/// received, typed columns serve `$filter`/`$orderby`), one link table per navigation without
/// referential constraints (the links `$expand` showed, see ``MirrorLinkNavigation``), the scope of each
/// defining request, and the time of the last download.
///
/// Promises: a download's rows and links are replaced in one transaction (readers see the old rows or the
/// new ones, never a mix); a changed `$metadata` drops and recreates every entity table; decimals and
/// Int64 keep their exact text in `_json`; date-time-offsets are stored as UTC text
/// (`YYYY-MM-DDThh:mm:ss[.fff]Z`) and V2 `/Date(ms)/` date-times as `YYYY-MM-DDThh:mm:ss[.fff]`.
public final class ODataMirror: Sendable {
    /// The database.
    public let pool: DatabasePool
    private let current = Mutex<MirrorModel?>(nil)

    /// Opens (creating) the mirror file, encrypted with `encryption` if given, and loads a stored model.
    public init(path: String, encryption: StoreEncryption? = nil) throws {
        pool = try DatabasePool(
            path: path, options: DatabaseOptions(synchronous: .normal, encryption: encryption), readers: 4)
        try Self.migrator.migrate(pool)
        if let bytes = try pool.read({ db in
            try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key='metadata'"#)
        }
        )?.bytes {
            if let m = try? MirrorModel(metadata: bytes) {
                try pool.write { db in
                    try Self.migrateLayout(db, m)
                    try Self.createLinkTables(db, m)
                }
                current.withLock { $0 = m }
            }
        }
    }

    /// The mirror's own tables (entity and link tables follow the model, see ``install(metadata:)``).
    /// The first migration accepts the tables of releases before migrations (created if missing).
    static let migrator = Migrator(
        table: "_mg_migrations_mirror",
        [
            Migration(
                "1-meta-and-scope",
                sql: """
                    CREATE TABLE IF NOT EXISTS "_mg_meta" (key TEXT PRIMARY KEY, value BLOB);
                    CREATE TABLE IF NOT EXISTS "_mg_scope" (request TEXT NOT NULL, entitySet TEXT NOT NULL,
                      query TEXT NOT NULL, rows INTEGER NOT NULL, downloadedAt TEXT NOT NULL,
                      PRIMARY KEY (request, entitySet));
                    """),
            // Issue 16 item 5: the delta link of each defining request (for the query it was read with).
            Migration(
                "2-delta-links",
                sql: """
                    CREATE TABLE IF NOT EXISTS "_mg_delta" (request TEXT PRIMARY KEY, query TEXT NOT NULL,
                      link TEXT NOT NULL);
                    """),
        ])

    /// The loaded model, if `$metadata` was ever stored.
    public var model: MirrorModel? { current.withLock { $0 } }

    /// The last successful download time (ISO-8601), if any.
    public var lastDownloadAt: String? { meta("lastDownloadAt") }

    /// Rows per entity set.
    public func rowCounts() -> [String: Int] {
        guard let m = model else { return [:] }
        var result: [String: Int] = [:]
        _ = try? pool.read { db in
            for name in m.layouts.keys {
                result[name] = try db.scalar("SELECT COUNT(*) FROM \(q(name))")?.int ?? 0
            }
        }
        return result
    }

    /// The service's version: `configured`, else the mirrored `$metadata`'s, else V4.
    public func version(configured: ODataVersion?) -> ODataVersion { configured ?? model?.version ?? .v4 }

    /// A value of `_mg_meta` (the mirror's own key-value table).
    func meta(_ key: String) -> String? {
        ((try? pool.read { db in try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key = ?"#, [.text(key)]) })
            ?? nil)?.string
    }

    /// The page size the upstream used for `set` in the last download (nil: it sent one page).
    public func upstreamPageSize(_ set: String) -> Int? { meta("pageSize/" + set).flatMap { Int($0) } }

    /// Records the page size the upstream used for `set` (nil: it did not page).
    func setUpstreamPageSize(_ set: String, _ size: Int?) throws {
        try pool.write { db in
            if let size {
                try db.run(
                    #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES (?, ?)"#,
                    [.text("pageSize/" + set), .text(String(size))])
            } else {
                try db.run(#"DELETE FROM "_mg_meta" WHERE key = ?"#, [.text("pageSize/" + set)])
            }
        }
    }

    /// Sets a value of `_mg_meta`.
    func setMeta(_ key: String, _ value: String) throws {
        try pool.write { db in
            try db.run(
                #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES (?, ?)"#, [.text(key), .text(value)])
        }
    }

    @discardableResult
    public func install(metadata: [UInt8]) throws -> MirrorModel {
        if let m = model, m.metadata == metadata { return m }
        let new = try MirrorModel(metadata: metadata)
        try pool.write { db in
            try db.transaction {
                if let old = model {
                    for name in old.layouts.keys { try db.execute("DROP TABLE IF EXISTS \(q(name))") }
                    try Self.dropLinkTables(db, old)
                }
                try Self.dropLinkTables(db, new)
                try Self.createLinkTables(db, new)
                try db.execute(#"DELETE FROM "_mg_scope""#)
                try db.execute(#"DELETE FROM "_mg_delta""#)
                try db.run(#"DELETE FROM "_mg_meta" WHERE key='lastDownloadAt'"#)
                for layout in new.layouts.values.sorted(by: { $0.set.name < $1.set.name }) {
                    try db.execute("DROP TABLE IF EXISTS \(q(layout.set.name))")
                    try Self.createTable(db, layout)
                }
                try Self.setLayoutVersion(db)
                try db.run(
                    #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('metadata', ?)"#,
                    [.blob(metadata)])
            }
        }
        current.withLock { $0 = new }
        return new
    }

    /// The rows and links one defining request brought, for ``replaceCounting(_:pending:)``.
    public struct Replacement: Sendable {
        /// The defining request's name (the rows' scope).
        public var request: String
        /// Its query.
        public var query: String
        /// Entities by entity set.
        public var rows: [String: [MirrorEntity]]
        /// What `$expand` showed for navigation without referential constraints.
        public var links: [MirrorLinkRecord]
        /// The delta link of the read (stored with the rows; none when nil).
        public var deltaLink: String?

        /// Creates a replacement.
        public init(
            request: String, query: String, rows: [String: [MirrorEntity]], links: [MirrorLinkRecord] = [],
            deltaLink: String? = nil
        ) {
            self.deltaLink = deltaLink
            self.request = request
            self.query = query
            self.rows = rows
            self.links = links
        }
    }

    /// Creates the table of one entity set or singleton (layout ``MirrorModel/layoutVersion``): `_json`
    /// (the entity as received), `_etag`, `_dr` (the defining request, `local`, `bootstrap:…`), `_type`
    /// (the qualified type when not the set's), then one typed column per stored property; a unique
    /// index on the key and one index per filterable column (up to 32) followed by the key.
    static func createTable(_ db: Database, _ layout: MirrorSetLayout) throws {
        var cols = [#""_json" TEXT NOT NULL"#, #""_etag" TEXT"#, #""_dr" TEXT NOT NULL"#, #""_type" TEXT"#]
        let parentKey = (layout.container?.parentKey ?? []).map(\.name)
        for c in layout.container?.parentKey ?? [] { cols.append("\(q(c.name)) \(c.sqlType)") }
        for c in layout.columns { cols.append("\(q(c.name)) \(c.sqlType)") }
        try db.execute("CREATE TABLE \(q(layout.set.name)) (\(cols.joined(separator: ", ")))")
        if !layout.key.isEmpty {
            try db.execute(
                "CREATE UNIQUE INDEX \(q("_mg_key_" + layout.set.name)) ON \(q(layout.set.name)) ("
                    + (parentKey + layout.key).map(q).joined(separator: ", ") + ")")
        }
        // One index per filterable column (up to 32), followed by the key (the default order of local
        // results), so that `$filter`/`$orderby` on one property with `$top` reads a few rows in order
        // instead of scanning or sorting the set.
        let keyColumns = layout.key.map(q).joined(separator: ", ")
        for c in layout.columns.prefix(32) where c.type != .binary && !(layout.key == [c.name]) {
            let columns = keyColumns.isEmpty ? q(c.name) : q(c.name) + ", " + keyColumns
            try db.execute(
                "CREATE INDEX \(q("_mg_ix_" + layout.set.name + "_" + c.name)) ON "
                    + "\(q(layout.set.name)) (\(columns))")
        }
    }

    static func setLayoutVersion(_ db: Database) throws {
        try db.run(
            #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('layout', ?)"#,
            [.text(MirrorModel.layoutVersion)])
    }

    /// Brings the tables of a mirror written with an older layout to the current one, in one
    /// transaction: each entity table is rebuilt and its rows re-encoded from their stored documents
    /// (`_json`, `_etag` and `_dr` kept, so local changes and the queue stay valid); link tables whose
    /// key columns are stored differently now are emptied (those navigations answer 501 until the next
    /// download), the others keep their rows.
    static func migrateLayout(_ db: Database, _ m: MirrorModel) throws {
        let stored = try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key='layout'"#)?.string
        guard stored != MirrorModel.layoutVersion else { return }
        try db.transaction(.immediate) {
            for layout in m.layouts.values.sorted(by: { $0.set.name < $1.set.name }) {
                let old = "_mg_old/" + layout.set.name
                try db.execute("DROP TABLE IF EXISTS \(q(old))")
                let exists =
                    try db.scalar(
                        "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", [.text(layout.set.name)])
                    != nil
                if exists { try db.execute("ALTER TABLE \(q(layout.set.name)) RENAME TO \(q(old))") }
                for index in try db.query(
                    "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name=? AND sql IS NOT NULL",
                    [.text(old)]
                ).compactMap({ $0[0].string }) {
                    try db.execute("DROP INDEX IF EXISTS \(q(index))")
                }
                try createTable(db, layout)
                guard exists else { continue }
                let insert = try db.prepare(MirrorWriter.storeSQL(layout, replacing: true))
                for row in try db.query("SELECT \"_json\", \"_etag\", \"_dr\" FROM \(q(old))") {
                    let members = (try? RawJSON.parse(row[0].string ?? "{}"))?.members ?? []
                    try insert.bind(
                        MirrorWriter.rowValues(
                            m, layout, members, etag: row[1].string, scope: row[2].string ?? "local"))
                    _ = try insert.step()
                    insert.reset()
                }
                try db.execute("DROP TABLE \(q(old))")
            }
            for navs in m.links.values {
                for link in navs.values
                where !(link.sourceKey + link.targetKey).allSatisfy({ Self.sameInBothLayouts($0.type) }) {
                    try db.execute("DROP TABLE IF EXISTS \(q(link.table))")
                }
            }
            try createLinkTables(db, m)
            try setLayoutVersion(db)
        }
    }

    /// Key types stored the same way by layouts 1 and 2.
    static func sameInBothLayouts(_ type: EdmPrimitiveType) -> Bool {
        switch type {
        case .boolean, .byte, .sbyte, .int16, .int32, .int64, .string: return true
        default: return false
        }
    }

    /// Replaces, in one transaction, the rows that defining request `request` (query `query`) brought:
    /// `rows` maps entity set names to their entities. Returns rows stored per set. With `pending` (the
    /// request queue's view, evaluated inside the same transaction so that no local write slips in
    /// between), entities with local changes still queued keep their local version (a locally deleted one
    /// stays deleted) and rows written through the gateway stay while anything is queued; once nothing is
    /// queued they give way to the server's. `links` (what `$expand` showed for navigation without
    /// referential constraints) replace the request's links in the same transaction, and `deltaLink`
    /// becomes the request's delta link (none when nil). Throws ``MirrorDownloadRaced`` (nothing stored)
    /// when requests left the queue while the download ran.
    @discardableResult
    public func replace(
        request: String, query: String, rows: [String: [MirrorEntity]], links: [MirrorLinkRecord] = [],
        pending: ((Database) throws -> MirrorPendingChanges)? = nil, deltaLink: String? = nil
    ) throws -> [String: Int] {
        try replaceCounting(
            request: request, query: query, rows: rows, links: links, pending: pending, deltaLink: deltaLink
        ).stored
    }

    /// ``replace(request:query:rows:links:pending:deltaLink:)`` with what it did.
    func replaceCounting(
        request: String, query: String, rows: [String: [MirrorEntity]], links: [MirrorLinkRecord] = [],
        pending: ((Database) throws -> MirrorPendingChanges)? = nil, deltaLink: String? = nil
    ) throws -> MirrorDownloadOutcome {
        try replaceCounting(
            [Replacement(request: request, query: query, rows: rows, links: links, deltaLink: deltaLink)],
            pending: pending)[0]
    }

    /// Replaces the rows of several defining requests in one transaction (a whole staged download: readers
    /// see the previous download or this one, never a mix); each as
    /// ``replace(request:query:rows:links:pending:deltaLink:)``, its delta link stored with its rows. Returns
    /// what it did per replacement, in order.
    func replaceCounting(
        _ replacements: [Replacement], pending: ((Database) throws -> MirrorPendingChanges)? = nil
    ) throws -> [MirrorDownloadOutcome] {
        guard let m = model else { throw MirrorError("no $metadata") }
        let now = iso8601Now()
        var outcomes: [MirrorDownloadOutcome] = []
        try pool.write { db in
            try db.transaction {
                let p = try pending?(db) ?? .none
                if !p.settled.isEmpty { throw MirrorDownloadRaced() }
                outcomes = []
                for r in replacements {
                    let (request, query, rows, links, deltaLink) = (
                        r.request, r.query, r.rows, r.links, r.deltaLink
                    )
                    var outcome = MirrorDownloadOutcome()
                    let sets = Set(
                        try db.query(
                            #"SELECT entitySet FROM "_mg_scope" WHERE request = ?"#, [.text(request)]
                        )
                        .compactMap { $0[0].string }
                    ).union(rows.keys)
                    // Entities with queued changes keep their rows as they are (marked while the request's rows
                    // are replaced).
                    if !p.entities.isEmpty { try Self.markProtected(db, m, p.entities, sets: sets) }
                    for set in sets where m.layouts[set] != nil {
                        try db.run("DELETE FROM \(q(set)) WHERE \"_dr\" = ?", [.text(request)])
                        // Nothing is queued: rows written locally have all been uploaded and the set is downloaded
                        // now, so local rows (e.g. nested entities of a deep insert whose server keys were never
                        // learned) give way to the server's.
                        if pending != nil, !p.queued {
                            try db.run(
                                "DELETE FROM \(q(set)) WHERE \"_dr\" IN " + MirrorWriter.localScopesSQL)
                        }
                    }
                    try db.run(#"DELETE FROM "_mg_scope" WHERE request = ?"#, [.text(request)])
                    // Links recorded by offline writes give way to the upstream's once all is uploaded.
                    if pending != nil, !p.queued { try Self.dropLocalLinks(db, m) }
                    try Self.replaceLinks(db, m, request: request, links: links)
                    for (set, entities) in rows.sorted(by: { $0.key < $1.key }) where m.layouts[set] != nil {
                        try Self.storeDownloaded(
                            db, m, request: request, set: set, entities, p, &outcome)
                        let n = outcome.stored[set] ?? 0
                        try db.run(
                            #"INSERT OR REPLACE INTO "_mg_scope" (request, entitySet, query, rows, downloadedAt) VALUES (?, ?, ?, ?, ?)"#,
                            [
                                .text(request), .text(set), .text(query), .integer(Int64(n)),
                                .text(now),
                            ])
                    }
                    if !p.entities.isEmpty { try Self.unmarkProtected(db, m, sets: sets) }
                    outcome.deltaLinkKept = deltaLink != nil
                    try Self.finishDownload(
                        db, request: request, query: query, link: outcome.deltaLinkKept ? deltaLink : nil,
                        at: now
                    )
                    outcomes.append(outcome)
                }
            }
            // Statistics for the query planner (which index serves a filter best).
            try db.execute("ANALYZE")
        }
        return outcomes
    }

    /// Whether rows loaded from bootstrap files answer: no download of the upstream replaced them yet.
    public var holdsBootstrap: Bool {
        ((try? pool.read { db in
            try db.scalar(#"SELECT EXISTS (SELECT 1 FROM "_mg_scope" WHERE request LIKE 'bootstrap:%')"#)
        }) ?? nil)?.int == 1
    }

    /// Removes the rows loaded from bootstrap files (once the defining requests have been downloaded).
    public func dropBootstrap() throws {
        guard let m = model else { return }
        try pool.write { db in
            try db.transaction {
                let sets = try db.query(
                    #"SELECT DISTINCT entitySet FROM "_mg_scope" WHERE request LIKE 'bootstrap:%'"#
                )
                .compactMap { $0[0].string }
                for set in sets where m.layouts[set] != nil {
                    try db.run("DELETE FROM \(q(set)) WHERE \"_dr\" LIKE 'bootstrap:%'")
                }
                try db.run(#"DELETE FROM "_mg_scope" WHERE request LIKE 'bootstrap:%'"#)
                for navs in m.links.values {
                    for link in navs.values {
                        try db.run("DELETE FROM \(q(link.table)) WHERE \"_dr\" LIKE 'bootstrap:%'")
                    }
                }
            }
        }
    }
}

extension ODataMirror {
    /// Runs `body` with a writer in one transaction on the writer connection; throws without a model.
    func write<T>(_ body: (MirrorWriter) throws -> T) throws -> T {
        guard let m = model else { throw MirrorError("no $metadata") }
        return try pool.write { db in
            try db.transaction(.immediate) { try body(MirrorWriter(db: db, model: m)) }
        }
    }
}
