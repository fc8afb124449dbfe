/// The OData protocol generation a service speaks.
///
/// Promises: `.v2` covers OData 1.0 and 2.0 (EDMX 1.0, `DataServiceVersion`); `.v4` covers 4.0 and 4.01.
public enum ODataVersion: String, Sendable, Hashable, CaseIterable {
    case v2
    case v4
}

/// A reference to a type as written in CSDL, with aliases resolved to namespaces.
///
/// Promises: `name` is namespace-qualified (`Edm.String`, `NorthwindModel.Customer`) once the model has been
/// resolved; `isCollection` is true for `Collection(...)` references.
public struct EdmTypeRef: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var isCollection: Bool

    public init(name: String, isCollection: Bool = false) {
        self.name = name
        self.isCollection = isCollection
    }

    /// Parses `Collection(NS.T)` or `NS.T`.
    public init(parsing text: String) {
        let trimmed = text.trimmingSpaces()
        if trimmed.hasPrefix("Collection("), trimmed.hasSuffix(")") {
            name = String(trimmed.dropFirst("Collection(".count).dropLast())
            isCollection = true
        } else {
            name = trimmed
            isCollection = false
        }
    }

    /// The primitive kind when `name` is an `Edm.*` primitive type.
    public var primitive: EdmPrimitiveType? {
        name.hasPrefix("Edm.") ? EdmPrimitiveType.byName[name] : nil
    }

    public var description: String { isCollection ? "Collection(\(name))" : name }
}

/// The EDM primitive types of V2 and V4.
///
/// Promises: raw values are the exact CSDL names; `isNumeric`, `isIntegral` classify the numeric ones.
public enum EdmPrimitiveType: String, Sendable, Hashable, CaseIterable {
    case binary = "Edm.Binary"
    case boolean = "Edm.Boolean"
    case byte = "Edm.Byte"
    case sbyte = "Edm.SByte"
    case int16 = "Edm.Int16"
    case int32 = "Edm.Int32"
    case int64 = "Edm.Int64"
    case single = "Edm.Single"
    case double = "Edm.Double"
    case decimal = "Edm.Decimal"
    case string = "Edm.String"
    case guid = "Edm.Guid"
    case date = "Edm.Date"
    case dateTime = "Edm.DateTime"
    case dateTimeOffset = "Edm.DateTimeOffset"
    case time = "Edm.Time"
    case timeOfDay = "Edm.TimeOfDay"
    case duration = "Edm.Duration"
    case stream = "Edm.Stream"
    case untyped = "Edm.Untyped"
    /// The abstract `Edm.PrimitiveType` (4.01): any primitive value.
    case primitiveType = "Edm.PrimitiveType"
    case geography = "Edm.Geography"
    case geographyPoint = "Edm.GeographyPoint"
    case geographyLineString = "Edm.GeographyLineString"
    case geographyPolygon = "Edm.GeographyPolygon"
    case geographyMultiPoint = "Edm.GeographyMultiPoint"
    case geographyMultiLineString = "Edm.GeographyMultiLineString"
    case geographyMultiPolygon = "Edm.GeographyMultiPolygon"
    case geographyCollection = "Edm.GeographyCollection"
    case geometry = "Edm.Geometry"
    case geometryPoint = "Edm.GeometryPoint"
    case geometryLineString = "Edm.GeometryLineString"
    case geometryPolygon = "Edm.GeometryPolygon"
    case geometryMultiPoint = "Edm.GeometryMultiPoint"
    case geometryMultiLineString = "Edm.GeometryMultiLineString"
    case geometryMultiPolygon = "Edm.GeometryMultiPolygon"
    case geometryCollection = "Edm.GeometryCollection"

    public var isIntegral: Bool {
        switch self {
        case .byte, .sbyte, .int16, .int32, .int64: return true
        default: return false
        }
    }

    public var isNumeric: Bool {
        isIntegral || self == .single || self == .double || self == .decimal
    }

    static let byName: [String: EdmPrimitiveType] = Dictionary(
        uniqueKeysWithValues: allCases.map { ($0.rawValue, $0) })

    /// The geography and geometry types (not comparable; not stored in columns).
    public var isSpatial: Bool { rawValue.hasPrefix("Edm.Geo") }

