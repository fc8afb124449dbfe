import JSONCore
import Storage

extension IndexStore {
    /// The stored version is not the one the change was computed from (a sync or build installed
    /// another one, or the index was deleted or moved meanwhile): nothing was written.
    public struct VersionConflict: Error, CustomStringConvertible, Sendable {
        /// The index.
        public let name: String
        public var description: String { "index \(name) changed in the store meanwhile" }
    }

    /// Runs `body` in one write transaction (`synchronous=FULL`: once this returns, what `body` did is
    /// on disk; if it throws, nothing of it is). `body` may also run statements of its own on the same
    /// database (``Transaction/database``), so that other tables change atomically with the indices.
    public func write<T>(_ body: (Transaction) throws -> T) throws -> T {
        try pool.write { db in try db.transaction { try body(Transaction(db: db)) } }
    }

    /// Whether `name` was deleted (``Transaction/delete(_:)``) and not written since: a configured
    /// index must then not be bootstrapped again.
    public func isDeleted(name: String) throws -> Bool {
        try pool.read { db in
            try db.scalar(
                "SELECT 1 FROM se_indices WHERE name = ? AND active_version IS NULL", [.text(name)]) != nil
        }
    }

    /// One write transaction of the index store. Table names come from integer version ids only;
    /// every value is bound.
    public struct Transaction {
        /// The database, inside the transaction.
        public let database: Database
        init(db: Database) { database = db }

        private func active(_ name: String) throws -> Int64? {
            try database.scalar("SELECT active_version FROM se_indices WHERE name = ?", [.text(name)])?.int64
        }

        private func newVersion(_ name: String, settings: JSON, synonyms: [JSON], rules: [JSON]) throws
            -> Int64
        {
            try database.run(
                "INSERT INTO se_versions (name, settings, synonyms, rules, complete) VALUES (?, ?, ?, ?, 1)",
                [
                    .text(name), .text(settings.serialized()), .text(JSON.array(synonyms).serialized()),
                    .text(JSON.array(rules).serialized()),
                ])
            let id = database.lastInsertRowID
            try database.execute(
                "CREATE TABLE se_records_\(id) (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            return id
        }

        private func activate(_ name: String, _ id: Int64?) throws {
            let previous = try active(name)
            try database.run(
                """
                INSERT INTO se_indices (name, active_version) VALUES (?, ?)
                ON CONFLICT(name) DO UPDATE SET active_version = excluded.active_version,
                    updated_at = strftime('%Y-%m-%dT%H:%M:%SZ','now')
                """, [.text(name), id.map { .integer($0) } ?? .null])
            if let previous, previous != id { try drop(previous) }
        }

        private func drop(_ id: Int64) throws {
            try database.execute("DROP TABLE IF EXISTS se_records_\(id)")
            try database.run("DELETE FROM se_versions WHERE id = ?", [.integer(id)])
        }

        /// Applies `change` to the active version of `index.name` (the index as it is after the change).
        /// The active version must be `index.storeVersion`; an index without one is created (its
        /// settings, synonyms and rules from `index`). Returns the version written.
        @discardableResult
        public func apply(_ change: StoredChange, to index: SearchIndex, expectedVersion: Int64?) throws
            -> Int64
        {
            let name = index.name
            let current = try active(name)
            let id: Int64
            if let current {
                guard expectedVersion == nil || expectedVersion == current else {
                    throw VersionConflict(name: name)
                }
                id = current
            } else {
                guard expectedVersion == nil else { throw VersionConflict(name: name) }
                id = try newVersion(
                    name, settings: index.settingsJSON, synonyms: index.synonyms, rules: index.rules)
                try activate(name, id)
            }
            if change.clear { try database.execute("DELETE FROM se_records_\(id)") }
            if !change.deletedKeys.isEmpty {
                let delete = try database.prepare("DELETE FROM se_records_\(id) WHERE seq = ?")
                for key in change.deletedKeys {
                    delete.reset()
                    try delete.bind([.integer(key)])
                    _ = try delete.step()
                }
            }
            if !change.inserted.isEmpty {
                let insert = try database.prepare(
                    "INSERT OR REPLACE INTO se_records_\(id) (seq, body) VALUES (?, ?)")
                for record in change.inserted {
                    insert.reset()
                    try insert.bind([.integer(record.key), .blob(record.bytes)])
                    _ = try insert.step()
                }
            }
            try database.run(
                "UPDATE se_versions SET record_count = ? WHERE id = ?",
                [.integer(Int64(change.recordCount)), .integer(id)])
            if let settings = change.settings {
                try database.run(
                    "UPDATE se_versions SET settings = ? WHERE id = ?",
                    [.text(settings.serialized()), .integer(id)])
            }
            if let synonyms = change.synonyms {
                try database.run(
                    "UPDATE se_versions SET synonyms = ? WHERE id = ?",
                    [.text(JSON.array(synonyms).serialized()), .integer(id)])
            }
            if let rules = change.rules {
                try database.run(
                    "UPDATE se_versions SET rules = ? WHERE id = ?",
                    [.text(JSON.array(rules).serialized()), .integer(id)])
            }
            try database.run(
                "UPDATE se_indices SET updated_at = strftime('%Y-%m-%dT%H:%M:%SZ','now') WHERE name = ?",
                [.text(name)])
            return id
        }

        /// Copies the active version of `source` (records, settings, synonyms, rules) to a new version
        /// that becomes `destination`'s (its previous one is dropped). Returns the new version, or nil
        /// when `source` has none.
        public func copy(from source: String, to destination: String) throws -> Int64? {
            guard let from = try active(source) else { return nil }
            try database.run(
                """
                INSERT INTO se_versions (name, settings, synonyms, rules, record_count, complete)
                SELECT ?, settings, synonyms, rules, record_count, 1 FROM se_versions WHERE id = ?
                """, [.text(destination), .integer(from)])
            let id = database.lastInsertRowID
            try database.execute(
                "CREATE TABLE se_records_\(id) (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            try database.execute(
                "INSERT INTO se_records_\(id) (seq, body) SELECT seq, body FROM se_records_\(from)")
            try activate(destination, id)
            return id
        }

        /// Makes `source`'s active version `destination`'s (the destination's previous one is dropped)
        /// and leaves `source` deleted (``isDeleted(name:)``). Returns the version, or nil when `source`
        /// has none (nothing changes).
        public func move(from source: String, to destination: String) throws -> Int64? {
            guard let from = try active(source) else { return nil }
            try database.run(
                "UPDATE se_versions SET name = ? WHERE id = ?", [.text(destination), .integer(from)])
            try database.run("UPDATE se_indices SET active_version = NULL WHERE name = ?", [.text(source)])
            try activate(destination, from)
            return from
        }

        /// Deletes `name`'s records and metadata; remembers that it was deleted (``isDeleted(name:)``).
        public func delete(_ name: String) throws {
            try activate(name, nil)
        }
    }
}
