/// A translated value expression: its SQL, its OData type when known, and how it encodes values.
///
/// Promises: `fragment`'s bindings are all the values it needs; comparing two values of the same
/// `encoding` in SQL compares the OData values as ``SQLValueEncoding`` describes.
public struct ODataSQLValue: Sendable, Hashable {
    public var fragment: SQLFragment
    public var type: EdmTypeRef?
    public var encoding: SQLValueEncoding

    public init(fragment: SQLFragment, type: EdmTypeRef?, encoding: SQLValueEncoding = .native) {
        self.fragment = fragment
        self.type = type
        self.encoding = encoding
    }
}

/// Translates `$filter` and `$orderby` trees to SQLite SQL over a ``SQLMapping``.
///
/// Promises: every literal becomes a `?` with a binding (never interpolated), bound in the encoding of the
/// value it is compared with (``SQLMapping/profile``); identifiers are double-quoted with embedded quotes
/// doubled; the root table is referred to by `rootAlias`; navigation paths become correlated subqueries
/// (`(SELECT … LIMIT 1)` for single-valued values, `EXISTS` for `any`, `NOT EXISTS … IS NOT 1` for `all`,
/// `COUNT(*)` for `$count`); collections of primitive or complex values are read from a side table or
/// with `json_each` over the stored document; type casts and `isof` test the mapping's type column;
/// `eq null`/`ne null` become `IS NULL`/`IS NOT NULL`, other comparisons keep SQL three-valued logic (a
/// null operand excludes the row, as odatapy does). Whatever cannot be answered exactly from the storage
/// (an unmapped property or navigation, a cast without a type column, ordering values stored without
/// order, arithmetic on durations, `totaloffsetminutes` of normalized instants) throws ``ODataError`` of
/// kind `.translation`, never a wrong comparison.
public struct ODataSQLTranslator: Sendable {
    public var mapping: any SQLMapping
    public var model: EdmModel?
    public var rootEntityType: String
    public var rootAlias: String
    /// Properties computed by `$compute` (or an `$apply` stage): a single-step path naming one reads this
    /// value instead of a column.
    public var computed: [String: ODataSQLValue] = [:]

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
        var context = SQLTranslationContext(translator: self)
        return try context.predicate(expression)
    }

    /// The `ORDER BY` list (without the keyword), e.g. `"t0"."Freight" DESC, "t0"."OrderID" ASC`.
    public func translateOrderBy(_ items: [ODataOrderByItem]) throws(ODataError) -> SQLFragment {
        var context = SQLTranslationContext(translator: self)
        var parts: [SQLFragment] = []
        for item in items {
            let value = try context.value(item.expression)
            try context.requireOrder(value)
            parts.append(context.orderable(value) + (item.descending ? " DESC" : " ASC"))
        }
        return SQLFragment.joined(parts, separator: ", ")
    }

    /// The SQL of a value expression (for `$compute` and `$apply`).
    public func translateValue(_ expression: ODataFilterExpression) throws(ODataError) -> ODataSQLValue {
        var context = SQLTranslationContext(translator: self)
        let v = try context.value(expression)
        if let literal = v.literal {
            return ODataSQLValue(
                fragment: SQLFragment("?", [SQLDefaults.binding(for: literal, type: nil)]),
                type: literal.edmType.map { EdmTypeRef(name: $0.rawValue) })
        }
        return ODataSQLValue(fragment: v.fragment, type: v.type, encoding: v.encoding)
    }

    /// The condition that a row of `alias` (rows of `entityType`'s table) is of `castType` or derived from
    /// it; nil when every row is (the table's type derives from `castType`). Throws when rows of derived
    /// types cannot be told apart (no type column).
    public func typeCondition(alias: String, entityType: String, castType: String) throws(ODataError)
        -> SQLFragment?
    {
        let context = SQLTranslationContext(translator: self)
        return try context.typeCondition(alias: alias, entityType: entityType, castType: castType)
    }

    /// SQL ordering like the values of `v` (`min`, `max`, `ORDER BY`); throws when the storage cannot
    /// order them.
    public func sortable(_ v: ODataSQLValue) throws(ODataError) -> SQLFragment {
        let context = SQLTranslationContext(translator: self)
        let value = context.value(of: v)
        try context.requireOrder(value)
        return context.orderable(value)
    }

    /// SQL testing values of `v` for equality (`countdistinct`, grouping); throws when the storage cannot.
    public func equatable(_ v: ODataSQLValue) throws(ODataError) -> SQLFragment {
        let context = SQLTranslationContext(translator: self)
        let value = context.value(of: v)
        try context.requireEquality(value)
        return context.comparable(value)
    }

    /// SQL reading `v` as a number (`sum`, `average`); decimal keys as REAL. Throws for values that are
    /// not numbers (durations, enumerations, text).
    public func numeric(_ v: ODataSQLValue) throws(ODataError) -> SQLFragment {
        let context = SQLTranslationContext(translator: self)
        if let p = v.type.flatMap({ model?.primitiveType(of: $0) ?? $0.primitive }), !p.isNumeric {
            throw ODataError(.translation, "\(p.rawValue) values cannot be summed or averaged")
        }
        return try context.number(context.value(of: v), "aggregation").fragment
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

/// The state of one translation: the translator, bound range variables and fresh aliases. Its path,
/// lambda and function-call translation is in `SQLTranslation+Paths.swift`.
struct SQLTranslationContext {
    /// What the root or a lambda range variable stands for.
    struct Binding {
        var alias: String
        /// The entity type of the rows (nil for collection items).
        var entityType: String?
        /// For items of a collection of primitive or complex values: the item's SQL and encoding.
        var item: Item?
    }

    struct Item {
        var fragment: SQLFragment
        var encoding: SQLValueEncoding
        var type: EdmTypeRef?
    }

    struct Value {
        private var stored: SQLFragment
        var type: EdmTypeRef?
        var encoding: SQLValueEncoding = .native
        var isNullLiteral = false
        /// Set for literals: bound once the other operand's type and encoding are known.
        var literal: ODataLiteral?

        init(
            fragment: SQLFragment, type: EdmTypeRef?, encoding: SQLValueEncoding = .native,
            isNullLiteral: Bool = false, literal: ODataLiteral? = nil
        ) {
            stored = fragment
            self.type = type
            self.encoding = encoding
            self.isNullLiteral = isNullLiteral
            self.literal = literal
        }

        /// The SQL; a literal not yet bound for another operand gets its untyped default binding (computed
        /// only when used, since most literals are bound for the value they are compared with).
        var fragment: SQLFragment {
            get {
                if let literal, stored.sql.isEmpty {
                    return SQLFragment("?", [SQLDefaults.binding(for: literal, type: nil)])
                }
                return stored
            }
            set { stored = newValue }
        }
    }

    let translator: ODataSQLTranslator
    var aliasCounter = 0
    var variables: [String: Binding] = [:]

    init(translator: ODataSQLTranslator) {
        self.translator = translator
    }

    var mapping: any SQLMapping { translator.mapping }
    var model: EdmModel? { translator.model }
    var profile: SQLStorageProfile { mapping.profile }

    mutating func newAlias() -> String {
        aliasCounter += 1
        return "t\(aliasCounter)"
    }

    func fail(_ message: String) -> ODataError { ODataError(.translation, message) }

    func q(_ s: String) -> String { ODataSQLTranslator.quote(s) }

    func primitive(_ type: EdmTypeRef?) -> EdmPrimitiveType? {
        guard let type else { return nil }
        return model?.primitiveType(of: type) ?? type.primitive
    }

    func isEnum(_ type: EdmTypeRef?) -> Bool {
        guard let type, let model else { return false }
        return model.enumType(type) != nil
    }

    /// The encoding of a stored column of `type`.
    func columnEncoding(_ type: EdmTypeRef?) -> SQLValueEncoding {
        type.map { profile.encoding(of: $0, in: model) } ?? .native
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
            return Value(fragment: SQLFragment(""), type: nil, literal: literal)
        case .property(let path):
            return try property(path)
        case .binary(let op, let l, let r):
            if op.isLogical {
                return Value(fragment: try predicate(e), type: EdmTypeRef(name: "Edm.Boolean"))
            }
            if op.isComparison {
                return Value(fragment: try comparison(op, l, r), type: EdmTypeRef(name: "Edm.Boolean"))
            }
            return try arithmetic(op, l, r)
        case .not:
            return Value(fragment: try predicate(e), type: EdmTypeRef(name: "Edm.Boolean"))
        case .negate(let inner):
            let operand = try number(try value(inner), "'-'")
            return Value(fragment: "(- " + operand.fragment + ")", type: operand.type)
        case .in(let subject, let list):
            let left = try value(subject)
            var items: [SQLFragment] = []
            for item in list {
                let right = try value(item)
                let (a, b) = try aligned(left, right, ordering: false)
                items.append(b.fragment)
                _ = a
            }
            let subjectSQL = left.literal == nil ? comparable(left) : left.fragment
            return Value(
                fragment: "(" + subjectSQL + " IN (" + SQLFragment.joined(items, separator: ", ") + "))",
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

    func value(of v: ODataSQLValue) -> Value {
        Value(fragment: v.fragment, type: v.type, encoding: v.encoding)
    }

    /// A literal bound in `like`'s type and encoding.
    func bind(_ literal: ODataLiteral, like other: Value) -> Value {
        let binding: SQLBinding
        if other.encoding == columnEncoding(other.type) {
            binding = mapping.binding(for: literal, type: other.type)
        } else {
            binding = ODataStorage.bind(
                literal, type: other.type, encoding: other.encoding, profile: profile, model: model)
        }
        return Value(fragment: SQLFragment("?", [binding]), type: other.type, encoding: other.encoding)
    }

    /// A value of the given type with its literal bound for it (other values unchanged).
    mutating func typedValue(_ e: ODataFilterExpression, hint: Value?) throws(ODataError) -> Value {
        let v = try value(e)
        if let literal = v.literal, let hint { return bind(literal, like: hint) }
        return v
    }

    /// The SQL of a value as compared: JSON GUIDs lowercased.
    func comparable(_ v: Value) -> SQLFragment {
        if v.encoding == .json, primitive(v.type) == .guid { return "lower(" + v.fragment + ")" }
        return v.fragment
    }

    /// SQL that orders like the values of `v` (after ``requireOrder(_:)``).
    func orderable(_ v: Value) -> SQLFragment { comparable(v) }

    /// Throws when SQLite cannot order values stored as `v` is.
    func requireOrder(_ v: Value) throws(ODataError) {
        switch v.encoding {
        case .enumName:
            throw fail("enumeration values stored as member names cannot be ordered locally")
        case .rawText:
            throw fail(
                "\(v.type?.name ?? "these") values are stored as sent and cannot be compared by size locally")
        case .json:
            if isEnum(v.type) || !ODataStorage.jsonComparable(primitive(v.type)) {
                throw fail(
                    "\(v.type?.name ?? "these") values read from the stored document cannot be ordered locally"
                )
            }
        default: return
        }
    }

    /// Throws when SQLite cannot test values stored as `v` is for equality.
    func requireEquality(_ v: Value) throws(ODataError) {
        if v.encoding == .json, !isEnum(v.type), !ODataStorage.jsonComparable(primitive(v.type)) {
            throw fail(
                "\(v.type?.name ?? "these") values read from the stored document cannot be compared locally")
        }
    }

    /// Brings two operands of a comparison to one encoding (literals bound for the other side).
    func aligned(_ a: Value, _ b: Value, ordering: Bool) throws(ODataError) -> (Value, Value) {
        var (a, b) = (a, b)
        if let literal = a.literal, let other = b.literal {
            a = bind(
                literal,
                like: Value(
                    fragment: SQLFragment(""), type: other.edmType.map { EdmTypeRef(name: $0.rawValue) }))
            b = bind(other, like: Value(fragment: SQLFragment(""), type: a.type))
        } else if let literal = a.literal {
            a = bind(literal, like: b)
        } else if let literal = b.literal {
            b = bind(literal, like: a)
        } else if a.encoding != b.encoding {
            a = try numericIfMixed(a, other: b)
            b = try numericIfMixed(b, other: a)
        }
        for v in [a, b] {
            if ordering { try requireOrder(v) } else { try requireEquality(v) }
        }
        return (a, b)
    }

    /// For operands of different encodings: decimal keys read as REAL next to plain numbers; JSON next to
    /// native values as is (when comparable); anything else cannot be compared.
    func numericIfMixed(_ v: Value, other: Value) throws(ODataError) -> Value {
        let pair: Set<SQLValueEncoding> = [v.encoding, other.encoding]
        let numeric: Set<SQLValueEncoding> = [.decimalKey, .native, .real, .json]
        switch v.encoding {
        case .decimalKey where pair.isSubset(of: numeric):
            return Value(fragment: ODataStorage.decimalRealSQL(v.fragment), type: v.type, encoding: .native)
        case .native where pair.isSubset(of: numeric), .real where pair.isSubset(of: numeric),
            .json where pair.isSubset(of: numeric):
            return v
        default:
            throw fail(
                "values of \(v.type?.name ?? "?") and \(other.type?.name ?? "?") are stored differently and cannot be compared locally"
            )
        }
    }

    /// A numeric operand: decimal keys read as REAL; durations, enumerations and other encodings refused.
    func number(_ v: Value, _ what: String) throws(ODataError) -> Value {
        if v.literal != nil { return v }
        switch v.encoding {
        case .native, .real: break
        case .decimalKey:
            return Value(fragment: ODataStorage.decimalRealSQL(v.fragment), type: v.type, encoding: .native)
        case .json where primitive(v.type)?.isNumeric ?? true: break
        default: throw fail("\(what) needs numbers; \(v.type?.name ?? "this value") is not stored as one")
        }
        if let p = primitive(v.type), p.isTemporal {
            throw fail("date and duration arithmetic is not supported locally")
        }
        return v
    }

    mutating func arithmetic(
        _ op: ODataBinaryOperator, _ l: ODataFilterExpression, _ r: ODataFilterExpression
    )
        throws(ODataError) -> Value
    {
        let left = try number(try value(l), "'\(op.rawValue)'")
        let right = try number(try value(r), "'\(op.rawValue)'")
        let type = left.type ?? right.type
        if let p = primitive(type), p.isTemporal {
            throw fail("date and duration arithmetic is not supported locally")
        }
        guard op.isArithmetic else { throw fail("operator '\(op.rawValue)' cannot be used here") }
        guard let symbol = op.sql else {
            return Value(
                fragment: "(CAST(" + left.fragment + " AS REAL) / " + right.fragment + ")", type: nil)
        }
        return Value(fragment: "(" + left.fragment + symbol + right.fragment + ")", type: type)
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
        let left = try value(l)
        let right = try value(r)
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
        guard op.isComparison, let symbol = op.sql else { throw fail("'\(op.rawValue)' is not a comparison") }
        let (a, b) = try aligned(left, right, ordering: op != .eq && op != .ne)
        return "(" + comparable(a) + symbol + comparable(b) + ")"
    }

    mutating func has(_ subject: ODataFilterExpression, _ literal: ODataLiteral) throws(ODataError)
        -> SQLFragment
    {
        let left = try value(subject)
        guard case .enumMember(_, let members) = literal else {
            throw fail("'has' needs an enumeration literal")
        }
        switch left.encoding {
        case .enumValue:
            let binding = bind(literal, like: left).fragment
            return "((" + left.fragment + " & " + binding + ") = " + binding + ")"
        case .enumName, .json, .native:
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
        default:
            throw fail("'has' needs an enumeration value")
        }
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
        if path.root == .it, path.steps.count == 1, case .property(let name, _) = path.steps[0],
            let computed = translator.computed[name]
        {
            return Value(fragment: computed.fragment, type: computed.type, encoding: computed.encoding)
        }
        let binding = try start(path.root)
        if let item = binding.item {
            return try itemMember(item, path.steps, type: path.type)
        }
        if path.steps.isEmpty { throw fail("an entity cannot be used as a value") }
        return try entityValue(path.steps[...], alias: binding.alias, entityType: binding.entityType)
    }

    /// A member of a collection item: the item itself, or a property of a complex item read from its JSON.
    func itemMember(_ item: Item, _ steps: [ODataPropertyPath.Step], type: EdmTypeRef?) throws(ODataError)
        -> Value
    {
        let names = steps.compactMap { step -> String? in
            if case .property(let name, _) = step { return name }
            return nil
        }
        guard names.count == steps.filter({ if case .cast = $0 { false } else { true } }).count else {
            throw fail("navigation from an item of a collection is not supported locally")
        }
        if steps.contains(where: { if case .cast = $0 { true } else { false } }) {
            throw fail("type casts inside collections of complex values are not supported locally")
        }
        if names.isEmpty {
            let itemType = item.type ?? type
            let fragment = item.encoding == .json ? jsonScalar(item.fragment, itemType) : item.fragment
            return Value(fragment: fragment, type: itemType, encoding: item.encoding)
        }
        guard item.encoding == .json else { throw fail("members of collection items are not stored locally") }
        let path = SQLFragment("?", [.text(ODataStorage.jsonPath(names))])
        return Value(
            fragment: jsonScalar("json_extract(" + item.fragment + ", " + path + ")", type), type: type,
            encoding: .json)
    }

    /// A JSON scalar as SQL compares it: numbers of integral and floating types cast (V2 and
    /// `IEEE754Compatible` send Int64 and others as strings).
    func jsonScalar(_ fragment: SQLFragment, _ type: EdmTypeRef?) -> SQLFragment {
        guard let p = primitive(type) else { return fragment }
        if p.isIntegral { return "CAST(" + fragment + " AS INTEGER)" }
        if p == .double || p == .single { return "CAST(" + fragment + " AS REAL)" }
        return fragment
    }

    /// Casts, structural steps (a column, or the stored document) and single-valued navigation (a
    /// correlated scalar subquery) from rows of `entityType` at `alias`.
    mutating func entityValue(_ steps: ArraySlice<ODataPropertyPath.Step>, alias: String, entityType: String?)
        throws(ODataError) -> Value
    {
        guard let entityType else { throw fail("the path cannot be resolved without a type") }
        var index = steps.startIndex
        var castType: String?
        while index < steps.endIndex, case .cast(let t) = steps[index] {
            castType = t
            index += 1
        }
        let condition = try castType.flatMap { t throws(ODataError) in
            try typeCondition(alias: alias, entityType: entityType, castType: t)
        }
        var names: [String] = []
        var leafType: EdmTypeRef?
        while index < steps.endIndex, case .property(let name, let type) = steps[index] {
            names.append(name)
            leafType = type
            index += 1
        }
        var result: Value
        if !names.isEmpty {
            guard index == steps.endIndex else {
                throw fail("a cast or navigation after a complex property is not supported locally")
            }
            result = try structural(names, type: leafType, alias: alias, entityType: castType ?? entityType)
        } else {
            guard index < steps.endIndex,
                case .navigation(let name, let target, let isCollection) = steps[index]
            else { throw fail("the entity cannot be used as a value") }
            guard !isCollection else { throw fail("'\(name)' is a collection; use any(), all() or $count") }
            guard index + 1 < steps.endIndex else {
                throw fail("the entity '\(name)' cannot be used as a value")
            }
            guard let nav = mapping.navigation(name, from: castType ?? entityType) else {
                throw fail("the navigation '\(name)' is not available locally")
            }
            let inner = newAlias()
            let innerValue = try entityValue(steps[(index + 1)...], alias: inner, entityType: target)
            result = innerValue
            result.fragment =
                "(SELECT " + innerValue.fragment + " FROM " + fromClause(nav, alias: inner) + " WHERE "
                + joinCondition(nav, outer: alias, inner: inner) + " LIMIT 1)"
        }
        if let condition {
            result.fragment = "(CASE WHEN " + condition + " THEN " + result.fragment + " END)"
        }
        return result
    }

    /// A structural property path of rows at `alias`: its column, else the stored document's value.
    func structural(_ names: [String], type: EdmTypeRef?, alias: String, entityType: String)
        throws(ODataError)
        -> Value
    {
        if let column = mapping.column(for: names, in: entityType) {
            return Value(
                fragment: SQLFragment(q(alias) + "." + q(column)), type: type,
                encoding: mapping.encoding(for: names, in: entityType) ?? columnEncoding(type))
        }
        if let document = mapping.documentColumn(for: entityType) {
            if let type, type.isCollection || model?.structuredType(type.name) != nil {
                throw fail("'\(names.joined(separator: "/"))' is not a primitive value")
            }
            let path = SQLFragment("?", [.text(ODataStorage.jsonPath(names))])
            return Value(
                fragment: jsonScalar(
                    "json_extract(" + q(alias) + "." + q(document) + ", " + path + ")", type),
                type: type, encoding: .json)
        }
        throw fail("the property '\(names.joined(separator: "/"))' is not available locally")
    }

    func typeCondition(alias: String, entityType: String, castType: String) throws(ODataError) -> SQLFragment?
    {
        guard let model else { throw fail("type casts need the model") }
        if model.isType(entityType, derivedFrom: castType) { return nil }
        guard model.isType(castType, derivedFrom: entityType) else { return SQLFragment("0") }
        guard let column = mapping.typeColumn(for: entityType) else {
            throw fail(
                "the entity types of stored rows are not known locally, so '\(castType)' cannot be told apart"
            )
        }
        let types = model.typeAndDerived(castType)
        return "(coalesce(" + q(alias) + "." + q(column) + ", '') IN ("
            + SQLFragment(
                Array(repeating: "?", count: types.count).joined(separator: ", "), types.map(SQLBinding.text))
            + "))"
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

}

extension ODataStorage {
    /// The SQLite JSON path of a property path (`$."Address"."City"`).
    public static func jsonPath(_ names: [String]) -> String {
        var out = "$"
        for name in names { out += ".\"" + name.replacingAll("\"", with: "\\\"") + "\"" }
        return out
    }
}