    /// Date, time and duration types.
    public var isTemporal: Bool {
        switch self {
        case .date, .dateTime, .dateTimeOffset, .time, .timeOfDay, .duration: return true
        default: return false
        }
    }
}

/// A structural property of an entity or complex type.
///
/// Promises: `maxLength` is nil when absent or `Max` (then `isMaxLengthMax` is true); `isConcurrencyToken` is
/// true for V2 `ConcurrencyMode="Fixed"` and for V4 properties listed in `Core.OptimisticConcurrency`;
/// `annotations` keeps other attributes (e.g. `sap:label`) verbatim, keyed by their qualified XML name.
public struct EdmProperty: Sendable, Hashable {
    public var name: String
    public var type: EdmTypeRef
    public var nullable: Bool
    public var maxLength: Int?
    public var isMaxLengthMax: Bool
    public var precision: Int?
    public var scale: Int?
    public var defaultValue: String?
    public var isConcurrencyToken: Bool
    public var annotations: [String: String]
    /// `Scale="variable"` (V4) or `Scale="floating"` (4.01): the scale is not fixed.
    public var isScaleVariable: Bool = false
    /// `SRID` of a geography or geometry property, as written.
    public var srid: String?
    /// `Unicode="false"` reads as false; nil when absent.
    public var isUnicode: Bool?
    /// The qualified `TypeDefinition` the property was declared with; `type` is then its underlying
    /// primitive type and absent facets are taken from the definition.
    public var typeDefinition: String?
    /// Annotated `Core.Computed` (V4, inline or in `<Annotations>`): the service computes the value on
    /// create and update and ignores what a client sends.
    public var isComputed: Bool = false
    /// Annotated `Core.Immutable` (V4): given on create, unchanged (and ignored) on update.
    public var isImmutable: Bool = false

    public init(
        name: String, type: EdmTypeRef, nullable: Bool = true, maxLength: Int? = nil,
        isMaxLengthMax: Bool = false, precision: Int? = nil, scale: Int? = nil, defaultValue: String? = nil,
        isConcurrencyToken: Bool = false, annotations: [String: String] = [:]
    ) {
        self.name = name
        self.type = type
        self.nullable = nullable
        self.maxLength = maxLength
        self.isMaxLengthMax = isMaxLengthMax
        self.precision = precision
        self.scale = scale
        self.defaultValue = defaultValue
        self.isConcurrencyToken = isConcurrencyToken
        self.annotations = annotations
    }
}

/// One pair of a referential constraint, oriented from the navigation's declaring type to its target.
///
/// Promises: `property` is a property of the type declaring the navigation property, `referencedProperty`
/// a property of the navigation target; joining on `source.property = target.referencedProperty` yields
/// the related entities.
public struct EdmReferentialConstraint: Sendable, Hashable {
    public var property: String
    public var referencedProperty: String

    public init(property: String, referencedProperty: String) {
        self.property = property
        self.referencedProperty = referencedProperty
    }
}

/// A navigation property (V4 directly, V2 resolved through its Association).
///
/// Promises: after model resolution `target` is the qualified target entity type and `isCollection` tells
/// to-many from to-one in both versions; `referentialConstraints` is oriented as described in
/// ``EdmReferentialConstraint`` and, when only the partner (V4) or the association's other side (V2)
/// declares the constraint, it is derived from there. V2-only fields keep the Association wiring.
/// `onDelete` is the action (`Cascade`, `SetNull`, `SetDefault`, `None`) the service takes on the related
/// entities when the entity this property is defined on is deleted: V4's `<OnDelete>` child, V2's
/// `<OnDelete>` on the Association end this property starts from.
public struct EdmNavigationProperty: Sendable, Hashable {
    public var name: String
    public var target: String
    public var isCollection: Bool
    public var nullable: Bool
    public var partner: String?
    public var containsTarget: Bool
    public var referentialConstraints: [EdmReferentialConstraint]
    public var relationship: String?
    public var fromRole: String?
    public var toRole: String?
    public var annotations: [String: String]
    public var onDelete: String?

    /// Whether deleting the entity this property is defined on deletes the related entities too.
    public var cascadesOnDelete: Bool { onDelete?.lowercased() == "cascade" }

