/// One resolved segment of an OData resource path.
///
/// Promises: every name in a segment exists in the model it was resolved against; `.key` follows an
/// entity collection; `.count`, `.value` and `.ref` are always last.
public enum ODataPathSegment: Sendable, Hashable {
    case metadata
    case batch
    case entitySet(name: String, entityType: String)
    case singleton(name: String, entityType: String)
    case key(ODataKey)
    /// `entitySet` is the bound target set when the model declares one.
    case navigation(name: String, entityType: String, isCollection: Bool, entitySet: String?)
    case property(name: String, type: EdmTypeRef)
    case cast(type: String)
    case count
    case value
    case ref
    /// V2 `$links` (a navigation segment follows).
    case links
    /// A service-root operation import; V4 parameters from the parentheses (V2 ones come from the query).
    case operationImport(name: String, parameters: [ODataKeyValue])
    /// A bound function or action (qualified name) applied to what the previous segments address; its
    /// non-binding parameters from the parentheses. Always last.
    case boundOperation(name: String, parameters: [ODataKeyValue])
}

/// A request path relative to the service root, resolved against an ``EdmModel``.
///
/// Promises: `parse` decodes each segment exactly once (so `%2F` inside a key stays in the key and `+`
/// stays a plus), splits only on `/` outside quotes and parentheses, and either resolves every segment or
/// throws an ``ODataError`` of kind `.path` whose `segment` is the offending segment and whose message says
/// why. `target` describes what the path addresses.
public struct ODataResourcePath: Sendable, Hashable {
    /// What a resource path addresses.
    public enum Target: Sendable, Hashable {
        case serviceDocument
        case metadata
        case batch
        case entityCollection(entityType: String, entitySet: String?)
        case entity(entityType: String, entitySet: String?)
        /// A structural property (primitive, complex, or a collection of those).
        case property(EdmTypeRef)
        /// The raw value of a primitive property, or of a media entity when `EdmTypeRef` is `Edm.Stream`.
        case rawValue(EdmTypeRef)
        case count
        /// `$ref` / V2 `$links`: `isCollection` tells whether it addresses one link or many.
        case reference(entityType: String, isCollection: Bool)
        case operationImport(EdmOperationImport)
        /// A bound function or action (not answered locally).
        case boundOperation(EdmOperation)
    }

    public var segments: [ODataPathSegment]
    public var target: Target
    /// What follows `$metadata#` in a V4 context URL for the response (without a `$select` list):
    /// `People`, `People/Shop.Employee`, `People/$entity`, `Company`, `Orders(2)/Lines`,
    /// `Orders(2)/Lines/$entity`, `People(1)/Address`, `Collection($ref)`; `""` for the service document;
    /// nil where no context URL applies (`$count`, `$value`, `$metadata`, `$batch`, operations) or the
    /// canonical URL is not known from the path (a property of an entity reached through a single-valued
    /// navigation gets its type name instead).
    public var contextFragment: String?

    public init(segments: [ODataPathSegment], target: Target) {
        self.segments = segments
        self.target = target
    }

    /// True when the result is reached through a containment navigation (`Orders(2)/Lines`): it has no
    /// entity set of its own (`entitySet` is nil) and its URL goes through the containing entity.
    public func isContained(in model: EdmModel) -> Bool {
        var type: String?
        var contained = false
        for segment in segments {
            switch segment {
            case .entitySet(_, let t), .singleton(_, let t):
                type = t
                contained = false
            case .navigation(let name, let target, _, _):
                contained =
                    type.flatMap { model.navigationProperty(named: name, in: $0) }?.containsTarget ?? false
                type = target
            case .cast(let t):
                type = t
            default:
                continue
            }
        }
        return contained
    }

    /// The entity set the path's result lives in, when known (last set or bound navigation target).
    public var entitySet: String? {
        switch target {
        case .entityCollection(_, let set), .entity(_, let set): return set
        default: return nil
        }
    }

