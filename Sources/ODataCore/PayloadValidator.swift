import JSONCore

/// Checks an entity payload (the JSON members a client writes) against the service's model, the way the
/// upstream would check it before applying it: every write path of a gateway that applies writes itself
/// (single creates, updates and replaces, nested entities of a deep insert, `$batch` parts) calls the one
/// validator, so that what the upstream would refuse with `400` is refused at once, never queued.
///
/// What is checked, per member: the property exists on the type (or the type is open); the value has the
/// JSON shape and lexical form of the property's type — booleans, integers in range of their EDM type
/// (`2^40` is not an `Edm.Int32`), finite floating-point numbers (`1e309` is not an `Edm.Double`),
/// decimals within the declared precision and scale, strings within `MaxLength`, GUIDs, dates, times,
/// durations, binaries, enumeration members, complex values (recursively) and collections (each element);
/// `null` only where the property is nullable or the service ignores the value (below). On a create,
/// every non-nullable single-valued property without a default is present, except keys (the caller mints
/// them) and properties the service fills itself (V4 `Core.Computed`, V2 `sap:creatable="false"`,
/// concurrency tokens). Instance annotations (`@odata.type`, `X@odata.bind`, V2 `__metadata`) are left to
/// the caller, navigation properties too.
///
/// The rules follow OData 4.01 Protocol §11.4.2 and §11.4.3: on a create, "properties with a defined
/// default value, nullable properties, and collection-valued properties omitted from the request are set
/// to the default value, null, or an empty collection" — so an omitted collection (SAP A2X's
/// `SAP__Messages`, `Collection(…) Nullable="false"`) is never required; on an update, the values of
/// non-updatable properties are ignored by the service. The service ignores values of `Core.Computed`
/// properties always, of `Core.Immutable` properties and V2 `sap:updatable="false"` ones on updates, and
/// of V2 `sap:creatable="false"` ones on creates: a `null` there is not refused (another value still has
/// to be of the property's type, which a service's deserializer checks before it ignores it).
///
/// Leniency follows the wire formats: V2 services take numbers of every type as JSON strings; V4 takes
/// strings for `Edm.Int64` and `Edm.Decimal` (`IEEE754Compatible`) and `INF`/`-INF`/`NaN` for floating
/// types.
///
/// Promises: pure (no I/O); a refused payload throws one ``ODataPayloadViolation`` whose message names the
/// property; never refuses what ``ODataStorage`` stores exactly unless a facet (range, precision, scale,
/// `MaxLength`, nullability) or the type's member list refuses it.
public struct ODataPayloadValidator: Sendable {
    /// What the payload is for: which required-property and key rules apply.
    public enum Operation: Sendable, Hashable {
        /// A new entity (POST, deep insert): non-nullable properties are required.
        case create
        /// A replacement (PUT): types checked, nothing required.
        case replace
        /// A partial update (PATCH, MERGE): types checked, nothing required.
        case update
    }

    /// The service's model.
    public let model: EdmModel

    /// The payload validator of `model`.
    public init(model: EdmModel) { self.model = model }

    /// Checks the structural `members` of an entity of `type` (navigation properties and annotations
    /// already taken out by the caller). `exempt` names properties the caller supplies itself (keys it
    /// mints, foreign keys it sets from a parent) and which are therefore not required on a create.
    public func validate(
        _ members: [(String, RawJSON)], ofType type: String, for operation: Operation,
        exempt: Set<String> = []
    ) throws(ODataPayloadViolation) {
        try validateStructured(members, type: type, operation: operation, exempt: exempt, path: "")
    }

    /// Checks one value against a property declaration (`path` names it in messages).
    public func validate(_ value: RawJSON, for property: EdmProperty, path: String)
        throws(ODataPayloadViolation)
    {
        try validateValue(value, property: property, type: property.type, path: path, operation: .update)
    }

