/// One column of a planned result that is not an entity's own: a computed property, or a property of an
/// aggregated result.
///
/// Promises: `path` is where the value goes in the result (`["Category", "Name"]` nests it in
/// `Category`); `type` is its EDM type (primitive or enumeration) and `encoding` how the SQL value
/// encodes it (decode with ``ODataStorage/wireValue(_:type:encoding:model:)``); `sqlName` is the result
/// column's name.
public struct ODataResultColumn: Sendable, Hashable {
    public var path: [String]
    public var type: EdmTypeRef
    public var encoding: SQLValueEncoding
    public var sqlName: String
}

/// What the rows of a planned query are.
public enum ODataResultShape: Sendable, Hashable {
    /// Entities of the input set: every column of the entity table (`"t0".*`, the entity's stored
    /// document included) followed by these computed columns.
    case entities(computed: [ODataResultColumn])
    /// Aggregated instances without identity: exactly these columns, in order (group keys first, then
    /// aggregates and computed values). A V4 serializer writes each row as an object with
    /// `"@odata.id": null` and the columns nested by path.
    case aggregated([ODataResultColumn])
}

/// A complete SQL query for `$apply` followed by `$compute`, `$search`, `$filter`, `$orderby`,
/// `$skip`, `$top` (in the order OData 4.01 evaluates them).
///
/// Promises: `sql` is one `SELECT` whose rows have the shape `shape`, in the requested order with
/// deterministic tie-breakers (the entity key, or the group keys ascending); `countSQL` counts the rows
/// before `$skip`/`$top` (what `$count=true` reports); all values are bound; `contextSelect` is the
/// select list for an aggregated result's context URL (`(Category(Name),Total)`), nil for entities.
public struct ODataQueryPlan: Sendable {
    public var sql: SQLFragment
    public var countSQL: SQLFragment
    public var shape: ODataResultShape
    public var contextSelect: String?
}

/// Plans `$apply` and the query options after it over one entity set's table.
///
/// Promises: filters, orders, computed and aggregated values are translated by ``ODataSQLTranslator``
/// (same storage rules, bound values, `.translation` errors for what the storage cannot answer); each
/// transformation sees exactly the rows the previous one produced (`top`/`skip` followed by a filter or an
/// order becomes a subquery); `groupby` paths must end in a primitive or enumeration property (through
/// complex properties or single-valued navigation); aggregates: `sum` and `average` of decimals are
/// computed in double precision (15–17 significant digits; `Edm.Decimal` results), of integers exactly
/// (`sum` → `Edm.Int64`, `average` → `Edm.Double`); `min`/`max` keep the input's type and exact order;
/// `countdistinct` and `$count` are `Edm.Int64`; a `groupby` may be followed inside it by `aggregate`
/// and then row-wise `filter`/`compute`/`identity`; `search` after aggregation and other nested
/// sequences are `.notImplemented`.
public struct ODataQueryPlanner: Sendable {
    public var model: EdmModel
    public var mapping: any SQLMapping
    public var table: String
    public var entityType: String
    /// The scope of the read over alias `t0` (e.g. the key of a navigation source), `1` for a whole set.
    public var condition: SQLFragment

    public init(
        model: EdmModel, mapping: any SQLMapping, table: String, entityType: String,
        condition: SQLFragment = SQLFragment("1")
    ) {
        self.model = model
        self.mapping = mapping
        self.table = table
        self.entityType = entityType
        self.condition = condition
    }

