import Foundation
import Storage

/// Where a download stands, in the mirror file: the pages fetched so far (raw bodies, in order) and
/// the next page to fetch, so that a download stopped at its run's budget — or killed — resumes from its
/// last defining request and page. The staged pages become rows only when every defining request is
/// fetched: the mirror keeps answering with the previous download until then (a request read by its delta
/// link is not staged: its changes are stored at once, and the position moves past it).
///
/// Tables `_mg_download` (one row) and `_mg_download_page`, migrations in `_mg_migrations_download`.
final class DownloadCheckpoints: Sendable {
    private let pool: DatabasePool

    /// How far a download got: defining request `request` (0-based) continues at `next` (nil: from its
    /// first page). `fingerprint` names what was being downloaded (`$metadata` and defining requests).
    struct Position: Equatable {
        var fingerprint: String
        var request: Int
        var next: String?
        var pages: Int
    }

    static let migrator = Migrator(
        table: "_mg_migrations_download",
        [
            Migration(
                "1-download-checkpoint",
                sql: """
                    CREATE TABLE IF NOT EXISTS "_mg_download" (id INTEGER PRIMARY KEY CHECK (id = 1),
                      fingerprint TEXT NOT NULL, request INTEGER NOT NULL, next TEXT, pages INTEGER NOT NULL);
                    CREATE TABLE IF NOT EXISTS "_mg_download_page" (request INTEGER NOT NULL, seq INTEGER NOT NULL,
                      body BLOB NOT NULL, PRIMARY KEY (request, seq));
                    """)
        ])

    init(pool: DatabasePool) throws {
        self.pool = pool
        try Self.migrator.migrate(pool)
    }

    /// The stored position, if a download was interrupted.
    func position() -> Position? {
        let row = try? pool.read { db in
            try db.query(#"SELECT fingerprint, request, next, pages FROM "_mg_download" WHERE id = 1"#).first
        }
        guard let row = row ?? nil, let fingerprint = row[0].string else { return nil }
        return Position(
            fingerprint: fingerprint, request: row[1].int ?? 0, next: row[2].string, pages: row[3].int ?? 0)
    }

    /// Starts over: no page staged, the position at the first request.
    func start(_ fingerprint: String) throws {
        try pool.write { db in
            try db.transaction {
                try db.run(#"DELETE FROM "_mg_download_page""#)
                try db.run(
                    #"INSERT OR REPLACE INTO "_mg_download" (id, fingerprint, request, next, pages) VALUES (1, ?, 0, NULL, 0)"#,
                    [.text(fingerprint)])
            }
        }
    }

    /// Stores one page of `position.request` and the position after it (the next page, or the next
    /// request when `next` is nil), in one transaction.
    func save(page body: [UInt8], at position: Position, next: String?) throws -> Position {
        var after = position
        after.pages += 1
        after.next = next
        if next == nil { after.request += 1 }
        try pool.write { db in
            try db.transaction {
                let seq =
                    try db.scalar(
                        #"SELECT COALESCE(MAX(seq), 0) + 1 FROM "_mg_download_page" WHERE request = ?"#,
                        [.integer(Int64(position.request))])?.int64 ?? 1
                try db.run(
                    #"INSERT INTO "_mg_download_page" (request, seq, body) VALUES (?, ?, ?)"#,
                    [.integer(Int64(position.request)), .integer(seq), .blob(body)])
                try db.run(
                    #"UPDATE "_mg_download" SET request = ?, next = ?, pages = ? WHERE id = 1"#,
                    [
                        .integer(Int64(after.request)), after.next.map { .text($0) } ?? .null,
                        .integer(Int64(after.pages)),
                    ])
            }
        }
        return after
    }

    /// Moves past defining request `position.request` without staging a page (it was read by its delta
    /// link and stored at once).
    func skip(at position: Position) throws -> Position {
        var after = position
        after.request += 1
        after.next = nil
        try pool.write { db in
            try db.run(
                #"UPDATE "_mg_download" SET request = ?, next = NULL, pages = ? WHERE id = 1"#,
                [.integer(Int64(after.request)), .integer(Int64(after.pages))])
        }
        return after
    }

    /// The staged pages of defining request `request`, in order.
    func pages(request: Int) throws -> [[UInt8]] {
        try pool.read { db in
            var out: [[UInt8]] = []
            let statement = try db.prepare(
                #"SELECT body FROM "_mg_download_page" WHERE request = ? ORDER BY seq"#)
            try statement.bind([.integer(Int64(request))])
            try statement.forEachRow { s in if let b = s.blob(0) { out.append(b) } }
            return out
        }
    }

    /// Forgets the download (after it was stored, or when it cannot be continued).
    func clear() {
        try? pool.write { db in
            try db.transaction {
                try db.run(#"DELETE FROM "_mg_download_page""#)
                try db.run(#"DELETE FROM "_mg_download""#)
            }
        }
    }

    /// A stable name for what is downloaded: the `$metadata` bytes and the defining requests (FNV-1a).
    static func fingerprint(metadata: [UInt8], requests: [(String, String)]) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) {
            for b in bytes {
                h ^= UInt64(b)
                h = h &* 0x100_0000_01b3
            }
            h ^= 0xff
            h = h &* 0x100_0000_01b3
        }
        mix(metadata)
        for (name, query) in requests {
            mix(name.utf8)
            mix(query.utf8)
        }
        return String(h, radix: 16)
    }
}
