import JSONCore
import Storage

/// Persistent home of the offline indices: records, settings, synonyms and query rules in SQLite.
///
/// Promises:
/// - each build writes a new version (records in their own table `se_records_<version>`, written in
///   chunks outside the active pointer) and then switches the index's active version in one short
///   transaction, so readers keep answering from the previous version until that commit, and a build that
///   fails or is interrupted leaves the previous version active (its leftovers are removed at next open);
/// - `load` rebuilds the in-memory ``SearchIndex`` from the active version's records;
/// - table names come only from integer version ids, never from user text; every value is bound.
///
/// Uses its own tables (`se_indices`, `se_versions`, `se_records_N`) and migrations table
/// (`se_migrations`), so it can share a database file with other components.
public final class IndexStore: Sendable {
    /// The database.
    public let pool: DatabasePool

    /// Opens (creating if needed) `directory/search.sqlite`, encrypted with `encryption` if given.
    public convenience init(directory: String, encryption: StoreEncryption? = nil) throws {
        let path = directory.hasSuffix("/") ? directory + "search.sqlite" : directory + "/search.sqlite"
        try self.init(
            pool: DatabasePool(path: path, options: DatabaseOptions(encryption: encryption), readers: 2))
    }

    /// The index registry and versions in `search.sqlite` (each version's records live in a table of its
    /// own, `se_records_<id>`, created with the version); the first migration accepts the tables of
    /// releases before migrations.
    static let migrator = Migrator(
        table: "se_migrations",
        [
            Migration(
                "1-indices-and-versions",
                sql: """
                    CREATE TABLE IF NOT EXISTS se_indices (
                        name TEXT PRIMARY KEY,
                        active_version INTEGER,
                        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
                    );
                    CREATE TABLE IF NOT EXISTS se_versions (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        name TEXT NOT NULL,
                        settings TEXT NOT NULL,
                        synonyms TEXT NOT NULL,
                        record_count INTEGER NOT NULL DEFAULT 0,
                        complete INTEGER NOT NULL DEFAULT 0,
                        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
                    );
                    """),
            Migration(
                "2-version-rules", sql: "ALTER TABLE se_versions ADD COLUMN rules TEXT NOT NULL DEFAULT '[]'"),
        ])

    /// Uses an existing pool.
    public init(pool: DatabasePool) throws {
        self.pool = pool
        try Self.migrator.migrate(pool)
        try pool.write { db in
            // Remove versions that are neither complete-and-active nor in progress (left by a crash).
            let stale = try db.query(
                """
                SELECT v.id FROM se_versions v
                WHERE NOT EXISTS (SELECT 1 FROM se_indices i WHERE i.active_version = v.id)
                """)
            for row in stale {
                guard let id = row[0].int64 else { continue }
                try db.transaction {
                    try db.execute("DROP TABLE IF EXISTS se_records_\(id)")
                    try db.run("DELETE FROM se_versions WHERE id = ?", [.integer(id)])
                }
            }
        }
    }

    /// Names of the indices that have an active version, sorted.
    public func indexNames() throws -> [String] {
        try pool.read { db in
            try db.query("SELECT name FROM se_indices WHERE active_version IS NOT NULL ORDER BY name")
                .compactMap { $0[0].string }
        }
    }

    /// Summary of one index: record count, last update (RFC 3339) and active version id.
    public func info(name: String) throws -> (entries: Int, updatedAt: String, version: Int64)? {
        try pool.read { db in
            let rows = try db.query(
                """
                SELECT v.record_count, i.updated_at, v.id FROM se_indices i
                JOIN se_versions v ON v.id = i.active_version WHERE i.name = ?
                """, [.text(name)])
            guard let row = rows.first else { return nil }
            return (row[0].int ?? 0, row[1].string ?? "", row[2].int64 ?? 0)
        }
    }

    /// Loads the active version of `name` into memory, or nil when there is none. Records stream from
    /// SQLite into the index builder one row at a time.
    public func load(name: String) throws -> SearchIndex? {
        try pool.read { db -> SearchIndex? in
            let rows = try db.query(
                """
                SELECT v.id, v.settings, v.synonyms, v.rules FROM se_indices i
                JOIN se_versions v ON v.id = i.active_version WHERE i.name = ?
                """, [.text(name)])
            guard let row = rows.first, let id = row[0].int64 else { return nil }
            var settings = (try? JSON.parse(row[1].string ?? "{}")) ?? .object(JSONObject())
            if settings.objectValue == nil { settings = .object(JSONObject()) }
            let synonyms = (try? JSON.parse(row[2].string ?? "[]"))?.arrayValue ?? []
            let rules = (try? JSON.parse(row[3].string ?? "[]"))?.arrayValue ?? []
            let statement = try db.prepare("SELECT seq, body FROM se_records_\(id) ORDER BY seq")
            let data = try IndexData(
                settings: EngineSettings(settings), placeholders: SynonymTable.placeholderKeys(synonyms)
            ) { add in
                try statement.forEachRow { row in
                    guard let bytes = row.blob(1) else { return }
                    try bytes.withUnsafeBufferPointer { buffer in
                        add(try JSON.parse(buffer: buffer), buffer, row.int64(0))
                    }
                }
            }
            return SearchIndex(
                name: name, settings: settings, synonyms: synonyms, rules: rules, data: data,
                generation: "v\(id)", storeVersion: id)
        }
    }