    /// The type a payload declares with `@odata.type` (`#NS.Derived`, V4) or `__metadata.type` (V2) when
    /// it is `base` or derived from it; `base` when it declares none. Throws when the named type is unknown
    /// or unrelated.
    public func declaredType(of members: [(String, RawJSON)], base: String) throws(ODataPayloadViolation)
        -> String
    {
        var named: String?
        for (name, value) in members {
            if name == "@odata.type" || name == "odata.type" { named = value.string }
            if name == "__metadata", let t = value["type"]?.string { named = t }
        }
        guard var text = named else { return base }
        if text.hasPrefix("#") { text.removeFirst() }
        guard let found = model.structuredType(text), model.isType(found.qualifiedName, derivedFrom: base)
        else {
            throw ODataPayloadViolation(
                "the type '\(text)' given in the payload is not '\(base)' or a type derived from it",
                target: nil)
        }
        return found.qualifiedName
    }

    // MARK: structured values

    private func isOpen(_ type: String) -> Bool { model.typeHierarchy(of: type).contains(where: \.isOpen) }

    private func validateStructured(
        _ members: [(String, RawJSON)], type: String, operation: Operation, exempt: Set<String>, path: String
    ) throws(ODataPayloadViolation) {
        var seen: Set<String> = []
        for (name, value) in members {
            if name == "__metadata" || name.contains("@") { continue }
            let target = path.isEmpty ? name : path + "/" + name
            guard seen.insert(name).inserted else {
                throw ODataPayloadViolation(
                    "the property '\(target)' is given more than once", target: target)
            }
            if let property = model.property(named: name, in: type) {
                if case .null = value, Self.ignoresValue(of: property, for: operation) { continue }
                try validateValue(
                    value, property: property, type: property.type, path: target, operation: operation)
            } else if model.navigationProperty(named: name, in: type) != nil {
                continue
            } else if !isOpen(type) {
                throw ODataPayloadViolation(
                    "the property '\(target)' does not exist on type '\(type)'", target: target)
            }
        }
        guard operation == .create else { return }
        let keys = Set(model.key(of: type))
        for property in model.properties(of: type)
        where !property.nullable && property.defaultValue == nil && !property.type.isCollection
            && !seen.contains(property.name) && !keys.contains(property.name)
            && !exempt.contains(property.name)
            && !Self.serverFilled(property)
        {
            let target = path.isEmpty ? property.name : path + "/" + property.name
            throw ODataPayloadViolation(
                "the non-nullable property '\(target)' of '\(type)' is missing", target: target)
        }
    }

    /// Properties a service fills itself on a create (not required from the client).
    static func serverFilled(_ property: EdmProperty) -> Bool {
        property.annotations["sap:creatable"] == "false" || property.isConcurrencyToken || property.isComputed
    }

    /// Whether the service ignores a value of `property` in a payload for `operation` (OData 4.01
    /// Protocol §11.4.2/§11.4.3, Core vocabulary; SAP's V2 `sap:creatable`/`sap:updatable`).
    static func ignoresValue(of property: EdmProperty, for operation: Operation) -> Bool {
        if property.isComputed { return true }
        switch operation {
        case .create: return property.annotations["sap:creatable"] == "false"
        case .replace, .update:
            return property.isImmutable || property.annotations["sap:updatable"] == "false"
        }
    }

    // MARK: values

