import CSQLite

/// A failed SQLite call: its primary and extended result codes, SQLite's message, and the SQL text
/// involved (never bound values, so it never carries user data that was bound).
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// Primary result code (`SQLITE_BUSY`, `SQLITE_CONSTRAINT`, …).
    public let code: Int32
    /// Extended result code (`SQLITE_CONSTRAINT_UNIQUE`, …).
    public let extendedCode: Int32
    /// SQLite's message, e.g. `no such table: x`.
    public let message: String
    /// The SQL that failed, when a statement was involved.
    public let sql: String?

    public init(code: Int32, extendedCode: Int32? = nil, message: String, sql: String? = nil) {
        self.code = code
        let ext = extendedCode ?? code
        self.extendedCode = ext
        self.message =
            ext == SQLiteError.authenticationFailure && !message.hasPrefix(SQLiteError.authenticationText)
            ? "\(SQLiteError.authenticationText): the store file was altered or damaged (\(message))"
            : message
        self.sql = sql
    }

    private static let authenticationFailure = mg_sqlite_ioerr_data()
    private static let authenticationText = "an encrypted page failed authentication"

    public var description: String {
        var s = "SQLite error \(code)"
        if extendedCode != code { s += "/\(extendedCode)" }
        s += ": \(message)"
        if let sql { s += " (in: \(sql))" }
        return s
    }

    /// `true` for `SQLITE_BUSY` or `SQLITE_LOCKED`.
    public var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }
    /// `true` for any `SQLITE_CONSTRAINT` violation.
    public var isConstraintViolation: Bool { code == SQLITE_CONSTRAINT }
    /// `true` when an encrypted page or WAL frame failed authentication (`SQLITE_IOERR_DATA`).
    public var isAuthenticationFailure: Bool { extendedCode == SQLiteError.authenticationFailure }

    /// The error currently recorded on a connection.
    static func from(_ db: OpaquePointer?, code rc: Int32, sql: String?) -> SQLiteError {
        let message: String
        let ext: Int32
        if let db {
            message = String(cString: sqlite3_errmsg(db))
            ext = sqlite3_extended_errcode(db)
        } else {
            message = String(cString: sqlite3_errstr(rc))
            ext = rc
        }
        return SQLiteError(code: rc & 0xFF, extendedCode: ext, message: message, sql: sql)
    }

    static func closed(sql: String?) -> SQLiteError {
        SQLiteError(code: SQLITE_MISUSE, message: "database connection is closed", sql: sql)
    }
}

/// A migration list that does not match what the database already recorded.
public struct MigrationError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "migration error: \(message)" }
}
