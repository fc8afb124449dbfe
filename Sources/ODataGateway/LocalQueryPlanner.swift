import HTTPCore
import JSONCore
import ODataCore
import Storage

/// The rows a read addresses, as a condition on the table of `layout` (aliased by the caller).
struct LocalScope {
    var layout: MirrorSetLayout
    var condition: @Sendable (String) -> SQLFragment
    var single: Bool
}

/// One entity read from the mirror, with the entities expanded inside it.
struct LocalEntry {
    var set: String
    var entityType: String
    var properties: [(String, RawJSON)]
    var etag: String?
    var row: Row
    var expanded: [(String, LocalExpansion)] = []
}

/// What an expanded navigation holds.
enum LocalExpansion {
    case many([LocalEntry], count: Int?)
    case one(LocalEntry?)
}

/// What a local read found, before it is written in a version's format.
enum LocalResult {
    /// `$metadata`, byte-identical.
    case metadata([UInt8])
    /// The service document.
    case serviceDocument
    /// `…/$count`.
    case count(Int)
    /// `…/Property/$value`.
    case rawValue(RawJSON)
    /// `…/Property`.
    case property(name: String, type: EdmTypeRef, value: RawJSON)
    /// One entity of `set`, its `$select` in `options`.
    case entity(LocalEntry, set: String, options: ODataQueryOptions)
    /// A page of a collection of `set`, the total count when asked for, the next page's link.
    case collection([LocalEntry], total: Int?, next: String?, set: String, options: ODataQueryOptions)
    /// V4 `$ref` / V2 `$links` of a single-valued navigation.
    case reference(LocalEntry)
    /// V4 `$ref` / V2 `$links` of a collection.
    case references([LocalEntry], total: Int?, next: String?)
}

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
            case .key(let key):
                guard var s = scope else {
                    throw ODataServiceError(400, "BadRequest", "key without entity set")
                }
                let previous = s.condition
                var parts: [(String, SQLBinding)] = []
                for kv in key.values {
                    let type = m.model.property(named: kv.name, in: s.layout.entityType)?.type
                    parts.append((kv.name, m.mapping.binding(for: kv.value, type: type)))
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
                if s.single, try !exists(s) { throw ODataServiceError(404, "NotFound", "no such entity") }
                guard let nav = m.mapping.navigation(name, from: s.layout.entityType) else {
                    guard let link = m.links[s.layout.set.name]?[name] else {
                        throw ODataServiceError(
                            501, "NotImplemented",
                            "navigation '\(name)' has no referential constraint nor downloaded links to answer it locally"
                        )
                    }
                    scope = try linkScope(link, from: s, isCollection: isCollection)
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
                navigationSet = target.set.name
            case .cast, .links:
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
                return .count(try count(scope, options: options))
            case .property(let name, let type):
                guard scope.single else {
                    throw ODataServiceError(400, "BadRequest", "property of a collection")
                }
                guard let e = try fetch(scope, options: ODataQueryOptions(), paging: nil).entries.first else {
                    throw ODataServiceError(404, "NotFound", "no such entity")
                }
                let value = e.properties.first { $0.0 == name }?.1 ?? .null
                if trailing.count > 1, case .value = trailing[1] { return .rawValue(value) }
                return .property(name: name, type: type, value: value)
            case .value:
                throw ODataServiceError(501, "NotImplemented", "media resources are not mirrored")
            default:
                throw ODataServiceError(501, "NotImplemented", "this path is not answered locally")
            }
        }
        let setName = navigationSet ?? scope.layout.set.name
        if reference { return try references(scope, options: options) }
        if scope.single {
            var o = options
            o.top = nil
            o.skip = nil
            o.filter = nil
            o.orderBy = nil
            let result = try fetch(scope, options: o, paging: nil, selectExpand: options)
            guard let e = result.entries.first else {
                throw ODataServiceError(404, "NotFound", "no such entity")
            }
            return .entity(e, set: setName, options: options)
        }
        // Collection with paging.
        let offset = try skipTokenOffset(options)
        let result = try fetch(
            scope, options: options, paging: (offset, request.pageSize), selectExpand: options)
        var total: Int?
        if options.wantsCount { total = try count(scope, options: options) }
        let next = result.more ? nextLink(offset: offset + result.entries.count) : nil
        return .collection(result.entries, total: total, next: next, set: setName, options: options)
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
        if case .entitySet = segment { return true }
        return false
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

    mutating func whereClause(_ scope: LocalScope, _ options: ODataQueryOptions) throws(ODataServiceError)
        -> SQLFragment
    {
        let condition = scope.condition("t0")
        guard let filter = options.filter else { return condition }
        return condition + " AND ("
            + (try translate(scope) { parser, translator throws(ODataCore.ODataError) in
                try translator.translateFilter(try parser.parseFilter(filter))
            }) + ")"
    }

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
            let parser = ODataFilterParser(
                model: m.model, entityType: scope.layout.entityType, version: m.version)
            let translator = ODataSQLTranslator(
                mapping: mapping, model: m.model, rootEntityType: scope.layout.entityType)
            fragment = try body(parser, translator)
        } catch {
            throw ODataServiceError(error)
        }
        try requireLinks(mapping.usage.all)
        return fragment
    }

    mutating func count(_ scope: LocalScope, options: ODataQueryOptions) throws(ODataServiceError) -> Int {
        let w = try whereClause(scope, options)
        let sql = "SELECT COUNT(*) FROM \(q(scope.layout.set.name)) AS \"t0\" WHERE " + w.sql
        return try self.sql { try db.scalar(sql, w.bindings.map(SQLValue.init))?.int ?? 0 }
    }

    /// Rows of `scope` with options applied; `paging` is (offset into the result, page size).
    mutating func fetch(
        _ scope: LocalScope, options: ODataQueryOptions, paging: (Int, Int?)?,
        selectExpand: ODataQueryOptions? = nil
    ) throws(ODataServiceError) -> (entries: [LocalEntry], more: Bool) {
        let w = try whereClause(scope, options)
        var order: [String] = []
        var orderBindings: [SQLBinding] = []
        if let orderBy = options.orderBy {
            let f = try translate(scope) { parser, translator throws(ODataCore.ODataError) in
                try translator.translateOrderBy(try parser.parseOrderBy(orderBy))
            }
            order.append(f.sql)
            orderBindings = f.bindings
        }
        order += scope.layout.key.map { "\"t0\".\(q($0)) ASC" }
        if order.isEmpty { order = ["\"t0\".rowid ASC"] }
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
        var sql =
            "SELECT \"t0\".* FROM \(q(scope.layout.set.name)) AS \"t0\" WHERE " + w.sql + " ORDER BY "
            + order.joined(separator: ", ")
        var bindings = (w.bindings + orderBindings).map(SQLValue.init)
        // One extra row tells whether another page follows.
        sql += " LIMIT ? OFFSET ?"
        bindings.append(.integer(Int64(limit.map { $0 + (pageLimited ? 1 : 0) } ?? -1)))
        bindings.append(.integer(Int64(start)))
        let finalSQL = sql
        let finalBindings = bindings
        var rows = try self.sql { try db.query(finalSQL, finalBindings) }
        var more = false
        if pageLimited, let limit, rows.count > limit {
            more = true
            rows.removeLast(rows.count - limit)
        }
        var entries: [LocalEntry] = []
        entries.reserveCapacity(rows.count)
        for row in rows {
            let text = row["_json"]?.string ?? "{}"
            let props = (try? RawJSON.parse(text))?.members ?? []
            entries.append(
                LocalEntry(
                    set: scope.layout.set.name, entityType: scope.layout.entityType, properties: props,
                    etag: row["_etag"]?.string, row: row))
        }
        if let se = selectExpand {
            if let expand = se.expand, !expand.isEmpty {
                for i in entries.indices { try expandEntry(&entries[i], expand) }
            }
            if let select = se.select, !select.isEmpty, !select.contains(where: \.isWildcard) {
                let names = Set(select.compactMap(\.path.first))
                let keys = v2 ? [] : Set(scope.layout.key)
                for i in entries.indices {
                    entries[i].properties = entries[i].properties.filter {
                        names.contains($0.0) || keys.contains($0.0)
                    }
                    entries[i].expanded = entries[i].expanded.filter { names.contains($0.0) || true }
                }
            }
        }
        return (entries, more)
    }

    mutating func expandEntry(_ entry: inout LocalEntry, _ items: [ODataExpandItem]) throws(ODataServiceError)
    {
        for item in items {
            if item.isWildcard { continue }
            guard let first = item.path.first else { continue }
            guard let nav = m.model.navigationProperty(named: first, in: entry.entityType) else { continue }
            let scope: LocalScope
            if let mapping = m.mapping.navigation(first, from: entry.entityType) {
                let sourceSet = m.layouts[entry.set]?.set
                let targetSet = sourceSet.flatMap {
                    m.model.targetEntitySet(from: $0, navigationPath: first)
                }?
                .name
                let target = try layout(forSet: targetSet ?? mapping.table, type: nav.target)
                var parts: [(String, SQLValue)] = []
                for j in mapping.joins {
                    parts.append((j.targetColumn, entry.row[j.sourceColumn] ?? .null))
                }
                let bound = parts.map { ($0.0, SQLBinding($0.1)) }
                scope = LocalScope(
                    layout: target,
                    condition: { a in
                        var f = SQLFragment("1")
                        for (col, v) in bound { f = f + " AND \(q(a)).\(q(col)) = ?" + SQLFragment("", [v]) }
                        return f
                    }, single: !nav.isCollection)
            } else if let link = m.links[entry.set]?[first] {
                scope = try linkScope(link, fromRow: entry.row)
            } else {
                throw ODataServiceError(
                    501, "NotImplemented",
                    "$expand=\(first) has no referential constraint nor downloaded links to answer it locally"
                )
            }
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

// MARK: navigation through link tables, $ref / $links

extension LocalQueryPlanner {
    /// Whether `scope` holds at least one row.
    func exists(_ scope: LocalScope) throws(ODataServiceError) -> Bool {
        let condition = scope.condition("src")
        let sql = "SELECT 1 FROM \(q(scope.layout.set.name)) AS \"src\" WHERE " + condition.sql + " LIMIT 1"
        return try self.sql { try db.scalar(sql, condition.bindings.map(SQLValue.init)) } != nil
    }

    /// `(alias.k1, alias.k2)` over the target key columns.
    static func keyTuple(_ alias: String, _ columns: [String]) -> String {
        "(" + columns.map { "\(q(alias)).\(q($0))" }.joined(separator: ", ") + ")"
    }

    /// The links of `link` are known for a source row when the link table holds its marker row.
    static func linksKnown(_ link: MirrorLinkNavigation, source alias: String) -> String {
        "EXISTS (SELECT 1 FROM \(q(link.table)) AS \"lk\" WHERE "
            + link.sourceKey.map {
                "\"lk\".\(q(MirrorLinkNavigation.sourceColumn($0.name))) = \(q(alias)).\(q($0.name))"
            }.joined(separator: " AND ") + ")"
    }

    static func unknownLinks(_ link: MirrorLinkNavigation) -> ODataServiceError {
        ODataServiceError(
            501, "NotImplemented",
            "navigation '\(link.name)' from \(link.sourceSet) has no referential constraint and its links were "
                + "not downloaded for these entities (a defining request with $expand=\(link.name) records them)"
        )
    }

    /// The entities a link-table navigation reaches from the rows of `source`. Throws 501 when some
    /// source row's links were never downloaded: the mirror cannot know them, so it does not answer
    /// (a source row whose links were downloaded and are empty gives an empty answer).
    func linkScope(_ link: MirrorLinkNavigation, from source: LocalScope, isCollection: Bool)
        throws(ODataServiceError)
        -> LocalScope
    {
        guard let target = m.layouts[link.targetSet] else { throw Self.unknownLinks(link) }
        let previous = source.condition
        let sourceSet = source.layout.set.name
        let check = previous("src")
        let sql =
            "SELECT 1 FROM \(q(sourceSet)) AS \"src\" WHERE " + check.sql + " AND NOT "
            + Self.linksKnown(link, source: "src") + " LIMIT 1"
        if try self.sql({ try db.scalar(sql, check.bindings.map(SQLValue.init)) }) != nil {
            throw Self.unknownLinks(link)
        }
        let sourceKeys = link.sourceKey.map(\.name)
        let targetKeys = link.targetKey.map(\.name)
        return LocalScope(
            layout: target,
            condition: { a in
                Self.keyTuple(a, targetKeys) + " IN (SELECT "
                    + targetKeys.map { "\"lk\".\(q(MirrorLinkNavigation.targetColumn($0)))" }.joined(
                        separator: ", ")
                    + " FROM \(q(link.table)) AS \"lk\" WHERE ("
                    + sourceKeys.map { "\"lk\".\(q(MirrorLinkNavigation.sourceColumn($0)))" }.joined(
                        separator: ", ")
                    + ") IN (SELECT "
                    + sourceKeys.map { "\"src\".\(q($0))" }.joined(separator: ", ")
                    + " FROM \(q(sourceSet)) AS \"src\" WHERE " + previous("src") + "))"
            }, single: !isCollection)
    }

    /// The entities a link-table navigation reaches from one source row (for `$expand`); 501 when that
    /// row's links were never downloaded.
    func linkScope(_ link: MirrorLinkNavigation, fromRow row: Row) throws(ODataServiceError) -> LocalScope {
        guard let target = m.layouts[link.targetSet] else { throw Self.unknownLinks(link) }
        let keys: [(String, SQLBinding)] = link.sourceKey.map {
            (MirrorLinkNavigation.sourceColumn($0.name), SQLBinding(row[$0.name] ?? .null))
        }
        let probe =
            "SELECT 1 FROM \(q(link.table)) WHERE "
            + keys.map { "\(q($0.0)) = ?" }.joined(separator: " AND ") + " LIMIT 1"
        let values = keys.map { SQLValue($0.1) }
        if try self.sql({ try db.scalar(probe, values) }) == nil { throw Self.unknownLinks(link) }
        let targetKeys = link.targetKey.map(\.name)
        return LocalScope(
            layout: target,
            condition: { a in
                var f =
                    SQLFragment(
                        Self.keyTuple(a, targetKeys) + " IN (SELECT "
                            + targetKeys.map { "\"lk\".\(q(MirrorLinkNavigation.targetColumn($0)))" }.joined(
                                separator: ", ")
                            + " FROM \(q(link.table)) AS \"lk\" WHERE 1")
                for (column, value) in keys {
                    f = f + " AND \"lk\".\(q(column)) = ?" + SQLFragment("", [value])
                }
                return f + ")"
            }, single: !link.isCollection)
    }

    /// A filter or order through link-table navigation is answered only when every row of each source
    /// set has its links downloaded (otherwise rows without links would silently not match).
    func requireLinks(_ used: Set<MirrorLinkNavigation>) throws(ODataServiceError) {
        for link in used.sorted(by: { $0.table < $1.table }) {
            let sql =
                "SELECT 1 FROM \(q(link.sourceSet)) AS \"src\" WHERE NOT "
                + Self.linksKnown(link, source: "src")
                + " LIMIT 1"
            if try self.sql({ try db.scalar(sql) }) != nil { throw Self.unknownLinks(link) }
        }
    }

    /// V4 `…/$ref` (`Collection($ref)` or one `@odata.id`), V2 `…/$links/Nav` (`results` of `uri`s or
    /// one `uri`).
    mutating func references(_ scope: LocalScope, options: ODataQueryOptions) throws(ODataServiceError)
        -> LocalResult
    {
        var o = options
        o.select = nil
        o.expand = nil
        if scope.single {
            o.top = nil
            o.skip = nil
            o.filter = nil
            o.orderBy = nil
            guard let e = try fetch(scope, options: o, paging: nil).entries.first else {
                throw ODataServiceError(404, "NotFound", "no entity is linked")
            }
            return .reference(e)
        }
        let offset = try skipTokenOffset(options)
        let result = try fetch(scope, options: o, paging: (offset, request.pageSize))
        var total: Int?
        if options.wantsCount { total = try count(scope, options: o) }
        let next = result.more ? nextLink(offset: offset + result.entries.count) : nil
        return .references(result.entries, total: total, next: next)
    }
}