    /// Stores a new version of `name` from records and makes it active atomically; returns the in-memory
    /// index built from the same records.
    @discardableResult
    public func build(
        name: String, settings: JSON, synonyms: [JSON], rules: [JSON] = [], records: some Sequence<JSON>,
        chunkSize: Int = 5000
    ) throws -> SearchIndex {
        let index = SearchIndex(
            name: name, settings: settings, synonyms: synonyms, rules: rules, records: Array(records))
        return try save(index, chunkSize: chunkSize)
    }

    /// Same, from a JSON array text (a data file), streamed element by element.
    @discardableResult
    public func build(
        name: String, settings: JSON, synonyms: [JSON], rules: [JSON] = [], jsonArray: [UInt8],
        chunkSize: Int = 5000
    ) throws -> SearchIndex {
        let index = try SearchIndex(
            name: name, settings: settings, synonyms: synonyms, rules: rules, jsonArray: jsonArray)
        return try save(index, chunkSize: chunkSize)
    }

    /// Writes an in-memory index (under its name) as a new version in chunks of `chunkSize` records per transaction (other writers on
    /// the same database are not blocked for the whole build), then swaps the active version in one short
    /// transaction and drops the previous version.
    @discardableResult
    public func save(_ index: SearchIndex, chunkSize: Int = 5000) throws -> SearchIndex {
        let name = index.name
        let data = index.data
        let id: Int64 = try pool.write { db in
            try db.transaction {
                try db.run(
                    "INSERT INTO se_versions (name, settings, synonyms, rules) VALUES (?, ?, ?, ?)",
                    [
                        .text(name), .text(index.settingsJSON.serialized()),
                        .text(JSON.array(index.synonyms).serialized()),
                        .text(JSON.array(index.rules).serialized()),
                    ])
                let id = db.lastInsertRowID
                try db.execute("CREATE TABLE se_records_\(id) (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
                return id
            }
        }
        do {
            let docs = data.liveDocs
            let keys = data.parts.storageKeys
            var start = 0
            while start < docs.count {
                let end = min(docs.count, start + max(1, chunkSize))
                try pool.write { db in
                    try db.transaction {
                        let insert = try db.prepare("INSERT INTO se_records_\(id) (seq, body) VALUES (?, ?)")
                        for doc in docs[start..<end] {
                            insert.reset()
                            try insert.bind([
                                .integer(keys[doc]), .blob(Array(data.recordBytes(doc))),
                            ])
                            _ = try insert.step()
                        }
                    }
                }
                start = end
            }
            try pool.write { db in
                let previous: Int64? = try db.transaction {
                    let old = try db.scalar(
                        "SELECT active_version FROM se_indices WHERE name = ?", [.text(name)])?
                        .int64
                    try db.run(
                        "UPDATE se_versions SET record_count = ?, complete = 1 WHERE id = ?",
                        [.integer(Int64(data.liveCount)), .integer(id)])
                    try db.run(
                        """
                        INSERT INTO se_indices (name, active_version) VALUES (?, ?)
                        ON CONFLICT(name) DO UPDATE SET active_version = excluded.active_version,
                            updated_at = strftime('%Y-%m-%dT%H:%M:%SZ','now')
                        """, [.text(name), .integer(id)])
                    return old
                }
                if let previous {
                    try db.transaction {
                        try db.execute("DROP TABLE IF EXISTS se_records_\(previous)")
                        try db.run("DELETE FROM se_versions WHERE id = ?", [.integer(previous)])
                    }
                }
            }
        } catch {
            _ = try? pool.write { db in
                try db.transaction {
                    try db.execute("DROP TABLE IF EXISTS se_records_\(id)")
                    try db.run("DELETE FROM se_versions WHERE id = ?", [.integer(id)])
                }
            }
            throw error
        }
        return SearchIndex(
            name: name, settings: index.settingsJSON, synonyms: index.synonyms, rules: index.rules,
            data: data,
            generation: "v\(id)", storeVersion: id)
    }

    /// Deletes an index and all its versions.
    public func delete(name: String) throws {
        try pool.write { db in
            let ids = try db.query("SELECT id FROM se_versions WHERE name = ?", [.text(name)]).compactMap {
                $0[0].int64
            }
            try db.transaction {
                try db.run("DELETE FROM se_indices WHERE name = ?", [.text(name)])
                for id in ids {
                    try db.execute("DROP TABLE IF EXISTS se_records_\(id)")
                    try db.run("DELETE FROM se_versions WHERE id = ?", [.integer(id)])
                }
            }
        }
    }
}
