import Foundation
import JSONCore
import ODataCore
import Storage
import Synchronization

/// One stored column of a mirrored entity set: a primitive property (complex properties flattened with
/// `_`, as ``ModelSQLMapping`` expects).
public struct MirrorColumn: Sendable, Hashable {
    /// Column name (`Address_City`).
    public var name: String
    /// Property path in the entity (`["Address", "City"]`).
    public var path: [String]
    /// The EDM type.
    public var type: EdmPrimitiveType
}

/// The table layout of one entity set.
public struct MirrorSetLayout: Sendable {
    /// Entity set (and table) name.
    public var set: EdmEntitySet
    /// Qualified entity type.
    public var entityType: String
    /// Typed columns, one per primitive property.
    public var columns: [MirrorColumn]
    /// Key property names, in key order.
    public var key: [String]
}

/// A parsed, stored `$metadata` with the derived table layouts.
public struct MirrorModel: Sendable {
    /// The `$metadata` document exactly as the upstream (or bootstrap file) served it.
    public var metadata: [UInt8]
    /// The parsed model.
    public var model: EdmModel
    /// Layout per entity set name.
    public var layouts: [String: MirrorSetLayout]
    /// SQL mapping for ODataCore's translator.
    public var mapping: ModelSQLMapping
    /// Per entity type (qualified name as used in the model): what serialization needs per row,
    /// computed once.
    public var types: [String: MirrorTypeInfo] = [:]
    /// Navigation without referential constraints, answered through link tables: source set → name.
    public var links: [String: [String: MirrorLinkNavigation]] = [:]

    /// The version of the service.
    public var version: ODataVersion { model.version }

    /// `"A" = ? AND "B" = ?` selecting the row of `layout`'s table with `key`, and the key values bound as
    /// the mirror stores them (typed by the entity type's properties). Names come from the parsed key,
    /// which holds only the model's key properties; they are quoted.
    func keyPredicate(_ key: ODataKey, in layout: MirrorSetLayout) -> (sql: String, values: [SQLValue]) {
        var parts: [String] = []
        var values: [SQLValue] = []
        for kv in key.values {
            let t = model.property(named: kv.name, in: layout.entityType)?.type
            parts.append("\(q(kv.name)) = ?")
            values.append(SQLValue(mapping.binding(for: kv.value, type: t)))
        }
        return (parts.joined(separator: " AND "), values)
    }
}

/// What serializing an entity of one type needs, computed once per model.
public struct MirrorTypeInfo: Sendable {
    /// Qualified type name.
    public var qualifiedName: String
    /// Primitive type of each primitive property.
    public var primitives: [String: EdmPrimitiveType]
    /// Key properties in key order.
    public var keyProperties: [EdmProperty]
    /// Navigation property names.
    public var navigationNames: [String]
}

/// One entity as received from the upstream, ready to be stored.
public struct MirrorEntity: Sendable {
    /// Structural properties as received (navigation properties and control information removed).
    public var properties: [(String, RawJSON)]
    /// The entity's ETag, if any.
    public var etag: String?
}

/// The SQLite mirror of one OData service (`dataDir/odata-NAME.sqlite`, mode 0600): the `$metadata`
/// byte-identical, one typed table per entity set (a `_json` column keeps every entity exactly as
/// received, typed columns serve `$filter`/`$orderby`), one link table per navigation without
/// referential constraints (the links `$expand` showed, see ``MirrorLinkNavigation``), the scope of each
/// defining request, and the time of the last download.
///
/// Promises: a defining request's rows and links are replaced in one transaction (readers see the old rows or the
/// new ones, never a mix); a changed `$metadata` drops and recreates every entity table; decimals and
/// Int64 keep their exact text in `_json`; date-time-offsets are stored as UTC text
/// (`YYYY-MM-DDThh:mm:ss[.fff]Z`) and V2 `/Date(ms)/` date-times as `YYYY-MM-DDThh:mm:ss[.fff]`.
public final class ODataMirror: Sendable {
    /// The database.
    public let pool: DatabasePool
    private let current = Mutex<MirrorModel?>(nil)

    /// Opens (creating) the mirror file, encrypted with `encryption` if given, and loads a stored model.
    public init(path: String, encryption: StoreEncryption? = nil) throws {
        pool = try DatabasePool(
            path: path, options: DatabaseOptions(synchronous: .normal, encryption: encryption), readers: 4)
        try Self.migrator.migrate(pool)
        if let bytes = try pool.read({ db in
            try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key='metadata'"#)
        }
        )?.bytes {
            if let m = try? Self.makeModel(bytes) {
                try pool.write { db in try Self.createLinkTables(db, m) }
                current.withLock { $0 = m }
            }
        }
    }

