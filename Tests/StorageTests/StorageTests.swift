import Foundation
import Testing

@testable import Storage

/// A fresh directory under the system temp dir, removed by `cleanup()`.
struct TempDir {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("mg-storage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    func cleanup() { try? FileManager.default.removeItem(at: url) }
}

private func mode(_ path: String) throws -> Int {
    let attrs = try FileManager.default.attributesOfItem(atPath: path)
    return (attrs[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

struct ThrowMe: Error {}

@Suite struct DatabaseTests {
    @Test func crud() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL, n INTEGER)")
        try db.run("INSERT INTO t(name, n) VALUES (?, ?)", [.text("a"), .integer(1)])
        #expect(db.lastInsertRowID == 1)
        try db.run("INSERT INTO t(name, n) VALUES (?, ?)", [.text("b"), .integer(2)])
        #expect(try db.scalar("SELECT count(*) FROM t") == .integer(2))
        try db.run("UPDATE t SET n = n + 10 WHERE name = ?", [.text("a")])
        #expect(db.changes == 1)
        let rows = try db.query("SELECT id, name, n FROM t ORDER BY id")
        #expect(rows.count == 2)
        #expect(rows[0]["name"] == .text("a"))
        #expect(rows[0]["n"] == .integer(11))
        #expect(rows[1][0] == .integer(2))
        #expect(rows[0]["missing"] == nil)
        try db.run("DELETE FROM t WHERE id = ?", [.integer(1)])
        #expect(db.changes == 1)
        #expect(try db.scalar("SELECT name FROM t") == .text("b"))
        #expect(try db.scalar("SELECT name FROM t WHERE id = 99") == nil)
    }

    @Test func typesRoundTrip() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE v(x)")
        let values: [SQLValue] = [
            .null, .integer(.max), .integer(.min), .integer(0), .integer(-1),
            .real(3.141592653589793), .real(-0.5), .real(1e308), .real(.leastNonzeroMagnitude),
            .text(""), .text("héllo wörld ✓ 日本語 🎉"), .text("nul\u{0}inside"),
            .blob([]), .blob([0, 1, 2, 255, 0]), .blob(Array(repeating: 7, count: 100_000)),
        ]
        for v in values { try db.run("INSERT INTO v(x) VALUES (?)", [v]) }
        let back = try db.query("SELECT x FROM v ORDER BY rowid").map { $0[0] }
        #expect(back == values)

        let stmt = try db.prepare("SELECT ?, ?, ?, ?, ?")
        try stmt.bind([.integer(42), .real(2.5), .text("ü"), .blob([9]), .null])
        #expect(try stmt.step())
        #expect(stmt.int64(0) == 42)
        #expect(stmt.double(1) == 2.5)
        #expect(stmt.text(2) == "ü")
        #expect(stmt.blob(3) == [9])
        #expect(stmt.isNull(4))
        #expect(stmt.text(4) == nil)
        #expect(stmt.blob(4) == nil)
        #expect(stmt.columnCount == 5)
        #expect(try !stmt.step())
    }

    @Test func bindingNeverInterpolates() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE x(s TEXT)")
        let evil = "'); DROP TABLE x; --"
        try db.run("INSERT INTO x(s) VALUES (?)", [.text(evil)])
        #expect(try db.scalar("SELECT s FROM x") == .text(evil))
        #expect(try db.scalar("SELECT count(*) FROM x WHERE s = ?", [.text(evil)]) == .integer(1))
        #expect(try db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'x'") == .integer(1))
    }

