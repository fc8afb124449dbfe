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

/// How a collection-valued structural property (e.g. `Tags`) is stored: a side table with one row per item.
public struct SQLCollectionMapping: Sendable, Hashable {
    public var table: String
    public var joins: [SQLJoinColumns]
    public var valueColumn: String

    public init(table: String, joins: [SQLJoinColumns], valueColumn: String) {
        self.table = table
        self.joins = joins
        self.valueColumn = valueColumn
    }
}

/// The storage layout the translator targets: column names for property paths, tables and joins for
/// navigation, and how literals become bound values. Names returned are raw identifiers; the translator
/// quotes them.
public protocol SQLMapping: Sendable {
    /// The column holding the structural property at `path` (one name, or several through complex
    /// properties) of `entityType`; nil when the property is not stored.
    func column(for path: [String], in entityType: String) -> String?
    /// The table and join for navigating `name` from `entityType`; nil when the relationship is not stored.
    func navigation(_ name: String, from entityType: String) -> SQLNavigationMapping?
    /// The side table of a collection-valued structural property.
    func collection(for path: [String], in entityType: String) -> SQLCollectionMapping?
    /// The bound value for a literal compared with (or assigned to) a value of `type` (nil when unknown).
    func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding
}

extension SQLMapping {
    public func collection(for path: [String], in entityType: String) -> SQLCollectionMapping? { nil }

    /// Default conversion: booleans as 0/1, decimals and doubles as REAL, temporal values as ISO-8601 text
    /// (date-time-offsets normalized to UTC `YYYY-MM-DDThh:mm:ss[.fff]Z`, date-times to
    /// `YYYY-MM-DDThh:mm:ss[.fff]`), GUIDs lowercase text, enum members as their member-name text.
    public func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding {
        SQLDefaults.binding(for: literal, type: type)
    }
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
        // Days from civil (Howard Hinnant), shift by the offset, back to civil.
        func daysFromCivil(_ y: Int, _ m: Int, _ d: Int) -> Int {
            let y2 = m <= 2 ? y - 1 : y
            let era = (y2 >= 0 ? y2 : y2 - 399) / 400
            let yoe = y2 - era * 400
            let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
            return era * 146_097 + doe - 719_468
        }
        var totalMinutes = daysFromCivil(year, month, day) * 1440 + hour * 60 + minute - offsetMinutes
        let days = Int((Double(totalMinutes) / 1440).rounded(.down))
        totalMinutes -= days * 1440
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func pad(_ v: Int, _ width: Int) -> String {
            let text = String(v)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return
            "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(totalMinutes / 60, 2)):\(pad(totalMinutes % 60, 2)):"
            + "\(pad(second, 2))\(fraction)Z"
    }
}

/// A mapping derived from the model: one table per entity type (named by the caller, defaulting to the
/// first entity set of that type), one column per property (complex paths joined with `_`), joins from
/// referential constraints, default literal bindings.
///
/// Promises: navigation without a referential constraint has no mapping (nil), so filters through it are
/// reported as untranslatable rather than guessed.
public struct ModelSQLMapping: SQLMapping {
    public var model: EdmModel
    public var tables: [String: String]

    public init(model: EdmModel, tables: [String: String] = [:]) {
        self.model = model
        var tables = tables
        for set in model.entitySets where !set.isSingleton && tables[set.entityType] == nil {
            tables[set.entityType] = set.name
        }
        self.tables = tables
    }

    public func table(for entityType: String) -> String? {
        for type in model.typeHierarchy(of: entityType) {
            if let table = tables[type.qualifiedName] { return table }
        }
        return nil
    }

    public func column(for path: [String], in entityType: String) -> String? {
        guard let first = path.first, model.property(named: first, in: entityType) != nil else { return nil }
        return path.joined(separator: "_")
    }

    public func navigation(_ name: String, from entityType: String) -> SQLNavigationMapping? {
        guard let nav = model.navigationProperty(named: name, in: entityType),
            !nav.referentialConstraints.isEmpty,
            let table = table(for: nav.target)
        else { return nil }
        return SQLNavigationMapping(
            table: table, entityType: nav.target,
            joins: nav.referentialConstraints.map {
                SQLJoinColumns(sourceColumn: $0.property, targetColumn: $0.referencedProperty)
            })
    }
}

