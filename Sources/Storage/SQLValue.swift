/// One SQLite value, as bound to a parameter or read from a column.
///
/// The five cases are SQLite's five storage classes; nothing is converted on the way in.
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    /// The integer, or a real truncated toward zero; `nil` for other cases.
    public var int64: Int64? {
        switch self {
        case .integer(let v): return v
        case .real(let d): return Int64(exactly: d.rounded(.towardZero))
        default: return nil
        }
    }

    /// The integer as `Int`, when it fits.
    public var int: Int? { int64.flatMap { Int(exactly: $0) } }

    /// The real, or an integer widened to `Double`; `nil` for other cases.
    public var double: Double? {
        switch self {
        case .real(let d): return d
        case .integer(let v): return Double(v)
        default: return nil
        }
    }

    /// The text; `nil` for other cases.
    public var string: String? {
        if case .text(let s) = self { return s }
        return nil
    }

    /// The blob bytes; `nil` for other cases.
    public var bytes: [UInt8]? {
        if case .blob(let b) = self { return b }
        return nil
    }

    /// `true` for `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension SQLValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByStringLiteral,
    ExpressibleByNilLiteral
{
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(stringLiteral value: String) { self = .text(value) }
    public init(nilLiteral: ()) { self = .null }
}

extension SQLValue {
    /// `.integer`, from any integer that fits in `Int64` (larger values trap).
    public init<I: BinaryInteger>(_ value: I) { self = .integer(Int64(value)) }
    /// `.text` or `.null` for `nil`.
    public init(_ value: String?) { self = value.map { .text($0) } ?? .null }
    /// `.real`.
    public init(_ value: Double) { self = .real(value) }
    /// `.integer(1)` or `.integer(0)`.
    public init(_ value: Bool) { self = .integer(value ? 1 : 0) }
}

/// One result row, detached from its statement: values plus shared column names.
public struct Row: Sendable, Hashable {
    /// Column names, in result order (shared by every row of one query).
    public let columnNames: [String]
    /// Values, in result order.
    public let values: [SQLValue]

    public init(columnNames: [String], values: [SQLValue]) {
        self.columnNames = columnNames
        self.values = values
    }

    /// Number of columns.
    public var count: Int { values.count }

    /// The value at a column index (traps when out of range).
    public subscript(index: Int) -> SQLValue { values[index] }

    /// The value of the first column with that name, or `nil` when no such column.
    public subscript(name: String) -> SQLValue? {
        guard let i = columnNames.firstIndex(of: name) else { return nil }
        return values[i]
    }
}