    @Test func namedParametersAndForEachRow() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(a INTEGER); INSERT INTO t VALUES (1),(2),(3);")
        let stmt = try db.prepare("SELECT a FROM t WHERE a >= :min ORDER BY a")
        try stmt.bind(.integer(2), named: ":min")
        var seen: [Int64] = []
        try stmt.forEachRow { seen.append($0.int64(0)) }
        #expect(seen == [2, 3])
        #expect(stmt.columnName(0) == "a")
    }

    @Test func cachedStatementsAreReused() throws {
        let db = try Database(path: ":memory:")
        let a = try db.cached("SELECT ?")
        try a.bind([.integer(1)])
        #expect(try a.step())
        let b = try db.cached("SELECT ?")
        #expect(a === b)
        // reset and bindings cleared
        #expect(try b.step())
        #expect(b.isNull(0))
    }

    @Test func wrongBindingCountIsAnError() throws {
        let db = try Database(path: ":memory:")
        #expect(throws: SQLiteError.self) { try db.run("SELECT ?", []) }
    }

    @Test func errorsCarryMessageAndSQL() throws {
        let db = try Database(path: ":memory:")
        let error = try #require(throws: SQLiteError.self) { try db.query("SELECT * FROM nope") }
        #expect(error.message.contains("no such table: nope"))
        #expect(error.sql == "SELECT * FROM nope")
        #expect(error.description.contains("no such table"))

        try db.execute("CREATE TABLE u(k TEXT UNIQUE)")
        try db.run("INSERT INTO u VALUES (?)", ["k"])
        let dup = try #require(throws: SQLiteError.self) { try db.run("INSERT INTO u VALUES (?)", ["k"]) }
        #expect(dup.isConstraintViolation)
        #expect(dup.extendedCode == 2067)  // SQLITE_CONSTRAINT_UNIQUE
        #expect(dup.message.contains("UNIQUE"))

        let exec = try #require(throws: SQLiteError.self) { try db.execute("CREATE TABLE u(k)") }
        #expect(exec.message.contains("already exists"))
        #expect(exec.sql == "CREATE TABLE u(k)")
    }

    @Test func transactionCommitsAndRollsBackOnThrow() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(a INTEGER)")
        let r = try db.transaction {
            try db.run("INSERT INTO t VALUES (1)")
            return 5
        }
        #expect(r == 5)
        #expect(throws: ThrowMe.self) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES (2)")
                throw ThrowMe()
            }
        }
        #expect(!db.isInTransaction)
        #expect(try db.query("SELECT a FROM t").map { $0[0] } == [.integer(1)])
    }

    @Test func nestedTransactionsUseSavepoints() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(a INTEGER)")
        try db.transaction {
            try db.run("INSERT INTO t VALUES (1)")
            try? db.transaction {
                try db.run("INSERT INTO t VALUES (2)")
                throw ThrowMe()
            }
            try db.transaction {
                try db.run("INSERT INTO t VALUES (3)")
                try db.transaction { try db.run("INSERT INTO t VALUES (4)") }
            }
            #expect(db.isInTransaction)
        }
        #expect(try db.query("SELECT a FROM t ORDER BY a").map { $0[0] } == [1, 3, 4])
        // outer throw undoes inner committed savepoints too
        #expect(throws: ThrowMe.self) {
            try db.transaction {
                try db.transaction { try db.run("INSERT INTO t VALUES (5)") }
                throw ThrowMe()
            }
        }
        #expect(try db.scalar("SELECT count(*) FROM t") == .integer(3))
    }

    @Test func fileModeWALAndPragmas() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.path("a.sqlite")
        let old = umask(0o022)
        defer { umask(old) }
        let db = try Database(path: path, options: .init(synchronous: .normal, busyTimeoutMs: 1234))
        try db.execute("CREATE TABLE t(a); INSERT INTO t VALUES (1);")
        #expect(try db.scalar("PRAGMA journal_mode") == .text("wal"))
        #expect(try db.scalar("PRAGMA foreign_keys") == .integer(1))
        #expect(try db.scalar("PRAGMA synchronous") == .integer(1))
        #expect(try db.scalar("PRAGMA busy_timeout") == .integer(1234))
        #expect(try mode(path) == 0o600)
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(try mode(path + "-wal") == 0o600)
        #expect(try mode(path + "-shm") == 0o600)
        try db.checkpoint()
        let walSize = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? NSNumber
        #expect(walSize?.intValue == 0)
        db.close()
        #expect(throws: SQLiteError.self) { try db.execute("SELECT 1") }

        let ro = try Database(path: path, options: .init(readOnly: true))
        #expect(try ro.scalar("SELECT a FROM t") == .integer(1))
        #expect(throws: SQLiteError.self) { try ro.run("INSERT INTO t VALUES (2)") }
    }

    @Test func foreignKeysEnforced() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE c(p INTEGER REFERENCES p(id));")
        #expect(throws: SQLiteError.self) { try db.run("INSERT INTO c VALUES (?)", [.integer(7)]) }
    }

    @Test func openFailureNamesThePath() throws {
        let error = try #require(throws: SQLiteError.self) {
            _ = try Database(path: "/nonexistent-dir-mg/x.sqlite")
        }
        #expect(error.message.contains("/nonexistent-dir-mg/x.sqlite"))
    }
}