    public func plan(apply: ODataApply?, options: ODataQueryOptions) throws(ODataError) -> ODataQueryPlan {
        var state = PlanState(planner: self)
        var relation = Relation(
            from: SQLFragment(q(table) + " AS \"t0\""), wheres: [condition], aggregated: nil)
        for transformation in apply?.transformations ?? [] {
            relation = try state.apply(transformation, to: relation)
        }
        if let compute = options.compute { relation = try state.apply(.compute(compute), to: relation) }
        if let search = options.searchExpression { relation = try state.apply(.search(search), to: relation) }
        if let filter = options.filter { relation = try state.apply(.filter(filter), to: relation) }
        let counted = relation
        if let orderBy = options.orderBy { relation = try state.apply(.orderBy(orderBy), to: relation) }
        if let skip = options.skip { relation = try state.apply(.skip(skip), to: relation) }
        if let top = options.top { relation = try state.apply(.top(top), to: relation) }
        let countSQL = "SELECT COUNT(*) FROM (" + state.select(counted, final: false) + ")"
        let columns = relation.computed.map(\.column)
        if let aggregated = relation.aggregated {
            return ODataQueryPlan(
                sql: state.select(relation, final: true), countSQL: countSQL,
                shape: .aggregated(aggregated.columns + columns),
                contextSelect: Self.selectList((aggregated.columns + columns).map(\.path)))
        }
        return ODataQueryPlan(
            sql: state.select(relation, final: true), countSQL: countSQL, shape: .entities(computed: columns),
            contextSelect: nil)
    }

    /// `(Category(Name),Total)` for paths `[Category, Name]`, `[Total]`.
    static func selectList(_ paths: [[String]]) -> String {
        var order: [String] = []
        var children: [String: [[String]]] = [:]
        for path in paths {
            guard let head = path.first else { continue }
            if children[head] == nil { order.append(head) }
            children[head, default: []].append(Array(path.dropFirst()))
        }
        return "("
            + order.map { head in
                let rest = children[head]!.filter { !$0.isEmpty }
                return rest.isEmpty ? head : head + selectList(rest)
            }.joined(separator: ",") + ")"
    }

    func q(_ s: String) -> String { ODataSQLTranslator.quote(s) }
}

/// A relation under construction: one `SELECT … FROM from WHERE … ORDER BY … LIMIT …` over alias `t0`.
private struct Relation {
    var from: SQLFragment
    var wheres: [SQLFragment]
    var order: [SQLFragment] = []
    var limit: Int?
    var offset = 0
    /// Set once aggregated: the result columns of `from` and the synthetic type describing them.
    var aggregated: Aggregated?
    /// Computed columns of this SELECT, with the value SQL filters and orders use.
    var computed: [(column: ODataResultColumn, value: ODataSQLValue)] = []

    struct Aggregated {
        var columns: [ODataResultColumn]
        var groupColumns: [ODataResultColumn]
        var model: EdmModel
        var typeName: String
    }

    var isLimited: Bool { limit != nil || offset > 0 }
}

/// Columns of an aggregated relation as the translator's mapping.
private struct ResultMapping: SQLMapping {
    let base: any SQLMapping
    let columns: [ODataResultColumn]

    func column(for path: [String], in entityType: String) -> String? {
        columns.first { $0.path == path }?.sqlName
    }
    func navigation(_ name: String, from entityType: String) -> SQLNavigationMapping? { nil }
    func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding {
        base.binding(for: literal, type: type)
    }
    var profile: SQLStorageProfile { base.profile }
    func encoding(for path: [String], in entityType: String) -> SQLValueEncoding? {
        columns.first { $0.path == path }?.encoding
    }
}

private struct PlanState {
    let planner: ODataQueryPlanner
    var syntheticCounter = 0

    init(planner: ODataQueryPlanner) { self.planner = planner }

    func fail(_ message: String, _ kind: ODataError.Kind = .translation) -> ODataError {
        ODataError(kind, "$apply: " + message, segment: "$apply")
    }

    func q(_ s: String) -> String { ODataSQLTranslator.quote(s) }

    /// The parser and translator for expressions over `relation`'s rows.
    func tools(_ relation: Relation) -> (ODataFilterParser, ODataSQLTranslator) {
        let model = relation.aggregated?.model ?? planner.model
        let type = relation.aggregated?.typeName ?? planner.entityType
        var parser = ODataFilterParser(model: model, entityType: type, version: planner.model.version)
        var translator: ODataSQLTranslator
        if let aggregated = relation.aggregated {
            translator = ODataSQLTranslator(
                mapping: ResultMapping(base: planner.mapping, columns: aggregated.columns), model: model,
                rootEntityType: type)
        } else {
            translator = ODataSQLTranslator(mapping: planner.mapping, model: model, rootEntityType: type)
        }
        for (column, value) in relation.computed {
            parser.computed[column.sqlName] = column.type
            translator.computed[column.sqlName] = value
        }
        return (parser, translator)
    }