/// Translates `$filter` and `$orderby` trees to SQLite SQL over a ``SQLMapping``.
///
/// Promises: every literal becomes a `?` with a binding (never interpolated); identifiers are
/// double-quoted with embedded quotes doubled; the root table is referred to by `rootAlias`; navigation
/// paths become correlated subqueries (`(SELECT … LIMIT 1)` for single-valued values, `EXISTS` for `any`,
/// `NOT EXISTS … IS NOT 1` for `all`, `COUNT(*)` for `$count`); `eq null`/`ne null` become
/// `IS NULL`/`IS NOT NULL`, other comparisons keep SQL three-valued logic (a null operand excludes the row,
/// as odatapy does); anything it cannot express (`isof`, casts to non-primitive types, unmapped
/// properties or navigation) throws ``ODataError`` of kind `.translation`.
public struct ODataSQLTranslator: Sendable {
    public var mapping: any SQLMapping
    public var model: EdmModel?
    public var rootEntityType: String
    public var rootAlias: String

    public init(
        mapping: any SQLMapping, model: EdmModel? = nil, rootEntityType: String, rootAlias: String = "t0"
    ) {
        self.mapping = mapping
        self.model = model
        self.rootEntityType = rootEntityType
        self.rootAlias = rootAlias
    }

    /// A boolean SQL expression for a `WHERE` clause (without the keyword).
    public func translateFilter(_ expression: ODataFilterExpression) throws(ODataError) -> SQLFragment {
        var context = Context(translator: self)
        return try context.predicate(expression)
    }

    /// The `ORDER BY` list (without the keyword), e.g. `"t0"."Freight" DESC, "t0"."OrderID" ASC`.
    public func translateOrderBy(_ items: [ODataOrderByItem]) throws(ODataError) -> SQLFragment {
        var context = Context(translator: self)
        var parts: [SQLFragment] = []
        for item in items {
            parts.append(try context.value(item.expression).fragment + (item.descending ? " DESC" : " ASC"))
        }
        return SQLFragment.joined(parts, separator: ", ")
    }

    /// Quotes an identifier for SQLite.
    public static func quote(_ identifier: String) -> String {
        "\"" + identifier.replacingAll("\"", with: "\"\"") + "\""
    }
}

extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var out = ""
        for c in self {
            if c == target { out += replacement } else { out.append(c) }
        }
        return out
    }
}

private struct Context {
    struct Binding {
        var alias: String
        var entityType: String?
        /// Set when the variable stands for one value of a primitive collection.
        var valueColumn: String?
    }

    let translator: ODataSQLTranslator
    var aliasCounter = 0
    var variables: [String: Binding] = [:]

    init(translator: ODataSQLTranslator) {
        self.translator = translator
    }

    var mapping: any SQLMapping { translator.mapping }

    mutating func newAlias() -> String {
        aliasCounter += 1
        return "t\(aliasCounter)"
    }

    func fail(_ message: String) -> ODataError { ODataError(.translation, message) }

    func q(_ s: String) -> String { ODataSQLTranslator.quote(s) }

    struct Value {
        var fragment: SQLFragment
        var type: EdmTypeRef?
        var isNullLiteral = false
        var isEntity = false
    }

    // MARK: Predicates

    mutating func predicate(_ e: ODataFilterExpression) throws(ODataError) -> SQLFragment {
        switch e {
        case .binary(let op, let l, let r) where op.isLogical:
            return "(" + (try predicate(l)) + (op == .and ? " AND " : " OR ") + (try predicate(r)) + ")"
        case .not(let inner):
            return "(NOT " + (try predicate(inner)) + ")"
        case .property, .function(.cast, _):
            return "(" + (try value(e)).fragment + " = 1)"
        case .literal(.boolean(let b)):
            return SQLFragment(b ? "1" : "0")
        default:
            return try value(e).fragment
        }
    }

