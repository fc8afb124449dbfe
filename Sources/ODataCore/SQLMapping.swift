import JSONCore

/// A value bound to a `?` placeholder; the same shape as Storage's `SQLValue`.
public enum SQLBinding: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// SQL text with `?` placeholders and the values to bind to them, in order.
///
/// Promises: `bindings.count` equals the number of `?` placeholders in `sql`, in the same order; user
/// supplied values only ever appear in `bindings`, never in `sql`.
public struct SQLFragment: Sendable, Hashable, CustomStringConvertible {
    public var sql: String
    public var bindings: [SQLBinding]

    public init(_ sql: String, _ bindings: [SQLBinding] = []) {
        self.sql = sql
        self.bindings = bindings
    }

    public static func + (lhs: SQLFragment, rhs: SQLFragment) -> SQLFragment {
        SQLFragment(lhs.sql + rhs.sql, lhs.bindings + rhs.bindings)
    }

    public static func + (lhs: SQLFragment, rhs: String) -> SQLFragment {
        SQLFragment(lhs.sql + rhs, lhs.bindings)
    }

    public static func + (lhs: String, rhs: SQLFragment) -> SQLFragment {
        SQLFragment(lhs + rhs.sql, rhs.bindings)
    }

    public var description: String { "\(sql) \(bindings)" }

    /// Joins fragments with a separator.
    public static func joined(_ parts: [SQLFragment], separator: String) -> SQLFragment {
        var result = SQLFragment("")
        for (index, part) in parts.enumerated() {
            if index > 0 { result = result + separator }
            result = result + part
        }
        return result
    }
}

/// A pair of columns to equate when joining a source row to a target row.
public struct SQLJoinColumns: Sendable, Hashable {
    public var sourceColumn: String
    public var targetColumn: String

    public init(sourceColumn: String, targetColumn: String) {
        self.sourceColumn = sourceColumn
        self.targetColumn = targetColumn
    }
}

/// How a navigation property reaches its target rows.
///
/// Promises: without `linkTable`, target rows are those with `target.targetColumn = source.sourceColumn`
/// for every pair of `joins`; with a link table (many-to-many), `joins` equate source → link columns and
/// `linkJoins` link → target columns.
public struct SQLNavigationMapping: Sendable, Hashable {
    public var table: String
    public var entityType: String
    public var joins: [SQLJoinColumns]
    public var linkTable: String?
    public var linkJoins: [SQLJoinColumns]

    public init(
        table: String, entityType: String, joins: [SQLJoinColumns], linkTable: String? = nil,
        linkJoins: [SQLJoinColumns] = []
    ) {
        self.table = table
        self.entityType = entityType
        self.joins = joins
        self.linkTable = linkTable
        self.linkJoins = linkJoins
    }
}

/// How a collection-valued structural property (e.g. `Tags`, `Addresses`) is stored: a side table with one
/// row per item, or a JSON array inside the row's stored document.
///
/// Promises: with a side table, items are the rows with `table.targetColumn = row.sourceColumn` for each
/// join and the item is `valueColumn`; with `jsonColumn`, the items are the elements of the array at
/// `jsonPath` (a SQLite JSON path such as `$."Tags"`) of that column, read with `json_each`.
public struct SQLCollectionMapping: Sendable, Hashable {
    public var table: String
    public var joins: [SQLJoinColumns]
    public var valueColumn: String
    /// The row's document column when the collection is a JSON array in it.
    public var jsonColumn: String?
    /// The JSON path of the array inside `jsonColumn`.
    public var jsonPath: String?

    public init(table: String, joins: [SQLJoinColumns], valueColumn: String) {
        self.table = table
        self.joins = joins
        self.valueColumn = valueColumn
    }

    /// A collection stored as the JSON array at `path` of the row's `column`.
    public init(jsonColumn column: String, path: String) {
        table = ""
        joins = []
        valueColumn = "value"
        jsonColumn = column
        jsonPath = path
    }
}

