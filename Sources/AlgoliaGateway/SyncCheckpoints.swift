import Foundation
import JSONCore
import Storage

/// Sync progress in `state.sqlite`: the checkpoint and the pages fetched so far, written together after
/// each page, so that a sync interrupted by a crash resumes where it stopped.
final class SQLiteCheckpoints: SyncCheckpointStore {
    private let pool: DatabasePool

    /// The checkpoint tables in `state.sqlite`; the first migration accepts those of releases before
    /// migrations.
    static let migrator = Migrator(
        table: "mg_migrations_sync_checkpoints",
        [
            Migration(
                "1-checkpoint-and-staging",
                sql: """
                    CREATE TABLE IF NOT EXISTS mg_sync_checkpoint (
                        key TEXT PRIMARY KEY, selection INTEGER NOT NULL, cursor TEXT, fetched INTEGER NOT NULL,
                        pages INTEGER NOT NULL);
                    CREATE TABLE IF NOT EXISTS mg_sync_staging (
                        key TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (key, seq));
                    """)
        ])

    init(pool: DatabasePool) throws {
        self.pool = pool
        try Self.migrator.migrate(pool)
    }

    func resume(_ key: String) -> (checkpoint: SyncCheckpoint, records: [JSON])? {
        try? pool.read { db -> (checkpoint: SyncCheckpoint, records: [JSON])? in
            let rows = try db.query(
                "SELECT selection, cursor, fetched, pages FROM mg_sync_checkpoint WHERE key = ?", [.text(key)]
            )
            guard let row = rows.first else { return nil }
            let checkpoint = SyncCheckpoint(
                selection: row[0].int ?? 0, cursor: row[1].string, fetched: row[2].int ?? 0,
                pages: row[3].int ?? 0)
            var records: [JSON] = []
            let statement = try db.prepare("SELECT body FROM mg_sync_staging WHERE key = ? ORDER BY seq")
            try statement.bind([.text(key)])
            try statement.forEachRow { s in
                if let bytes = s.blob(0), let json = try? JSON.parse(bytes) { records.append(json) }
            }
            return (checkpoint, records)
        } ?? nil
    }

    func save(_ key: String, _ checkpoint: SyncCheckpoint, page: [JSON]) {
        try? pool.write { db in
            try db.transaction {
                let next = try db.scalar(
                    "SELECT COALESCE(MAX(seq), 0) FROM mg_sync_staging WHERE key = ?", [.text(key)])
                var seq = next?.int64 ?? 0
                for record in page {
                    seq += 1
                    try db.run(
                        "INSERT INTO mg_sync_staging (key, seq, body) VALUES (?, ?, ?)",
                        [.text(key), .integer(seq), .blob(record.serializedBytes())])
                }
                try db.run(
                    """
                    INSERT OR REPLACE INTO mg_sync_checkpoint (key, selection, cursor, fetched, pages)
                    VALUES (?, ?, ?, ?, ?)
                    """,
                    [
                        .text(key), .integer(Int64(checkpoint.selection)),
                        checkpoint.cursor.map { .text($0) } ?? .null,
                        .integer(Int64(checkpoint.fetched)), .integer(Int64(checkpoint.pages)),
                    ])
            }
        }
    }

    func clear(_ key: String) {
        try? pool.write { db in
            try db.transaction {
                try db.run("DELETE FROM mg_sync_staging WHERE key = ?", [.text(key)])
                try db.run("DELETE FROM mg_sync_checkpoint WHERE key = ?", [.text(key)])
            }
        }
    }
}