    // MARK: Values

    mutating func value(_ e: ODataFilterExpression) throws(ODataError) -> Value {
        switch e {
        case .literal(let literal):
            if case .null = literal {
                return Value(fragment: SQLFragment("NULL"), type: nil, isNullLiteral: true)
            }
            return Value(fragment: SQLFragment("?", [mapping.binding(for: literal, type: nil)]), type: nil)
        case .property(let path):
            return try property(path)
        case .binary(let op, let l, let r):
            if op.isLogical {
                return Value(fragment: try predicate(e), type: EdmTypeRef(name: "Edm.Boolean"))
            }
            if op.isComparison {
                return Value(fragment: try comparison(op, l, r), type: EdmTypeRef(name: "Edm.Boolean"))
            }
            let left = try value(l)
            let right = try value(r)
            let symbol: String
            switch op {
            case .add: symbol = " + "
            case .sub: symbol = " - "
            case .mul: symbol = " * "
            case .div: symbol = " / "
            case .mod: symbol = " % "
            case .divby:
                return Value(
                    fragment: "(CAST(" + left.fragment + " AS REAL) / " + right.fragment + ")", type: nil)
            default: throw fail("operator '\(op.rawValue)' cannot be used here")
            }
            if let t = left.type?.primitive ?? right.type?.primitive, t.isTemporal {
                throw fail("date and duration arithmetic is not supported locally")
            }
            return Value(
                fragment: "(" + left.fragment + symbol + right.fragment + ")", type: left.type ?? right.type)
        case .not:
            return Value(fragment: try predicate(e), type: EdmTypeRef(name: "Edm.Boolean"))
        case .negate(let inner):
            let operand = try value(inner)
            return Value(fragment: "(- " + operand.fragment + ")", type: operand.type)
        case .in(let subject, let list):
            let left = try value(subject)
            var items: [SQLFragment] = []
            for item in list { items.append(try typedValue(item, hint: left.type).fragment) }
            return Value(
                fragment: "(" + left.fragment + " IN (" + SQLFragment.joined(items, separator: ", ") + "))",
                type: EdmTypeRef(name: "Edm.Boolean"))
        case .has(let subject, let literal):
            return Value(fragment: try has(subject, literal), type: EdmTypeRef(name: "Edm.Boolean"))
        case .function(let function, let args):
            return try call(function, args)
        case .typeName(let name):
            throw fail("the type name '\(name)' cannot be used as a value")
        case .lambda(let lambda):
            return Value(fragment: try self.lambda(lambda), type: EdmTypeRef(name: "Edm.Boolean"))
        case .count(let path):
            return Value(fragment: try count(path), type: EdmTypeRef(name: "Edm.Int64"))
        }
    }

    /// A value whose literal binding is typed by `hint` (the other operand's type).
    mutating func typedValue(_ e: ODataFilterExpression, hint: EdmTypeRef?) throws(ODataError) -> Value {
        if case .literal(let literal) = e, literal != .null {
            return Value(fragment: SQLFragment("?", [mapping.binding(for: literal, type: hint)]), type: hint)
        }
        return try value(e)
    }

    mutating func comparison(
        _ op: ODataBinaryOperator, _ l: ODataFilterExpression, _ r: ODataFilterExpression
    )
        throws(ODataError) -> SQLFragment
    {
        // `Nav eq null` on a single-valued navigation: existence of the related row.
        if case .property(let path) = l, case .literal(.null) = r,
            case .navigation(_, _, false)? = path.steps.last,
            op == .eq || op == .ne
        {
            let exists = try navigationExists(path)
            return op == .eq ? "(NOT " + exists + ")" : exists
        }
        var left = try value(l)
        if case .literal = l {
            // Type the left literal by the right side.
            let right = try value(r)
            left = try typedValue(l, hint: right.type)
            return try compare(op, left, right)
        }
        let right = try typedValue(r, hint: left.type)
        return try compare(op, left, right)
    }