/// The storage layout the translator targets: column names for property paths, tables and joins for
/// navigation, and how literals become bound values. Names returned are raw identifiers; the translator
/// quotes them.
public protocol SQLMapping: Sendable {
    /// The column holding the structural property at `path` (one name, or several through complex
    /// properties) of `entityType`; nil when the property is not stored in a column.
    func column(for path: [String], in entityType: String) -> String?
    /// The table and join for navigating `name` from `entityType`; nil when the relationship is not stored.
    func navigation(_ name: String, from entityType: String) -> SQLNavigationMapping?
    /// The storage of a collection-valued structural property.
    func collection(for path: [String], in entityType: String) -> SQLCollectionMapping?
    /// The bound value for a literal compared with (or assigned to) a stored value of `type`.
    func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding
    /// How stored columns encode their values.
    var profile: SQLStorageProfile { get }
    /// The column holding each row's qualified type name (NULL meaning the table's own type), when rows of
    /// derived types can be told apart.
    func typeColumn(for entityType: String) -> String?
    /// The column holding each row's JSON document (the entity as the service sent it), used for
    /// properties not stored in columns.
    func documentColumn(for entityType: String) -> String?
    /// The encoding of the column of `path`, when it is not the profile's for its type (computed columns).
    func encoding(for path: [String], in entityType: String) -> SQLValueEncoding?
}

extension SQLMapping {
    public func collection(for path: [String], in entityType: String) -> SQLCollectionMapping? { nil }

    /// Default conversion: booleans as 0/1, decimals and doubles as REAL, temporal values as ISO-8601 text
    /// (date-time-offsets normalized to UTC `YYYY-MM-DDThh:mm:ss[.fff]Z`, date-times to
    /// `YYYY-MM-DDThh:mm:ss[.fff]`), GUIDs lowercase text, enum members as their member-name text.
    public func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding {
        SQLDefaults.binding(for: literal, type: type)
    }

    public var profile: SQLStorageProfile { .mirrorV1 }
    public func typeColumn(for entityType: String) -> String? { nil }
    public func documentColumn(for entityType: String) -> String? { nil }
    public func encoding(for path: [String], in entityType: String) -> SQLValueEncoding? { nil }
}

/// Default conversions shared by mappings.
public enum SQLDefaults {
    public static func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding {
        switch literal {
        case .null: return .null
        case .boolean(let b): return .integer(b ? 1 : 0)
        case .integer(let v):
            if let p = type?.primitive, p == .double || p == .single { return .real(Double(v)) }
            return .integer(v)
        case .decimal(let text): return Double(text).map(SQLBinding.real) ?? .text(text)
        case .double(let v): return .real(v)
        case .string(let s): return .text(s)
        case .guid(let g): return .text(g)
        case .date(let d): return .text(d)
        case .dateTime(let d):
            if type?.primitive == .dateTimeOffset { return .text(normalizeDateTimeOffset(d + "Z") ?? d) }
            return .text(normalizeDateTime(d))
        case .dateTimeOffset(let d): return .text(normalizeDateTimeOffset(d) ?? d)
        case .timeOfDay(let t): return .text(t.count == 5 ? t + ":00" : t)
        case .duration(let d): return .text(d)
        case .binary(let b): return .blob(b)
        case .enumMember(_, let value): return .text(value)
        }
    }

    /// `YYYY-MM-DDThh:mm` → `YYYY-MM-DDThh:mm:00`; other forms unchanged.
    public static func normalizeDateTime(_ text: String) -> String {
        let scalars = Array(text.unicodeScalars)
        if scalars.count == 16, scalars[10] == "T" || scalars[10] == "t" { return text + ":00" }
        return text
    }

