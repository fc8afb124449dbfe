import JSONCore
import ODataCore
import Storage

/// Every statement that changes an entity row of the mirror outside a download: the offline writer's
/// creates, updates and deletes, the uploader's replacement of a local key by the server's, the
/// reflection of a forwarded write, the restoration of an entity after a revert.
///
/// A writer works inside a transaction its caller owns on the mirror's writer connection (the request
/// queue's, so that a change and its queue entry commit together, or ``ODataMirror/write(_:)``'s). Rows
/// it stores keep `_json` exactly as given and fill the typed columns from it; rows it creates are marked
/// as written through the gateway (`_dr = 'local'`; `local:unknown` for an update of an entity the
/// mirror did not hold, which the gateway did not create).
struct MirrorWriter {
    let db: Database
    let model: MirrorModel

    /// The scope (`_dr`) of an entity created through the gateway.
    static let createdScope = "local"
    /// The scope of an entity the mirror did not hold that an offline update stored (``insert``'s
    /// `scope`), or of one created offline whose create was uploaded (``markUploaded(_:key:)``): written
    /// through the gateway like a created one, but not known to contain only what was written into it.
    static let unknownScope = "local:unknown"
    /// The scopes of rows written through the gateway, as an SQL list (constants only).
    static let localScopesSQL = "('local', 'local:unknown')"

    /// Whether `scope` marks a row written through the gateway (created or not).
    static func isLocal(_ scope: String?) -> Bool { scope == createdScope || scope == unknownScope }

