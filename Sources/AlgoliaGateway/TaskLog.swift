import Foundation
import Storage
import Synchronization

/// The tables of local writes in `search.sqlite`, beside the index store's (their own migrations table):
/// the gateway's tasks, the queue of mirrored-index writes waiting for the upstream, and the writes the
/// upstream refused on replay. Credentials live only in queue rows (the file is mode 0600) and go with
/// them.
enum WriteTables {
    static let migrator = Migrator(
        table: "mg_migrations_algolia_writes",
        [
            Migration(
                "1-tasks-queue-failed",
                sql: """
                    CREATE TABLE IF NOT EXISTS mg_algolia_tasks (
                        id INTEGER PRIMARY KEY,
                        index_name TEXT NOT NULL,
                        state TEXT NOT NULL,
                        upstream_task INTEGER,
                        created_at REAL NOT NULL);
                    CREATE TABLE IF NOT EXISTS mg_algolia_write_queue (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        index_name TEXT NOT NULL,
                        task_id INTEGER NOT NULL,
                        method TEXT NOT NULL,
                        target TEXT NOT NULL,
                        body BLOB NOT NULL,
                        app_id TEXT NOT NULL,
                        api_key TEXT NOT NULL,
                        idempotent INTEGER NOT NULL,
                        queued_at REAL NOT NULL);
                    CREATE TABLE IF NOT EXISTS mg_algolia_failed_writes (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        index_name TEXT NOT NULL,
                        task_id INTEGER NOT NULL,
                        method TEXT NOT NULL,
                        target TEXT NOT NULL,
                        body BLOB NOT NULL,
                        status INTEGER NOT NULL,
                        message TEXT NOT NULL,
                        queued_at REAL NOT NULL,
                        failed_at REAL NOT NULL);
                    CREATE INDEX IF NOT EXISTS mg_algolia_failed_writes_index ON mg_algolia_failed_writes (index_name);
                    """)
        ])
}

/// The gateway's own Algolia tasks (`taskID` of every local write). A task is recorded in the same
/// transaction as its write, so a task the gateway answered with survives a crash together with the
/// write.
///
/// Promises: ids are integers from 2^52 up (below 2^53, so JavaScript clients read them exactly, and far
/// above the ids Algolia issues, so an upstream task id is never taken for a local one); a local write's
/// task is `published` once the write is searchable (before the answer); a queued mirrored-index write's
/// task is `notPublished` until its replay is accepted, then follows the upstream's task; a replay the
/// upstream refused ends its task (`published`: nothing more will happen; the write is listed as failed).
public final class TaskLog: Sendable {
    /// The first id the gateway issues.
    public static let firstID: Int64 = 1 << 52

    /// Where a task stands.
    public enum State: Sendable, Equatable {
        /// Done (searchable locally; or replayed and published upstream; or refused on replay).
        case published
        /// A queued write not yet accepted by the upstream.
        case queued
        /// Accepted by the upstream as its task `upstreamTask`, which may still be running there.
        case replayed(upstreamTask: Int64)
    }

    private let pool: DatabasePool
    private let next: Mutex<Int64>

    /// Opens the tables in `pool` (the index store's database); drops published tasks older than a week.
    public init(pool: DatabasePool) throws {
        self.pool = pool
        try WriteTables.migrator.migrate(pool)
        let week = Date().timeIntervalSince1970 - 7 * 86400
        let last = try pool.write { db -> Int64? in
            try db.run(
                "DELETE FROM mg_algolia_tasks WHERE state = 'published' AND created_at < ?", [.real(week)])
            return try db.scalar("SELECT max(id) FROM mg_algolia_tasks")?.int64
        }
        next = Mutex(max(Self.firstID, (last ?? 0) + 1))
    }

    /// Records a new task of `index` in `db` (call inside the write's transaction): published at once, or
    /// queued for the upstream.
    public func record(index: String, queued: Bool, in db: Database) throws -> Int64 {
        let id = next.withLock { n in
            defer { n += 1 }
            return n
        }
        try db.run(
            "INSERT INTO mg_algolia_tasks (id, index_name, state, created_at) VALUES (?, ?, ?, ?)",
            [
                .integer(id), .text(index), .text(queued ? "queued" : "published"),
                .real(Date().timeIntervalSince1970),
            ])
        return id
    }

    /// The index and state of task `id`, nil when the gateway never issued it.
    public func lookup(_ id: Int64) -> (index: String, state: State)? {
        guard id >= Self.firstID else { return nil }
        let row = try? pool.read { db in
            try db.query(
                "SELECT index_name, state, upstream_task FROM mg_algolia_tasks WHERE id = ?", [.integer(id)]
            )
            .first
        }
        guard let row, let index = row[0].string else { return nil }
        switch row[1].string {
        case "queued": return (index, .queued)
        case "replayed": return (index, row[2].int64.map { .replayed(upstreamTask: $0) } ?? .published)
        default: return (index, .published)
        }
    }

    /// Task `id` was accepted by the upstream as `upstreamTask` (nil: the upstream gave no task; then
    /// it is published).
    public func replayed(_ id: Int64, upstreamTask: Int64?, in db: Database) throws {
        if let upstreamTask {
            try db.run(
                "UPDATE mg_algolia_tasks SET state = 'replayed', upstream_task = ? WHERE id = ?",
                [.integer(upstreamTask), .integer(id)])
        } else {
            try db.run("UPDATE mg_algolia_tasks SET state = 'published' WHERE id = ?", [.integer(id)])
        }
    }

    /// Task `id` is over (its upstream task published, or its replay refused).
    public func publish(_ id: Int64, in db: Database? = nil) throws {
        let sql = "UPDATE mg_algolia_tasks SET state = 'published' WHERE id = ?"
        if let db {
            try db.run(sql, [.integer(id)])
        } else {
            try pool.write { try $0.run(sql, [.integer(id)]) }
        }
    }
}