    func compare(_ op: ODataBinaryOperator, _ left: Value, _ right: Value) throws(ODataError) -> SQLFragment {
        if left.isNullLiteral || right.isNullLiteral {
            let other = left.isNullLiteral ? right : left
            if left.isNullLiteral && right.isNullLiteral { return SQLFragment(op == .eq ? "1" : "0") }
            switch op {
            case .eq: return "(" + other.fragment + " IS NULL)"
            case .ne: return "(" + other.fragment + " IS NOT NULL)"
            default: return SQLFragment("NULL")
            }
        }
        let symbol: String
        switch op {
        case .eq: symbol = " = "
        case .ne: symbol = " <> "
        case .gt: symbol = " > "
        case .ge: symbol = " >= "
        case .lt: symbol = " < "
        case .le: symbol = " <= "
        default: throw fail("'\(op.rawValue)' is not a comparison")
        }
        return "(" + left.fragment + symbol + right.fragment + ")"
    }

    mutating func has(_ subject: ODataFilterExpression, _ literal: ODataLiteral) throws(ODataError)
        -> SQLFragment
    {
        let left = try value(subject)
        guard case .enumMember(_, let members) = literal else {
            throw fail("'has' needs an enumeration literal")
        }
        let binding = mapping.binding(for: literal, type: left.type)
        if case .integer = binding {
            return "((" + left.fragment + " & ?) = ?)" + SQLFragment("", [binding, binding])
        }
        // Member-name text storage: every flag of the literal must appear in the comma-separated value.
        var parts: [SQLFragment] = []
        for member in members.split(separator: ",") {
            let flag = SQLBinding.text("," + String(member).trimmingSpaces() + ",")
            parts.append(
                "(instr(',' || replace(" + left.fragment + ", ' ', '') || ',', ?) > 0)"
                    + SQLFragment("", [flag]))
        }
        return parts.count == 1 ? parts[0] : "(" + SQLFragment.joined(parts, separator: " AND ") + ")"
    }

    // MARK: Property paths

    func start(_ root: ODataPropertyPath.Root) throws(ODataError) -> Binding {
        switch root {
        case .it: return Binding(alias: translator.rootAlias, entityType: translator.rootEntityType)
        case .variable(let name):
            guard let binding = variables[name] else { throw fail("unknown range variable '\(name)'") }
            return binding
        }
    }

    mutating func property(_ path: ODataPropertyPath) throws(ODataError) -> Value {
        let binding = try start(path.root)
        let steps = path.steps.filter {
            if case .cast = $0 { return false }
            return true
        }
        if steps.isEmpty {
            if let column = binding.valueColumn {
                return Value(fragment: SQLFragment(q(binding.alias) + "." + q(column)), type: path.type)
            }
            throw fail("an entity cannot be used as a value")
        }
        let fragment = try valuePath(steps[...], alias: binding.alias, entityType: binding.entityType)
        return Value(fragment: fragment, type: path.type)
    }

    /// Structural steps become a column; a single-valued navigation becomes a correlated scalar subquery.
    mutating func valuePath(_ steps: ArraySlice<ODataPropertyPath.Step>, alias: String, entityType: String?)
        throws(ODataError) -> SQLFragment
    {
        guard let entityType else { throw fail("the path cannot be resolved without a type") }
        var names: [String] = []
        var index = steps.startIndex
        while index < steps.endIndex, case .property(let name, _) = steps[index] {
            names.append(name)
            index += 1
        }
        if !names.isEmpty {
            guard index == steps.endIndex else {
                throw fail("a navigation cannot follow a complex property here")
            }
            guard let column = mapping.column(for: names, in: entityType) else {
                throw fail("the property '\(names.joined(separator: "/"))' is not available locally")
            }
            return SQLFragment(q(alias) + "." + q(column))
        }
        guard case .navigation(let name, let target, let isCollection) = steps[index] else {
            throw fail("unsupported path")
        }
        guard !isCollection else { throw fail("'\(name)' is a collection; use any(), all() or $count") }
        guard index + 1 < steps.endIndex else { throw fail("the entity '\(name)' cannot be used as a value") }
        guard let nav = mapping.navigation(name, from: entityType) else {
            throw fail("the navigation '\(name)' is not available locally")
        }
        let inner = newAlias()
        let innerValue = try valuePath(steps[(index + 1)...], alias: inner, entityType: target)
        return "(SELECT " + innerValue + " FROM " + fromClause(nav, alias: inner) + " WHERE "
            + joinCondition(nav, outer: alias, inner: inner) + " LIMIT 1)"
    }