    /// `INSERT [OR REPLACE] INTO set (_json, _etag, _dr, _type, columns…) VALUES (?, …)`.
    static func storeSQL(_ layout: MirrorSetLayout, replacing: Bool) -> String {
        let names =
            [#""_json""#, #""_etag""#, #""_dr""#, #""_type""#]
            + (layout.container?.parentKey ?? []).map { q($0.name) } + layout.columns.map { q($0.name) }
        return "INSERT \(replacing ? "OR REPLACE " : "")INTO \(q(layout.set.name)) ("
            + names.joined(separator: ", ") + ") VALUES ("
            + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
    }

    /// The values of ``storeSQL(_:replacing:)`` for one entity.
    static func rowValues(
        _ m: MirrorModel, _ layout: MirrorSetLayout, _ properties: [(String, RawJSON)], etag: String?,
        scope: String, type: String? = nil, parent: [(String, RawJSON)]? = nil
    ) -> [SQLValue] {
        [
            .text(RawJSON.object(properties).serialized()), SQLValue(etag), .text(scope),
            storedType(layout, type),
        ]
            + (layout.container?.parentKey ?? []).map {
                $0.encode(MirrorColumn.lookup(parent ?? [], $0.path))
            }
            + columnValues(m, layout, properties)
    }

    /// The `_type` of a row: the qualified type when it is not the set's own, else NULL.
    static func storedType(_ layout: MirrorSetLayout, _ type: String?) -> SQLValue {
        guard let type, type != layout.entityType else { return .null }
        return .text(type)
    }

    /// The typed column values of `properties`.
    static func columnValues(_ m: MirrorModel, _ layout: MirrorSetLayout, _ properties: [(String, RawJSON)])
        -> [SQLValue]
    {
        layout.columns.map { $0.encode(MirrorColumn.lookup(properties, $0.path)) }
    }

    /// The stored members and ETag of the entity with `key`, if any.
    func entity(_ layout: MirrorSetLayout, key: ODataKey) throws -> (
        members: [(String, RawJSON)], etag: String?
    )? {
        let (whereSQL, values) = model.keyPredicate(key, in: layout)
        guard
            let r = try db.query(
                "SELECT \"_json\", \"_etag\" FROM \(q(layout.set.name)) WHERE \(whereSQL)", values
            ).first
        else { return nil }
        return ((try? RawJSON.parse(r[0].string ?? "{}"))?.members ?? [], r[1].string)
    }

    /// Stores a new entity created through the gateway; throws when its key exists.
    func insert(
        _ layout: MirrorSetLayout, members: [(String, RawJSON)], etag: String?,
        parent: [(String, RawJSON)]? = nil,
        type: String? = nil, scope: String = createdScope
    ) throws {
        try db.run(
            Self.storeSQL(layout, replacing: false),
            Self.rowValues(model, layout, members, etag: etag, scope: scope, type: type, parent: parent))
    }

    /// The key of a singleton's one stored row (404 when it was never downloaded).
    func onlyKey(_ layout: MirrorSetLayout) throws -> ODataKey {
        guard let row = try db.query("SELECT \"_json\" FROM \(q(layout.set.name)) LIMIT 1").first,
            let members = (try? RawJSON.parse(row[0].string ?? "{}"))?.members
        else { throw ODataServiceError(404, "NotFound", "\(layout.set.name) is not in the mirror") }
        var values: [ODataKeyValue] = []
        for name in layout.key {
            let text = members.first { $0.0 == name }?.1
            let literal: ODataLiteral
            switch text {
            case .number(let n)?: literal = Int64(n).map(ODataLiteral.integer) ?? .decimal(n)
            case .string(let s)?: literal = .string(s)
            case .bool(let b)?: literal = .boolean(b)
            default: literal = .null
            }
            values.append(ODataKeyValue(name: name, value: literal))
        }
        return ODataKey(values)
    }

    /// Replaces the stored members (and ETag) of the entity with `key`.
    func update(_ layout: MirrorSetLayout, key: ODataKey, members: [(String, RawJSON)], etag: String?) throws
    {
        let (whereSQL, whereValues) = model.keyPredicate(key, in: layout)
        let sets = ([#""_json" = ?"#, #""_etag" = ?"#] + layout.columns.map { "\(q($0.name)) = ?" })
            .joined(separator: ", ")
        try db.run(
            "UPDATE \(q(layout.set.name)) SET \(sets) WHERE \(whereSQL)",
            [.text(RawJSON.object(members).serialized()), SQLValue(etag)]
                + Self.columnValues(model, layout, members) + whereValues)
    }

    /// Removes the entity with `key` (nothing when there is none).
    func delete(_ layout: MirrorSetLayout, key: ODataKey) throws {
        let (whereSQL, values) = model.keyPredicate(key, in: layout)
        try db.run("DELETE FROM \(q(layout.set.name)) WHERE \(whereSQL)", values)
    }

    /// Whether `layout`'s entities carry ETags: the model names concurrency properties, or stored rows
    /// have ETags (looking at a few rows only: the set's downloaded rows come first).
    func usesETags(_ layout: MirrorSetLayout) throws -> Bool {
        if !model.model.concurrencyProperties(of: layout.entityType).isEmpty { return true }
        return try db.scalar(
            "SELECT 1 FROM (SELECT \"_etag\" AS e FROM \(q(layout.set.name)) LIMIT 64) WHERE e IS NOT NULL LIMIT 1"
        ) != nil
    }

    /// Whether a defining request (or a bootstrap file) reads the whole of `set` (its path is the set,
    /// with no `$filter`, `$top`, `$skip`, `$search` or `$apply`), so that an entity missing from the mirror is missing
    /// upstream too (as of the last download).
    func holdsWholeSet(_ set: String) throws -> Bool {
        let queries = try db.query(
            #"SELECT query FROM "_mg_scope" WHERE entitySet = ?"#,
            [.text(set)]
        ).compactMap { $0[0].string }
        return queries.contains { query in
            var path = Substring(query)
            var options = ""
            if let i = path.firstIndex(of: "?") {
                options = String(path[path.index(after: i)...]).lowercased()
                path = path[..<i]
            }
            guard path == set else { return false }
            return !["filter=", "top=", "skip=", "search=", "apply="].contains { options.contains($0) }
        }
    }

    /// The next gateway-minted integer key: negative, never reused (kept in `_mg_meta`).
    func mintLocalInteger() throws -> Int64 {
        let current =
            try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key='localKeySeq'"#)?.string.flatMap {
                Int64($0)
            } ?? 0
        let n = current - 1
        try db.run(
            #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('localKeySeq', ?)"#, [.text(String(n))])
        return n
    }

    /// After an upload: the row created locally with key predicate `old` takes the server's key `new`:
    /// the server's entity when the response carried it, else the local row with the server's key.
    func replaceKey(_ layout: MirrorSetLayout, old: String, new: String, entity: [(String, RawJSON)]?) throws
    {
        let m = model
        let keys = m.model.keyProperties(of: layout.entityType)
        guard keys.count == 1, let oldLiteral = ODataKeyText.literal(old, keys[0], m.version),
            let newLiteral = ODataKeyText.literal(new, keys[0], m.version)
        else { return }
        let table = q(layout.set.name)
        let keyColumn = q(keys[0].name)
        let oldValue = SQLValue(m.binding(for: oldLiteral, type: keys[0].type))
        guard
            let row = try db.query("SELECT \"_json\" FROM \(table) WHERE \(keyColumn) = ?", [oldValue]).first
        else { return }
        var properties = (try? RawJSON.parse(row[0].string ?? "{}"))?.members ?? []
        if let entity {
            properties = entity.filter {
                $0.0 != "__metadata" && !$0.0.contains("@")
                    && m.model.navigationProperty(named: $0.0, in: layout.entityType) == nil
            }
        } else if let i = properties.firstIndex(where: { $0.0 == keys[0].name }) {
            let newValue = SQLValue(m.binding(for: newLiteral, type: keys[0].type))
            switch newValue {
            case .integer(let n): properties[i].1 = .number(String(n))
            case .text(let t): properties[i].1 = .string(t)
            default: break
            }
        }
        try db.run("DELETE FROM \(table) WHERE \(keyColumn) = ?", [oldValue])
        try db.run(
            Self.storeSQL(layout, replacing: true),
            Self.rowValues(m, layout, properties, etag: nil, scope: "local"))
    }

    /// An entity created through the gateway whose create was uploaded: still a row written through the
    /// gateway (``unknownScope``), no longer one known to contain only what was written into it.
    func markUploaded(_ layout: MirrorSetLayout, key: ODataKey) throws {
        let (whereSQL, values) = model.keyPredicate(key, in: layout)
        try db.run(
            "UPDATE \(q(layout.set.name)) SET \"_dr\" = ? WHERE \"_dr\" = ? AND \(whereSQL)",
            [.text(Self.unknownScope), .text(Self.createdScope)] + values)
    }

    /// Removes the row a single-property key predicate (`(-1)`) names.
    func delete(_ layout: MirrorSetLayout, predicate: String) throws {
        let keys = model.model.keyProperties(of: layout.entityType)
        guard keys.count == 1, let literal = ODataKeyText.literal(predicate, keys[0], model.version) else {
            return
        }
        let value = SQLValue(model.binding(for: literal, type: keys[0].type))
        try db.run("DELETE FROM \(q(layout.set.name)) WHERE \(q(keys[0].name)) = ?", [value])
    }

    /// Stores one entity as the upstream serves it, replacing the row with the same key; the row keeps
    /// the defining request it came from (so that the next download of that request replaces it), else
    /// the set's first defining request when `scopeOfSet`, else it is marked as written through the
    /// gateway. A row that was written through the gateway (`local`, `local:unknown`) keeps that mark unless
    /// `scopeOfSet`.
    func store(_ layout: MirrorSetLayout, entity: MirrorEntity, scopeOfSet: Bool) throws {
        let keys = layout.key
        let keyValues = keys.map { k in
            layout.columns.first { $0.name == k }.map {
                $0.encode(MirrorColumn.lookup(entity.properties, $0.path))
            }
                ?? .null
        }
        let whereSQL = keys.map { "\(q($0)) = ?" }.joined(separator: " AND ")
        let previous = try db.scalar(
            "SELECT \"_dr\" FROM \(q(layout.set.name)) WHERE \(whereSQL)", keyValues)?.string
        var scope = previous ?? "local"
        if scopeOfSet {
            try db.run("DELETE FROM \(q(layout.set.name)) WHERE \(whereSQL)", keyValues)
            let first = try db.scalar(
                #"SELECT request FROM "_mg_scope" WHERE entitySet = ? ORDER BY request LIMIT 1"#,
                [.text(layout.set.name)])?.string
            scope = (Self.isLocal(previous) ? nil : previous) ?? first ?? "local"
        }
        try db.run(
            Self.storeSQL(layout, replacing: true),
            Self.rowValues(
                model, layout, entity.properties, etag: entity.etag, scope: scope, type: entity.type,
                parent: entity.parent))
    }
}