@Suite struct MigratorTests {
    @Test func runsOnceInOrder() throws {
        let db = try Database(path: ":memory:")
        let m = Migrator([
            Migration("001-create", sql: "CREATE TABLE t(a INTEGER)"),
            Migration("002-seed") { db in try db.run("INSERT INTO t VALUES (?)", [.integer(1)]) },
        ])
        #expect(try m.migrate(db) == ["001-create", "002-seed"])
        #expect(try m.migrate(db) == [])
        #expect(try db.scalar("SELECT count(*) FROM t") == .integer(1))
        #expect(try Migrator.appliedNames(db) == ["001-create", "002-seed"])

        let more = Migrator(
            m.migrations + [Migration("003-add", sql: "ALTER TABLE t ADD COLUMN b TEXT")])
        #expect(try more.migrate(db) == ["003-add"])
        #expect(try Migrator.appliedNames(db) == ["001-create", "002-seed", "003-add"])
    }

    @Test func failedMigrationLeavesNoTrace() throws {
        let db = try Database(path: ":memory:")
        let m = Migrator([
            Migration("001", sql: "CREATE TABLE t(a INTEGER)"),
            Migration("002") { db in
                try db.execute("CREATE TABLE u(a)")
                throw ThrowMe()
            },
        ])
        #expect(throws: ThrowMe.self) { try m.migrate(db) }
        #expect(try Migrator.appliedNames(db) == ["001"])
        #expect(try db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'u'") == .integer(0))
    }

    @Test func refusesUnknownOrReordered() throws {
        let db = try Database(path: ":memory:")
        try Migrator([Migration("a", sql: "SELECT 1"), Migration("b", sql: "SELECT 1")]).migrate(db)
        #expect(throws: MigrationError.self) {
            try Migrator([Migration("b", sql: "SELECT 1"), Migration("a", sql: "SELECT 1")]).migrate(db)
        }
        #expect(throws: MigrationError.self) {
            try Migrator([Migration("a", sql: "SELECT 1"), Migration("x", sql: "SELECT 1")]).migrate(db)
        }
        #expect(throws: MigrationError.self) { try Migrator([Migration("a", sql: "SELECT 1")]).migrate(db) }
        #expect(throws: MigrationError.self) {
            try Migrator([Migration("z", sql: "SELECT 1"), Migration("z", sql: "SELECT 1")]).migrate(
                Database(path: ":memory:"))
        }
    }
}