    /// Parses `rawPath` (percent-encoded, relative to the service root, leading `/` optional).
    public static func parse(_ rawPath: String, model: EdmModel) throws(ODataError) -> ODataResourcePath {
        var path = Substring(rawPath)
        while path.hasPrefix("/") { path = path.dropFirst() }
        if path.hasSuffix("/") { path = path.dropLast() }
        if path.isEmpty { return ODataResourcePath(segments: [], target: .serviceDocument) }
        let rawSegments = try splitPath(String(path))
        var segments: [String] = []
        for raw in rawSegments {
            let decoded = try PercentDecoding.decode(raw, plusAsSpace: false)
            guard !decoded.isEmpty else { throw ODataError(.path, "empty path segment in '\(rawPath)'") }
            segments.append(decoded)
        }
        var resolver = Resolver(model: model, texts: segments)
        return try resolver.resolve()
    }

    /// Splits on `/` that is outside quotes and parentheses (recognizing `%27`, `%28`, `%29` too).
    static func splitPath(_ path: String) throws(ODataError) -> [String] {
        let bytes = Array(path.utf8)
        var parts: [String] = []
        var current: [UInt8] = []
        var depth = 0
        var inQuote = false
        var i = 0
        while i < bytes.count {
            var c = bytes[i]
            var width = 1
            if c == 37, i + 2 < bytes.count, let h = LiteralScanner.hexValue(bytes[i + 1]),
                let l = LiteralScanner.hexValue(bytes[i + 2])
            {
                let decoded = h << 4 | l
                if decoded == 39 || decoded == 40 || decoded == 41 {
                    c = decoded
                    width = 3
                }
            }
            if c == 39 {
                inQuote.toggle()
            } else if !inQuote && c == 40 {
                depth += 1
            } else if !inQuote && c == 41 {
                depth = max(0, depth - 1)
            }
            if bytes[i] == 47 && depth == 0 && !inQuote {
                parts.append(String(decoding: current, as: UTF8.self))
                current = []
            } else {
                current.append(contentsOf: bytes[i..<i + width])
            }
            i += width
        }
        parts.append(String(decoding: current, as: UTF8.self))
        return parts
    }
}

private struct Resolver {
    /// Where the current resource lives: the entity set it belongs to (for navigation bindings), the
    /// binding path from that set's entity to here (`Lines/` inside a containment), its canonical path
    /// (for the context URL), and whether it is reached through containment.
    struct Place {
        var set: EdmEntitySet?
        var prefix: String
        var canonical: String?
        var contained: Bool
        /// The canonical path of the contained collection the resource belongs to (`Orders(2)/Lines`).
        var collection: String?

        static func of(_ set: EdmEntitySet) -> Place {
            Place(set: set, prefix: "", canonical: set.name, contained: false, collection: nil)
        }
    }

    enum State {
        case start
        case collection(type: String, place: Place, cast: String?)
        case entity(type: String, place: Place, cast: String?)
        case complex(type: String, canonical: String?)
        case complexCollection(type: String, canonical: String?)
        case primitive(EdmTypeRef, canonical: String?)
        case terminal(ODataResourcePath.Target, context: String?)
        case links(type: String, place: Place)
    }

    let model: EdmModel
    let texts: [String]
    var segments: [ODataPathSegment] = []
    var state: State = .start

    init(model: EdmModel, texts: [String]) {
        self.model = model
        self.texts = texts
    }

    func fail(_ index: Int, _ why: String, _ kind: ODataError.Kind = .path) -> ODataError {
        ODataError(kind, "path segment '\(texts[index])': \(why)", segment: texts[index])
    }

    /// Splits `Name(args)` into name and optional argument text.
    func nameAndArguments(_ index: Int) throws(ODataError) -> (String, String?) {
        let text = texts[index]
        guard let open = text.firstIndex(of: "(") else { return (text, nil) }
        guard text.hasSuffix(")") else { throw fail(index, "unbalanced parentheses") }
        let name = String(text[..<open])
        let args = String(text[text.index(after: open)..<text.index(before: text.endIndex)])
        return (name, args)
    }

