import HTTPCore
import JSONCore
import ODataCore
import Storage

/// How a local response is written: version, V4 metadata level, `IEEE754Compatible`.
public struct ODataFormat: Sendable {
    /// V4 `odata.metadata` levels.
    public enum Metadata: String, Sendable {
        case minimal, full, none
    }
    /// The service version.
    public var version: ODataVersion
    /// V4 metadata level.
    public var metadata: Metadata = .minimal
    /// V4: Int64 and Decimal as strings.
    public var ieee754Compatible = false

    /// A format for `version`.
    public init(version: ODataVersion, metadata: Metadata = .minimal, ieee754Compatible: Bool = false) {
        self.version = version
        self.metadata = metadata
        self.ieee754Compatible = ieee754Compatible
    }
}

/// A read request answered from the mirror.
public struct LocalReadRequest: Sendable {
    /// Path relative to the service root, still percent-encoded (no leading `/`).
    public var path: String
    /// Raw query string (without `?`).
    public var query: String
    /// The gateway's service root URL as the client sees it (ends with `/`).
    public var serviceRoot: String
    /// Output format.
    public var format: ODataFormat
    /// Server-driven page size (config `pageSize` or `Prefer: odata.maxpagesize`, the smaller).
    public var pageSize: Int?

    /// Creates a request.
    public init(path: String, query: String, serviceRoot: String, format: ODataFormat, pageSize: Int?) {
        self.path = path
        self.query = query
        self.serviceRoot = serviceRoot
        self.format = format
        self.pageSize = pageSize
    }
}

/// A local answer: status, content type and body (headers such as `OData-Version` are added by the caller).
public struct LocalReadResponse: Sendable {
    /// HTTP status.
    public var status: Int
    /// Content type.
    public var contentType: String
    /// Body.
    public var body: [UInt8]
    /// The entity's ETag (single-entity answers).
    public var etag: String?

    init(status: Int, contentType: String, body: [UInt8], etag: String? = nil) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.etag = etag
    }
}

/// A failure answering locally, mapped to an OData error by the caller.
public struct LocalReadError: Error, Sendable, CustomStringConvertible {
    /// HTTP status (400, 404, 501, 503).
    public var status: Int
    /// OData error code.
    public var code: String
    /// Message.
    public var message: String
    public var description: String { "\(status) \(code): \(message)" }

    init(_ status: Int, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    init(_ e: ODataCore.ODataError) {
        self.init(
            e.kind == .translation ? 501 : 400, e.kind == .translation ? "NotImplemented" : "BadRequest",
            e.message)
    }
}

/// Skip tokens the gateway issues: `mg1.<offset>`; any other token is the upstream's.
public enum LocalSkipToken {
    /// Prefix of the gateway's own tokens.
    public static let prefix = "mg1."
    /// Whether `token` was issued by the gateway.
    public static func isLocal(_ token: String) -> Bool { token.hasPrefix(prefix) }
}

private struct Scope {
    var layout: MirrorSetLayout
    var condition: @Sendable (String) -> SQLFragment
    var single: Bool
}

private struct Entry {
    var set: String
    var entityType: String
    var properties: [(String, RawJSON)]
    var etag: String?
    var row: Row
    var expanded: [(String, Expanded)] = []
}

private enum Expanded {
    case many([Entry], count: Int?)
    case one(Entry?)
}

/// Answers OData reads from an ``ODataMirror``: resource paths (entity sets, keys incl. composite,
/// navigation, `/$count`, properties and `$value`), `$filter`, `$orderby`, `$select`, `$expand` (nested
/// options), `$top`, `$skip`, `$count`/`$inlinecount`, server-driven paging with the gateway's own
/// `$skiptoken`, `$ref` (V4) and `$links` (V2), and writes V4 JSON or V2 verbose JSON. Navigation uses
/// referential constraints when the model has them, otherwise the links `$expand` showed in defining
/// requests (``MirrorLinkNavigation``): a source entity whose links were downloaded answers (empty when
/// there were none); one whose links were never downloaded gives 501, as does a filter or order through
/// such a navigation while any row of the source set lacks its links.
///
/// Promises: every value from the request reaches SQL as a bound parameter; results are ordered by the
/// requested `$orderby` then by key, so pages are stable; an upstream `$skiptoken` gives a 400 telling the
/// client to restart; unsupported constructs give 501, never a wrong answer.
public struct LocalQueryEngine: Sendable {
    /// The mirror read.
    public let mirror: ODataMirror