    private func validateValue(
        _ value: RawJSON, property: EdmProperty, type: EdmTypeRef, path: String, operation: Operation
    ) throws(ODataPayloadViolation) {
        if case .null = value {
            guard property.nullable else {
                throw ODataPayloadViolation("the property '\(path)' cannot be null", target: path)
            }
            return
        }
        if type.isCollection {
            // V2 wraps collections as {"results": [...]}.
            let items = value.elements ?? value["results"]?.elements
            guard let items else {
                throw ODataPayloadViolation(
                    "the property '\(path)' must be an array (\(type))", target: path)
            }
            let element = EdmTypeRef(name: type.name)
            for (i, item) in items.enumerated() {
                if case .null = item {
                    guard property.nullable else {
                        throw ODataPayloadViolation(
                            "the collection '\(path)' cannot contain null", target: "\(path)/\(i)")
                    }
                    continue
                }
                try validateValue(
                    item, property: property, type: element, path: "\(path)/\(i)", operation: operation)
            }
            return
        }
        if let complex = model.structuredType(type.name), !complex.isEntity {
            guard var members = value.members else {
                throw ODataPayloadViolation(
                    "the property '\(path)' must be an object (\(type))", target: path)
            }
            let declared = try declaredType(of: members, base: complex.qualifiedName)
            members.removeAll { $0.0 == "__metadata" }
            // A replaced or created complex value is whole; an update of one replaces it too (PATCH of a
            // complex property is a merge for some services, a replacement for others: not required).
            try validateStructured(
                members, type: declared, operation: operation == .create ? .create : .update, exempt: [],
                path: path)
            return
        }
        if let enumType = model.enumType(type) {
            let text: String?
            switch value {
            case .string(let s): text = s
            case .number(let n): text = n
            default: text = nil
            }
            guard let text, enumType.value(ofLiteral: text) != nil else {
                throw ODataPayloadViolation(
                    "the value of '\(path)' is not a member of '\(enumType.qualifiedName)'", target: path)
            }
            return
        }
        guard let primitive = model.primitiveType(of: type) ?? type.primitive else {
            // An entity type in a structural property, or a type the model does not know.
            throw ODataPayloadViolation(
                "the property '\(path)' has a type that cannot be written (\(type))", target: path)
        }
        let facets = facets(of: property, type: type)
        if let problem = Self.problem(with: value, as: primitive, facets: facets, version: model.version) {
            throw ODataPayloadViolation("the value of '\(path)' \(problem)", target: path)
        }
    }

    /// The facets that apply: the property's, else those of its type definition.
    private func facets(of property: EdmProperty, type: EdmTypeRef) -> Facets {
        var f = Facets(maxLength: property.maxLength, precision: property.precision, scale: property.scale)
        if property.isScaleVariable { f.scale = nil }
        if let definition = model.typeDefinitions[model.resolveQualifiedName(type.name)] {
            f.maxLength = f.maxLength ?? definition.maxLength
            f.precision = f.precision ?? definition.precision
            if !definition.isScaleVariable { f.scale = f.scale ?? definition.scale }
        }
        return f
    }

    /// The facets a primitive value is checked against.
    public struct Facets: Sendable, Hashable {
        /// `MaxLength` of strings and binaries.
        public var maxLength: Int?
        /// `Precision` of decimals (significant digits).
        public var precision: Int?
        /// `Scale` of decimals (digits after the point).
        public var scale: Int?

        /// Facets, all absent by default.
        public init(maxLength: Int? = nil, precision: Int? = nil, scale: Int? = nil) {
            self.maxLength = maxLength
            self.precision = precision
            self.scale = scale
        }
    }