    mutating func resolve() throws(ODataError) -> ODataResourcePath {
        for index in texts.indices {
            try step(index)
        }
        let target: ODataResourcePath.Target
        let context: String?
        switch state {
        case .start:
            target = .serviceDocument
            context = ""
        case .collection(let type, let place, let cast):
            target = .entityCollection(entityType: type, entitySet: place.contained ? nil : place.set?.name)
            context = collectionContext(type: type, place: place, cast: cast)
        case .entity(let type, let place, let cast):
            target = .entity(entityType: type, entitySet: place.contained ? nil : place.set?.name)
            if let set = place.set, set.isSingleton, !place.contained {
                context = set.name + (cast.map { "/" + $0 } ?? "")
            } else if place.set == nil && !place.contained {
                context = type
            } else {
                context = collectionContext(type: type, place: place, cast: cast) + "/$entity"
            }
        case .complex(let type, let canonical):
            target = .property(EdmTypeRef(name: type))
            context = canonical ?? type
        case .complexCollection(let type, let canonical):
            target = .property(EdmTypeRef(name: type, isCollection: true))
            context = canonical ?? "Collection(\(type))"
        case .primitive(let ref, let canonical):
            target = .property(ref)
            context = canonical ?? ref.description
        case .terminal(let t, let c):
            target = t
            context = c
        case .links:
            throw ODataError(.path, "'$links' must be followed by a navigation property", segment: "$links")
        }
        var path = ODataResourcePath(segments: segments, target: target)
        path.contextFragment = context
        return path
    }

    /// `People`, `People/NS.Employee`, `Orders(2)/Lines`, or `Collection(NS.T)` without a set.
    func collectionContext(type: String, place: Place, cast: String?) -> String {
        let castSuffix = cast.map { "/" + $0 } ?? ""
        if place.contained, let collection = place.collection { return collection + castSuffix }
        if let set = place.set { return set.name + castSuffix }
        return "Collection(\(type))"
    }

    func keyText(_ key: ODataKey, type: String) -> String {
        let parts = key.values.map { kv -> (String, String) in
            // Only V2 spells a literal by its property's type (`12L` for Int64).
            let primitive =
                model.version == .v2 ? model.property(named: kv.name, in: type)?.type.primitive : nil
            return (kv.name, kv.value.urlText(version: model.version, type: primitive))
        }
        if parts.count == 1 { return "(" + parts[0].1 + ")" }
        return "(" + parts.map { $0.0 + "=" + $0.1 }.joined(separator: ",") + ")"
    }