    /// Creates an engine over `mirror`.
    public init(mirror: ODataMirror) { self.mirror = mirror }

    /// Answers `request`.
    public func read(_ request: LocalReadRequest) throws(LocalReadError) -> LocalReadResponse {
        guard let m = mirror.model else { throw LocalReadError(503, "NoMirror", "no $metadata mirrored yet") }
        let path: ODataResourcePath
        let options: ODataQueryOptions
        do {
            path = try ODataResourcePath.parse(request.path, model: m.model)
            options = try ODataQueryOptions.parse(rawQuery: request.query, version: m.version)
        } catch { throw LocalReadError(error) }
        let format = request.format
        if let f = options.format?.lowercased(), !f.hasPrefix("json"), !f.hasPrefix("application/json") {
            throw LocalReadError(501, "NotImplemented", "only $format=json is answered locally")
        }
        do {
            return try mirror.pool.read { db throws(LocalReadError) in
                var ctx = Context(db: db, model: m, format: format, root: request.serviceRoot)
                return try ctx.answer(path: path, options: options, request: request)
            }
        } catch let e as LocalReadError {
            throw e
        } catch {
            throw LocalReadError(sqlFailure: error)
        }
    }
}

extension LocalReadError {
    /// A failure of SQLite while answering a read: a statement beyond SQLite's limits (a `$filter` with
    /// lambdas nested a few levels deep overflows its parser stack; a huge expression tree, too many terms
    /// or variables, too big a value) is a valid query not answered locally (501); anything else is 500.
    init(sqlFailure error: any Error) {
        if let e = error as? SQLiteError, Self.beyondLimits(e) {
            self.init(
                501, "NotImplemented",
                "the query is too complex to be answered locally (\(e.message))")
        } else {
            self.init(500, "InternalError", "local read failed: \(error)")
        }
    }

    static func beyondLimits(_ e: SQLiteError) -> Bool {
        if e.code == 18 { return true }  // SQLITE_TOOBIG
        let m = e.message.lowercased()
        return m.contains("parser stack overflow") || m.contains("expression tree is too large")
            || m.hasPrefix("too many ") || m.contains("pattern too complex")
    }
}

private struct Context {
    let db: Database
    let m: MirrorModel
    let format: ODataFormat
    let root: String
    var aliasCounter = 0

    init(db: Database, model: MirrorModel, format: ODataFormat, root: String) {
        self.db = db
        self.m = model
        self.format = format
        self.root = root
    }

    var v2: Bool { format.version == .v2 }

    mutating func alias() -> String {
        aliasCounter += 1
        return "p\(aliasCounter)"
    }

    func sql<T>(_ body: () throws -> T) throws(LocalReadError) -> T {
        do { return try body() } catch let e as LocalReadError { throw e } catch let e as ODataCore.ODataError
        {
            throw LocalReadError(e)
        } catch { throw LocalReadError(sqlFailure: error) }
    }

    func layout(forSet set: String?, type: String) throws(LocalReadError) -> MirrorSetLayout {
        if let set, let l = m.layouts[set] { return l }
        if let l = m.layouts.values.first(where: { $0.entityType == type && !$0.set.isSingleton }) {
            return l
        }
        throw LocalReadError(501, "NotImplemented", "no mirrored entity set for \(type)")
    }

    // MARK: paths

