import CSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// SQLite's `PRAGMA synchronous` levels.
public enum Synchronous: String, Sendable {
    case off, normal, full, extra
}

/// How a connection is opened and tuned.
public struct DatabaseOptions: Sendable {
    /// Open read-only (never creates the file, never changes the journal mode).
    public var readOnly = false
    /// `PRAGMA synchronous`; `.full` where an acknowledgement promises durability.
    public var synchronous: Synchronous = .full
    /// How long a statement waits for a lock held by another connection before `SQLITE_BUSY`.
    public var busyTimeoutMs: Int32 = 5000
    /// `PRAGMA wal_autocheckpoint` in pages (0 disables automatic checkpoints).
    public var walAutocheckpointPages: Int32 = 1000
    /// Encrypts the file, its WAL and everything SQLite would write for it (see ``StoreEncryption``);
    /// `nil` keeps it plaintext. Ignored for in-memory databases.
    public var encryption: StoreEncryption?

    public init(
        readOnly: Bool = false, synchronous: Synchronous = .full, busyTimeoutMs: Int32 = 5000,
        walAutocheckpointPages: Int32 = 1000, encryption: StoreEncryption? = nil
    ) {
        self.readOnly = readOnly
        self.synchronous = synchronous
        self.busyTimeoutMs = busyTimeoutMs
        self.walAutocheckpointPages = walAutocheckpointPages
        self.encryption = encryption
    }
}

/// `BEGIN DEFERRED | IMMEDIATE | EXCLUSIVE`.
public enum TransactionKind: String, Sendable {
    case deferred = "DEFERRED"
    case immediate = "IMMEDIATE"
    case exclusive = "EXCLUSIVE"
}

/// One SQLite connection. Not safe for concurrent use: callers serialize (see `DatabasePool`).
///
/// Promises: a file database is created with mode 0600 (its `-wal` and `-shm` files inherit that mode),
/// runs in WAL journal mode with `foreign_keys=ON`, the configured busy timeout and `synchronous` level,
/// and SQLite's defensive mode. Values are always bound, never interpolated into SQL. With
/// ``DatabaseOptions/encryption`` the file and its WAL are encrypted, temporary data stays in memory, and
/// a wrong key, a plaintext file or an encrypted file opened without a key is refused before any query.
public final class Database: @unchecked Sendable {
    /// The path given at open (`:memory:` for an in-memory database).
    public let path: String
    /// The options given at open.
    public let options: DatabaseOptions

    var handle: OpaquePointer?
    private var statementCache: [String: Statement] = [:]
    private var savepointCounter = 0
    private static let statementCacheLimit = 512

    /// Opens (and for a writable file database, creates) the database at `path`.
    public convenience init(path: String, options: DatabaseOptions = .init()) throws {
        try self.init(path: path, options: options, role: .primary)
    }

    enum Role { case primary, poolReader }