    mutating func step(_ index: Int) throws(ODataError) {
        let text = texts[index]
        switch state {
        case .terminal:
            throw fail(index, "no segment may follow '\(texts[index - 1])'")
        case .start:
            try first(index)
        case .collection(let type, let place, let cast):
            let (name, args) = try nameAndArguments(index)
            if text.hasPrefix("("), let args {
                // `Orders(1)` arrives as one segment; a separate `(1)` only after a cast or navigation text.
                try key(args, type: type, place: place, cast: cast, index: index)
                _ = name
                return
            }
            switch text {
            case "$count":
                segments.append(.count)
                state = .terminal(.count, context: nil)
                return
            case "$ref":
                segments.append(.ref)
                state = .terminal(
                    .reference(entityType: type, isCollection: true), context: "Collection($ref)")
                return
            case "$each":
                throw fail(index, "'$each' is not supported", .notImplemented)
            default: break
            }
            if name == "$filter" {
                throw fail(index, "path segment '$filter(…)' is not supported", .notImplemented)
            }
            if let cast = castType(name, base: type) {
                segments.append(.cast(type: cast))
                state = .collection(type: cast, place: place, cast: cast)
                if let args { try key(args, type: cast, place: place, cast: cast, index: index) }
                return
            }
            if try boundOperation(index, bindingType: EdmTypeRef(name: type, isCollection: true)) { return }
            // 4.01 key-as-segment: `Orders/10248`.
            if model.version == .v4, !text.hasPrefix("$"), model.key(of: type).count == 1,
                (try? LiteralScanner.scan(
                    Array(text.unicodeScalars), at: 0, version: .v4, allowBareDuration: false)) != nil
            {
                try key(text, type: type, place: place, cast: cast, index: index)
                return
            }
            throw fail(
                index, "a collection of '\(type)' can only be followed by a key, $count, $ref or a cast")
        case .entity(let type, let place, let cast):
            try member(index, type: type, place: place, cast: cast)
        case .complex(let type, let canonical):
            try complexMember(index, type: type, canonical: canonical)
        case .complexCollection(let type, let canonical):
            if text == "$count" {
                segments.append(.count)
                state = .terminal(.count, context: nil)
                return
            }
            if let cast = castType(text, base: type) {
                segments.append(.cast(type: cast))
                state = .complexCollection(type: cast, canonical: canonical.map { $0 + "/" + cast })
                return
            }
            if try boundOperation(index, bindingType: EdmTypeRef(name: type, isCollection: true)) { return }
            throw fail(index, "a collection of '\(type)' can only be followed by $count or a cast")
        case .primitive(let ref, _):
            if text == "$value", !ref.isCollection {
                segments.append(.value)
                state = .terminal(.rawValue(ref), context: nil)
                return
            }
            if text == "$count", ref.isCollection {
                segments.append(.count)
                state = .terminal(.count, context: nil)
                return
            }
            if try boundOperation(index, bindingType: ref) { return }
            throw fail(
                index,
                ref.isCollection
                    ? "a collection of primitive values can only be followed by $count"
                    : "a primitive property can only be followed by $value")
        case .links(let type, let place):
            let (name, args) = try nameAndArguments(index)
            guard let nav = model.navigationProperty(named: name, in: type) else {
                throw fail(index, "'\(name)' is not a navigation property of '\(type)'")
            }
            let targetSet = place.set.flatMap {
                model.targetEntitySet(from: $0, navigation: name, on: type, prefix: place.prefix)
            }
            segments.append(
                .navigation(
                    name: name, entityType: nav.target, isCollection: nav.isCollection,
                    entitySet: targetSet?.name)
            )
            if let args {
                guard nav.isCollection else {
                    throw fail(index, "'\(name)' is single-valued and takes no key")
                }
                let key = try ODataKey.parse(args, entityType: nav.target, model: model)
                segments.append(.key(key))
                state = .terminal(.reference(entityType: nav.target, isCollection: false), context: "$ref")
            } else {
                state = .terminal(
                    .reference(entityType: nav.target, isCollection: nav.isCollection),
                    context: nav.isCollection ? "Collection($ref)" : "$ref")
            }
        }
    }

    mutating func key(_ args: String, type: String, place: Place, cast: String?, index: Int)
        throws(ODataError)
    {
        do {
            let key = try ODataKey.parse(args, entityType: type, model: model)
            segments.append(.key(key))
            var entityPlace = place
            let base = place.contained ? (place.canonical ?? "") : (place.set?.name ?? place.canonical ?? "")
            entityPlace.canonical = base + keyText(key, type: type) + (cast.map { "/" + $0 } ?? "")
            state = .entity(type: type, place: entityPlace, cast: cast)
        } catch {
            throw ODataError(
                error.kind == .notImplemented ? .notImplemented : .path,
                "path segment '\(texts[index])': \(error.message)", segment: texts[index])
        }
    }

    mutating func first(_ index: Int) throws(ODataError) {
        let text = texts[index]
        if text == "$metadata" {
            segments.append(.metadata)
            state = .terminal(.metadata, context: nil)
            return
        }
        if text == "$batch" {
            segments.append(.batch)
            state = .terminal(.batch, context: nil)
            return
        }
        let (name, args) = try nameAndArguments(index)
        if ["$all", "$crossjoin", "$entity", "$root"].contains(name) {
            throw fail(index, "'\(name)' is not supported", .notImplemented)
        }
        if let set = model.entitySet(named: name) {
            if set.isSingleton {
                guard args == nil else { throw fail(index, "singleton '\(name)' takes no key") }
                segments.append(.singleton(name: name, entityType: set.entityType))
                state = .entity(type: set.entityType, place: .of(set), cast: nil)
                return
            }
            segments.append(.entitySet(name: name, entityType: set.entityType))
            state = .collection(type: set.entityType, place: .of(set), cast: nil)
            if let args {
                try key(args, type: set.entityType, place: .of(set), cast: nil, index: index)
            }
            return
        }
        if let operation = model.operationImport(named: name) {
            let parameters = try callParameters(args, declared: operation.parameters, of: name, index: index)
            segments.append(.operationImport(name: name, parameters: parameters))
            state = .terminal(.operationImport(operation), context: nil)
            return
        }
        throw fail(
            index,
            text.hasPrefix("$")
                ? "'\(text)' is not supported at the service root"
                : "no entity set, singleton or operation import is named '\(name)'")
    }