@Suite struct PoolTests {
    @Test func readersSeeCommittedDataWhileWriterWrites() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let pool = try DatabasePool(path: dir.path("p.sqlite"), options: .init(), readers: 2)
        try pool.write { db in
            try db.execute("CREATE TABLE t(a INTEGER)")
            try db.run("INSERT INTO t VALUES (1)")
        }
        try pool.write { db in
            try db.transaction {
                try db.run("INSERT INTO t VALUES (2)")
                // The writer holds an open write transaction; a reader is not blocked and sees
                // only committed rows.
                let seen = try pool.read { try $0.scalar("SELECT count(*) FROM t") }
                #expect(seen == .integer(1))
            }
        }
        #expect(try pool.read { try $0.scalar("SELECT count(*) FROM t") } == .integer(2))
        // readers are query-only
        #expect(throws: SQLiteError.self) { try pool.read { try $0.run("INSERT INTO t VALUES (3)") } }
        try pool.checkpoint()
        pool.close()
        #expect(throws: SQLiteError.self) { try pool.read { try $0.scalar("SELECT 1") } }
        #expect(throws: SQLiteError.self) { try pool.write { try $0.scalar("SELECT 1") } }
    }

    @Test func concurrentWritersAndReaders() async throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let pool = try DatabasePool(
            path: dir.path("c.sqlite"), options: .init(synchronous: .normal), readers: 2)
        try pool.write { try $0.execute("CREATE TABLE t(a INTEGER)") }
        let total = 200
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<2 {
                group.addTask {
                    for i in 0..<(total / 2) {
                        try pool.write { db in
                            try db.transaction {
                                try db.run("INSERT INTO t VALUES (?)", [.integer(Int64(w * 1000 + i))])
                            }
                        }
                    }
                }
            }
            for _ in 0..<3 {
                group.addTask {
                    var last: Int64 = 0
                    for _ in 0..<100 {
                        let n = try pool.read { try $0.scalar("SELECT count(*) FROM t")?.int64 ?? -1 }
                        #expect(n >= last)
                        #expect(n <= Int64(total))
                        last = n
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try pool.read { try $0.scalar("SELECT count(*) FROM t") } == .integer(Int64(total)))
        pool.close()
    }

    @Test func inMemoryPoolReadsThroughWriter() throws {
        let pool = try DatabasePool(path: ":memory:", readers: 2)
        try pool.write { try $0.execute("CREATE TABLE t(a); INSERT INTO t VALUES (1);") }
        #expect(try pool.read { try $0.scalar("SELECT a FROM t") } == .integer(1))
    }

    @Test func storesSharingAFileKeepSeparateHistories() throws {
        let db = try Database(path: ":memory:")
        let a = Migrator(table: "a_migrations", [Migration("1", sql: "CREATE TABLE a(x)")])
        let b = Migrator(table: "b_migrations", [Migration("1", sql: "CREATE TABLE b(y)")])
        #expect(try a.migrate(db) == ["1"])
        #expect(try b.migrate(db) == ["1"])
        #expect(try Migrator.appliedNames(db, table: "a_migrations") == ["1"])
        #expect(try Migrator.appliedNames(db, table: "b_migrations") == ["1"])
        // A second migration of one store does not disturb the other.
        let a2 = Migrator(table: "a_migrations", a.migrations + [Migration("2", sql: "CREATE TABLE a2(x)")])
        #expect(try a2.migrate(db) == ["2"])
        #expect(try b.migrate(db) == [])
    }

    @Test func aFirstMigrationAcceptsALegacySchemaWithColumnsAddedLater() throws {
        let legacy = try Database(path: ":memory:")
        try legacy.execute("CREATE TABLE q(id INTEGER PRIMARY KEY, a TEXT); ALTER TABLE q ADD COLUMN b TEXT")
        try legacy.run("INSERT INTO q(a, b) VALUES ('kept', 'too')")
        let older = try Database(path: ":memory:")
        try older.execute("CREATE TABLE q(id INTEGER PRIMARY KEY, a TEXT)")
        let m = Migrator(
            table: "q_migrations",
            [
                Migration("1-adopt") { db in
                    try db.execute("CREATE TABLE IF NOT EXISTS q(id INTEGER PRIMARY KEY, a TEXT)")
                    try db.addMissingColumns("q", [("b", "TEXT"), ("c", "TEXT")])
                }
            ])
        for db in [legacy, older, try Database(path: ":memory:")] {
            #expect(try m.migrate(db) == ["1-adopt"])
            #expect(try db.columns(of: "q") == ["id", "a", "b", "c"])
        }
        #expect(try legacy.scalar("SELECT a || b FROM q") == .text("kepttoo"))
    }
}
