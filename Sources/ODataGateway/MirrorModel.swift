import Foundation
import JSONCore
import ODataCore
import Storage

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

extension MirrorModel {
    /// Parses `bytes` (CSDL or EDMX) and derives the table layouts, per-type information and link
    /// navigations.
    public init(metadata bytes: [UInt8]) throws {
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
        self.metadata = bytes
        self.model = model
        self.layouts = layouts
        self.mapping = ModelSQLMapping(model: model)
        self.types = types
        self.links = MirrorLinkNavigation.all(in: model)
    }

    /// Stores `metadata` (when it differs from the stored one: every entity table is recreated) and makes
    /// it current. Throws when it does not parse.
}

/// How wire values become stored column values.
extension MirrorColumn {
    /// The column type of an EDM primitive type.
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
                if let ms = ODataStorage.v2Date(s) { return .text(isoFromMillis(ms.millis, utc: true)) }
                return .text(SQLDefaults.normalizeDateTimeOffset(s) ?? s)
            case .dateTime:
                if let ms = ODataStorage.v2Date(s) { return .text(isoFromMillis(ms.millis, utc: false)) }
                return .text(SQLDefaults.normalizeDateTime(s))
            case .binary, .stream:
                var b64 = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                while b64.count % 4 != 0 { b64 += "=" }
                return Data(base64Encoded: b64).map { .blob([UInt8]($0)) } ?? .text(s)
            default: return .text(s)
            }
        }
    }

    /// `YYYY-MM-DDThh:mm:ss[.fff][Z]` for milliseconds since 1970 (the instant of a V2 `/Date(ms)/`, read
    /// by ODataCore's ``ODataStorage/v2Date(_:)``).
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

/// The one conversion between the translator's bindings (ODataCore knows no storage) and storage values.
extension SQLValue {
    /// The storage value of a translator binding.
    init(_ binding: SQLBinding) {
        switch binding {
        case .null: self = .null
        case .integer(let i): self = .integer(i)
        case .real(let d): self = .real(d)
        case .text(let t): self = .text(t)
        case .blob(let b): self = .blob(b)
        }
    }
}

extension SQLBinding {
    /// The translator binding of a storage value.
    init(_ value: SQLValue) {
        switch value {
        case .null: self = .null
        case .integer(let i): self = .integer(i)
        case .real(let d): self = .real(d)
        case .text(let t): self = .text(t)
        case .blob(let b): self = .blob(b)
        }
    }
}
