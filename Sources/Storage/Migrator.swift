/// One named schema change. Names are recorded once applied and must never be reused for other work.
public struct Migration: Sendable {
    /// The name recorded once applied.
    public let name: String
    /// The change, run inside the migration's transaction.
    public let apply: @Sendable (Database) throws -> Void

    /// A migration that runs `apply`.
    public init(_ name: String, apply: @escaping @Sendable (Database) throws -> Void) {
        self.name = name
        self.apply = apply
    }

    /// A migration that runs fixed SQL (one or more statements).
    public init(_ name: String, sql: String) {
        self.init(name) { db in try db.execute(sql) }
    }
}

/// Applies named migrations in order, exactly once each: the one way a store creates and changes its
/// schema.
///
/// Promises: applied names are recorded in the store's own table (`table`, so that several stores can
/// share one database file without seeing each other's history); each migration runs in its own
/// transaction together with its record, so a failure leaves neither; a database whose recorded names
/// are not a prefix of this list (an unknown name, or a different order) is refused untouched.
///
/// A store that existed before it had migrations declares as its first migration one that accepts
/// whatever schema the earlier releases left (tables created if missing, columns added if missing), so
/// that an existing data directory is migrated, never rebuilt.
public struct Migrator: Sendable {
    /// The table that records this store's applied migrations.
    public let table: String
    /// The migrations, in the order they apply.
    public let migrations: [Migration]

    /// A migrator recording into `table` (letters, digits and `_` only: a name chosen in code, never
    /// from input).
    public init(table: String = "mg_migrations", _ migrations: [Migration]) {
        precondition(
            !table.isEmpty
                && table.utf8.allSatisfy {
                    $0 == 0x5F || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0)
                        || (0x61...0x7A).contains($0)
                },
            "migration table names are identifiers")
        self.table = table
        self.migrations = migrations
    }

    /// Names already applied to `db` by the migrator recording into `table`, in the order they were applied.
    public static func appliedNames(_ db: Database, table: String = "mg_migrations") throws -> [String] {
        try ensureTable(db, table)
        return try db.query("SELECT name FROM \(table) ORDER BY seq").compactMap { $0[0].string }
    }

    /// Applies the migrations not yet recorded on the writer of `pool`; returns the names applied now.
    @discardableResult
    public func migrate(_ pool: DatabasePool) throws -> [String] {
        try pool.write { try migrate($0) }
    }

    private static func ensureTable(_ db: Database, _ table: String) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS \(table) (
              seq INTEGER PRIMARY KEY,
              name TEXT NOT NULL UNIQUE,
              applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
            )
            """)
    }

    /// Applies the migrations not yet recorded; returns the names applied now.
    @discardableResult
    public func migrate(_ db: Database) throws -> [String] {
        var seen = Set<String>()
        for m in migrations where !seen.insert(m.name).inserted {
            throw MigrationError("duplicate migration name '\(m.name)'")
        }
        let applied = try Migrator.appliedNames(db, table: table)
        for (i, name) in applied.enumerated() {
            guard i < migrations.count else {
                throw MigrationError(
                    "database has unknown migration '\(name)' (newer version of the program?)")
            }
            guard migrations[i].name == name else {
                if seen.contains(name) {
                    throw MigrationError(
                        "migration '\(name)' was applied out of order (expected '\(migrations[i].name)' at \(i + 1))"
                    )
                }
                throw MigrationError("database has unknown migration '\(name)'")
            }
        }
        var done: [String] = []
        for m in migrations.dropFirst(applied.count) {
            try db.transaction(.immediate) {
                try m.apply(db)
                try db.run("INSERT INTO \(table)(name) VALUES (?)", [.text(m.name)])
            }
            done.append(m.name)
        }
        return done
    }
}

extension Database {
    /// The column names of `table` (for a store's first migration, which accepts the columns earlier
    /// releases added with `ALTER TABLE`). `table` is an identifier chosen in code.
    public func columns(of table: String) throws -> Set<String> {
        Set(try query("PRAGMA table_info(\"\(table)\")").compactMap { $0[1].string })
    }

    /// Adds each of `columns` (name and declaration) that `table` lacks.
    public func addMissingColumns(_ table: String, _ columns: [(name: String, declaration: String)]) throws {
        let have = try self.columns(of: table)
        for (name, declaration) in columns where !have.contains(name) {
            try execute("ALTER TABLE \"\(table)\" ADD COLUMN \"\(name)\" \(declaration)")
        }
    }
}