    /// Converts an ISO-8601 date-time with offset to UTC `YYYY-MM-DDThh:mm:ss[.fff]Z`.
    public static func normalizeDateTimeOffset(_ text: String) -> String? {
        let s = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= s.count else { return nil }
            var v = 0
            for i in from..<from + count {
                guard s[i] >= 48, s[i] <= 57 else { return nil }
                v = v * 10 + Int(s[i] - 48)
            }
            return v
        }
        guard s.count >= 17, let year = num(0, 4), s[4] == 45, let month = num(5, 2), s[7] == 45,
            let day = num(8, 2), s[10] == 84 || s[10] == 116, let hour = num(11, 2), s[13] == 58,
            let minute = num(14, 2)
        else { return nil }
        var i = 16
        var second = 0
        var fraction = ""
        if i < s.count, s[i] == 58 {
            guard let sec = num(i + 1, 2) else { return nil }
            second = sec
            i += 3
            if i < s.count, s[i] == 46 {
                var j = i + 1
                while j < s.count, s[j] >= 48, s[j] <= 57 { j += 1 }
                fraction = String(decoding: s[i..<j], as: UTF8.self)
                i = j
            }
        }
        var offsetMinutes = 0
        if i < s.count, s[i] == 90 || s[i] == 122 {
            i += 1
        } else if i < s.count, s[i] == 43 || s[i] == 45 {
            guard let oh = num(i + 1, 2), i + 3 < s.count, s[i + 3] == 58, let om = num(i + 4, 2) else {
                return nil
            }
            offsetMinutes = (oh * 60 + om) * (s[i] == 45 ? -1 : 1)
            i += 6
        } else {
            return nil
        }
        guard i == s.count else { return nil }
        let minutes = CivilDate(year: year, month: month, day: day).daysSince1970 * 1440 + hour * 60 + minute
        let (date, secondOfDay) = CivilDate.split(secondsSince1970: Int64(minutes - offsetMinutes) * 60)
        func p(_ v: Int, _ width: Int) -> String { CivilDate.pad(v, width) }
        return
            "\(p(date.year, 4))-\(p(date.month, 2))-\(p(date.day, 2))T\(p(secondOfDay / 3600, 2)):"
            + "\(p(secondOfDay / 60 % 60, 2)):\(p(second, 2))\(fraction)Z"
    }
}

/// A mapping derived from the model: one table per entity set (named by the caller, defaulting to the
/// first entity set of a type), one column per primitive or enumeration property declared on the set's
/// entity type or its base types — and, with `derivedTypeColumns`, on the types deriving from it —
/// (complex paths joined with `_`, at most five steps deep, no collections), joins from referential
/// constraints, literal bindings by `profile`.
///
/// Promises: a property without a column (of a derived type without `derivedTypeColumns`, of a complex
/// value's derived type, a collection) is read from `documentColumn` when one is given (JSON arrays for
/// collections, V2's `results` wrapper included); navigation without a referential constraint, or whose
/// constraint names a property without a column, has no mapping (nil), so filters through it are
/// reported as untranslatable rather than guessed.
public struct ModelSQLMapping: SQLMapping {
    public let model: EdmModel
    public let tables: [String: String]
    public let profile: SQLStorageProfile
    /// The column with each row's qualified type name, when stored.
    public let typeColumnName: String?
    /// The column with each row's JSON document, when stored.
    public let documentColumnName: String?
    /// Whether tables have columns for the properties of derived types too.
    public let derivedTypeColumns: Bool
    /// Per entity type, the column of each stored property path (joined with `/`), computed once.
    private let columnIndex: [String: [String: String]]

    public init(
        model: EdmModel, tables: [String: String] = [:], profile: SQLStorageProfile = .mirrorV1,
        typeColumn: String? = nil, documentColumn: String? = nil, derivedTypeColumns: Bool = false
    ) {
        self.model = model
        var tables = tables
        for set in model.entitySets where !set.isSingleton && tables[set.entityType] == nil {
            tables[set.entityType] = set.name
        }
        self.tables = tables
        self.profile = profile
        typeColumnName = typeColumn
        documentColumnName = documentColumn
        self.derivedTypeColumns = derivedTypeColumns
        var index: [String: [String: String]] = [:]
        for type in model.structuredTypes.values where type.isEntity {
            let name = type.qualifiedName
            let tableType = Self.tableEntityType(for: name, model: model, tables: tables)
            let source = derivedTypeColumns && model.isType(name, derivedFrom: tableType) ? name : tableType
            var columns: [String: String] = [:]
            Self.storedPaths(of: source, model: model, prefix: []) { path in
                columns[path.joined(separator: "/")] = path.joined(separator: "_")
            }
            index[name] = columns
        }
        columnIndex = index
    }