    /// Why `value` is not a valid JSON value of `type` under `facets` in `version` (a phrase following
    /// "the value of 'P'"), nil when it is.
    public static func problem(
        with value: RawJSON, as type: EdmPrimitiveType, facets: Facets = Facets(), version: ODataVersion
    ) -> String? {
        let v2 = version == .v2
        switch type {
        case .boolean:
            switch value {
            case .bool: return nil
            case .string(let s) where v2 && (s == "true" || s == "false"): return nil
            default: return "is not an Edm.Boolean (true or false)"
            }
        case .byte, .sbyte, .int16, .int32, .int64:
            let text: String
            switch value {
            case .number(let n): text = n
            case .string(let s) where v2 || type == .int64: text = s
            default: return "is not an \(type.rawValue) (a JSON number)"
            }
            guard let v = integer(text) else { return "is not an integer (\(type.rawValue))" }
            let range: ClosedRange<Int64>
            switch type {
            case .byte: range = 0...255
            case .sbyte: range = -128...127
            case .int16: range = Int64(Int16.min)...Int64(Int16.max)
            case .int32: range = Int64(Int32.min)...Int64(Int32.max)
            default: range = Int64.min...Int64.max
            }
            return range.contains(v) ? nil : "is out of range for \(type.rawValue)"
        case .single, .double:
            let text: String
            switch value {
            case .number(let n): text = n
            case .string(let s): text = s
            default: return "is not an \(type.rawValue) (a JSON number)"
            }
            if case .string = value {
                if ["INF", "-INF", "NaN"].contains(text) { return nil }
                guard v2 else { return "is not an \(type.rawValue) (a JSON number, INF, -INF or NaN)" }
            }
            guard DecimalParts(text) != nil, let d = Double(text) else {
                return "is not a number (\(type.rawValue))"
            }
            let limit =
                type == .single ? Double(Float.greatestFiniteMagnitude) : Double.greatestFiniteMagnitude
            return d.isFinite && abs(d) <= limit ? nil : "is out of range for \(type.rawValue)"
        case .decimal:
            let text: String
            switch value {
            case .number(let n): text = n
            case .string(let s): text = s
            default: return "is not an Edm.Decimal (a JSON number)"
            }
            guard let parts = DecimalParts(text) else { return "is not a decimal number" }
            let fractionDigits = max(0, parts.digits.count - parts.exponent)
            let integerDigits = max(0, parts.exponent)
            if let scale = facets.scale, fractionDigits > scale {
                return "has more than \(scale) digits after the point (Scale=\(scale))"
            }
            if let precision = facets.precision {
                // Digits before the point: at most Precision − Scale; all digits: at most Precision.
                if integerDigits > precision - (facets.scale ?? 0)
                    || integerDigits + fractionDigits > precision
                {
                    return "has more digits than Precision=\(precision) allows"
                }
            } else if integerDigits > 29 {
                // Without a declared precision, what a service's decimal type can hold (29 digits).
                return "is out of range for Edm.Decimal"
            }
            return nil
        case .string:
            guard case .string(let s) = value else { return "is not an Edm.String (a JSON string)" }
            if let max = facets.maxLength, s.utf16.count > max {
                return "is longer than MaxLength=\(max)"
            }
            return nil
        case .guid:
            guard case .string(let s) = value else { return "is not an Edm.Guid (a JSON string)" }
            let scalars = Array(s.unicodeScalars)
            guard let (_, end) = LiteralScanner.scanGUID(scalars, at: 0), end == scalars.count else {
                return "is not an Edm.Guid"
            }
            return nil
        case .binary:
            guard case .string(let s) = value, let bytes = LiteralScanner.base64Bytes(s) else {
                return "is not an Edm.Binary (base64 text)"
            }
            if let max = facets.maxLength, bytes.count > max { return "is longer than MaxLength=\(max)" }
            return nil
        case .date, .dateTime, .dateTimeOffset, .timeOfDay, .duration, .time:
            guard case .string = value else { return "is not an \(type.rawValue) (a JSON string)" }
            if case .null = ODataStorage.encode(value, as: type) { return "is not a valid \(type.rawValue)" }
            return nil
        case .stream, .untyped, .primitiveType:
            return nil
        default:
            // Geography and geometry: GeoJSON objects.
            guard case .object = value else { return "is not a GeoJSON object (\(type.rawValue))" }
            return nil
        }
    }

    /// An integral value written as `12`, `-3`, `12.0` or `1.2e1`; nil when not integral or beyond Int64.
    static func integer(_ text: String) -> Int64? {
        if let v = Int64(text) { return v }
        guard let parts = DecimalParts(text) else { return nil }
        if parts.digits.isEmpty { return 0 }
        guard parts.exponent >= parts.digits.count, parts.exponent <= 19 else { return nil }
        let digits = parts.digits + String(repeating: "0", count: parts.exponent - parts.digits.count)
        return Int64((parts.negative ? "-" : "") + digits)
    }
}

/// A payload the model refuses: the message for the client's `400` and the property concerned (the
/// OData error's `target`), nil for the payload as a whole.
public struct ODataPayloadViolation: Error, Sendable, Hashable, CustomStringConvertible {
    /// A sentence naming the property and what is wrong with its value.
    public var message: String
    /// The property path concerned (`UnitPrice`, `Address/City`), nil for the whole payload.
    public var target: String?

    /// A violation with its message and target.
    public init(_ message: String, target: String?) {
        self.message = message
        self.target = target
    }

    public var description: String { message }
}
