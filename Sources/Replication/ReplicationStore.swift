import Foundation
import Storage

/// The schedules and paused policies in `state.sqlite` (tables `mg_replication_schedule` and
/// `mg_replication_paused`, migrations in `mg_migrations_replication`). Writes happen at the start and
/// end of runs, on pause and resume, and at shutdown; a failed write is logged by the caller and the
/// schedule goes on from memory.
public final class ReplicationStore: Sendable {
    private let pool: DatabasePool

    static let migrator = Migrator(
        table: "mg_migrations_replication",
        [
            Migration(
                "1-schedule-and-paused",
                sql: """
                    CREATE TABLE IF NOT EXISTS mg_replication_schedule (
                        job TEXT PRIMARY KEY, last_start REAL, last_end REAL, last_success REAL,
                        last_outcome TEXT, last_error TEXT, last_duration_ms INTEGER,
                        failures INTEGER NOT NULL DEFAULT 0, retry_at REAL,
                        refusals INTEGER NOT NULL DEFAULT 0, recheck_at REAL,
                        resume TEXT NOT NULL DEFAULT 'none', in_progress INTEGER NOT NULL DEFAULT 0,
                        jitter REAL NOT NULL DEFAULT 0, last_used REAL, runs INTEGER NOT NULL DEFAULT 0);
                    CREATE TABLE IF NOT EXISTS mg_replication_paused (policy TEXT PRIMARY KEY, since REAL NOT NULL);
                    """)
        ])

    /// Opens the tables in `pool` (creating them).
    public init(pool: DatabasePool) throws {
        self.pool = pool
        try Self.migrator.migrate(pool)
    }

    /// Every stored record by job id.
    public func records() throws -> [String: ScheduleRecord] {
        try pool.read { db in
            var out: [String: ScheduleRecord] = [:]
            let rows = try db.query(
                """
                SELECT job, last_start, last_end, last_success, last_outcome, last_error, last_duration_ms,
                       failures, retry_at, refusals, recheck_at, resume, in_progress, jitter, last_used, runs
                FROM mg_replication_schedule
                """)
            for row in rows {
                guard let job = row[0].string else { continue }
                func date(_ i: Int) -> Date? { row[i].double.map { Date(timeIntervalSince1970: $0) } }
                var r = ScheduleRecord()
                r.lastStart = date(1)
                r.lastEnd = date(2)
                r.lastSuccess = date(3)
                r.lastOutcome = row[4].string
                r.lastError = row[5].string
                r.lastDurationMs = row[6].int
                r.failures = row[7].int ?? 0
                r.retryAt = date(8)
                r.refusals = row[9].int ?? 0
                r.recheckAt = date(10)
                r.resume = row[11].string.flatMap(ScheduleRecord.Resume.init(rawValue:)) ?? .none
                r.inProgress = (row[12].int ?? 0) != 0
                r.jitter = row[13].double ?? 0
                r.lastUsed = date(14)
                r.runs = row[15].int ?? 0
                out[job] = r
            }
            return out
        }
    }

    /// Stores `record` for `job` (one statement, replacing the previous row).
    public func save(_ job: String, _ r: ScheduleRecord) throws {
        func date(_ d: Date?) -> SQLValue { d.map { .real($0.timeIntervalSince1970) } ?? .null }
        func text(_ s: String?) -> SQLValue { s.map { .text($0) } ?? .null }
        try pool.write { db in
            try db.run(
                """
                INSERT OR REPLACE INTO mg_replication_schedule (job, last_start, last_end, last_success,
                    last_outcome, last_error, last_duration_ms, failures, retry_at, refusals, recheck_at, resume,
                    in_progress, jitter, last_used, runs)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(job), date(r.lastStart), date(r.lastEnd), date(r.lastSuccess), text(r.lastOutcome),
                    text(r.lastError), r.lastDurationMs.map { .integer(Int64($0)) } ?? .null,
                    .integer(Int64(r.failures)), date(r.retryAt), .integer(Int64(r.refusals)),
                    date(r.recheckAt),
                    .text(r.resume.rawValue), .integer(r.inProgress ? 1 : 0), .real(r.jitter),
                    date(r.lastUsed),
                    .integer(Int64(r.runs)),
                ])
        }
    }

    /// The paused policies and since when.
    public func paused() throws -> [String: Date] {
        try pool.read { db in
            var out: [String: Date] = [:]
            for row in try db.query("SELECT policy, since FROM mg_replication_paused") {
                if let p = row[0].string { out[p] = Date(timeIntervalSince1970: row[1].double ?? 0) }
            }
            return out
        }
    }

    /// Stores that `policy` is paused since `since`, or (nil) that it runs.
    public func setPaused(_ policy: String, since: Date?) throws {
        try pool.write { db in
            if let since {
                try db.run(
                    "INSERT OR REPLACE INTO mg_replication_paused (policy, since) VALUES (?, ?)",
                    [.text(policy), .real(since.timeIntervalSince1970)])
            } else {
                try db.run("DELETE FROM mg_replication_paused WHERE policy = ?", [.text(policy)])
            }
        }
    }
}