    /// Calls `body` with every property path of `type` that has a column: primitive (stored by
    /// ``ODataStorage/columnType(_:)``) or enumeration, not a collection, through complex properties, at
    /// most five steps.
    static func storedPaths(of type: String, model: EdmModel, prefix: [String], _ body: ([String]) -> Void) {
        guard prefix.count < 5 else { return }
        for property in model.properties(of: type) where !property.type.isCollection {
            let path = prefix + [property.name]
            if model.enumType(property.type) != nil
                || model.primitiveType(of: property.type).flatMap(ODataStorage.columnType) != nil
            {
                body(path)
            } else if let complex = model.structuredType(property.type.name), !complex.isEntity {
                storedPaths(of: complex.qualifiedName, model: model, prefix: path, body)
            }
        }
    }

    static func tableEntityType(for entityType: String, model: EdmModel, tables: [String: String]) -> String {
        for type in model.typeHierarchy(of: entityType) where tables[type.qualifiedName] != nil {
            return type.qualifiedName
        }
        return entityType
    }

    public func table(for entityType: String) -> String? {
        for type in model.typeHierarchy(of: entityType) {
            if let table = tables[type.qualifiedName] { return table }
        }
        return nil
    }

    /// The entity type whose properties the table of `entityType` has as columns.
    public func tableEntityType(for entityType: String) -> String {
        Self.tableEntityType(for: entityType, model: model, tables: tables)
    }

    public func column(for path: [String], in entityType: String) -> String? {
        guard !path.isEmpty, path.count <= 5 else { return nil }
        let key = path.count == 1 ? path[0] : path.joined(separator: "/")
        if let columns = columnIndex[entityType] ?? columnIndex[model.resolveQualifiedName(entityType)] {
            return columns[key]
        }
        return nil
    }

    public func navigation(_ name: String, from entityType: String) -> SQLNavigationMapping? {
        guard let nav = model.navigationProperty(named: name, in: entityType),
            !nav.referentialConstraints.isEmpty,
            let table = table(for: nav.target),
            nav.referentialConstraints.allSatisfy({
                column(for: [$0.property], in: entityType) != nil
                    && column(for: [$0.referencedProperty], in: nav.target) != nil
            })
        else { return nil }
        return SQLNavigationMapping(
            table: table, entityType: nav.target,
            joins: nav.referentialConstraints.map {
                SQLJoinColumns(sourceColumn: $0.property, targetColumn: $0.referencedProperty)
            })
    }

    public func collection(for path: [String], in entityType: String) -> SQLCollectionMapping? {
        guard let document = documentColumnName else { return nil }
        return SQLCollectionMapping(jsonColumn: document, path: jsonPath(path, collection: true))
    }

    /// The SQLite JSON path of a property path in the stored document (`$."Address"."City"`); V2
    /// collections are wrapped in `results`.
    public func jsonPath(_ path: [String], collection: Bool = false) -> String {
        ODataStorage.jsonPath(path) + (collection && model.version == .v2 ? ".\"results\"" : "")
    }

    public func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding {
        let encoding = type.map { profile.encoding(of: $0, in: model) } ?? .native
        return ODataStorage.bind(literal, type: type, encoding: encoding, profile: profile, model: model)
    }

    public func typeColumn(for entityType: String) -> String? { typeColumnName }
    public func documentColumn(for entityType: String) -> String? { documentColumnName }
}
