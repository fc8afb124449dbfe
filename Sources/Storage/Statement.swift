import CSQLite

/// One compiled SQL statement on one connection. Not thread-safe; finalized when released.
///
/// Promises: bound values are copied into SQLite (`SQLITE_TRANSIENT`) and never interpolated into SQL;
/// text columns are decoded from their UTF-8 bytes.
public final class Statement {
    private var handle: OpaquePointer?
    /// Keeps the connection object alive while the statement is.
    private let database: Database
    /// The SQL text this statement was compiled from.
    public let sql: String
    private var cachedNames: [String]?

    init(handle: OpaquePointer, database: Database, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { finalize() }

    func finalize() {
        if let handle {
            sqlite3_finalize(handle)
            self.handle = nil
        }
    }

    private func live() throws -> OpaquePointer {
        guard let handle, database.handle != nil else { throw SQLiteError.closed(sql: sql) }
        return handle
    }

    private func check(_ rc: Int32) throws {
        if rc != SQLITE_OK { throw SQLiteError.from(database.handle, code: rc, sql: sql) }
    }

    // MARK: Binding

    /// Number of `?` parameters.
    public var parameterCount: Int32 {
        guard let handle else { return 0 }
        return sqlite3_bind_parameter_count(handle)
    }

    /// Binds `values` to parameters 1…n; the count must match the statement's parameters.
    public func bind(_ values: [SQLValue]) throws {
        let stmt = try live()
        let expected = sqlite3_bind_parameter_count(stmt)
        guard values.count == Int(expected) else {
            throw SQLiteError(
                code: SQLITE_RANGE,
                message: "statement expects \(expected) bindings, got \(values.count)", sql: sql)
        }
        for (i, v) in values.enumerated() { try bind(v, at: Int32(i + 1)) }
    }

    /// Binds one value to a 1-based parameter index.
    public func bind(_ value: SQLValue, at index: Int32) throws {
        let stmt = try live()
        let rc: Int32
        switch value {
        case .null:
            rc = sqlite3_bind_null(stmt, index)
        case .integer(let v):
            rc = sqlite3_bind_int64(stmt, index, v)
        case .real(let d):
            rc = sqlite3_bind_double(stmt, index, d)
        case .text(var s):
            rc = s.withUTF8 { buf -> Int32 in
                guard let base = buf.baseAddress, buf.count > 0 else {
                    return sqlite3_bind_text(stmt, index, "", 0, mg_sqlite_transient())
                }
                return base.withMemoryRebound(to: CChar.self, capacity: buf.count) { p in
                    sqlite3_bind_text64(
                        stmt, index, p, sqlite3_uint64(buf.count), mg_sqlite_transient(), UInt8(SQLITE_UTF8))
                }
            }
        case .blob(let bytes):
            rc = bytes.withUnsafeBytes { buf -> Int32 in
                guard let base = buf.baseAddress, buf.count > 0 else {
                    return sqlite3_bind_zeroblob(stmt, index, 0)
                }
                return sqlite3_bind_blob64(
                    stmt, index, base, sqlite3_uint64(buf.count), mg_sqlite_transient())
            }
        }
        try check(rc)
    }

    /// Binds one value to a named parameter (`:name`, `@name` or `$name`, prefix included).
    public func bind(_ value: SQLValue, named name: String) throws {
        let stmt = try live()
        let index = sqlite3_bind_parameter_index(stmt, name)
        guard index > 0 else {
            throw SQLiteError(code: SQLITE_RANGE, message: "no parameter named \(name)", sql: sql)
        }
        try bind(value, at: index)
    }

    /// Sets every parameter back to NULL.
    public func clearBindings() {
        if let handle { sqlite3_clear_bindings(handle) }
    }

    // MARK: Stepping

    /// Advances: `true` when a row is available, `false` when done. Throws on error (and resets).
    @discardableResult
    public func step() throws -> Bool {
        let stmt = try live()
        let rc = sqlite3_step(stmt)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = SQLiteError.from(database.handle, code: rc, sql: sql)
            sqlite3_reset(stmt)
            throw error
        }
    }

    /// Rewinds so the statement can run again; bindings are kept.
    public func reset() {
        if let handle { sqlite3_reset(handle) }
    }

    /// Steps through every remaining row, calling `body` with this statement positioned on the row
    /// (read it with `int64(_:)`, `text(_:)`, … — no per-row allocation). Resets afterwards.
    public func forEachRow(_ body: (Statement) throws -> Void) throws {
        defer { reset() }
        while try step() { try body(self) }
    }

    /// Every remaining row, detached. Resets afterwards.
    public func rows() throws -> [Row] {
        defer { reset() }
        var result: [Row] = []
        let names = columnNames
        let n = columnCount
        while try step() {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(n))
            for i in 0..<n { values.append(value(i)) }
            result.append(Row(columnNames: names, values: values))
        }
        return result
    }

    // MARK: Columns (0-based)

    /// Number of result columns.
    public var columnCount: Int32 {
        guard let handle else { return 0 }
        return sqlite3_column_count(handle)
    }

    /// Name of a result column.
    public func columnName(_ i: Int32) -> String {
        guard let handle, let p = sqlite3_column_name(handle, i) else { return "" }
        return String(cString: p)
    }

    /// All result column names.
    public var columnNames: [String] {
        if let cachedNames { return cachedNames }
        let names = (0..<columnCount).map { columnName($0) }
        cachedNames = names
        return names
    }

    /// `true` when the column of the current row is NULL.
    public func isNull(_ i: Int32) -> Bool {
        guard let handle else { return true }
        return sqlite3_column_type(handle, i) == SQLITE_NULL
    }

    /// The column as an integer (SQLite's conversion rules; NULL is 0).
    public func int64(_ i: Int32) -> Int64 {
        guard let handle else { return 0 }
        return sqlite3_column_int64(handle, i)
    }

    /// The column as `Int`.
    public func int(_ i: Int32) -> Int { Int(int64(i)) }

    /// The column as a double (NULL is 0).
    public func double(_ i: Int32) -> Double {
        guard let handle else { return 0 }
        return sqlite3_column_double(handle, i)
    }

    /// The column as text, or `nil` when NULL.
    public func text(_ i: Int32) -> String? {
        guard let handle, sqlite3_column_type(handle, i) != SQLITE_NULL else { return nil }
        guard let p = sqlite3_column_text(handle, i) else { return "" }
        let n = Int(sqlite3_column_bytes(handle, i))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    /// The column as bytes, or `nil` when NULL.
    public func blob(_ i: Int32) -> [UInt8]? {
        guard let handle, sqlite3_column_type(handle, i) != SQLITE_NULL else { return nil }
        let n = Int(sqlite3_column_bytes(handle, i))
        guard n > 0, let p = sqlite3_column_blob(handle, i) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    /// The column with its own storage class.
    public func value(_ i: Int32) -> SQLValue {
        guard let handle else { return .null }
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, i))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, i))
        case SQLITE_TEXT: return .text(text(i) ?? "")
        case SQLITE_BLOB: return .blob(blob(i) ?? [])
        default: return .null
        }
    }
}