    public init(
        name: String, target: String, isCollection: Bool, nullable: Bool = true, partner: String? = nil,
        containsTarget: Bool = false, referentialConstraints: [EdmReferentialConstraint] = [],
        relationship: String? = nil, fromRole: String? = nil, toRole: String? = nil,
        annotations: [String: String] = [:], onDelete: String? = nil
    ) {
        self.name = name
        self.target = target
        self.isCollection = isCollection
        self.nullable = nullable
        self.partner = partner
        self.containsTarget = containsTarget
        self.referentialConstraints = referentialConstraints
        self.relationship = relationship
        self.fromRole = fromRole
        self.toRole = toRole
        self.annotations = annotations
        self.onDelete = onDelete
    }
}

/// A structured type (entity or complex) as declared, without inherited members.
///
/// Promises: `key` lists the declared key property names in order (empty for complex types and for entity
/// types that inherit their key); use ``EdmModel/key(of:)`` and ``EdmModel/properties(of:)`` for the
/// inherited view.
public struct EdmStructuredType: Sendable, Hashable {
    public var namespace: String
    public var name: String
    public var isEntity: Bool
    public var baseType: String?
    public var isAbstract: Bool
    public var isOpen: Bool
    public var hasStream: Bool
    public var key: [String]
    public var properties: [EdmProperty]
    public var navigationProperties: [EdmNavigationProperty]
    public var annotations: [String: String]

    public var qualifiedName: String { namespace + "." + name }

    public init(
        namespace: String, name: String, isEntity: Bool, baseType: String? = nil, isAbstract: Bool = false,
        isOpen: Bool = false, hasStream: Bool = false, key: [String] = [], properties: [EdmProperty] = [],
        navigationProperties: [EdmNavigationProperty] = [], annotations: [String: String] = [:]
    ) {
        self.namespace = namespace
        self.name = name
        self.isEntity = isEntity
        self.baseType = baseType
        self.isAbstract = isAbstract
        self.isOpen = isOpen
        self.hasStream = hasStream
        self.key = key
        self.properties = properties
        self.navigationProperties = navigationProperties
        self.annotations = annotations
    }
}

/// A V4 enumeration type.
///
/// Promises: members keep document order; a member without `Value` gets its position (or `1 << position`
/// is NOT assumed for flags: CSDL requires explicit values for flags, and absent ones get the position).
public struct EdmEnumType: Sendable, Hashable {
    /// A named member with its numeric value.
    public struct Member: Sendable, Hashable {
        public var name: String
        public var value: Int64
    }
    public var namespace: String
    public var name: String
    public var underlyingType: String
    public var isFlags: Bool
    public var members: [Member]

    public var qualifiedName: String { namespace + "." + name }

    /// The value of a member by name.
    public func value(of member: String) -> Int64? { members.first { $0.name == member }?.value }

    /// The value of an enumeration literal's text: a member name, a number, or for flags a comma-separated
    /// list of those (combined with bitwise or); nil when a part is neither, or several parts are given
    /// for a type that is not `IsFlags`.
    public func value(ofLiteral text: String) -> Int64? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map {
            String($0).trimmingSpaces()
        }
        guard !parts.isEmpty, isFlags || parts.count == 1 else { return nil }
        var total: Int64 = 0
        for part in parts {
            guard let v = value(of: part) ?? Int64(part) else { return nil }
            total |= v
        }
        return total
    }

    /// The canonical text of a value: the member's name, or for flags the names of the members whose bits
    /// make up the value (in member order, joined with `,`); the number itself when no such spelling exists.
    public func names(for value: Int64) -> String {
        if let exact = members.first(where: { $0.value == value }) { return exact.name }
        guard isFlags, value > 0 else { return String(value) }
        var rest = value
        var names: [String] = []
        for member in members where member.value > 0 && member.value & value == member.value {
            if rest & member.value != 0 {
                names.append(member.name)
                rest &= ~member.value
            }
        }
        return rest == 0 && !names.isEmpty ? names.joined(separator: ",") : String(value)
    }
}

/// A V4 `TypeDefinition`: a named primitive type with facets.
///
/// Promises: `underlyingType` is an `Edm.*` primitive name; properties declared with the definition are
/// resolved to it (see ``EdmProperty/typeDefinition``).
public struct EdmTypeDefinition: Sendable, Hashable {
    public var namespace: String
    public var name: String
    public var underlyingType: String
    public var maxLength: Int?
    public var isMaxLengthMax: Bool
    public var precision: Int?
    public var scale: Int?
    public var isScaleVariable: Bool
    public var srid: String?
    public var isUnicode: Bool?
    public var annotations: [String: String]

