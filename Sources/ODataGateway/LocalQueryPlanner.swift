import HTTPCore
import JSONCore
import ODataCore
import Storage

/// Plans one local read on a reader connection of the mirror: walks the resource path into a
/// ``LocalScope`` (keys, navigation by referential constraint or link table), translates `$filter` and
/// `$orderby` with ODataCore's translator, runs the SELECTs (paging with one extra row, `$expand` per
/// entity) and returns a ``LocalResult`` for ``ODataJSONSerializer``. Reads only; every request value is a
/// bound parameter.
struct LocalQueryPlanner {
    let db: Database
    let m: MirrorModel
    let request: LocalReadRequest
    var aliasCounter = 0

    init(db: Database, model: MirrorModel, request: LocalReadRequest) {
        self.db = db
        self.m = model
        self.request = request
    }

    var format: ODataFormat { request.format }
    var root: String { request.serviceRoot }
    var v2: Bool { format.version == .v2 }

    mutating func alias() -> String {
        aliasCounter += 1
        return "p\(aliasCounter)"
    }

    func sql<T>(_ body: () throws -> T) throws(ODataServiceError) -> T {
        do { return try body() } catch let e as ODataServiceError { throw e } catch let e
            as ODataCore.ODataError
        {
            throw ODataServiceError(e)
        } catch { throw ODataServiceError(sqlFailure: error) }
    }

    func layout(forSet set: String?, type: String) throws(ODataServiceError) -> MirrorSetLayout {
        if let set, let l = m.layouts[set] { return l }
        if let l = m.layouts.values.first(where: { $0.entityType == type && !$0.set.isSingleton }) {
            return l
        }
        throw ODataServiceError(501, "NotImplemented", "no mirrored entity set for \(type)")
    }

    // MARK: paths