    /// The relation as a subquery, so that what follows sees exactly its rows.
    mutating func materialized(_ r: Relation) throws(ODataError) -> Relation {
        var next = Relation(
            from: "(" + select(r, final: false) + ") AS \"t0\"", wheres: [], aggregated: r.aggregated)
        next.order = r.isLimited ? [] : r.order
        next.computed = r.computed.map { item in
            var value = item.value
            value.fragment = SQLFragment("\"t0\"." + q(item.column.sqlName))
            return (item.column, value)
        }
        if var aggregated = next.aggregated, !r.computed.isEmpty {
            // Computed values are columns now.
            aggregated.columns += r.computed.map(\.column)
            next.computed = []
            next.aggregated = aggregated
            try rebuildModel(&next)
        }
        return next
    }

    /// The tie-breakers that make the order deterministic.
    func tiebreakers(_ r: Relation) -> [SQLFragment] {
        if let aggregated = r.aggregated {
            return aggregated.groupColumns.map { SQLFragment("\"t0\"." + q($0.sqlName) + " ASC") }
        }
        return planner.model.key(of: planner.entityType).compactMap { key in
            planner.mapping.column(for: [key], in: planner.entityType).map {
                SQLFragment("\"t0\"." + q($0) + " ASC")
            }
        }
    }

    func select(_ r: Relation, final: Bool) -> SQLFragment {
        var list: [SQLFragment] = [SQLFragment("\"t0\".*")]
        for (column, value) in r.computed { list.append(value.fragment + " AS " + q(column.sqlName)) }
        var sql = "SELECT " + SQLFragment.joined(list, separator: ", ") + " FROM " + r.from
        let wheres = r.wheres.filter { $0.sql != "1" || !$0.bindings.isEmpty }
        if !wheres.isEmpty {
            sql = sql + " WHERE " + SQLFragment.joined(wheres.map { "(" + $0 + ")" }, separator: " AND ")
        }
        var order = r.order
        if final || r.isLimited { order += tiebreakers(r) }
        if !order.isEmpty { sql = sql + " ORDER BY " + SQLFragment.joined(order, separator: ", ") }
        if r.isLimited {
            sql =
                sql
                + SQLFragment(
                    " LIMIT ? OFFSET ?", [.integer(Int64(r.limit ?? -1)), .integer(Int64(r.offset))])
        }
        return sql
    }

    mutating func apply(_ t: ODataApplyTransformation, to input: Relation) throws(ODataError) -> Relation {
        var r = input
        switch t {
        case .identity:
            return r
        case .filter(let text):
            if r.isLimited { r = try materialized(r) }
            let (parser, translator) = tools(r)
            r.wheres.append(try translator.translateFilter(try parser.parseFilter(text)))
        case .search(let expression):
            guard r.aggregated == nil else {
                throw fail("search after aggregation is not supported", .notImplemented)
            }
            if r.isLimited { r = try materialized(r) }
            let translator = ODataSearchTranslator(
                model: planner.model, mapping: planner.mapping, entityType: planner.entityType)
            r.wheres.append(try translator.translate(expression))
        case .orderBy(let text):
            if r.isLimited { r = try materialized(r) }
            let (parser, translator) = tools(r)
            r.order = [try translator.translateOrderBy(try parser.parseOrderBy(text))]
        case .top(let n):
            r.limit = min(r.limit ?? n, n)
        case .skip(let n):
            let (sum, overflow) = r.offset.addingReportingOverflow(n)
            r.offset = overflow ? Int.max : sum
            if let limit = r.limit { r.limit = max(0, limit - n) }
        case .compute(let items):
            for item in items {
                let (parser, translator) = tools(r)
                guard !r.computed.contains(where: { $0.column.sqlName == item.alias }),
                    r.aggregated?.columns.contains(where: { $0.path.first == item.alias }) != true,
                    planner.model.property(named: item.alias, in: planner.entityType) == nil
                        || r.aggregated != nil
                else { throw fail("the alias '\(item.alias)' is already a property", .query) }
                let expression = try parser.parseExpression(item.expression)
                let value = try translator.translateValue(expression)
                let type = value.type ?? expression.staticType ?? EdmTypeRef(name: "Edm.String")
                let column = ODataResultColumn(
                    path: [item.alias], type: type, encoding: value.encoding, sqlName: item.alias)
                r.computed.append((column, value))
            }
            if r.aggregated != nil { try rebuildModel(&r) }
        case .aggregate(let items):
            return try aggregate(r, groups: [], items: items)
        case .groupBy(let paths, let then):
            var items: [ODataAggregateExpression] = []
            var rest = then[...]
            if case .aggregate(let aggregates)? = rest.first {
                items = aggregates
                rest = rest.dropFirst()
            }
            for step in rest {
                switch step {
                case .filter, .compute, .identity: continue
                default:
                    throw fail(
                        "inside groupby only aggregate followed by filter or compute is supported, not '\(step.text)'",
                        .notImplemented)
                }
            }
            var grouped = try aggregate(r, groups: paths, items: items)
            for step in rest { grouped = try apply(step, to: grouped) }
            return grouped
        }
        return r
    }