    mutating func answer(path: ODataResourcePath, options: ODataQueryOptions, request: LocalReadRequest)
        throws(LocalReadError) -> LocalReadResponse
    {
        if let token = options.skipToken, !LocalSkipToken.isLocal(token) {
            throw LocalReadError(
                400, "SkipTokenExpired",
                "this $skiptoken was issued by the upstream, which is unreachable; restart the read without it"
            )
        }
        switch path.target {
        case .metadata:
            return LocalReadResponse(status: 200, contentType: "application/xml", body: m.metadata)
        case .serviceDocument:
            return serviceDocument()
        case .batch, .operationImport:
            throw LocalReadError(501, "NotImplemented", "not answered locally")
        default: break
        }
        var scope: Scope?
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
                scope = Scope(layout: l, condition: { _ in SQLFragment("1") }, single: false)
                navigationSet = name
            case .key(let key):
                guard var s = scope else { throw LocalReadError(400, "BadRequest", "key without entity set") }
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
                    throw LocalReadError(400, "BadRequest", "navigation without source")
                }
                // Navigation from an entity that does not exist is 404 (as upstreams answer), not empty.
                if s.single, try !exists(s) { throw LocalReadError(404, "NotFound", "no such entity") }
                guard let nav = m.mapping.navigation(name, from: s.layout.entityType) else {
                    guard let link = m.links[s.layout.set.name]?[name] else {
                        throw LocalReadError(
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
                scope = Scope(
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
        guard let scope else { throw LocalReadError(501, "NotImplemented", "not answered locally") }
        if let first = trailing.first {
            switch first {
            case .count:
                let n = try count(scope, options: options)
                return LocalReadResponse(
                    status: 200, contentType: "text/plain;charset=utf-8", body: Array(String(n).utf8))
            case .property(let name, let type):
                guard scope.single else {
                    throw LocalReadError(400, "BadRequest", "property of a collection")
                }
                guard let e = try fetch(scope, options: ODataQueryOptions(), paging: nil).entries.first else {
                    throw LocalReadError(404, "NotFound", "no such entity")
                }
                let value = e.properties.first { $0.0 == name }?.1 ?? .null
                if trailing.count > 1, case .value = trailing[1] {
                    if case .null = value {
                        return LocalReadResponse(status: 204, contentType: "text/plain", body: [])
                    }
                    let text: String
                    switch value {
                    case .string(let s): text = s
                    case .number(let n): text = n
                    case .bool(let b): text = b ? "true" : "false"
                    default: text = value.serialized()
                    }
                    return LocalReadResponse(
                        status: 200, contentType: "text/plain;charset=utf-8", body: Array(text.utf8))
                }
                var body: [(String, RawJSON)]
                if v2 {
                    body = [("d", .object([(name, value)]))]
                } else {
                    body = []
                    if format.metadata != .none {
                        body.append(("@odata.context", .string(root + "$metadata#" + type.description)))
                    }
                    body.append(("value", convert(value, type: type.primitive)))
                }
                return json(.object(body))
            case .value:
                throw LocalReadError(501, "NotImplemented", "media resources are not mirrored")
            default:
                throw LocalReadError(501, "NotImplemented", "this path is not answered locally")
            }
        }
        let setName = navigationSet ?? scope.layout.set.name
        if reference { return try references(scope, options: options, request: request) }
        if scope.single {
            var o = options
            o.top = nil
            o.skip = nil
            o.filter = nil
            o.orderBy = nil
            let result = try fetch(scope, options: o, paging: nil, selectExpand: options)
            guard let e = result.entries.first else {
                throw LocalReadError(404, "NotFound", "no such entity")
            }
            var object = entityJSON(e, topLevel: true)
            if !v2, format.metadata != .none {
                object.insert(
                    (
                        "@odata.context",
                        .string(root + "$metadata#" + setName + selectSuffix(options) + "/$entity")
                    ), at: 0)
            }
            var response = json(v2 ? .object([("d", .object(object))]) : .object(object))
            response.etag = e.etag
            return response
        }
        // Collection with paging.
        var offset = 0
        if let token = options.skipToken {
            guard let n = Int(token.dropFirst(LocalSkipToken.prefix.count)), n >= 0 else {
                throw LocalReadError(400, "BadRequest", "invalid $skiptoken")
            }
            offset = n
        }
        let result = try fetch(
            scope, options: options, paging: (offset, request.pageSize), selectExpand: options)
        var total: Int?
        if options.wantsCount { total = try count(scope, options: options) }
        var next: String?
        if result.more {
            next = nextLink(request, offset: offset + result.entries.count)
        }
        let values = result.entries.map { RawJSON.object(entityJSON($0, topLevel: true)) }
        if v2 {
            var d: [(String, RawJSON)] = [("results", .array(values))]
            if let total { d.append(("__count", .string(String(total)))) }
            if let next { d.append(("__next", .string(next))) }
            return json(.object([("d", .object(d))]))
        }
        var body: [(String, RawJSON)] = []
        if format.metadata != .none {
            body.append(("@odata.context", .string(root + "$metadata#" + setName + selectSuffix(options))))
        }
        if let total { body.append(("@odata.count", .number(String(total)))) }
        body.append(("value", .array(values)))
        if let next { body.append(("@odata.nextLink", .string(next))) }
        return json(.object(body))
    }

    func isStart(_ segment: ODataPathSegment) -> Bool {
        if case .entitySet = segment { return true }
        return false
    }

    func selectSuffix(_ options: ODataQueryOptions) -> String {
        guard let select = options.select, !select.isEmpty, !select.contains(where: \.isWildcard) else {
            return ""
        }
        return "(" + select.map { $0.path.joined(separator: "/") }.joined(separator: ",") + ")"
    }

    func json(_ value: RawJSON) -> LocalReadResponse {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        value.write(to: &out)
        let type: String
        if v2 {
            type = "application/json;charset=utf-8"
        } else {
            type =
                "application/json;odata.metadata=\(format.metadata.rawValue);odata.streaming=true;IEEE754Compatible=\(format.ieee754Compatible)"
        }
        return LocalReadResponse(status: 200, contentType: type, body: out)
    }

    func serviceDocument() -> LocalReadResponse {
        let sets = m.model.entitySets.filter { !$0.isSingleton }
        if v2 {
            return json(.object([("d", .object([("EntitySets", .array(sets.map { .string($0.name) }))]))]))
        }
        var items: [RawJSON] = sets.map {
            .object([("name", .string($0.name)), ("kind", .string("EntitySet")), ("url", .string($0.name))])
        }
        items += m.model.entitySets.filter(\.isSingleton).map {
            .object([("name", .string($0.name)), ("kind", .string("Singleton")), ("url", .string($0.name))])
        }
        return json(.object([("@odata.context", .string(root + "$metadata")), ("value", .array(items))]))
    }

    func nextLink(_ request: LocalReadRequest, offset: Int) -> String {
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

    mutating func whereClause(_ scope: Scope, _ options: ODataQueryOptions) throws(LocalReadError)
        -> SQLFragment
    {
        var condition = scope.condition("t0")
        if let filter = options.filter {
            let mapping = MirrorSQLMapping(m)
            do {
                let parser = ODataFilterParser(
                    model: m.model, entityType: scope.layout.entityType, version: m.version)
                let expr = try parser.parseFilter(filter)
                let translator = ODataSQLTranslator(
                    mapping: mapping, model: m.model, rootEntityType: scope.layout.entityType)
                condition = condition + " AND (" + (try translator.translateFilter(expr)) + ")"
            } catch { throw LocalReadError(error) }
            try requireLinks(mapping.usage.all)
        }
        return condition
    }

    mutating func count(_ scope: Scope, options: ODataQueryOptions) throws(LocalReadError) -> Int {
        let w = try whereClause(scope, options)
        let sql = "SELECT COUNT(*) FROM \(q(scope.layout.set.name)) AS \"t0\" WHERE " + w.sql
        return try self.sql { try db.scalar(sql, w.bindings.map(SQLValue.init))?.int ?? 0 }
    }

    /// Rows of `scope` with options applied; `paging` is (offset into the result, page size).
    mutating func fetch(
        _ scope: Scope, options: ODataQueryOptions, paging: (Int, Int?)?,
        selectExpand: ODataQueryOptions? = nil
    ) throws(LocalReadError) -> (entries: [Entry], more: Bool) {
        let w = try whereClause(scope, options)
        var order: [String] = []
        var orderBindings: [SQLBinding] = []
        if let orderBy = options.orderBy {
            let mapping = MirrorSQLMapping(m)
            do {
                let parser = ODataFilterParser(
                    model: m.model, entityType: scope.layout.entityType, version: m.version)
                let items = try parser.parseOrderBy(orderBy)
                let translator = ODataSQLTranslator(
                    mapping: mapping, model: m.model, rootEntityType: scope.layout.entityType)
                let f = try translator.translateOrderBy(items)
                order.append(f.sql)
                orderBindings = f.bindings
            } catch { throw LocalReadError(error) }
            try requireLinks(mapping.usage.all)
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
        var entries: [Entry] = []
        entries.reserveCapacity(rows.count)
        for row in rows {
            let text = row["_json"]?.string ?? "{}"
            let props = (try? RawJSON.parse(text))?.members ?? []
            entries.append(
                Entry(
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

    mutating func expandEntry(_ entry: inout Entry, _ items: [ODataExpandItem]) throws(LocalReadError) {
        for item in items {
            if item.isWildcard { continue }
            guard let first = item.path.first else { continue }
            guard let nav = m.model.navigationProperty(named: first, in: entry.entityType) else { continue }
            let scope: Scope
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
                scope = Scope(
                    layout: target,
                    condition: { a in
                        var f = SQLFragment("1")
                        for (col, v) in bound { f = f + " AND \(q(a)).\(q(col)) = ?" + SQLFragment("", [v]) }
                        return f
                    }, single: !nav.isCollection)
            } else if let link = m.links[entry.set]?[first] {
                scope = try linkScope(link, fromRow: entry.row)
            } else {
                throw LocalReadError(
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

    // MARK: serialization

    func keyPredicate(_ e: Entry) -> String {
        let keys = m.types[e.entityType]?.keyProperties ?? m.model.keyProperties(of: e.entityType)
        func literal(_ p: EdmProperty) -> String {
            let v = e.properties.first { $0.0 == p.name }?.1 ?? .null
            switch v {
            case .string(let s):
                switch p.type.primitive {
                case .guid?: return v2 ? "guid'\(s)'" : s
                case .int64?: return v2 ? s + "L" : s
                case .decimal?: return v2 ? s + "M" : s
                case .int16?, .int32?, .byte?, .sbyte?: return s
                case .dateTime?:
                    if let ms = ODataMirror.parseV2Date(s) {
                        return "datetime'\(ODataMirror.isoFromMillis(ms.millis, utc: false))'"
                    }
                    return "datetime'\(s)'"
                case .dateTimeOffset?:
                    if v2 {
                        if let ms = ODataMirror.parseV2Date(s) {
                            return "datetimeoffset'\(ODataMirror.isoFromMillis(ms.millis, utc: true))'"
                        }
                        return "datetimeoffset'\(s)'"
                    }
                    return s
                case .date?, .timeOfDay?: return s
                default:
                    return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
                }
            case .number(let n):
                if v2, p.type.primitive == .int64 { return n + "L" }
                return n
            case .bool(let b): return b ? "true" : "false"
            default: return "null"
            }
        }
        if keys.count == 1 {
            return "(" + FormCodec.percentEncode(literal(keys[0]), keeping: .pathSegment) + ")"
        }
        return "("
            + keys.map { $0.name + "=" + FormCodec.percentEncode(literal($0), keeping: .pathSegment) }.joined(
                separator: ",") + ")"
    }

    func convert(_ value: RawJSON, type: EdmPrimitiveType?) -> RawJSON {
        if !v2, format.ieee754Compatible, case .number(let n) = value, type == .int64 || type == .decimal {
            return .string(n)
        }
        if !v2, !format.ieee754Compatible, case .string(let s) = value, type == .int64 || type == .decimal,
            Double(s) != nil
        {
            return .number(s)
        }
        return value
    }

    func entityJSON(_ e: Entry, topLevel: Bool) -> [(String, RawJSON)] {
        var out: [(String, RawJSON)] = []
        let id = root + e.set + keyPredicate(e)
        let info = m.types[e.entityType]
        let qualified = info?.qualifiedName ?? e.entityType
        if v2 {
            var meta: [(String, RawJSON)] = [
                ("id", .string(id)), ("uri", .string(id)), ("type", .string(qualified)),
            ]
            if let etag = e.etag { meta.append(("etag", .string(etag))) }
            out.append(("__metadata", .object(meta)))
        } else {
            if format.metadata == .full {
                out.append(("@odata.type", .string("#" + qualified)))
                out.append(("@odata.id", .string(id)))
            }
            if let etag = e.etag, format.metadata != .none { out.append(("@odata.etag", .string(etag))) }
            if format.metadata == .full { out.append(("@odata.editLink", .string(id))) }
        }
        for (name, value) in e.properties {
            let type = info?.primitives[name]
            out.append((name, convert(value, type: type)))
        }
        let expandedNames = Set(e.expanded.map(\.0))
        if v2 {
            let navs = info?.navigationNames ?? m.model.navigationProperties(of: e.entityType).map(\.name)
            for nav in navs where !expandedNames.contains(nav) {
                out.append((nav, .object([("__deferred", .object([("uri", .string(id + "/" + nav))]))])))
            }
        }
        for (name, x) in e.expanded {
            switch x {
            case .many(let entries, let count):
                let items = RawJSON.array(entries.map { .object(entityJSON($0, topLevel: false)) })
                if v2 {
                    var o: [(String, RawJSON)] = [("results", items)]
                    if let count { o.append(("__count", .string(String(count)))) }
                    out.append((name, .object(o)))
                } else {
                    if let count { out.append((name + "@odata.count", .number(String(count)))) }
                    out.append((name, items))
                }
            case .one(let entry):
                out.append((name, entry.map { .object(entityJSON($0, topLevel: false)) } ?? .null))
            }
        }
        return out
    }
}

// MARK: navigation through link tables, $ref / $links

extension Context {
    /// Whether `scope` holds at least one row.
    func exists(_ scope: Scope) throws(LocalReadError) -> Bool {
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

    static func unknownLinks(_ link: MirrorLinkNavigation) -> LocalReadError {
        LocalReadError(
            501, "NotImplemented",
            "navigation '\(link.name)' from \(link.sourceSet) has no referential constraint and its links were "
                + "not downloaded for these entities (a defining request with $expand=\(link.name) records them)"
        )
    }

    /// The entities a link-table navigation reaches from the rows of `source`. Throws 501 when some
    /// source row's links were never downloaded: the mirror cannot know them, so it does not answer
    /// (a source row whose links were downloaded and are empty gives an empty answer).
    func linkScope(_ link: MirrorLinkNavigation, from source: Scope, isCollection: Bool)
        throws(LocalReadError)
        -> Scope
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
        return Scope(
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
    func linkScope(_ link: MirrorLinkNavigation, fromRow row: Row) throws(LocalReadError) -> Scope {
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
        return Scope(
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
    func requireLinks(_ used: Set<MirrorLinkNavigation>) throws(LocalReadError) {
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
    mutating func references(_ scope: Scope, options: ODataQueryOptions, request: LocalReadRequest)
        throws(LocalReadError) -> LocalReadResponse
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
                throw LocalReadError(404, "NotFound", "no entity is linked")
            }
            let id = root + e.set + keyPredicate(e)
            if v2 { return json(.object([("d", .object([("uri", .string(id))]))])) }
            var body: [(String, RawJSON)] = []
            if format.metadata != .none { body.append(("@odata.context", .string(root + "$metadata#$ref"))) }
            body.append(("@odata.id", .string(id)))
            return json(.object(body))
        }
        var offset = 0
        if let token = options.skipToken {
            guard let n = Int(token.dropFirst(LocalSkipToken.prefix.count)), n >= 0 else {
                throw LocalReadError(400, "BadRequest", "invalid $skiptoken")
            }
            offset = n
        }
        let result = try fetch(scope, options: o, paging: (offset, request.pageSize))
        var total: Int?
        if options.wantsCount { total = try count(scope, options: o) }
        let next = result.more ? nextLink(request, offset: offset + result.entries.count) : nil
        if v2 {
            let items = result.entries.map {
                RawJSON.object([("uri", .string(root + $0.set + keyPredicate($0)))])
            }
            var d: [(String, RawJSON)] = [("results", .array(items))]
            if let total { d.append(("__count", .string(String(total)))) }
            if let next { d.append(("__next", .string(next))) }
            return json(.object([("d", .object(d))]))
        }
        let items = result.entries.map {
            RawJSON.object([("@odata.id", .string(root + $0.set + keyPredicate($0)))])
        }
        var body: [(String, RawJSON)] = []
        if format.metadata != .none {
            body.append(("@odata.context", .string(root + "$metadata#Collection($ref)")))
        }
        if let total { body.append(("@odata.count", .number(String(total)))) }
        body.append(("value", .array(items)))
        if let next { body.append(("@odata.nextLink", .string(next))) }
        return json(.object(body))
    }
}