    public var qualifiedName: String { namespace + "." + name }
}

/// A V2 Association end.
public struct EdmAssociationEnd: Sendable, Hashable {
    public var role: String
    public var type: String
    /// `1`, `0..1` or `*`.
    public var multiplicity: String
    /// `<OnDelete Action="…"/>` of this end: what happens to the other end's entities when one of this
    /// end's is deleted.
    public var onDelete: String? = nil
}

/// A V2 Association with its optional referential constraint.
///
/// Promises: `principalRole`/`dependentRole` and their property lists are set only when the association
/// declares a `ReferentialConstraint` (also tolerated without the wrapper element, as some SAP services do).
public struct EdmAssociation: Sendable, Hashable {
    public var namespace: String
    public var name: String
    public var ends: [EdmAssociationEnd]
    public var principalRole: String?
    public var principalProperties: [String]
    public var dependentRole: String?
    public var dependentProperties: [String]
    public var annotations: [String: String]

    public var qualifiedName: String { namespace + "." + name }

    public func end(role: String) -> EdmAssociationEnd? { ends.first { $0.role == role } }
}

/// A V2 AssociationSet: which entity set plays which role.
public struct EdmAssociationSet: Sendable, Hashable {
    public var name: String
    public var association: String
    /// (role, entity set name) pairs.
    public var ends: [EdmAssociationSetEnd]
}

/// One end of a V2 AssociationSet.
public struct EdmAssociationSetEnd: Sendable, Hashable {
    public var role: String
    public var entitySet: String
}

/// An entity set (or, with `isSingleton`, a V4 singleton) of the entity container.
///
/// Promises: `entityType` is qualified; `navigationBindings` maps a navigation path (e.g. `Orders` or
/// `NS.Derived/Orders`) to the target entity set name, from V4 `NavigationPropertyBinding` or derived from
/// V2 AssociationSets.
public struct EdmEntitySet: Sendable, Hashable {
    public var name: String
    public var entityType: String
    public var isSingleton: Bool
    public var navigationBindings: [String: String]
    public var annotations: [String: String]

    public init(
        name: String, entityType: String, isSingleton: Bool = false,
        navigationBindings: [String: String] = [:],
        annotations: [String: String] = [:]
    ) {
        self.name = name
        self.entityType = entityType
        self.isSingleton = isSingleton
        self.navigationBindings = navigationBindings
        self.annotations = annotations
    }
}

/// A parameter of a function, action or V2 function import.
public struct EdmParameter: Sendable, Hashable {
    public var name: String
    public var type: EdmTypeRef
    public var nullable: Bool
    /// V2 `Mode` (`In`, `Out`, `InOut`) when given.
    public var mode: String?
}

/// A V4 function or action declared in a schema.
///
/// Promises: `isBound` operations have the binding parameter as `parameters[0]`.
public struct EdmOperation: Sendable, Hashable {
    /// Function (side-effect free, GET) or action (POST).
    public enum Kind: String, Sendable, Hashable {
        case function
        case action
    }
    public var kind: Kind
    public var namespace: String
    public var name: String
    public var isBound: Bool
    public var isComposable: Bool
    public var entitySetPath: String?
    public var parameters: [EdmParameter]
    public var returnType: EdmTypeRef?

    public var qualifiedName: String { namespace + "." + name }
}

/// Something callable at the service root: a V2 FunctionImport, a V4 FunctionImport or ActionImport.
///
/// Promises: for V2, `parameters`, `returnType` and `httpMethod` come from the import itself; for V4 they are
/// copied from the first overload of `operation` (the qualified function or action), and `httpMethod` is
/// `GET` for functions, `POST` for actions.
public struct EdmOperationImport: Sendable, Hashable {
    /// Which CSDL element declared the import.
    public enum Kind: String, Sendable, Hashable {
        case functionImportV2
        case functionImport
        case actionImport
    }
    public var kind: Kind
    public var name: String
    public var operation: String?
    public var entitySet: String?
    public var httpMethod: String?
    public var parameters: [EdmParameter]
    public var returnType: EdmTypeRef?
    public var annotations: [String: String]
}