    mutating func aggregate(_ input: Relation, groups: [[String]], items: [ODataAggregateExpression])
        throws(ODataError) -> Relation
    {
        var r = input
        if r.isLimited { r = try materialized(r) }
        let (parser, translator) = tools(r)
        var selects: [SQLFragment] = []
        var groupBy: [SQLFragment] = []
        var groupColumns: [ODataResultColumn] = []
        var columns: [ODataResultColumn] = []
        for path in groups {
            try refuseCollectionSteps(path, relation: r)
            let expression = try parser.parseExpression(path.joined(separator: "/"))
            guard case .property(let property) = expression else {
                throw fail("'\(path.joined(separator: "/"))' is not a property path", .query)
            }
            guard let type = property.type, !type.isCollection,
                planner.model.primitiveType(of: type) != nil || planner.model.enumType(type) != nil
                    || r.aggregated?.model.enumType(type) != nil
            else {
                throw fail(
                    "grouping by '\(path.joined(separator: "/"))' (not a primitive value) is not supported",
                    .notImplemented)
            }
            let value = try translator.translateValue(expression)
            let key = try translator.equatable(value)
            let names = path.filter { !ApplySyntax.isQualified($0) }
            let column = ODataResultColumn(
                path: names, type: type, encoding: value.encoding, sqlName: names.joined(separator: "/"))
            guard !groupColumns.contains(where: { $0.path == names }) else {
                throw fail("'\(path.joined(separator: "/"))' is grouped twice", .query)
            }
            groupColumns.append(column)
            selects.append(key + " AS " + q(column.sqlName))
            groupBy.append(key)
        }
        columns = groupColumns
        for item in items {
            guard !columns.contains(where: { $0.path.first == item.alias }) else {
                throw fail("the alias '\(item.alias)' is already a property of the result", .query)
            }
            let int64 = EdmTypeRef(name: EdmPrimitiveType.int64.rawValue)
            let sql: SQLFragment
            var type = int64
            var encoding = SQLValueEncoding.native
            switch item {
            case .count:
                sql = SQLFragment("COUNT(*)")
            case .aggregate(let text, let method, _):
                let steps = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
                if steps.allSatisfy({ ApplySyntax.isIdentifier($0) || ApplySyntax.isQualified($0) }) {
                    try refuseCollectionSteps(steps, relation: r)
                }
                let expression = try parser.parseExpression(text)
                let value = try translator.translateValue(expression)
                let input = value.type ?? expression.staticType
                let primitive = input.flatMap { planner.model.primitiveType(of: $0) }
                switch method {
                case .sum, .average:
                    let number = try translator.numeric(value)
                    sql = (method == .sum ? "sum(" : "avg(") + number + ")"
                    if primitive == .decimal {
                        type = EdmTypeRef(name: EdmPrimitiveType.decimal.rawValue)
                    } else if method == .average || primitive == .double || primitive == .single {
                        type = EdmTypeRef(name: EdmPrimitiveType.double.rawValue)
                    }
                case .min, .max:
                    sql = (method == .min ? "min(" : "max(") + (try translator.sortable(value)) + ")"
                    type = input ?? EdmTypeRef(name: EdmPrimitiveType.string.rawValue)
                    encoding = value.encoding
                case .countdistinct:
                    sql = "COUNT(DISTINCT " + (try translator.equatable(value)) + ")"
                }
            }
            let column = ODataResultColumn(
                path: [item.alias], type: type, encoding: encoding, sqlName: item.alias)
            columns.append(column)
            selects.append(sql + " AS " + q(item.alias))
        }
        guard !selects.isEmpty else { throw fail("groupby needs at least one property", .query) }
        var sql = "SELECT " + SQLFragment.joined(selects, separator: ", ") + " FROM " + r.from
        let wheres = r.wheres.filter { $0.sql != "1" || !$0.bindings.isEmpty }
        if !wheres.isEmpty {
            sql = sql + " WHERE " + SQLFragment.joined(wheres.map { "(" + $0 + ")" }, separator: " AND ")
        }
        if !groupBy.isEmpty { sql = sql + " GROUP BY " + SQLFragment.joined(groupBy, separator: ", ") }
        var next = Relation(
            from: "(" + sql + ") AS \"t0\"", wheres: [],
            aggregated: Relation.Aggregated(
                columns: columns, groupColumns: groupColumns, model: planner.model, typeName: ""))
        try rebuildModel(&next)
        return next
    }