    /// `name=value` pairs of a function call, checked against the declared parameters.
    func callParameters(_ args: String?, declared: [EdmParameter], of name: String, index: Int)
        throws(ODataError) -> [ODataKeyValue]
    {
        var parameters: [ODataKeyValue] = []
        guard let args, !args.trimmingSpaces().isEmpty else { return [] }
        do throws(ODataError) {
            for part in try ODataKey.splitKeyPredicate(args, version: model.version) {
                guard let parameterName = part.name else {
                    throw ODataError(.path, "function parameters must be written name=value")
                }
                guard let parameter = declared.first(where: { $0.name == parameterName }) else {
                    throw ODataError(.path, "'\(parameterName)' is not a parameter of '\(name)'")
                }
                guard part.value.conforms(to: parameter.type, in: model) else {
                    throw ODataError(.path, "parameter '\(parameterName)' is not a valid \(parameter.type)")
                }
                parameters.append(ODataKeyValue(name: parameterName, value: part.value))
            }
        } catch {
            throw fail(index, error.message)
        }
        return parameters
    }

    /// A bound function or action (`NS.Name` or `NS.Name(p=1)`) whose binding parameter accepts
    /// `bindingType`: appended as the last segment.
    mutating func boundOperation(_ index: Int, bindingType: EdmTypeRef) throws(ODataError) -> Bool {
        let (name, args) = try nameAndArguments(index)
        guard name.contains(".") else { return false }
        let qualified = model.resolveQualifiedName(name)
        let candidates = model.operations.filter { op in
            guard op.qualifiedName == qualified, op.isBound, let binding = op.parameters.first else {
                return false
            }
            return binding.type.isCollection == bindingType.isCollection
                && (binding.type.name == bindingType.name
                    || model.isType(bindingType.name, derivedFrom: binding.type.name))
        }
        guard let operation = candidates.first else { return false }
        let parameters = try callParameters(
            args, declared: Array(operation.parameters.dropFirst()), of: name, index: index)
        segments.append(.boundOperation(name: qualified, parameters: parameters))
        state = .terminal(.boundOperation(operation), context: nil)
        return true
    }

    /// Property, navigation, cast, bound operation, $value, $ref, $links after a single entity.
    mutating func member(_ index: Int, type: String, place: Place, cast: String?) throws(ODataError) {
        let text = texts[index]
        switch text {
        case "$value":
            segments.append(.value)
            state = .terminal(.rawValue(EdmTypeRef(name: EdmPrimitiveType.stream.rawValue)), context: nil)
            return
        case "$ref":
            segments.append(.ref)
            state = .terminal(.reference(entityType: type, isCollection: false), context: "$ref")
            return
        case "$links":
            segments.append(.links)
            state = .links(type: type, place: place)
            return
        default: break
        }
        let (name, args) = try nameAndArguments(index)
        let canonical = place.canonical
        if let property = model.property(named: name, in: type) {
            guard args == nil else { throw fail(index, "property '\(name)' takes no parentheses") }
            try structural(property, canonical: canonical.map { $0 + "/" + name })
            return
        }
        if let nav = model.navigationProperty(named: name, in: type) {
            var next: Place
            if nav.containsTarget {
                let path = canonical.map { $0 + "/" + name }
                next = Place(
                    set: place.set, prefix: place.prefix + name + "/", canonical: path, contained: true,
                    collection: path)
            } else if let targetSet = place.set.flatMap({
                model.targetEntitySet(from: $0, navigation: name, on: type, prefix: place.prefix)
            }) {
                next = .of(targetSet)
                if !nav.isCollection { next.canonical = nil }
            } else {
                next = Place(set: nil, prefix: "", canonical: nil, contained: false, collection: nil)
            }
            segments.append(
                .navigation(
                    name: name, entityType: nav.target, isCollection: nav.isCollection,
                    entitySet: nav.containsTarget ? nil : next.set?.name))
            if nav.isCollection {
                state = .collection(type: nav.target, place: next, cast: nil)
                if let args { try key(args, type: nav.target, place: next, cast: nil, index: index) }
            } else {
                guard args == nil else { throw fail(index, "'\(name)' is single-valued and takes no key") }
                state = .entity(type: nav.target, place: next, cast: nil)
            }
            return
        }
        if args == nil, let castTo = castType(text, base: type) {
            segments.append(.cast(type: castTo))
            var next = place
            next.canonical = canonical.map { $0 + "/" + castTo }
            state = .entity(type: castTo, place: next, cast: castTo)
            return
        }
        if try boundOperation(index, bindingType: EdmTypeRef(name: type)) { return }
        throw fail(index, "'\(name)' is not a property or navigation property of '\(type)'")
    }