/// A schema's namespace and optional alias.
public struct EdmSchema: Sendable, Hashable {
    public var namespace: String
    public var alias: String?
}

/// An OData service model parsed from `$metadata`.
///
/// Promises: all type names inside are qualified with namespaces (aliases and, leniently, unqualified names
/// of sloppy services resolved); entity sets, singletons and imports keep document order and merge all
/// entity containers; lookups are by exact, case-sensitive name as OData requires.
public struct EdmModel: Sendable, Hashable {
    public var version: ODataVersion
    /// `edmx:Edmx Version` as written (`1.0`, `4.0`, `4.01`).
    public var edmxVersion: String?
    /// V2 `m:DataServiceVersion` as written.
    public var dataServiceVersion: String?
    public var schemas: [EdmSchema]
    public var containerName: String?
    public var structuredTypes: [String: EdmStructuredType]
    public var enumTypes: [String: EdmEnumType]
    public var typeDefinitions: [String: EdmTypeDefinition]
    public var associations: [String: EdmAssociation]
    public var associationSets: [EdmAssociationSet]
    /// Entity sets then singletons in document order.
    public var entitySets: [EdmEntitySet]
    public var operations: [EdmOperation]
    public var operationImports: [EdmOperationImport]

    public init(version: ODataVersion) {
        self.version = version
        schemas = []
        structuredTypes = [:]
        enumTypes = [:]
        typeDefinitions = [:]
        associations = [:]
        associationSets = []
        entitySets = []
        operations = []
        operationImports = []
    }

    /// Entity types only.
    public var entityTypes: [EdmStructuredType] {
        structuredTypes.values.filter(\.isEntity).sorted { $0.qualifiedName < $1.qualifiedName }
    }

    /// Complex types only.
    public var complexTypes: [EdmStructuredType] {
        structuredTypes.values.filter { !$0.isEntity }.sorted { $0.qualifiedName < $1.qualifiedName }
    }

    /// The entity set or singleton with that exact name.
    public func entitySet(named name: String) -> EdmEntitySet? { entitySets.first { $0.name == name } }

    /// The structured type with that qualified (or alias-qualified) name.
    public func structuredType(_ name: String) -> EdmStructuredType? {
        structuredTypes[name] ?? structuredTypes[resolveQualifiedName(name)]
    }

    /// The operation import (V2 function import, V4 function/action import) with that name.
    public func operationImport(named name: String) -> EdmOperationImport? {
        operationImports.first { $0.name == name }
    }

    /// Replaces a leading alias by its namespace.
    public func resolveQualifiedName(_ name: String) -> String {
        guard let dot = name.lastIndex(of: ".") else { return name }
        let prefix = String(name[..<dot])
        if let schema = schemas.first(where: { $0.alias == prefix }) {
            return schema.namespace + name[dot...]
        }
        return name
    }

    /// The chain from `type` up through its base types (the type first); cycles are cut.
    public func typeHierarchy(of type: String) -> [EdmStructuredType] {
        var chain: [EdmStructuredType] = []
        var seen: Set<String> = []
        var current: String? = type
        while let name = current, let found = structuredType(name), !seen.contains(found.qualifiedName) {
            seen.insert(found.qualifiedName)
            chain.append(found)
            current = found.baseType
        }
        return chain
    }

    /// Key property names, inherited from the nearest base type that declares them.
    public func key(of type: String) -> [String] {
        for t in typeHierarchy(of: type) where !t.key.isEmpty { return t.key }
        return []
    }

    /// Key properties with their declarations, in key order.
    public func keyProperties(of type: String) -> [EdmProperty] {
        key(of: type).compactMap { property(named: $0, in: type) }
    }

    /// All structural properties, base type's first.
    public func properties(of type: String) -> [EdmProperty] {
        typeHierarchy(of: type).reversed().flatMap(\.properties)
    }

    /// All navigation properties, base type's first.
    public func navigationProperties(of type: String) -> [EdmNavigationProperty] {
        typeHierarchy(of: type).reversed().flatMap(\.navigationProperties)
    }

    /// A structural property by exact name, searching base types.
    public func property(named name: String, in type: String) -> EdmProperty? {
        for t in typeHierarchy(of: type) {
            if let p = t.properties.first(where: { $0.name == name }) { return p }
        }
        return nil
    }