    func fromClause(_ nav: SQLNavigationMapping, alias: String) -> String {
        if let link = nav.linkTable {
            let on = nav.linkJoins.map {
                "\(q(alias + "l")).\(q($0.sourceColumn)) = \(q(alias)).\(q($0.targetColumn))"
            }
            return "\(q(link)) AS \(q(alias + "l")) JOIN \(q(nav.table)) AS \(q(alias)) ON "
                + on.joined(separator: " AND ")
        }
        return "\(q(nav.table)) AS \(q(alias))"
    }

    func joinCondition(_ nav: SQLNavigationMapping, outer: String, inner: String) -> String {
        let innerAlias = nav.linkTable == nil ? inner : inner + "l"
        return nav.joins.map { "\(q(innerAlias)).\(q($0.targetColumn)) = \(q(outer)).\(q($0.sourceColumn))" }
            .joined(separator: " AND ")
    }

    /// `EXISTS` over a path ending in a single-valued navigation.
    mutating func navigationExists(_ path: ODataPropertyPath) throws(ODataError) -> SQLFragment {
        let binding = try start(path.root)
        return try existsChain(
            path.steps.filter {
                if case .cast = $0 { return false }
                return true
            }[...], alias: binding.alias, entityType: binding.entityType, body: { _, _, _ in SQLFragment("") }
        )
    }

    /// Nested `EXISTS (SELECT 1 FROM … WHERE join AND …)` through navigation steps; `body` adds the condition
    /// on the innermost row.
    mutating func existsChain(
        _ steps: ArraySlice<ODataPropertyPath.Step>, alias: String, entityType: String?,
        body: (inout Context, String, String) throws(ODataError) -> SQLFragment
    ) throws(ODataError) -> SQLFragment {
        guard let entityType, let first = steps.first else { throw fail("unsupported collection path") }
        guard case .navigation(let name, let target, _) = first else {
            throw fail("'\(first.name)' is not a navigation property")
        }
        guard let nav = mapping.navigation(name, from: entityType) else {
            throw fail("the navigation '\(name)' is not available locally")
        }
        let inner = newAlias()
        let condition: SQLFragment
        if steps.count == 1 {
            condition = try body(&self, inner, target)
        } else {
            condition =
                " AND " + (try existsChain(steps.dropFirst(), alias: inner, entityType: target, body: body))
        }
        return "EXISTS (SELECT 1 FROM " + fromClause(nav, alias: inner) + " WHERE "
            + joinCondition(nav, outer: alias, inner: inner) + condition + ")"
    }

    mutating func lambda(_ lambda: ODataLambda) throws(ODataError) -> SQLFragment {
        let binding = try start(lambda.collection.root)
        let steps = lambda.collection.steps.filter {
            if case .cast = $0 { return false }
            return true
        }
        let variable = lambda.variable
        let predicate = lambda.predicate
        let isAll = lambda.kind == .all
        let body: (inout Context, String, String) throws(ODataError) -> SQLFragment = {
            context, alias, type in
            guard let predicate, let variable else { return SQLFragment("") }
            let saved = context.variables[variable]
            context.variables[variable] = Binding(alias: alias, entityType: type)
            defer { context.variables[variable] = saved }
            let condition = try context.predicate(predicate)
            return isAll ? " AND (" + condition + ") IS NOT 1" : " AND " + condition
        }
        // A collection of primitive or complex values stored in a side table.
        if case .property? = steps.last {
            let names = steps.map(\.name)
            guard steps.allSatisfy({ if case .property = $0 { return true } else { return false } }),
                let entityType = binding.entityType,
                let collection = mapping.collection(for: names, in: entityType)
            else { throw fail("the collection '\(names.joined(separator: "/"))' is not available locally") }
            let inner = newAlias()
            var condition = SQLFragment("")
            if let predicate, let variable {
                let saved = variables[variable]
                variables[variable] = Binding(
                    alias: inner, entityType: nil, valueColumn: collection.valueColumn)
                defer { variables[variable] = saved }
                let p = try self.predicate(predicate)
                condition = isAll ? " AND (" + p + ") IS NOT 1" : " AND " + p
            }
            let join = collection.joins.map {
                "\(q(inner)).\(q($0.targetColumn)) = \(q(binding.alias)).\(q($0.sourceColumn))"
            }
            let exists =
                "EXISTS (SELECT 1 FROM \(q(collection.table)) AS \(q(inner)) WHERE "
                + join.joined(separator: " AND ") + condition + ")"
            return isAll ? "(NOT " + exists + ")" : exists
        }
        let exists = try existsChain(
            steps[...], alias: binding.alias, entityType: binding.entityType, body: body)
        return isAll ? "(NOT " + exists + ")" : exists
    }