    /// Property, cast or bound operation after a single complex value.
    mutating func complexMember(_ index: Int, type: String, canonical: String?) throws(ODataError) {
        let text = texts[index]
        let (name, args) = try nameAndArguments(index)
        if let property = model.property(named: name, in: type) {
            guard args == nil else { throw fail(index, "property '\(name)' takes no parentheses") }
            try structural(property, canonical: canonical.map { $0 + "/" + name })
            return
        }
        if model.navigationProperty(named: name, in: type) != nil {
            throw fail(index, "navigation from a complex value is not supported", .notImplemented)
        }
        if args == nil, let castTo = castType(text, base: type) {
            segments.append(.cast(type: castTo))
            state = .complex(type: castTo, canonical: canonical.map { $0 + "/" + castTo })
            return
        }
        if try boundOperation(index, bindingType: EdmTypeRef(name: type)) { return }
        throw fail(index, "'\(name)' is not a property of '\(type)'")
    }

    mutating func structural(_ property: EdmProperty, canonical: String?) throws(ODataError) {
        segments.append(.property(name: property.name, type: property.type))
        if model.structuredType(property.type.name) != nil {
            state =
                property.type.isCollection
                ? .complexCollection(type: property.type.name, canonical: canonical)
                : .complex(type: property.type.name, canonical: canonical)
        } else {
            state = .primitive(property.type, canonical: canonical)
        }
    }

    /// A qualified type name deriving from `base`.
    func castType(_ text: String, base: String) -> String? {
        guard text.contains("."), let type = model.structuredType(text),
            model.isType(type.qualifiedName, derivedFrom: base)
        else { return nil }
        return type.qualifiedName
    }
}

extension EdmOperationImport {
    /// Typed parameters of a V2 function import, read from the request's custom query options
    /// (`sum?A=1&B=2`); each value must be a literal of the declared type. Unknown names are ignored (they may
    /// be other custom options such as `sap-client`); a missing non-nullable parameter is an error.
    public func parameterValues(from custom: [ODataQueryParameter], model: EdmModel) throws(ODataError)
        -> [ODataKeyValue]
    {
        var values: [ODataKeyValue] = []
        for parameter in parameters {
            guard let given = custom.first(where: { $0.name == parameter.name }) else {
                if !parameter.nullable {
                    throw ODataError(.query, "the parameter '\(parameter.name)' of '\(name)' is missing")
                }
                continue
            }
            let literal: ODataLiteral
            do {
                literal = try ODataLiteral.parse(given.value, version: model.version)
            } catch {
                throw ODataError(
                    .query, "the parameter '\(parameter.name)' of '\(name)': \(error.message)",
                    segment: parameter.name)
            }
            guard literal.conforms(to: parameter.type, in: model) else {
                throw ODataError(
                    .query,
                    "the parameter '\(parameter.name)' of '\(name)' must be a \(parameter.type) literal",
                    segment: parameter.name)
            }
            values.append(ODataKeyValue(name: parameter.name, value: literal))
        }
        return values
    }
}
