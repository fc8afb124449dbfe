import Foundation
import JSONCore
import ODataCore
import Storage

/// One stored column of a mirrored entity set: a primitive or enumeration property of the set's type or
/// of a type deriving from it (complex properties flattened with `_`, as ``ModelSQLMapping`` expects),
/// stored in ODataCore's ``SQLStorageProfile/exact`` encoding (``ODataStorage``).
public struct MirrorColumn: Sendable, Hashable {
    /// Column name (`Address_City`).
    public var name: String
    /// Property path in the entity (`["Address", "City"]`).
    public var path: [String]
    /// The primitive type (an enumeration's underlying values are stored as integers).
    public var type: EdmPrimitiveType
    /// The enumeration type, when the property is one.
    public var enumType: EdmEnumType?

    /// The column value of a wire value (V2 and V4 forms alike).
    func encode(_ value: RawJSON) -> SQLValue {
        if let enumType { return SQLValue(ODataStorage.encode(value, as: enumType)) }
        return SQLValue(ODataStorage.encode(value, as: type))
    }

    /// The SQL column type.
    var sqlType: String { enumType != nil ? "INTEGER" : ODataStorage.columnType(type) ?? "TEXT" }
}

/// The table layout of one entity set or singleton.
public struct MirrorSetLayout: Sendable {
    /// Entity set (and table) name.
    public var set: EdmEntitySet
    /// Qualified entity type.
    public var entityType: String
    /// Typed columns, one per primitive or enumeration property of the type and the types deriving from it.
    public var columns: [MirrorColumn]
    /// Key property names, in key order.
    public var key: [String]
    /// For the entities a containment navigation holds (table `Set/Nav`): the container.
    public var container: MirrorContainment?
}

/// Where contained entities live: the table `ParentSet/Nav` holds the entities the containment
/// navigation `Nav` of `ParentSet`'s entities holds, each with its parent's key in `_p_<Key>` columns
/// (the entity's own key is unique only within its parent).
public struct MirrorContainment: Sendable {
    /// The parent's entity set (or singleton).
    public var parentSet: String
    /// The containment navigation property.
    public var navigation: String
    /// Whether the navigation is collection-valued.
    public var isCollection: Bool
    /// The parent's key columns (`_p_ID`), their paths naming the parent's key properties.
    public var parentKey: [MirrorColumn]
}

/// A parsed, stored `$metadata` with the derived table layouts.
public struct MirrorModel: Sendable {
    /// The storage layout version this code writes (kept in `_mg_meta` as `layout`): 1 was the first
    /// release's (decimals as REAL, durations and enumerations as sent, no type column), 2 is ODataCore's
    /// ``SQLStorageProfile/exact`` with a `_type` column and columns for derived types' properties.
    public static let layoutVersion = "2"

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

    /// The bound value of a key or literal compared with a stored value of `type` (GUIDs lowercased, as
    /// they are stored).
    func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding {
        if case .guid(let g) = literal { return .text(g.lowercased()) }
        return mapping.binding(for: literal, type: type)
    }

    /// `"A" = ? AND "B" = ?` selecting the row of `layout`'s table with `key`, and the key values bound as
    /// the mirror stores them (typed by the entity type's properties). Names come from the parsed key,
    /// which holds only the model's key properties; they are quoted.
    func keyPredicate(_ key: ODataKey, in layout: MirrorSetLayout) -> (sql: String, values: [SQLValue]) {
        var parts: [String] = []
        var values: [SQLValue] = []
        for kv in key.values {
            // A contained entity's key includes its parent's (`_p_ID`, see ``MirrorContainment``).
            let t =
                model.property(named: kv.name, in: layout.entityType)?.type
                ?? layout.container?.parentKey.first { $0.name == kv.name }.map {
                    EdmTypeRef(name: $0.type.rawValue)
                }
            parts.append("\(q(kv.name)) = ?")
            values.append(SQLValue(binding(for: kv.value, type: t)))
        }
        return (parts.joined(separator: " AND "), values)
    }