    mutating func count(_ path: ODataPropertyPath) throws(ODataError) -> SQLFragment {
        let binding = try start(path.root)
        let steps = path.steps.filter {
            if case .cast = $0 { return false }
            return true
        }
        return try countChain(steps[...], alias: binding.alias, entityType: binding.entityType)
    }

    mutating func countChain(_ steps: ArraySlice<ODataPropertyPath.Step>, alias: String, entityType: String?)
        throws(ODataError) -> SQLFragment
    {
        guard let entityType, let first = steps.first, case .navigation(let name, let target, _) = first
        else {
            throw fail("$count is only supported on navigation collections locally")
        }
        guard let nav = mapping.navigation(name, from: entityType) else {
            throw fail("the navigation '\(name)' is not available locally")
        }
        let inner = newAlias()
        // Through a link table, one target may be linked more than once (several sources of the link).
        let counted = nav.linkTable == nil ? "COUNT(*)" : "COUNT(DISTINCT \(q(inner)).rowid)"
        let select: SQLFragment =
            steps.count == 1
            ? SQLFragment(counted) : try countChain(steps.dropFirst(), alias: inner, entityType: target)
        return "(SELECT " + select + " FROM " + fromClause(nav, alias: inner) + " WHERE "
            + joinCondition(nav, outer: alias, inner: inner) + ")"
    }

    // MARK: Functions

