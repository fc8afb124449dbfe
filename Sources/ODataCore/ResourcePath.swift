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
    }

    public var segments: [ODataPathSegment]
    public var target: Target

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
    enum State {
        case start
        case collection(type: String, set: String?, navigation: String?)
        case entity(type: String, set: String?)
        case complex(type: String)
        case complexCollection(type: String)
        case primitive(EdmTypeRef)
        case terminal(ODataResourcePath.Target)
        case links(type: String, set: String?)
    }

    let model: EdmModel
    let texts: [String]
    var segments: [ODataPathSegment] = []
    var state: State = .start

    init(model: EdmModel, texts: [String]) {
        self.model = model
        self.texts = texts
    }

    func fail(_ index: Int, _ why: String) -> ODataError {
        ODataError(.path, "path segment '\(texts[index])': \(why)", segment: texts[index])
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
        switch state {
        case .start: target = .serviceDocument
        case .collection(let type, let set, _): target = .entityCollection(entityType: type, entitySet: set)
        case .entity(let type, let set): target = .entity(entityType: type, entitySet: set)
        case .complex(let type): target = .property(EdmTypeRef(name: type))
        case .complexCollection(let type): target = .property(EdmTypeRef(name: type, isCollection: true))
        case .primitive(let ref): target = .property(ref)
        case .terminal(let t): target = t
        case .links:
            throw ODataError(.path, "'$links' must be followed by a navigation property", segment: "$links")
        }
        return ODataResourcePath(segments: segments, target: target)
    }

    mutating func step(_ index: Int) throws(ODataError) {
        let text = texts[index]
        switch state {
        case .terminal:
            throw fail(index, "no segment may follow '\(texts[index - 1])'")
        case .start:
            try first(index)
        case .collection(let type, let set, let navigation):
            let (name, args) = try nameAndArguments(index)
            if text.hasPrefix("("), let args {
                // `Orders(1)` arrives as one segment; a separate `(1)` only after a cast or navigation text.
                try key(args, type: type, set: set, index: index)
                _ = name
                return
            }
            switch text {
            case "$count":
                segments.append(.count)
                state = .terminal(.count)
                return
            case "$ref":
                segments.append(.ref)
                state = .terminal(.reference(entityType: type, isCollection: true))
                return
            default: break
            }
            if let cast = castType(name, base: type) {
                segments.append(.cast(type: cast))
                state = .collection(type: cast, set: set, navigation: navigation)
                if let args { try key(args, type: cast, set: set, index: index) }
                return
            }
            // 4.01 key-as-segment: `Orders/10248`.
            if model.version == .v4, !text.hasPrefix("$"), model.key(of: type).count == 1,
                (try? LiteralScanner.scan(
                    Array(text.unicodeScalars), at: 0, version: .v4, allowBareDuration: false)) != nil
            {
                try key(text, type: type, set: set, index: index)
                return
            }
            throw fail(
                index, "a collection of '\(type)' can only be followed by a key, $count, $ref or a cast")
        case .entity(let type, let set):
            try member(index, type: type, set: set, isEntity: true)
        case .complex(let type):
            try member(index, type: type, set: nil, isEntity: false)
        case .complexCollection(let type):
            if text == "$count" {
                segments.append(.count)
                state = .terminal(.count)
                return
            }
            if let cast = castType(text, base: type) {
                segments.append(.cast(type: cast))
                state = .complexCollection(type: cast)
                return
            }
            throw fail(index, "a collection of '\(type)' can only be followed by $count or a cast")
        case .primitive(let ref):
            if text == "$value", !ref.isCollection {
                segments.append(.value)
                state = .terminal(.rawValue(ref))
                return
            }
            if text == "$count", ref.isCollection {
                segments.append(.count)
                state = .terminal(.count)
                return
            }
            throw fail(index, "a primitive property can only be followed by $value")
        case .links(let type, let set):
            let (name, args) = try nameAndArguments(index)
            guard let nav = model.navigationProperty(named: name, in: type) else {
                throw fail(index, "'\(name)' is not a navigation property of '\(type)'")
            }
            let targetSet = set.flatMap { model.entitySet(named: $0) }.flatMap {
                model.targetEntitySet(from: $0, navigationPath: name)
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
                state = .terminal(.reference(entityType: nav.target, isCollection: false))
            } else {
                state = .terminal(.reference(entityType: nav.target, isCollection: nav.isCollection))
            }
        }
    }

    mutating func key(_ args: String, type: String, set: String?, index: Int) throws(ODataError) {
        do {
            let key = try ODataKey.parse(args, entityType: type, model: model)
            segments.append(.key(key))
            state = .entity(type: type, set: set)
        } catch {
            throw ODataError(.path, "path segment '\(texts[index])': \(error.message)", segment: texts[index])
        }
    }

    mutating func first(_ index: Int) throws(ODataError) {
        let text = texts[index]
        if text == "$metadata" {
            segments.append(.metadata)
            state = .terminal(.metadata)
            return
        }
        if text == "$batch" {
            segments.append(.batch)
            state = .terminal(.batch)
            return
        }
        let (name, args) = try nameAndArguments(index)
        if let set = model.entitySet(named: name) {
            if set.isSingleton {
                guard args == nil else { throw fail(index, "singleton '\(name)' takes no key") }
                segments.append(.singleton(name: name, entityType: set.entityType))
                state = .entity(type: set.entityType, set: name)
                return
            }
            segments.append(.entitySet(name: name, entityType: set.entityType))
            state = .collection(type: set.entityType, set: name, navigation: nil)
            if let args {
                try key(args, type: set.entityType, set: name, index: index)
            }
            return
        }
        if let operation = model.operationImport(named: name) {
            var parameters: [ODataKeyValue] = []
            if let args, !args.trimmingSpaces().isEmpty {
                do throws(ODataError) {
                    for part in try ODataKey.splitKeyPredicate(args, version: model.version) {
                        guard let parameterName = part.name else {
                            throw ODataError(.path, "function parameters must be written name=value")
                        }
                        guard let declared = operation.parameters.first(where: { $0.name == parameterName })
                        else {
                            throw ODataError(.path, "'\(parameterName)' is not a parameter of '\(name)'")
                        }
                        guard part.value.conforms(to: declared.type, in: model) else {
                            throw ODataError(
                                .path, "parameter '\(parameterName)' is not a valid \(declared.type)")
                        }
                        parameters.append(ODataKeyValue(name: parameterName, value: part.value))
                    }
                } catch {
                    throw fail(index, error.message)
                }
            }
            segments.append(.operationImport(name: name, parameters: parameters))
            state = .terminal(.operationImport(operation))
            return
        }
        throw fail(
            index,
            text.hasPrefix("$")
                ? "'\(text)' is not supported at the service root"
                : "no entity set, singleton or operation import is named '\(name)'")
    }

    /// Property, navigation, cast, $value, $ref, $links after a single entity or complex value.
    mutating func member(_ index: Int, type: String, set: String?, isEntity: Bool) throws(ODataError) {
        let text = texts[index]
        if isEntity {
            switch text {
            case "$value":
                segments.append(.value)
                state = .terminal(.rawValue(EdmTypeRef(name: EdmPrimitiveType.stream.rawValue)))
                return
            case "$ref":
                segments.append(.ref)
                state = .terminal(.reference(entityType: type, isCollection: false))
                return
            case "$links":
                segments.append(.links)
                state = .links(type: type, set: set)
                return
            default: break
            }
        }
        let (name, args) = try nameAndArguments(index)
        if let property = model.property(named: name, in: type) {
            guard args == nil else { throw fail(index, "property '\(name)' takes no parentheses") }
            segments.append(.property(name: name, type: property.type))
            if model.structuredType(property.type.name) != nil {
                state =
                    property.type.isCollection
                    ? .complexCollection(type: property.type.name) : .complex(type: property.type.name)
            } else {
                state = .primitive(property.type)
            }
            return
        }
        if let nav = model.navigationProperty(named: name, in: type) {
            let targetSet = set.flatMap { model.entitySet(named: $0) }.flatMap {
                model.targetEntitySet(from: $0, navigationPath: name)
            }
            segments.append(
                .navigation(
                    name: name, entityType: nav.target, isCollection: nav.isCollection,
                    entitySet: targetSet?.name))
            if nav.isCollection {
                state = .collection(type: nav.target, set: targetSet?.name, navigation: name)
                if let args { try key(args, type: nav.target, set: targetSet?.name, index: index) }
            } else {
                guard args == nil else { throw fail(index, "'\(name)' is single-valued and takes no key") }
                state = .entity(type: nav.target, set: targetSet?.name)
            }
            return
        }
        if args == nil, let cast = castType(text, base: type) {
            segments.append(.cast(type: cast))
            state = isEntity ? .entity(type: cast, set: set) : .complex(type: cast)
            return
        }
        throw fail(index, "'\(name)' is not a property or navigation property of '\(type)'")
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