    /// Aggregating or grouping across a collection (`Orders/Freight`, `Tags`) is valid `$apply` that the
    /// planner does not translate: `.notImplemented`, not a parse error.
    func refuseCollectionSteps(_ path: [String], relation: Relation) throws(ODataError) {
        let model = relation.aggregated?.model ?? planner.model
        var type = relation.aggregated?.typeName ?? planner.entityType
        for name in path {
            if ApplySyntax.isQualified(name), let cast = model.structuredType(name) {
                type = cast.qualifiedName
                continue
            }
            if let nav = model.navigationProperty(named: name, in: type) {
                if nav.isCollection {
                    throw fail(
                        "aggregating or grouping across the collection '\(name)' is not supported",
                        .notImplemented)
                }
                type = nav.target
            } else if let property = model.property(named: name, in: type) {
                if property.type.isCollection {
                    throw fail(
                        "aggregating or grouping across the collection '\(name)' is not supported",
                        .notImplemented)
                }
                type = property.type.name
            } else {
                return  // unknown names are reported by the parser
            }
        }
    }

    /// A synthetic complex type (and nested ones for grouped paths) describing the relation's columns, so
    /// that later filters, orders and computations parse and type-check against them.
    mutating func rebuildModel(_ r: inout Relation) throws(ODataError) {
        guard var aggregated = r.aggregated else { return }
        var model = aggregated.model
        syntheticCounter += 1
        let namespace = "Mirrorgate.Apply"
        let typeName = "Result\(syntheticCounter)"
        func build(_ name: String, _ entries: [(path: [String], type: EdmTypeRef)]) {
            var type = EdmStructuredType(namespace: namespace, name: name, isEntity: false)
            var nested: [String: [(path: [String], type: EdmTypeRef)]] = [:]
            var order: [String] = []
            for entry in entries {
                guard let head = entry.path.first else { continue }
                if entry.path.count == 1 {
                    type.properties.append(EdmProperty(name: head, type: entry.type))
                } else {
                    if nested[head] == nil { order.append(head) }
                    nested[head, default: []].append((Array(entry.path.dropFirst()), entry.type))
                }
            }
            for head in order {
                let childName = name + "_" + head
                build(childName, nested[head]!)
                type.properties.append(
                    EdmProperty(name: head, type: EdmTypeRef(name: namespace + "." + childName)))
            }
            model.structuredTypes[type.qualifiedName] = type
        }
        let entries = (aggregated.columns + r.computed.map(\.column)).map { (path: $0.path, type: $0.type) }
        build(typeName, entries)
        aggregated.model = model
        aggregated.typeName = namespace + "." + typeName
        r.aggregated = aggregated
    }
}
