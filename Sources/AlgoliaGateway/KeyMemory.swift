import Crypto
import Foundation
import Storage
import Synchronization

/// Remembers which API keys the upstream has accepted for which index, as salted SHA-256 hashes (never
/// the keys), so that local answers go only to clients that the real service would have answered.
/// Hashes survive restarts (`dataDir/state.sqlite`, mode 0600); nothing here is ever logged.
public final class KeyMemory: Sendable {
    private let pool: DatabasePool?
    private let salt: [UInt8]
    private let known = Mutex<Set<String>>([])

    /// Opens (creating) the table in `pool`; a nil pool keeps hashes in memory only.
    public init(pool: DatabasePool?) throws {
        self.pool = pool
        guard let pool else {
            salt = (0..<32).map { _ in UInt8.random(in: 0...255) }
            return
        }
        var loadedSalt: [UInt8] = []
        var hashes = Set<String>()
        try Self.migrator.migrate(pool)
        try pool.write { db in
            if let existing = try db.scalar("SELECT salt FROM mg_key_salt WHERE id = 1")?.bytes {
                loadedSalt = existing
            } else {
                loadedSalt = (0..<32).map { _ in UInt8.random(in: 0...255) }
                try db.run("INSERT INTO mg_key_salt (id, salt) VALUES (1, ?)", [.blob(loadedSalt)])
            }
            for row in try db.query("SELECT hash FROM mg_accepted_keys") {
                if let h = row[0].string { hashes.insert(h) }
            }
        }
        salt = loadedSalt
        known.withLock { $0 = hashes }
    }

    /// The store's tables in `state.sqlite`; the first migration accepts those of releases before
    /// migrations (created if missing).
    static let migrator = Migrator(
        table: "mg_migrations_keys",
        [
            Migration(
                "1-salt-and-accepted-keys",
                sql: """
                    CREATE TABLE IF NOT EXISTS mg_key_salt (id INTEGER PRIMARY KEY CHECK (id = 1), salt BLOB NOT NULL);
                    CREATE TABLE IF NOT EXISTS mg_accepted_keys (
                        hash TEXT PRIMARY KEY,
                        first_seen TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));
                    """)
        ])

    private func hash(appId: String, index: String, key: String) -> String {
        var hasher = SHA256()
        hasher.update(data: salt)
        for part in [appId, index, key] {
            hasher.update(data: Array(part.utf8))
            hasher.update(data: [0])
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// Whether the upstream accepted `key` for `index` before.
    public func isAccepted(appId: String, index: String, key: String) -> Bool {
        let h = hash(appId: appId, index: index, key: key)
        return known.withLock { $0.contains(h) }
    }

    /// Records that the upstream accepted `key` for `index` (a 2xx answer).
    public func accept(appId: String, index: String, key: String) {
        let h = hash(appId: appId, index: index, key: key)
        let isNew = known.withLock { $0.insert(h).inserted }
        guard isNew, let pool else { return }
        try? pool.write { db in
            try db.run("INSERT OR IGNORE INTO mg_accepted_keys (hash) VALUES (?)", [.text(h)])
        }
    }
}