    /// A navigation property by exact name, searching base types.
    public func navigationProperty(named name: String, in type: String) -> EdmNavigationProperty? {
        for t in typeHierarchy(of: type) {
            if let p = t.navigationProperties.first(where: { $0.name == name }) { return p }
        }
        return nil
    }

    /// Properties used as the ETag: V2 `ConcurrencyMode="Fixed"` or V4 `Core.OptimisticConcurrency`.
    public func concurrencyProperties(of type: String) -> [EdmProperty] {
        properties(of: type).filter(\.isConcurrencyToken)
    }

    /// The types deriving from `type`, directly or not (not `type` itself), sorted by qualified name.
    public func derivedTypes(of type: String) -> [EdmStructuredType] {
        let base = structuredType(type)?.qualifiedName ?? type
        return structuredTypes.values.filter {
            $0.qualifiedName != base && isType($0.qualifiedName, derivedFrom: base)
        }
        .sorted { $0.qualifiedName < $1.qualifiedName }
    }

    /// `type` and every type deriving from it: the types an instance of `type` may have.
    public func typeAndDerived(_ type: String) -> [String] {
        let base = structuredType(type)?.qualifiedName ?? type
        return [base] + derivedTypes(of: base).map(\.qualifiedName)
    }

    /// The enumeration type a reference names, if any.
    public func enumType(_ ref: EdmTypeRef) -> EdmEnumType? {
        if enumTypes.isEmpty || ref.name.hasPrefix("Edm.") { return nil }
        return enumTypes[ref.name] ?? enumTypes[resolveQualifiedName(ref.name)]
    }

    /// The primitive kind of a reference: an `Edm.*` type, the underlying type of a type definition, or
    /// nil (structured types and enumerations).
    public func primitiveType(of ref: EdmTypeRef) -> EdmPrimitiveType? {
        if let p = ref.primitive { return p }
        if typeDefinitions.isEmpty { return nil }
        if let definition = typeDefinitions[ref.name] ?? typeDefinitions[resolveQualifiedName(ref.name)] {
            return EdmPrimitiveType(rawValue: definition.underlyingType)
        }
        return nil
    }

    /// The navigation properties of `type` that contain their targets (`ContainsTarget="true"`).
    public func containmentNavigations(of type: String) -> [EdmNavigationProperty] {
        navigationProperties(of: type).filter(\.containsTarget)
    }

    /// True when `derived` is `base` or derives from it.
    public func isType(_ derived: String, derivedFrom base: String) -> Bool {
        let resolved = structuredType(base)?.qualifiedName ?? base
        return typeHierarchy(of: derived).contains { $0.qualifiedName == resolved }
    }

    /// The entity set a navigation from `set` through `navigationPath` leads to, when bound.
    public func targetEntitySet(from set: EdmEntitySet, navigationPath: String) -> EdmEntitySet? {
        if let target = set.navigationBindings[navigationPath] {
            let last = target.split(separator: "/").last.map(String.init) ?? target
            return entitySet(named: last)
        }
        return nil
    }

    /// The entity set navigation `name` leads to from an entity of `type` in `set`, reached through
    /// `prefix` (the containment or complex path before it, e.g. `Lines/`): the binding of the plain path,
    /// else of the path cast to `type` or one of its base types (`NS.Derived/Name`), most specific first.
    public func targetEntitySet(
        from set: EdmEntitySet, navigation name: String, on type: String, prefix: String = ""
    ) -> EdmEntitySet? {
        if let found = targetEntitySet(from: set, navigationPath: prefix + name) { return found }
        for t in typeHierarchy(of: type) {
            if let found = targetEntitySet(from: set, navigationPath: t.qualifiedName + "/" + prefix + name) {
                return found
            }
            if let alias = schemas.first(where: { $0.namespace == t.namespace })?.alias,
                let found = targetEntitySet(
                    from: set, navigationPath: alias + "." + t.name + "/" + prefix + name)
            {
                return found
            }
        }
        return nil
    }
}

extension String {
    func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while let f = scalars.first, f == " " || f == "\t" || f == "\n" || f == "\r" { scalars.removeFirst() }
        while let l = scalars.last, l == " " || l == "\t" || l == "\n" || l == "\r" { scalars.removeLast() }
        return String(scalars)
    }
}