    init(path: String, options: DatabaseOptions, role: Role, uri: Bool = false) throws {
        self.path = path
        self.options = options
        let isMemory = path == ":memory:" || path.isEmpty
        let encryption = isMemory ? nil : options.encryption
        var isNew = false
        if let encryption {
            isNew = try encryption.prepare(path: path, create: !options.readOnly && role == .primary)
        } else if !isMemory {
            try Database.refuseEncrypted(path)
            if !options.readOnly && role == .primary { try Database.createPrivateFile(path) }
        }
        var flags = SQLITE_OPEN_EXRESCODE
        if options.readOnly {
            flags |= SQLITE_OPEN_READONLY
        } else {
            flags |= SQLITE_OPEN_READWRITE
            if role == .primary { flags |= SQLITE_OPEN_CREATE }
        }
        if uri { flags |= SQLITE_OPEN_URI }
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, flags, encryption?.vfsName)
        guard rc == SQLITE_OK, let db else {
            let error = SQLiteError.from(db, code: rc, sql: nil)
            sqlite3_close_v2(db)
            throw SQLiteError(
                code: error.code, extendedCode: error.extendedCode,
                message: "cannot open '\(path)': \(error.message)")
        }
        handle = db
        do {
            sqlite3_extended_result_codes(db, 1)
            _ = mg_sqlite_db_config_defensive(db, 1)
            sqlite3_busy_timeout(db, options.busyTimeoutMs)
            // Only enum raw values and integers are interpolated here, never caller text.
            if encryption != nil {
                // Sorts, temporary tables and statement journals in memory: the VFS writes no other file.
                try execute("PRAGMA temp_store = MEMORY")
            }
            try execute("PRAGMA foreign_keys = ON")
            if encryption != nil && !options.readOnly && role == .primary {
                try prepareEncryptedFile(isNew: isNew)
            }
            if !options.readOnly && role == .primary && !isMemory {
                let mode = try scalar("PRAGMA journal_mode = WAL")?.string?.lowercased()
                if mode != "wal" {
                    throw SQLiteError(
                        code: SQLITE_ERROR, message: "cannot enable WAL mode (journal_mode is \(mode ?? "?"))"
                    )
                }
            }
            try execute("PRAGMA synchronous = \(options.synchronous.rawValue.uppercased())")
            if !options.readOnly {
                try execute("PRAGMA wal_autocheckpoint = \(options.walAutocheckpointPages)")
            }
            if role == .poolReader { try execute("PRAGMA query_only = ON") }
            if !isMemory && !options.readOnly && role == .primary {
                Database.restrictMode(path)
            }
        } catch let error as SQLiteError {
            close()
            if let note = encryption?.takeRefusal() {
                throw SQLiteError(
                    code: error.code, extendedCode: error.extendedCode, message: "\(error.message): \(note)",
                    sql: error.sql)
            }
            throw error
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Before the first write of an encrypted file: the page geometry the VFS needs (28 reserved bytes per
    /// page for nonce and tag), and a way into WAL mode that writes no rollback journal: a file not yet in
    /// WAL mode (new, or the copy `VACUUM INTO` made) goes through `journal_mode=MEMORY`, from which SQLite
    /// switches to WAL with journaling off (the VFS refuses rollback journals, which would hold plaintext).
    private func prepareEncryptedFile(isNew: Bool) throws {
        let db = try requireHandle(sql: nil)
        if isNew {
            var reserve = Int32(StoreHeader.reserve)
            let rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
            guard rc == SQLITE_OK else {
                throw SQLiteError.from(db, code: rc, sql: "SQLITE_FCNTL_RESERVE_BYTES")
            }
            try execute("PRAGMA page_size = \(StoreHeader.pageSize)")
        }
        let mode = try scalar("PRAGMA journal_mode")?.string?.lowercased()
        if mode != "wal" { try execute("PRAGMA journal_mode = MEMORY") }
    }

    /// Refuses an encrypted store opened without a key, with a message that says so (SQLite would only say
    /// "file is not a database").
    private static func refuseEncrypted(_ path: String) throws {
        if path.hasPrefix("file:") { return }
        let prefix = try StoreFile.readPrefix(path, count: StoreHeader.magic.count)
        if prefix == StoreHeader.magic {
            throw StoreEncryptionError(
                .encryptedWithoutKey, path: path,
                "\(path) is an encrypted store: configure its storeEncryptionKey")
        }
    }

    /// Creates the file with mode 0600 if it does not exist, and tightens an existing one to 0600.
    private static func createPrivateFile(_ path: String) throws {
        if path.hasPrefix("file:") { return }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 {
            let err = errno
            throw SQLiteError(
                code: SQLITE_CANTOPEN,
                message: "cannot create '\(path)': \(String(cString: strerror(err)))")
        }
        _ = fchmod(fd, 0o600)
        closeDescriptor(fd)
    }

    /// Keeps the WAL and shared-memory files private too (SQLite copies the main file's mode, but a
    /// file left over from an earlier run may have another).
    private static func restrictMode(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            _ = chmod(path + suffix, 0o600)
        }
    }

    /// Closes the connection; finalizes cached statements. Safe to call twice. Statements still held
    /// by callers stay valid objects but fail on use; the connection is freed when the last one goes.
    public func close() {
        for statement in statementCache.values { statement.finalize() }
        statementCache.removeAll()
        if let handle {
            sqlite3_close_v2(handle)
            self.handle = nil
        }
    }

    /// `true` until `close()`.
    public var isOpen: Bool { handle != nil }

    func requireHandle(sql: String?) throws -> OpaquePointer {
        guard let handle else { throw SQLiteError.closed(sql: sql) }
        return handle
    }

    /// Runs one or more statements separated by `;`, without bindings; result rows are discarded.
    public func execute(_ sql: String) throws {
        let db = try requireHandle(sql: sql)
        var errmsg: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &errmsg)
        if rc != SQLITE_OK {
            let message = errmsg.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(db))
            sqlite3_free(errmsg)
            throw SQLiteError(
                code: rc & 0xFF, extendedCode: sqlite3_extended_errcode(db), message: message, sql: sql)
        }
    }

    /// Compiles one statement. The caller owns it; it is finalized when released.
    public func prepare(_ sql: String) throws -> Statement {
        let db = try requireHandle(sql: sql)
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, 0, &stmt, nil)
        guard rc == SQLITE_OK else { throw SQLiteError.from(db, code: rc, sql: sql) }
        guard let stmt else {
            throw SQLiteError(code: SQLITE_MISUSE, message: "empty SQL statement", sql: sql)
        }
        return Statement(handle: stmt, database: self, sql: sql)
    }

    /// A statement from the per-connection cache keyed by SQL text, reset and with bindings cleared.
    /// Don't hold two uses of the same SQL at once (e.g. a nested `forEachRow` over the same text).
    public func cached(_ sql: String) throws -> Statement {
        if let statement = statementCache[sql] {
            statement.reset()
            statement.clearBindings()
            return statement
        }
        let statement = try prepare(sql)
        if statementCache.count >= Database.statementCacheLimit {
            for s in statementCache.values { s.finalize() }
            statementCache.removeAll()
        }
        statementCache[sql] = statement
        return statement
    }

    /// Runs one statement with bindings to completion, discarding rows.
    public func run(_ sql: String, _ bindings: [SQLValue] = []) throws {
        let statement = try cached(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        while try statement.step() {}
    }

    /// Runs one statement with bindings and returns every row.
    public func query(_ sql: String, _ bindings: [SQLValue] = []) throws -> [Row] {
        let statement = try cached(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        return try statement.rows()
    }

    /// The first column of the first row, or `nil` when there is no row.
    public func scalar(_ sql: String, _ bindings: [SQLValue] = []) throws -> SQLValue? {
        let statement = try cached(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        guard try statement.step() else { return nil }
        return statement.value(0)
    }

    /// `true` while an explicit transaction is open on this connection.
    public var isInTransaction: Bool {
        guard let handle else { return false }
        return sqlite3_get_autocommit(handle) == 0
    }

    /// Runs `body` in a transaction: commits when it returns, rolls back when it throws (and rethrows).
    /// Called inside an open transaction, it uses a SAVEPOINT instead, so nesting rolls back only the
    /// inner part. `kind` applies to the outermost level only.
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        if isInTransaction {
            savepointCounter += 1
            let name = "mg_sp\(savepointCounter)"
            defer { savepointCounter -= 1 }
            try execute("SAVEPOINT \(name)")
            let result: T
            do {
                result = try body()
            } catch {
                if isInTransaction { try? execute("ROLLBACK TO \(name); RELEASE \(name)") }
                throw error
            }
            try execute("RELEASE \(name)")
            return result
        }
        try execute("BEGIN \(kind.rawValue)")
        let result: T
        do {
            result = try body()
        } catch {
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
        do {
            try execute("COMMIT")
        } catch {
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
        return result
    }

    /// Rowid of the last successful INSERT on this connection.
    public var lastInsertRowID: Int64 {
        guard let handle else { return 0 }
        return sqlite3_last_insert_rowid(handle)
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE on this connection.
    public var changes: Int {
        guard let handle else { return 0 }
        return Int(sqlite3_changes64(handle))
    }

    /// Checkpoints the WAL into the main file; `truncate` also empties the WAL file
    /// (`wal_checkpoint(TRUNCATE)`), otherwise `PASSIVE`.
    public func checkpoint(truncate: Bool = true) throws {
        let db = try requireHandle(sql: nil)
        let mode = truncate ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE
        let rc = sqlite3_wal_checkpoint_v2(db, nil, mode, nil, nil)
        guard rc == SQLITE_OK else {
            throw SQLiteError.from(db, code: rc, sql: truncate ? "wal_checkpoint(TRUNCATE)" : nil)
        }
    }
}

private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