    /// What `path` with `options` reads.
    mutating func plan(path: ODataResourcePath, options: ODataQueryOptions) throws(ODataServiceError)
        -> LocalResult
    {
        if let token = options.skipToken, !LocalSkipToken.isLocal(token) {
            throw ODataServiceError(
                400, "SkipTokenExpired",
                "this $skiptoken was issued by the upstream, which is unreachable; restart the read without it"
            )
        }
        switch path.target {
        case .metadata:
            return .metadata(m.metadata)
        case .serviceDocument:
            return .serviceDocument
        case .batch, .operationImport:
            throw ODataServiceError(501, "NotImplemented", "not answered locally")
        default: break
        }
        var scope: LocalScope?
        var trailing: [ODataPathSegment] = []
        var navigationSet: String?
        // V4 `…/$ref` or V2 `…/$links/Nav` (no `$ref` segment there).
        var reference = false
        if case .reference = path.target { reference = true }
        for segment in path.segments {
            if !trailing.isEmpty || scope == nil && !isStart(segment) {
                trailing.append(segment)
                continue
            }
            switch segment {
            case .entitySet(let name, let type):
                let l = try layout(forSet: name, type: type)
                scope = LocalScope(layout: l, condition: { _ in SQLFragment("1") }, single: false)
                navigationSet = name
            case .singleton(let name, let type):
                let l = try layout(forSet: name, type: type)
                scope = LocalScope(layout: l, condition: { _ in SQLFragment("1") }, single: true)
                navigationSet = name
            case .key(let key):
                guard var s = scope else {
                    throw ODataServiceError(400, "BadRequest", "key without entity set")
                }
                let previous = s.condition
                var parts: [(String, SQLBinding)] = []
                for kv in key.values {
                    let type = m.model.property(named: kv.name, in: s.layout.entityType)?.type
                    parts.append((kv.name, m.binding(for: kv.value, type: type)))
                }
                let fixed = parts
                s.condition = { a in
                    var f = previous(a)
                    for (name, value) in fixed {
                        f = f + " AND \(q(a)).\(q(name)) = ?" + SQLFragment("", [value])
                    }
                    return f
                }
                s.single = true
                scope = s
            case .navigation(let name, let type, let isCollection, let set):
                guard let s = scope else {
                    throw ODataServiceError(400, "BadRequest", "navigation without source")
                }
                // Navigation from an entity that does not exist is 404 (as upstreams answer), not empty.
                // From contained entities not downloaded: only from one the mirror holds.
                if let unheld = s.unheld, !s.single { throw unheld }
                if s.single, try !exists(s) {
                    throw s.unheld ?? ODataServiceError(404, "NotFound", "no such entity")
                }
                if let contained = m.layouts[s.layout.set.name + "/" + name] {
                    scope = try containedScope(contained, from: s, deferring: true)
                    navigationSet = contained.set.name
                    continue
                }
                guard let nav = m.mapping.navigation(name, from: s.entityType) else {
                    guard let link = m.links[s.layout.set.name]?[name] else {
                        throw ODataServiceError(
                            501, "NotImplemented",
                            "navigation '\(name)' has no referential constraint nor downloaded links to answer it locally"
                        )
                    }
                    scope = try linkScope(link, from: s, isCollection: isCollection)
                    scope?.declaredType = type
                    navigationSet = link.targetSet
                    continue
                }
                let target = try layout(forSet: set ?? nav.table, type: type)
                let inner = alias()
                let previous = s.condition
                let sourceTable = s.layout.set.name
                scope = LocalScope(
                    layout: target,
                    condition: { a in
                        let left =
                            "(" + nav.joins.map { "\(q(a)).\(q($0.targetColumn))" }.joined(separator: ", ")
                            + ")"
                        let right = nav.joins.map { "\(q(inner)).\(q($0.sourceColumn))" }.joined(
                            separator: ", ")
                        return "\(left) IN (SELECT \(right) FROM \(q(sourceTable)) AS \(q(inner)) WHERE "
                            + previous(inner)
                            + ")"
                    }, single: !isCollection)
                scope?.declaredType = type
                navigationSet = target.set.name
            case .cast(let type):
                guard var s = scope else { continue }
                s = try cast(s, to: type)
                s.declaredType = nil
                scope = s
            case .links:
                continue
            case .ref:
                continue
            default:
                trailing.append(segment)
            }
        }
        guard let scope else { throw ODataServiceError(501, "NotImplemented", "not answered locally") }
        if let first = trailing.first {
            switch first {
            case .count:
                if let unheld = scope.unheld { throw unheld }
                return .count(try count(scope, options: options))
            case .property(let name, let type):
                guard scope.single else {
                    throw ODataServiceError(400, "BadRequest", "property of a collection")
                }
                guard let e = try fetch(scope, options: ODataQueryOptions(), paging: nil).entries.first else {
                    throw scope.unheld ?? ODataServiceError(404, "NotFound", "no such entity")
                }
                var value = e.properties.first { $0.0 == name }?.1 ?? .null
                var last = (name: name, type: type)
                var i = 1
                // A path through complex properties (`Address/City`).
                while i < trailing.count, case .property(let n, let t) = trailing[i] {
                    value = value[n] ?? .null
                    last = (n, t)
                    i += 1
                }
                if i < trailing.count, case .value = trailing[i] { return .rawValue(value) }
                if i < trailing.count, case .count = trailing[i] {
                    return .count(value.navigationItems.count)
                }
                return .property(
                    name: last.name, type: last.type, value: value, context: path.contextFragment)
            case .value:
                throw ODataServiceError(501, "NotImplemented", "media resources are not mirrored")
            default:
                throw ODataServiceError(501, "NotImplemented", "this path is not answered locally")
            }
        }
        let setName = navigationSet ?? scope.layout.set.name
        if let unheld = scope.unheld, reference || !scope.single { throw unheld }
        if reference { return try references(scope, options: options) }
        if scope.single {
            var o = options
            o.top = nil
            o.skip = nil
            o.filter = nil
            o.orderBy = nil
            let result = try fetch(scope, options: o, paging: nil, selectExpand: options)
            guard let e = result.entries.first else {
                throw scope.unheld ?? ODataServiceError(404, "NotFound", "no such entity")
            }
            return .entity(e, set: setName, options: options, context: path.contextFragment)
        }
        // Collection with paging: the client's or configured page size, else the upstream's for the set.
        let offset = try skipTokenOffset(options)
        let pageSize = request.pageSize ?? upstreamPageSize(setName)
        let result = try fetch(scope, options: options, paging: (offset, pageSize), selectExpand: options)
        var total: Int?
        if options.wantsCount { total = try count(scope, options: options) }
        let next = result.more ? nextLink(offset: offset + result.entries.count) : nil
        var context = path.contextFragment
        if options.apply != nil {
            // An aggregated result names its columns: `Products(Category,Total)`.
            let p = try plan(scope, apply: options.apply, options: Self.rowOptions(options))
            if let select = p.contextSelect { context = (context ?? setName) + select }
        }
        return .collection(
            result.entries, total: total, next: next, set: setName, options: options, context: context)
    }