    mutating func call(_ function: ODataFunction, _ args: [ODataFilterExpression]) throws(ODataError) -> Value
    {
        var values: [SQLFragment] = []
        var first: EdmTypeRef?
        for (index, arg) in args.enumerated() {
            if case .typeName = arg { continue }
            let v = index == 0 ? try value(arg) : try typedValue(arg, hint: first)
            if index == 0 { first = v.type }
            values.append(v.fragment)
        }
        func a(_ i: Int) -> SQLFragment { values[i] }
        let int = EdmTypeRef(name: "Edm.Int32")
        let string = EdmTypeRef(name: "Edm.String")
        let bool = EdmTypeRef(name: "Edm.Boolean")
        switch function {
        case .contains: return Value(fragment: "(instr(" + a(0) + ", " + a(1) + ") > 0)", type: bool)
        case .startswith:
            return Value(
                fragment: "(substr(" + a(0) + ", 1, length(" + a(1) + ")) = " + a(1) + ")", type: bool)
        case .endswith:
            return Value(
                fragment: "(length(" + a(1) + ") = 0 OR substr(" + a(0) + ", -length(" + a(1) + ")) = " + a(1)
                    + ")",
                type: bool)
        case .length: return Value(fragment: "length(" + a(0) + ")", type: int)
        case .indexof: return Value(fragment: "(instr(" + a(0) + ", " + a(1) + ") - 1)", type: int)
        case .substring:
            if values.count == 3 {
                return Value(fragment: "substr(" + a(0) + ", (" + a(1) + ") + 1, " + a(2) + ")", type: string)
            }
            return Value(fragment: "substr(" + a(0) + ", (" + a(1) + ") + 1)", type: string)
        case .tolower: return Value(fragment: "lower(" + a(0) + ")", type: string)
        case .toupper: return Value(fragment: "upper(" + a(0) + ")", type: string)
        case .trim: return Value(fragment: "trim(" + a(0) + ")", type: string)
        case .concat: return Value(fragment: "(" + a(0) + " || " + a(1) + ")", type: string)
        case .replace:
            return Value(fragment: "replace(" + a(0) + ", " + a(1) + ", " + a(2) + ")", type: string)
        case .year: return Value(fragment: "CAST(strftime('%Y', " + a(0) + ") AS INTEGER)", type: int)
        case .month: return Value(fragment: "CAST(strftime('%m', " + a(0) + ") AS INTEGER)", type: int)
        case .day: return Value(fragment: "CAST(strftime('%d', " + a(0) + ") AS INTEGER)", type: int)
        case .hour: return Value(fragment: "CAST(strftime('%H', " + a(0) + ") AS INTEGER)", type: int)
        case .minute: return Value(fragment: "CAST(strftime('%M', " + a(0) + ") AS INTEGER)", type: int)
        case .second: return Value(fragment: "CAST(strftime('%S', " + a(0) + ") AS INTEGER)", type: int)
        case .fractionalseconds:
            return Value(
                fragment: "(CAST(strftime('%f', " + a(0) + ") AS REAL) - CAST(strftime('%S', " + a(0)
                    + ") AS INTEGER))",
                type: EdmTypeRef(name: "Edm.Decimal"))
        case .date: return Value(fragment: "date(" + a(0) + ")", type: EdmTypeRef(name: "Edm.Date"))
        case .time: return Value(fragment: "time(" + a(0) + ")", type: EdmTypeRef(name: "Edm.TimeOfDay"))
        case .totaloffsetminutes:
            let x = a(0)
            return Value(
                fragment: "(CASE WHEN substr(" + x + ", -6, 1) IN ('+', '-') THEN (CASE substr(" + x
                    + ", -6, 1) WHEN '-' THEN -1 ELSE 1 END) * (CAST(substr(" + x
                    + ", -5, 2) AS INTEGER) * 60 + CAST(substr("
                    + x + ", -2, 2) AS INTEGER)) ELSE 0 END)", type: int)
        case .now:
            return Value(
                fragment: SQLFragment("strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"),
                type: EdmTypeRef(name: "Edm.DateTimeOffset"))
        case .mindatetime:
            return Value(
                fragment: SQLFragment("?", [.text("0001-01-01T00:00:00Z")]),
                type: EdmTypeRef(name: "Edm.DateTimeOffset"))
        case .maxdatetime:
            return Value(
                fragment: SQLFragment("?", [.text("9999-12-31T23:59:59.999Z")]),
                type: EdmTypeRef(name: "Edm.DateTimeOffset"))
        case .round: return Value(fragment: "round(" + a(0) + ")", type: first)
        case .floor:
            let x = a(0)
            return Value(
                fragment: "(CAST(" + x + " AS INTEGER) - (" + x + " < CAST(" + x + " AS INTEGER)))",
                type: first)
        case .ceiling:
            let x = a(0)
            return Value(
                fragment: "(CAST(" + x + " AS INTEGER) + (" + x + " > CAST(" + x + " AS INTEGER)))",
                type: first)
        case .isof:
            throw fail("isof() is not supported locally")
        case .cast:
            guard case .typeName(let typeName)? = args.last,
                let primitive = EdmPrimitiveType(rawValue: typeName),
                !values.isEmpty
            else { throw fail("cast() is only supported locally to primitive types with an argument") }
            let target: String
            if primitive.isIntegral {
                target = "INTEGER"
            } else if primitive == .double || primitive == .single || primitive == .decimal {
                target = "REAL"
            } else if primitive == .string {
                target = "TEXT"
            } else {
                throw fail("cast() to \(typeName) is not supported locally")
            }
            return Value(fragment: "CAST(" + a(0) + " AS " + target + ")", type: EdmTypeRef(name: typeName))
        }
    }
}
