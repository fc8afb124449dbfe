/// One named schema change. Names are recorded once applied and must never be reused for other work.
public struct Migration: Sendable {
    public let name: String
    public let apply: @Sendable (Database) throws -> Void

    public init(_ name: String, apply: @escaping @Sendable (Database) throws -> Void) {
        self.name = name
        self.apply = apply
    }

    /// A migration that runs fixed SQL (one or more statements).
    public init(_ name: String, sql: String) {
        self.init(name) { db in try db.execute(sql) }
    }
}

/// Applies named migrations in order, exactly once each.
///
/// Promises: applied names are recorded in table `mg_migrations`; each migration runs in its own
/// transaction together with its record, so a failure leaves neither; a database whose recorded names
/// are not a prefix of this list (an unknown name, or a different order) is refused untouched.
public struct Migrator: Sendable {
    public let migrations: [Migration]

    public init(_ migrations: [Migration]) { self.migrations = migrations }

    /// Names already applied to `db`, in the order they were applied.
    public static func appliedNames(_ db: Database) throws -> [String] {
        try ensureTable(db)
        return try db.query("SELECT name FROM mg_migrations ORDER BY seq").compactMap { $0[0].string }
    }

    private static func ensureTable(_ db: Database) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS mg_migrations (
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
        let applied = try Migrator.appliedNames(db)
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
                try db.run("INSERT INTO mg_migrations(name) VALUES (?)", [.text(m.name)])
            }
            done.append(m.name)
        }
        return done
    }
}