    /// The qualified name of the type a wire entity names (`@odata.type` `#NS.Type` or an alias, V2
    /// `__metadata.type`), when it is `base` or derives from it; nil otherwise.
    func wireType(_ name: String?, base: String) -> String? {
        guard var name else { return nil }
        if name.hasPrefix("#") { name.removeFirst() }
        guard let t = model.structuredType(name), t.isEntity, model.isType(t.qualifiedName, derivedFrom: base)
        else { return nil }
        return t.qualifiedName
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
    /// The entity's qualified type when the upstream named one (`@odata.type`, `__metadata.type`).
    public var type: String?
    /// A contained entity's parent (its properties: the key is read from them).
    public var parent: [(String, RawJSON)]?

    /// An entity with its properties, ETag and type.
    public init(
        properties: [(String, RawJSON)], etag: String? = nil, type: String? = nil,
        parent: [(String, RawJSON)]? = nil
    ) {
        self.properties = properties
        self.etag = etag
        self.type = type
        self.parent = parent
    }
}

extension MirrorModel {
    /// The stored columns of entities of `types` (a type and those deriving from it): every primitive or
    /// enumeration property that is not a collection, through complex properties (at most five steps),
    /// joined with `_`; a name two types share is one column (the first type's).
    static func storedColumns(_ types: [String], _ model: EdmModel) -> [MirrorColumn] {
        var columns: [MirrorColumn] = []
        var seen: Set<String> = []
        func add(_ type: String, _ prefix: [String]) {
            guard prefix.count < 5 else { return }
            for p in model.properties(of: type) where !p.type.isCollection {
                let path = prefix + [p.name]
                let name = path.joined(separator: "_")
                if let e = model.enumType(p.type) {
                    if seen.insert(name).inserted {
                        let underlying = EdmPrimitiveType(rawValue: e.underlyingType) ?? .int32
                        columns.append(MirrorColumn(name: name, path: path, type: underlying, enumType: e))
                    }
                } else if let prim = model.primitiveType(of: p.type), ODataStorage.columnType(prim) != nil {
                    if seen.insert(name).inserted {
                        columns.append(MirrorColumn(name: name, path: path, type: prim))
                    }
                } else if let complex = model.structuredType(p.type.name), !complex.isEntity {
                    add(complex.qualifiedName, path)
                }
            }
        }
        for type in types { add(type, []) }
        return columns
    }

    /// Parses `bytes` (CSDL or EDMX) and derives the table layouts, per-type information and link
    /// navigations.
    public init(metadata bytes: [UInt8]) throws {
        let model = try CSDLParser.parse(bytes)
        var layouts: [String: MirrorSetLayout] = [:]
        for set in model.entitySets {
            let columns = Self.storedColumns(model.typeAndDerived(set.entityType), model)
            layouts[set.name] = MirrorSetLayout(
                set: set, entityType: model.structuredType(set.entityType)?.qualifiedName ?? set.entityType,
                columns: columns, key: model.key(of: set.entityType))
        }
        // Contained entities (one level): a table per containment navigation of a set's type.
        for set in model.entitySets {
            guard let parent = layouts[set.name] else { continue }
            let parentKey = parent.key.compactMap { k in parent.columns.first { $0.name == k } }
            guard parentKey.count == parent.key.count else { continue }
            for nav in model.containmentNavigations(of: set.entityType) {
                guard let target = model.structuredType(nav.target), target.isEntity else { continue }
                let columns = Self.storedColumns(model.typeAndDerived(target.qualifiedName), model)
                let name = set.name + "/" + nav.name
                layouts[name] = MirrorSetLayout(
                    set: EdmEntitySet(name: name, entityType: target.qualifiedName),
                    entityType: target.qualifiedName,
                    columns: columns, key: model.key(of: target.qualifiedName),
                    container: MirrorContainment(
                        parentSet: set.name, navigation: nav.name, isCollection: nav.isCollection,
                        parentKey: parentKey.map {
                            MirrorColumn(
                                name: "_p_" + $0.name, path: $0.path, type: $0.type, enumType: $0.enumType)
                        }))
            }
        }
        var types: [String: MirrorTypeInfo] = [:]
        for type in model.structuredTypes.values where type.isEntity {
            let t = type.qualifiedName
            var primitives: [String: EdmPrimitiveType] = [:]
            for p in model.properties(of: t) {
                if let prim = model.primitiveType(of: p.type) { primitives[p.name] = prim }
            }
            types[t] = MirrorTypeInfo(
                qualifiedName: t, primitives: primitives, keyProperties: model.keyProperties(of: t),
                navigationNames: model.navigationProperties(of: t).map(\.name))
        }
        self.metadata = bytes
        self.model = model
        self.layouts = layouts
        self.mapping = ModelSQLMapping(
            model: model, profile: .exact, typeColumn: "_type", documentColumn: "_json",
            derivedTypeColumns: true)
        self.types = types
        self.links = MirrorLinkNavigation.all(in: model)
    }

}

/// How wire values become stored column values.
extension MirrorColumn {
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

    /// The column value of a wire value of primitive `type` (key columns of link tables).
    static func encode(_ value: RawJSON, _ type: EdmPrimitiveType) -> SQLValue {
        SQLValue(ODataStorage.encode(value, as: type))
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