    /// The rows of `layout` whose columns equal the bound values.
    static func equalScope(_ layout: MirrorSetLayout, _ bound: [(String, SQLBinding)], single: Bool)
        -> LocalScope
    {
        LocalScope(
            layout: layout,
            condition: { a in
                var f = SQLFragment("1")
                for (col, v) in bound { f = f + " AND \(q(a)).\(q(col)) = ?" + SQLFragment("", [v]) }
                return f
            }, single: single)
    }

    /// The entities `contained` (a `Set/Nav` table) holds for the rows of `source`; 501 when no defining
    /// request downloaded them (`$expand=Nav`) and some row of `source` was not created through the
    /// gateway, since the mirror cannot tell what that parent contains upstream. (A parent created
    /// offline contains exactly what was written with it or into it since.) `deferring`: the 501 is
    /// the scope's `unheld` instead, for a path that may still look up one entity the mirror holds.
    func containedScope(_ contained: MirrorSetLayout, from source: LocalScope, deferring: Bool = false)
        throws(ODataServiceError) -> LocalScope
    {
        guard let container = contained.container else {
            throw ODataServiceError(500, "InternalError", "no container")
        }
        let previous = source.condition
        let sourceTable = source.layout.set.name
        var unheld: ODataServiceError?
        let downloaded = try self.sql {
            try db.scalar(
                #"SELECT 1 FROM "_mg_scope" WHERE entitySet = ? LIMIT 1"#, [.text(contained.set.name)])
        }
        if downloaded == nil {
            let parents = previous("p")
            let notLocal = try self.sql {
                try db.scalar(
                    "SELECT 1 FROM \(q(sourceTable)) AS \"p\" WHERE (" + parents.sql
                        + #") AND "p"."_dr" IS NOT 'local' LIMIT 1"#,
                    parents.bindings.map(SQLValue.init))
            }
            if notLocal != nil {
                let error = ODataServiceError(
                    501, "NotImplemented",
                    "the entities '\(container.navigation)' contains were not downloaded (a defining request "
                        + "with $expand=\(container.navigation) records them)")
                guard deferring else { throw error }
                unheld = error
            }
        }
        let inner = "c\(contained.set.name.count)"
        let parentColumns = container.parentKey
        var scope = LocalScope(
            layout: contained,
            condition: { a in
                "(" + parentColumns.map { "\(q(a)).\(q($0.name))" }.joined(separator: ", ") + ") IN (SELECT "
                    + parentColumns.map { "\(q(inner)).\(q($0.path[0]))" }.joined(separator: ", ")
                    + " FROM \(q(sourceTable)) AS \(q(inner)) WHERE " + previous(inner) + ")"
            }, single: !container.isCollection)
        scope.unheld = unheld
        return scope
    }

    /// The page size the upstream used for `set` when it was downloaded (nil: it did not page).
    func upstreamPageSize(_ set: String) -> Int? {
        let value = try? db.scalar(#"SELECT value FROM "_mg_meta" WHERE key = ?"#, [.text("pageSize/" + set)])
        return value?.string.flatMap { Int($0) }
    }

    /// The offset a gateway-issued `$skiptoken` (`mg1.<offset>`) names; 0 without one.
    func skipTokenOffset(_ options: ODataQueryOptions) throws(ODataServiceError) -> Int {
        guard let token = options.skipToken else { return 0 }
        guard let n = Int(token.dropFirst(LocalSkipToken.prefix.count)), n >= 0 else {
            throw ODataServiceError(400, "BadRequest", "invalid $skiptoken")
        }
        return n
    }

    func isStart(_ segment: ODataPathSegment) -> Bool {
        switch segment {
        case .entitySet, .singleton: return true
        default: return false
        }
    }

    /// `scope` read as `type` (a cast segment): rows of other types drop out (the `_type` column).
    func cast(_ scope: LocalScope, to type: String) throws(ODataServiceError) -> LocalScope {
        let qualified = m.model.structuredType(type)?.qualifiedName ?? type
        if m.model.isType(scope.entityType, derivedFrom: qualified) { return scope }
        guard m.model.isType(qualified, derivedFrom: scope.entityType) else {
            throw ODataServiceError(400, "BadRequest", "'\(type)' does not derive from \(scope.entityType)")
        }
        let types = m.model.typeAndDerived(qualified)
        let previous = scope.condition
        var s = scope
        s.entityType = qualified
        s.condition = { a in
            previous(a) + " AND coalesce(\(q(a)).\"_type\", '') IN ("
                + SQLFragment(
                    Array(repeating: "?", count: types.count).joined(separator: ", "),
                    types.map(SQLBinding.text))
                + ")"
        }
        return s
    }

    /// The request's URL with the gateway's `$skiptoken` for `offset` in place of any other.
    func nextLink(offset: Int) -> String {
        var pieces: [String] = []
        for piece in request.query.split(separator: "&", omittingEmptySubsequences: true) {
            let name = String(piece.split(separator: "=", maxSplits: 1).first ?? "")
            let decoded =
                (try? PercentDecoding.decode(name, plusAsSpace: true, kind: .query))?.lowercased() ?? name
            if decoded == "$skiptoken" || decoded == "skiptoken" { continue }
            pieces.append(String(piece))
        }
        pieces.append("$skiptoken=" + LocalSkipToken.prefix + String(offset))
        return root + request.path + "?" + pieces.joined(separator: "&")
    }

    // MARK: SQL

    /// Runs `body` with a parser and a translator for `scope`'s entity type over the mirror's mapping
    /// (referential constraints, then link tables); a translation through link tables is answered only
    /// when the links it uses were downloaded for every source row.
    func translate(
        _ scope: LocalScope,
        _ body: (ODataFilterParser, ODataSQLTranslator) throws(ODataCore.ODataError) -> SQLFragment
    ) throws(ODataServiceError) -> SQLFragment {
        let mapping = MirrorSQLMapping(m)
        let fragment: SQLFragment
        do {
            let parser = ODataFilterParser(model: m.model, entityType: scope.entityType, version: m.version)
            let translator = ODataSQLTranslator(
                mapping: mapping, model: m.model, rootEntityType: scope.entityType)
            fragment = try body(parser, translator)
        } catch {
            throw ODataServiceError(error)
        }
        try requireLinks(mapping.usage.all)
        try requireContained(mapping.usage.contained)
        return fragment
    }

    /// ODataCore's plan of `options` (with `apply`) over `scope`'s rows, checked for link tables.
    func plan(_ scope: LocalScope, apply: ODataApply?, options: ODataQueryOptions) throws(ODataServiceError)
        -> ODataQueryPlan
    {
        let mapping = MirrorSQLMapping(m)
        let planner = ODataQueryPlanner(
            model: m.model, mapping: mapping, table: scope.layout.set.name, entityType: scope.entityType,
            condition: scope.condition("t0"))
        let result: ODataQueryPlan
        do { result = try planner.plan(apply: apply, options: options) } catch {
            throw ODataServiceError(error)
        }
        try requireLinks(mapping.usage.all)
        try requireContained(mapping.usage.contained)
        return result
    }

    /// A filter, order or aggregation through contained entities (`Lines/any()`, `Lines/$count`) is
    /// answered only when they were downloaded or every parent row was created through the gateway
    /// (otherwise parents whose entities were never downloaded would silently match as empty).
    func requireContained(_ used: Set<String>) throws(ODataServiceError) {
        for set in used.sorted() {
            guard let contained = m.layouts[set], let slash = set.lastIndex(of: "/"),
                let parent = m.layouts[String(set[..<slash])]
            else { continue }
            _ = try containedScope(
                contained,
                from: LocalScope(layout: parent, condition: { _ in SQLFragment("1") }, single: false))
        }
    }

    /// The options that select rows (`$filter`, `$search`, `$compute`), without paging, order or shape.
    static func rowOptions(_ options: ODataQueryOptions) -> ODataQueryOptions {
        var o = ODataQueryOptions()
        o.filter = options.filter
        o.search = options.search
        o.searchExpression = options.searchExpression
        o.compute = options.compute
        return o
    }

    mutating func count(_ scope: LocalScope, options: ODataQueryOptions) throws(ODataServiceError) -> Int {
        let p = try plan(scope, apply: options.apply, options: Self.rowOptions(options))
        return try self.sql {
            try db.scalar(p.countSQL.sql, p.countSQL.bindings.map(SQLValue.init))?.int ?? 0
        }
    }

    /// Rows of `scope` with options applied; `paging` is (offset into the result, page size).
    mutating func fetch(
        _ scope: LocalScope, options: ODataQueryOptions, paging: (Int, Int?)?,
        selectExpand: ODataQueryOptions? = nil
    ) throws(ODataServiceError) -> (entries: [LocalEntry], more: Bool) {
        let skip = options.skip ?? 0
        var limit = options.top
        var start = skip
        var pageLimited = false
        if let (offset, pageSize) = paging {
            // `$skip` and a skip token's offset are each at most Int.max: past the end saturates (no rows).
            let (sum, overflow) = start.addingReportingOverflow(offset)
            start = overflow ? Int.max : sum
            if let top = limit { limit = max(0, top - offset) }
            if let pageSize, pageSize > 0, limit == nil || limit! > pageSize {
                limit = pageSize
                pageLimited = true
            }
        }
        var o = Self.rowOptions(options)
        o.orderBy = options.orderBy
        // One extra row tells whether another page follows.
        o.top = limit.map { $0 + (pageLimited ? 1 : 0) }
        o.skip = start > 0 ? start : nil
        let p = try plan(scope, apply: options.apply, options: o)
        var rows = try self.sql { try db.query(p.sql.sql, p.sql.bindings.map(SQLValue.init)) }
        var more = false
        if pageLimited, let limit, rows.count > limit {
            more = true
            rows.removeLast(rows.count - limit)
        }
        var entries: [LocalEntry] = []
        entries.reserveCapacity(rows.count)
        switch p.shape {
        case .aggregated(let columns):
            for row in rows {
                var props: [(String, RawJSON)] = []
                for c in columns { Self.place(&props, c.path, value(row, c)) }
                var e = LocalEntry(
                    set: scope.layout.set.name, entityType: scope.entityType, properties: props, etag: nil,
                    row: row)
                e.aggregated = true
                e.columnTypes = Self.columnTypes(columns, model: m.model)
                entries.append(e)
            }
            return (entries, more)
        case .entities(let computed):
            for row in rows {
                let text = row["_json"]?.string ?? "{}"
                var props = (try? RawJSON.parse(text))?.members ?? []
                for c in computed { Self.place(&props, c.path, value(row, c)) }
                var e = LocalEntry(
                    set: scope.layout.set.name, entityType: row["_type"]?.string ?? scope.layout.entityType,
                    properties: props, etag: row["_etag"]?.string, row: row)
                e.expectedType = scope.declaredType ?? scope.entityType
                e.columnTypes = Self.columnTypes(computed, model: m.model)
                entries.append(e)
            }
        }
        if let se = selectExpand {
            if let expand = se.expand, !expand.isEmpty {
                for i in entries.indices { try expandEntry(&entries[i], expand) }
            }
            if let select = se.select, !select.isEmpty, !select.contains(where: \.isWildcard) {
                let names = Set(select.compactMap(\.path.first))
                // The key stays (V4 needs it for the entity's id; a V2 `__metadata.uri` names it).
                let keys = Set(scope.layout.key)
                for i in entries.indices {
                    entries[i].properties = entries[i].properties.filter {
                        names.contains($0.0) || keys.contains($0.0)
                    }
                    // V4 services answer the key properties too (odatapy, Olingo); V2 only what was chosen.
                    entries[i].selected = v2 ? names : names.union(keys)
                }
            }
        }
        return (entries, more)
    }

    /// The primitive types of the top-level `columns`, by name.
    static func columnTypes(_ columns: [ODataResultColumn], model: EdmModel) -> [String: EdmPrimitiveType] {
        var out: [String: EdmPrimitiveType] = [:]
        for c in columns where c.path.count == 1 {
            if let t = model.primitiveType(of: c.type) { out[c.path[0]] = t }
        }
        return out
    }

    /// A computed or aggregated column's wire value.
    func value(_ row: Row, _ c: ODataResultColumn) -> RawJSON {
        ODataStorage.wireValue(
            SQLBinding(row[c.sqlName] ?? .null), type: c.type, encoding: c.encoding, model: m.model)
    }

    /// Puts `value` at `path` among `members` (nested objects created as needed).
    static func place(_ members: inout [(String, RawJSON)], _ path: [String], _ value: RawJSON) {
        guard let head = path.first else { return }
        if path.count == 1 {
            ODataOfflineWriter.setMember(&members, head, value)
            return
        }
        var inner = members.first { $0.0 == head }?.1.members ?? []
        place(&inner, Array(path.dropFirst()), value)
        ODataOfflineWriter.setMember(&members, head, .object(inner))
    }

    mutating func expandEntry(_ entry: inout LocalEntry, _ items: [ODataExpandItem]) throws(ODataServiceError)
    {
        for item in items {
            if item.isWildcard { continue }
            guard let first = item.path.first else { continue }
            if let cast = m.model.structuredType(first), cast.isEntity {
                // `Shop.Employee/Manager`: only for entities of that type.
                guard m.model.isType(entry.entityType, derivedFrom: cast.qualifiedName), item.path.count > 1
                else {
                    continue
                }
                var rest = item
                rest.path = Array(item.path.dropFirst())
                try expandEntry(&entry, [rest])
                continue
            }
            guard let nav = m.model.navigationProperty(named: first, in: entry.entityType) else { continue }
            var scope: LocalScope
            if let contained = m.layouts[entry.set + "/" + first], let container = contained.container,
                let parent = m.layouts[entry.set]
            {
                let row = entry.row
                _ = try containedScope(
                    contained,
                    from: Self.equalScope(
                        parent,
                        container.parentKey.map { ($0.path[0], SQLBinding(row[$0.path[0]] ?? .null)) },
                        single: true))
                scope = Self.equalScope(
                    contained, container.parentKey.map { ($0.name, SQLBinding(row[$0.path[0]] ?? .null)) },
                    single: !nav.isCollection)
            } else if let mapping = m.mapping.navigation(first, from: entry.entityType) {
                let sourceSet = m.layouts[entry.set]?.set
                let targetSet = sourceSet.flatMap {
                    m.model.targetEntitySet(from: $0, navigation: first, on: entry.entityType)
                }?
                .name
                let target = try layout(forSet: targetSet ?? mapping.table, type: nav.target)
                let row = entry.row
                scope = Self.equalScope(
                    target,
                    mapping.joins.map { ($0.targetColumn, SQLBinding(row[$0.sourceColumn] ?? .null)) },
                    single: !nav.isCollection)
            } else if let link = m.links[entry.set]?[first] {
                scope = try linkScope(link, fromRow: entry.row)
            } else {
                throw ODataServiceError(
                    501, "NotImplemented",
                    "$expand=\(first) has no referential constraint nor downloaded links to answer it locally"
                )
            }
            scope.declaredType = nav.target
            var nested = ODataQueryOptions()
            if item.path.count > 1 {
                var rest = item
                rest.path = Array(item.path.dropFirst())
                nested.expand = [rest]
            } else {
                nested.filter = item.filter
                nested.orderBy = item.orderBy
                nested.top = item.top
                nested.skip = item.skip
                nested.select = item.select
                nested.expand = item.expand
                nested.search = item.search
                nested.searchExpression = item.searchExpression
                nested.compute = item.compute
                if let levels = item.levels, levels > 1 {
                    // `$levels=n`: the same expansion again inside, n - 1 more times.
                    guard levels != Int.max else {
                        throw ODataServiceError(501, "NotImplemented", "$levels=max is not answered locally")
                    }
                    var again = item
                    again.levels = levels - 1
                    nested.expand = (nested.expand ?? []) + [again]
                }
            }
            let merge = entry.expanded.firstIndex { $0.0 == first }
            if nav.isCollection {
                let result = try fetch(scope, options: nested, paging: nil, selectExpand: nested)
                var total: Int?
                if item.count == true {
                    var o = nested
                    o.top = nil
                    o.skip = nil
                    total = try count(scope, options: o)
                }
                if let merge, case .many(var existing, let c) = entry.expanded[merge].1 {
                    // `Orders,Orders/Items` (V2): expand inside what is already there.
                    for (i, e) in result.entries.enumerated()
                    where i < existing.count && existing[i].row == e.row {
                        existing[i].expanded += e.expanded
                    }
                    entry.expanded[merge].1 = .many(existing, count: c)
                } else {
                    entry.expanded.append((first, .many(result.entries, count: total)))
                }
            } else {
                let result = try fetch(scope, options: nested, paging: nil, selectExpand: nested)
                if let merge, case .one(var existing) = entry.expanded[merge].1, let e = result.entries.first
                {
                    existing?.expanded += e.expanded
                    entry.expanded[merge].1 = .one(existing)
                } else {
                    entry.expanded.append((first, .one(result.entries.first)))
                }
            }
        }
    }

}
