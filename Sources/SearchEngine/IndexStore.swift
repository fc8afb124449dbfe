import JSONCore
import Storage

/// Persistent home of the offline indices: records, settings and synonyms in SQLite.
///
/// Promises:
/// - each build writes a new version (records in their own table `se_records_<version>`, written in
///   chunks outside the active pointer) and then switches the index's active version in one short
///   transaction, so readers keep answering from the previous version until that commit, and a build that
///   fails or is interrupted leaves the previous version active (its leftovers are removed at next open);
/// - `load` rebuilds the in-memory ``SearchIndex`` from the active version's records;
/// - table names come only from integer version ids, never from user text; every value is bound.
///
/// Uses its own tables (`se_indices`, `se_versions`, `se_records_N`) and no `Migrator`, so it can share a
/// database file with other components.
public final class IndexStore: Sendable {
    /// The database.
    public let pool: DatabasePool

    /// Opens (creating if needed) `directory/search.sqlite`.
    public convenience init(directory: String) throws {
        let path = directory.hasSuffix("/") ? directory + "search.sqlite" : directory + "/search.sqlite"
        try self.init(pool: DatabasePool(path: path, readers: 2))
    }

    /// Uses an existing pool.
    public init(pool: DatabasePool) throws {
        self.pool = pool
        try pool.write { db in
            try db.execute(
                """
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
                """)
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

    /// Loads the active version of `name` into memory, or nil when there is none.
    public func load(name: String) throws -> SearchIndex? {
        let loaded: (JSON, [JSON], [JSON], Int64)? = try pool.read { db in
            let rows = try db.query(
                """
                SELECT v.id, v.settings, v.synonyms, v.record_count FROM se_indices i
                JOIN se_versions v ON v.id = i.active_version WHERE i.name = ?
                """, [.text(name)])
            guard let row = rows.first, let id = row[0].int64 else { return nil }
            let settings = (try? JSON.parse(row[1].string ?? "{}")) ?? .object(JSONObject())
            let synonyms = (try? JSON.parse(row[2].string ?? "[]"))?.arrayValue ?? []
            var records: [JSON] = []
            records.reserveCapacity(row[3].int ?? 0)
            let statement = try db.prepare("SELECT body FROM se_records_\(id) ORDER BY seq")
            var failure: (any Error)?
            try statement.forEachRow { row in
                guard failure == nil, let bytes = row.blob(0) else { return }
                do { records.append(try JSON.parse(bytes)) } catch { failure = error }
            }
            if let failure { throw failure }
            return (settings, synonyms, records, id)
        }
        guard let (settings, synonyms, records, id) = loaded else { return nil }
        return SearchIndex(
            name: name, settings: settings, synonyms: synonyms, records: records, generation: "v\(id)")
    }

    /// Stores a new version of `name` and makes it active atomically; returns the in-memory index built
    /// from the same records. Records are written in chunks of `chunkSize` per transaction so other
    /// writers on the same database are not blocked for the whole build.
    @discardableResult
    public func build(
        name: String, settings: JSON, synonyms: [JSON], records: some Sequence<JSON>, chunkSize: Int = 5000
    ) throws -> SearchIndex {
        let all = Array(records)
        let id: Int64 = try pool.write { db in
            try db.transaction {
                try db.run(
                    "INSERT INTO se_versions (name, settings, synonyms) VALUES (?, ?, ?)",
                    [.text(name), .text(settings.serialized()), .text(JSON.array(synonyms).serialized())])
                let id = db.lastInsertRowID
                try db.execute("CREATE TABLE se_records_\(id) (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
                return id
            }
        }
        do {
            var start = 0
            while start < all.count {
                let end = min(all.count, start + chunkSize)
                try pool.write { db in
                    try db.transaction {
                        let insert = try db.prepare("INSERT INTO se_records_\(id) (seq, body) VALUES (?, ?)")
                        for seq in start..<end {
                            insert.reset()
                            try insert.bind([.integer(Int64(seq)), .blob(all[seq].serializedBytes())])
                            _ = try insert.step()
                        }
                    }
                }
                start = end
            }
            try pool.write { db in
                let previous: Int64? = try db.transaction {
                    let old = try db.scalar(
                        "SELECT active_version FROM se_indices WHERE name = ?", [.text(name)])?.int64
                    try db.run(
                        "UPDATE se_versions SET record_count = ?, complete = 1 WHERE id = ?",
                        [.integer(Int64(all.count)), .integer(id)])
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
            name: name, settings: settings, synonyms: synonyms, records: all, generation: "v\(id)")
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