    /// The mirror's own tables (entity and link tables follow the model, see ``install(metadata:)``).
    /// The first migration accepts the tables of releases before migrations (created if missing).
    static let migrator = Migrator(
        table: "_mg_migrations_mirror",
        [
            Migration(
                "1-meta-and-scope",
                sql: """
                    CREATE TABLE IF NOT EXISTS "_mg_meta" (key TEXT PRIMARY KEY, value BLOB);
                    CREATE TABLE IF NOT EXISTS "_mg_scope" (request TEXT NOT NULL, entitySet TEXT NOT NULL,
                      query TEXT NOT NULL, rows INTEGER NOT NULL, downloadedAt TEXT NOT NULL,
                      PRIMARY KEY (request, entitySet));
                    """)
        ])

    /// The loaded model, if `$metadata` was ever stored.
    public var model: MirrorModel? { current.withLock { $0 } }

    /// The last successful download time (ISO-8601), if any.
    public var lastDownloadAt: String? {
        (try? pool.read { db in try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key='lastDownloadAt'"#) })??
            .string
    }

    /// Rows per entity set.
    public func rowCounts() -> [String: Int] {
        guard let m = model else { return [:] }
        var result: [String: Int] = [:]
        _ = try? pool.read { db in
            for name in m.layouts.keys {
                result[name] = try db.scalar("SELECT COUNT(*) FROM \(q(name))")?.int ?? 0
            }
        }
        return result
    }

    static func makeModel(_ bytes: [UInt8]) throws -> MirrorModel {
        let model = try CSDLParser.parse(bytes)
        var layouts: [String: MirrorSetLayout] = [:]
        for set in model.entitySets {
            var columns: [MirrorColumn] = []
            func add(_ type: String, _ prefix: [String], depth: Int) {
                for p in model.properties(of: type) where !p.type.isCollection {
                    let path = prefix + [p.name]
                    if let prim = p.type.primitive {
                        columns.append(
                            MirrorColumn(name: path.joined(separator: "_"), path: path, type: prim))
                    } else if model.structuredType(p.type.name) != nil, depth < 4 {
                        add(p.type.name, path, depth: depth + 1)
                    } else if model.enumTypes[p.type.name] != nil {
                        columns.append(
                            MirrorColumn(name: path.joined(separator: "_"), path: path, type: .string))
                    }
                }
            }
            add(set.entityType, [], depth: 0)
            layouts[set.name] = MirrorSetLayout(
                set: set, entityType: set.entityType, columns: columns, key: model.key(of: set.entityType))
        }
        var types: [String: MirrorTypeInfo] = [:]
        for layout in layouts.values where types[layout.entityType] == nil {
            let t = layout.entityType
            var primitives: [String: EdmPrimitiveType] = [:]
            for p in model.properties(of: t) { if let prim = p.type.primitive { primitives[p.name] = prim } }
            types[t] = MirrorTypeInfo(
                qualifiedName: model.structuredType(t)?.qualifiedName ?? t, primitives: primitives,
                keyProperties: model.keyProperties(of: t),
                navigationNames: model.navigationProperties(of: t).map(\.name))
        }
        var result = MirrorModel(
            metadata: bytes, model: model, layouts: layouts, mapping: ModelSQLMapping(model: model))
        result.types = types
        result.links = MirrorLinkNavigation.all(in: model)
        return result
    }

    /// Stores `metadata` (when it differs from the stored one: every entity table is recreated) and makes
    /// it current. Throws when it does not parse.
    @discardableResult
    public func install(metadata: [UInt8]) throws -> MirrorModel {
        if let m = model, m.metadata == metadata { return m }
        let new = try Self.makeModel(metadata)
        try pool.write { db in
            try db.transaction {
                if let old = model {
                    for name in old.layouts.keys { try db.execute("DROP TABLE IF EXISTS \(q(name))") }
                    try Self.dropLinkTables(db, old)
                }
                try Self.dropLinkTables(db, new)
                try Self.createLinkTables(db, new)
                try db.execute(#"DELETE FROM "_mg_scope""#)
                try db.run(#"DELETE FROM "_mg_meta" WHERE key='lastDownloadAt'"#)
                for layout in new.layouts.values.sorted(by: { $0.set.name < $1.set.name }) {
                    try db.execute("DROP TABLE IF EXISTS \(q(layout.set.name))")
                    var cols = [#""_json" TEXT NOT NULL"#, #""_etag" TEXT"#, #""_dr" TEXT NOT NULL"#]
                    for c in layout.columns { cols.append("\(q(c.name)) \(Self.sqlType(c.type))") }
                    try db.execute("CREATE TABLE \(q(layout.set.name)) (\(cols.joined(separator: ", ")))")
                    if !layout.key.isEmpty {
                        try db.execute(
                            "CREATE UNIQUE INDEX \(q("_mg_key_" + layout.set.name)) ON \(q(layout.set.name)) ("
                                + layout.key.map(q).joined(separator: ", ") + ")")
                    }
                    // One index per filterable column (up to 32), followed by the key (the default order of
                    // local results), so that `$filter`/`$orderby` on one property with `$top` reads a few
                    // rows in order instead of scanning or sorting the set.
                    let keyColumns = layout.key.map(q).joined(separator: ", ")
                    for c in layout.columns.prefix(32)
                    where c.type != .binary && c.type != .stream && !(layout.key == [c.name]) {
                        let columns = keyColumns.isEmpty ? q(c.name) : q(c.name) + ", " + keyColumns
                        try db.execute(
                            "CREATE INDEX \(q("_mg_ix_" + layout.set.name + "_" + c.name)) ON "
                                + "\(q(layout.set.name)) (\(columns))")
                    }
                }
                try db.run(
                    #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('metadata', ?)"#,
                    [.blob(metadata)])
            }
        }
        current.withLock { $0 = new }
        return new
    }

    static func sqlType(_ t: EdmPrimitiveType) -> String {
        switch t {
        case .boolean, .byte, .sbyte, .int16, .int32, .int64: return "INTEGER"
        case .single, .double, .decimal: return "REAL"
        case .binary, .stream: return "BLOB"
        default: return "TEXT"
        }
    }

    /// Replaces, in one transaction, the rows that defining request `request` (query `query`) brought:
    /// `rows` maps entity set names to their entities. Returns rows stored per set. With `unlessQueued`,
    /// throws instead (inside the same transaction, so no local write slips in between) when the request
    /// queue holds local changes that the downloaded rows would overwrite. `links` (what `$expand` showed
    /// for navigation without referential constraints) replace the request's links in the same transaction.
    @discardableResult
    public func replace(
        request: String, query: String, rows: [String: [MirrorEntity]], links: [MirrorLinkRecord] = [],
        unlessQueued: Bool = false
    ) throws -> [String: Int] {
        guard let m = model else { throw MirrorError("no $metadata") }
        let now = iso8601Now()
        var stored: [String: Int] = [:]
        try pool.write { db in
            try db.transaction {
                if unlessQueued,
                    try db.scalar(#"SELECT 1 FROM sqlite_master WHERE type='table' AND name='_mg_queue'"#)
                        != nil,
                    try db.scalar(#"SELECT 1 FROM "_mg_queue" LIMIT 1"#) != nil
                {
                    throw MirrorError(
                        "local changes were queued during the download; it is retried after the upload")
                }
                let sets = try db.query(
                    #"SELECT entitySet FROM "_mg_scope" WHERE request = ?"#, [.text(request)]
                )
                .compactMap { $0[0].string }
                for set in Set(sets).union(rows.keys) where m.layouts[set] != nil {
                    try db.run("DELETE FROM \(q(set)) WHERE \"_dr\" = ?", [.text(request)])
                    // Nothing is queued (checked above): rows written locally have all been uploaded and
                    // the set is downloaded now, so local rows (e.g. nested entities of a deep insert whose
                    // server keys were never learned) give way to the server's.
                    if unlessQueued { try db.run("DELETE FROM \(q(set)) WHERE \"_dr\" = 'local'") }
                }
                try db.run(#"DELETE FROM "_mg_scope" WHERE request = ?"#, [.text(request)])
                try Self.replaceLinks(db, m, request: request, links: links)
                for (set, entities) in rows.sorted(by: { $0.key < $1.key }) {
                    guard let layout = m.layouts[set] else { continue }
                    let names = [#""_json""#, #""_etag""#, #""_dr""#] + layout.columns.map { q($0.name) }
                    let sql =
                        "INSERT OR REPLACE INTO \(q(set)) (\(names.joined(separator: ", "))) VALUES ("
                        + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
                    let statement = try db.prepare(sql)
                    for e in entities {
                        var values: [SQLValue] = [
                            .text(RawJSON.object(e.properties).serialized()), SQLValue(e.etag),
                            .text(request),
                        ]
                        for c in layout.columns {
                            values.append(
                                Self.columnValue(Self.lookup(e.properties, c.path), c.type, m.version))
                        }
                        try statement.bind(values)
                        _ = try statement.step()
                        statement.reset()
                    }
                    stored[set] = entities.count
                    try db.run(
                        #"INSERT OR REPLACE INTO "_mg_scope" (request, entitySet, query, rows, downloadedAt) VALUES (?, ?, ?, ?, ?)"#,
                        [
                            .text(request), .text(set), .text(query), .integer(Int64(entities.count)),
                            .text(now),
                        ])
                }
                try db.run(
                    #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('lastDownloadAt', ?)"#,
                    [.text(now)])
            }
            // Statistics for the query planner (which index serves a filter best).
            try db.execute("ANALYZE")
        }
        return stored
    }

    /// Removes the rows loaded from bootstrap files (once the defining requests have been downloaded).
    public func dropBootstrap() throws {
        guard let m = model else { return }
        try pool.write { db in
            try db.transaction {
                let sets = try db.query(
                    #"SELECT DISTINCT entitySet FROM "_mg_scope" WHERE request LIKE 'bootstrap:%'"#
                )
                .compactMap { $0[0].string }
                for set in sets where m.layouts[set] != nil {
                    try db.run("DELETE FROM \(q(set)) WHERE \"_dr\" LIKE 'bootstrap:%'")
                }
                try db.run(#"DELETE FROM "_mg_scope" WHERE request LIKE 'bootstrap:%'"#)
                for navs in m.links.values {
                    for link in navs.values {
                        try db.run("DELETE FROM \(q(link.table)) WHERE \"_dr\" LIKE 'bootstrap:%'")
                    }
                }
            }
        }
    }

    /// Whether some defining request ever stored rows (or an empty result) for `set`.
    public func hasScope(_ set: String) -> Bool {
        ((try? pool.read { db in
            try db.scalar(#"SELECT 1 FROM "_mg_scope" WHERE entitySet = ? LIMIT 1"#, [.text(set)])
        }) ?? nil) != nil
    }

    static func lookup(_ properties: [(String, RawJSON)], _ path: [String]) -> RawJSON {
        var members = properties
        for (i, name) in path.enumerated() {
            guard let v = members.first(where: { $0.0 == name })?.1 else { return .null }
            if i == path.count - 1 { return v }
            guard let m = v.members else { return .null }
            members = m
        }
        return .null
    }

    /// The typed column value for a wire value.
    public static func columnValue(_ value: RawJSON, _ type: EdmPrimitiveType, _ version: ODataVersion)
        -> SQLValue
    {
        switch value {
        case .null, .array, .object: return .null
        case .bool(let b): return .integer(b ? 1 : 0)
        case .number(let text):
            switch type {
            case .boolean, .byte, .sbyte, .int16, .int32, .int64:
                return Int64(text).map(SQLValue.integer) ?? Double(text).map(SQLValue.real) ?? .text(text)
            default: return Double(text).map(SQLValue.real) ?? .text(text)
            }
        case .string(let s):
            switch type {
            case .byte, .sbyte, .int16, .int32, .int64:
                return Int64(s).map(SQLValue.integer) ?? .text(s)
            case .single, .double, .decimal:
                return Double(s).map(SQLValue.real) ?? .text(s)
            case .boolean: return .integer(s == "true" ? 1 : 0)
            case .guid: return .text(s.lowercased())
            case .dateTimeOffset:
                if let ms = parseV2Date(s) { return .text(isoFromMillis(ms.millis, utc: true)) }
                return .text(SQLDefaults.normalizeDateTimeOffset(s) ?? s)
            case .dateTime:
                if let ms = parseV2Date(s) { return .text(isoFromMillis(ms.millis, utc: false)) }
                return .text(SQLDefaults.normalizeDateTime(s))
            case .binary, .stream:
                var b64 = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                while b64.count % 4 != 0 { b64 += "=" }
                return Data(base64Encoded: b64).map { .blob([UInt8]($0)) } ?? .text(s)
            default: return .text(s)
            }
        }
    }

    /// `/Date(1754611200000)/` or `/Date(1754611200000+0060)/` → milliseconds (UTC) and offset.
    static func parseV2Date(_ s: String) -> (millis: Int64, offsetMinutes: Int64)? {
        guard s.hasPrefix("/Date("), s.hasSuffix(")/") else { return nil }
        let inner = s.dropFirst(6).dropLast(2)
        var digits = inner
        var offset: Int64 = 0
        if let i = inner.dropFirst().firstIndex(where: { $0 == "+" || $0 == "-" }) {
            digits = inner[..<i]
            offset = Int64(inner[inner.index(after: i)...]) ?? 0
            if inner[i] == "-" { offset = -offset }
        }
        guard let ms = Int64(digits) else { return nil }
        return (ms, offset)
    }

    static func isoFromMillis(_ ms: Int64, utc: Bool) -> String {
        let seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        let fraction = ms - seconds * 1000
        let (date, rest) = CivilDate.split(secondsSince1970: seconds)
        var text = date.iso + "T" + CivilDate.clock(rest)
        if fraction != 0 { text += "." + CivilDate.pad(fraction, 3) }
        return utc ? text + "Z" : text
    }
}

/// A mirror operation that cannot proceed.
public struct MirrorError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public var description: String
    init(_ d: String) { description = d }
}

/// A double-quoted SQL identifier.
func q(_ identifier: String) -> String { ODataSQLTranslator.quote(identifier) }

/// Now as RFC 3339 with milliseconds, UTC.
func iso8601Now() -> String { Timestamps.rfc3339(secondsSince1970: Date().timeIntervalSince1970) }
