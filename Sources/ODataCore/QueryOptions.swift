/// One query parameter as received (decoded), kept in request order.
public struct ODataQueryParameter: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// One `$select` item: a property path (`Name`, `Address/City`, V2 `Customer/CompanyName`), `*`, or
/// `Namespace.*`.
public struct ODataSelectItem: Sendable, Hashable {
    public var path: [String]

    public init(path: [String]) { self.path = path }

    /// `*` or `Namespace.*`.
    public var isWildcard: Bool { path.last == "*" || (path.last?.hasSuffix(".*") ?? false) }
}

/// One `$expand` item with its nested options (V4), or a V2 path normalized into nesting.
///
/// Promises: V2 `Orders/Order_Details` becomes `Orders` with a nested `Order_Details` item, and repeated
/// prefixes (`Orders,Orders/Order_Details`) are merged into one item; V4 paths stay as written (a path may
/// go through complex properties or end with a cast). `isRef` for `…/$ref`, `isCount` for 4.01
/// `…/$count`. `levels` is `Int.max` for `$levels=max`. Nested `filter`/`orderBy` are raw text for the
/// `$filter` parser; `search` is raw text and `searchExpression` its parse; `compute` and `apply` are
/// parsed; every nested option of 4.01 is parsed, none is dropped.
public struct ODataExpandItem: Sendable, Hashable {
    public var path: [String]
    public var isRef: Bool
    public var isCount: Bool = false
    public var filter: String?
    public var select: [ODataSelectItem]?
    public var expand: [ODataExpandItem]?
    public var orderBy: String?
    public var top: Int?
    public var skip: Int?
    public var count: Bool?
    public var search: String?
    public var searchExpression: ODataSearchExpression?
    public var levels: Int?
    public var compute: [ODataComputeItem]?
    public var apply: ODataApply?

    public init(path: [String], isRef: Bool = false) {
        self.path = path
        self.isRef = isRef
    }

    public var isWildcard: Bool { path == ["*"] }
}

/// The system and custom query options of a request.
///
/// Promises: `parse` splits on raw `&` and the first raw `=`, then percent-decodes names and values once with
/// `+` as a space (so `%24top=5`, `$filter=City+eq+%27Berlin%27` work); option names are matched
/// case-insensitively, and for V4 also without the `$` prefix (4.01); a repeated system option, an invalid
/// `$top`/`$skip`/`$count`/`$inlinecount`/`$levels`, or malformed `$select`/`$expand` throws ``ODataError``
/// of kind `.query` naming the option. `$filter`, `$orderby` and `$search` stay raw text (`$search` is
/// also parsed into `searchExpression`); `$apply` is parsed into `apply`, `$compute` into `compute`,
/// `$index` into `index` (an unsupported transformation is `.notImplemented`); everything not a system
/// option lands in `custom` in request order (including `sap-client` and `@alias` parameters).
public struct ODataQueryOptions: Sendable, Hashable {
    public var filter: String?
    public var select: [ODataSelectItem]?
    public var expand: [ODataExpandItem]?
    public var orderBy: String?
    public var top: Int?
    public var skip: Int?
    /// V4 `$count=true|false`.
    public var count: Bool?
    /// V2 `$inlinecount=allpages` (true) or `none` (false).
    public var inlineCount: Bool?
    public var skipToken: String?
    public var deltaToken: String?
    public var format: String?
    public var search: String?
    /// `$search` parsed.
    public var searchExpression: ODataSearchExpression?
    /// `$apply` parsed.
    public var apply: ODataApply?
    /// `$compute` parsed.
    public var compute: [ODataComputeItem]?
    /// `$index` (the position for an insert into an ordered collection).
    public var index: Int?
    /// A top-level `$levels` (`Int.max` for `max`).
    public var levels: Int?
    /// Other `$` options kept raw, keyed by lowercased name without `$` (`id`, `schemaversion`).
    public var otherSystemOptions: [String: String]
    public var custom: [ODataQueryParameter]

    public init() {
        otherSystemOptions = [:]
        custom = []
    }

    /// True when the client asked for an inline count in either version.
    public var wantsCount: Bool { count == true || inlineCount == true }

    static let known: Set<String> = [
        "filter", "select", "expand", "orderby", "top", "skip", "count", "inlinecount", "skiptoken",
        "deltatoken", "format", "search", "apply", "compute", "index", "levels", "id", "schemaversion",
    ]

    /// Parses a raw (still percent-encoded) query string without the leading `?`.
    public static func parse(rawQuery: String, version: ODataVersion) throws(ODataError) -> ODataQueryOptions
    {
        var query = Substring(rawQuery)
        if query.hasPrefix("?") { query = query.dropFirst() }
        var parameters: [ODataQueryParameter] = []
        for piece in query.split(separator: "&", omittingEmptySubsequences: true) {
            let name: Substring
            let value: Substring
            if let eq = piece.firstIndex(of: "=") {
                name = piece[..<eq]
                value = piece[piece.index(after: eq)...]
            } else {
                name = piece
                value = ""
            }
            parameters.append(
                ODataQueryParameter(
                    name: try PercentDecoding.decode(name, plusAsSpace: true, kind: .query),
                    value: try PercentDecoding.decode(value, plusAsSpace: true, kind: .query)))
        }
        return try parse(parameters: parameters, version: version)
    }

    /// Parses already-decoded parameters.
    public static func parse(parameters: [ODataQueryParameter], version: ODataVersion) throws(ODataError)
        -> ODataQueryOptions
    {
        var options = ODataQueryOptions()
        var seen: Set<String> = []
        for parameter in parameters {
            guard let option = systemName(parameter.name, version: version) else {
                options.custom.append(parameter)
                continue
            }
            guard seen.insert(option).inserted else {
                throw ODataError(
                    .query, "the query option '$\(option)' is given more than once", segment: parameter.name)
            }
            try options.apply(
                option: option, value: parameter.value, rawName: parameter.name, version: version)
        }
        return options
    }

    /// The lowercased system option name without `$`, or nil for custom options.
    static func systemName(_ name: String, version: ODataVersion) -> String? {
        let lower = name.lowercased()
        if lower.hasPrefix("$") {
            return String(lower.dropFirst())
        }
        if version == .v4, known.contains(lower), lower != "id", lower != "index" { return lower }
        return nil
    }

    mutating func apply(option: String, value: String, rawName: String, version: ODataVersion)
        throws(ODataError)
    {
        func invalid(_ why: String) -> ODataError {
            ODataError(.query, "invalid value for '\(rawName)': \(why)", segment: rawName)
        }
        switch option {
        case "filter": filter = value
        case "orderby": orderBy = value
        case "search":
            search = value
            searchExpression = try ODataSearchExpression.parse(value)
        case "apply": apply = try ODataApply.parse(value)
        case "compute": compute = try ODataComputeItem.parseList(value, option: rawName)
        case "index":
            guard let n = Int(value), n >= 0 else { throw invalid("expected a non-negative integer") }
            index = n
        case "levels":
            guard let n = value.lowercased() == "max" ? Int.max : Int(value), n >= 1 else {
                throw invalid("expected a positive integer or max")
            }
            levels = n
        case "skiptoken": skipToken = value
        case "deltatoken": deltaToken = value
        case "format": format = value
        case "top":
            guard let n = Int(value), n >= 0 else { throw invalid("expected a non-negative integer") }
            top = n
        case "skip":
            guard let n = Int(value), n >= 0 else { throw invalid("expected a non-negative integer") }
            skip = n
        case "count":
            switch value.lowercased() {
            case "true": count = true
            case "false": count = false
            default: throw invalid("expected true or false")
            }
        case "inlinecount":
            switch value.lowercased() {
            case "allpages": inlineCount = true
            case "none": inlineCount = false
            default: throw invalid("expected allpages or none")
            }
        case "select":
            select = try Self.parseSelect(value, optionName: rawName)
        case "expand":
            expand = try Self.parseExpand(value, version: version, optionName: rawName, depth: 0)
        default:
            if Self.known.contains(option) {
                otherSystemOptions[option] = value
            } else {
                throw ODataError(.query, "unknown system query option '\(rawName)'", segment: rawName)
            }
        }
    }

    // MARK: $select / $expand

    static func parseSelect(_ text: String, optionName: String) throws(ODataError) -> [ODataSelectItem] {
        var items: [ODataSelectItem] = []
        for part in try splitTopLevel(text, separator: ",", optionName: optionName) {
            let trimmed = part.trimmingSpaces()
            guard !trimmed.isEmpty else {
                throw ODataError(.query, "empty item in '\(optionName)'", segment: optionName)
            }
            if let open = trimmed.firstIndex(of: "(") {
                try checkNestedSelect(trimmed, open: open, optionName: optionName)
            }
            let path = trimmed.split(separator: "/", omittingEmptySubsequences: false).map {
                String($0).trimmingSpaces()
            }
            guard path.allSatisfy(isPathSegment) else {
                throw ODataError(.query, "invalid path '\(trimmed)' in '\(optionName)'", segment: optionName)
            }
            items.append(ODataSelectItem(path: path))
        }
        return items
    }

    /// A `$select` item with parentheses: a 4.01 item with nested options (`Addresses($top=2)`) or an
    /// operation with its parameter names (`NS.Function(a,b)`) is valid and not supported (`501`);
    /// anything else (`sqlite_version()`, `Name(x)`, unbalanced parentheses) is malformed (`400`).
    static func checkNestedSelect(_ item: String, open: String.Index, optionName: String) throws(ODataError) {
        let invalid = ODataError(.query, "invalid item '\(item)' in '\(optionName)'", segment: optionName)
        guard item.hasSuffix(")") else { throw invalid }
        let path = item[..<open].split(separator: "/", omittingEmptySubsequences: false).map {
            String($0).trimmingSpaces()
        }
        let inner = String(item[item.index(after: open)..<item.index(before: item.endIndex)]).trimmingSpaces()
        guard path.allSatisfy(isPathSegment), let last = path.last, !inner.isEmpty else { throw invalid }
        let names = ["filter", "search", "count", "orderby", "skip", "top", "select", "expand", "compute"]
        let valid: Bool
        if last.contains(".") {
            // An operation's parameter names.
            valid = inner.split(separator: ",").allSatisfy { isPathSegment(String($0).trimmingSpaces()) }
        } else {
            valid = inner.split(separator: ";").allSatisfy { option in
                let name = String(option.prefix { $0 != "=" }).trimmingSpaces().lowercased()
                return option.contains("=")
                    && names.contains(name.hasPrefix("$") ? String(name.dropFirst()) : name)
            }
        }
        guard valid else { throw invalid }
        throw ODataError(
            .notImplemented, "nested options in '\(optionName)' are not supported: '\(item)'",
            segment: optionName)
    }

    static func isPathSegment(_ s: String) -> Bool {
        guard !s.isEmpty else { return false }
        if s == "*" || s == "$ref" || s == "$count" { return true }
        var scalars = Substring(s).unicodeScalars[...]
        if s.hasSuffix(".*") { scalars = Substring(s.dropLast(2)).unicodeScalars[...] }
        guard let first = scalars.first, LiteralScanner.isIdentifierStart(first) else { return false }
        return scalars.allSatisfy { LiteralScanner.isIdentifierChar($0) || $0 == "." }
    }

    static let maxExpandDepth = 16

    static func parseExpand(_ text: String, version: ODataVersion, optionName: String, depth: Int)
        throws(ODataError)
        -> [ODataExpandItem]
    {
        guard depth < maxExpandDepth else {
            throw ODataError(.query, "'\(optionName)' is nested too deeply", segment: optionName)
        }
        var items: [ODataExpandItem] = []
        for part in try splitTopLevel(text, separator: ",", optionName: optionName) {
            let trimmed = part.trimmingSpaces()
            guard !trimmed.isEmpty else {
                throw ODataError(.query, "empty item in '\(optionName)'", segment: optionName)
            }
            var pathText = trimmed
            var nested: String?
            if let open = trimmed.firstIndex(of: "(") {
                guard trimmed.hasSuffix(")") else {
                    throw ODataError(.query, "unbalanced parentheses in '\(optionName)'", segment: optionName)
                }
                pathText = String(trimmed[..<open]).trimmingSpaces()
                nested = String(trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)])
            }
            var path = pathText.split(separator: "/", omittingEmptySubsequences: false).map {
                String($0).trimmingSpaces()
            }
            var isRef = false
            var isCount = false
            if path.last == "$ref" {
                isRef = true
                path.removeLast()
            } else if path.last == "$count", version == .v4 {
                isCount = true
                path.removeLast()
            }
            guard !path.isEmpty, path.allSatisfy({ isPathSegment($0) && $0 != "$ref" && $0 != "$count" })
            else {
                throw ODataError(.query, "invalid path '\(pathText)' in '\(optionName)'", segment: optionName)
            }
            var item = ODataExpandItem(path: path, isRef: isRef)
            item.isCount = isCount
            if let nested {
                try item.applyNested(nested, version: version, optionName: optionName, depth: depth)
            }
            if version == .v2 {
                merge(item, into: &items)
            } else {
                items.append(item)
            }
        }
        return items
    }

    /// V2: `A/B/C` becomes A { B { C } }, merged with siblings of the same name.
    static func merge(_ item: ODataExpandItem, into items: inout [ODataExpandItem]) {
        guard let head = item.path.first else { return }
        var rest = item
        rest.path.removeFirst()
        if let index = items.firstIndex(where: { $0.path == [head] }) {
            if !rest.path.isEmpty {
                var children = items[index].expand ?? []
                merge(rest, into: &children)
                items[index].expand = children
            }
        } else {
            var top = ODataExpandItem(path: [head])
            if !rest.path.isEmpty {
                var children: [ODataExpandItem] = []
                merge(rest, into: &children)
                top.expand = children
            } else {
                top = item
                top.path = [head]
            }
            items.append(top)
        }
    }

    /// Splits on `separator` outside single quotes and parentheses.
    static func splitTopLevel(_ text: String, separator: Character, optionName: String) throws(ODataError)
        -> [String]
    {
        var parts: [String] = []
        var current = ""
        var depth = 0
        var inQuote = false
        for c in text {
            if c == "'" {
                inQuote.toggle()
            } else if !inQuote {
                if c == "(" {
                    depth += 1
                } else if c == ")" {
                    depth -= 1
                    guard depth >= 0 else {
                        throw ODataError(
                            .query, "unbalanced parentheses in '\(optionName)'", segment: optionName)
                    }
                } else if c == separator && depth == 0 {
                    parts.append(current)
                    current = ""
                    continue
                }
            }
            current.append(c)
        }
        guard depth == 0, !inQuote else {
            throw ODataError(
                .query, "unbalanced parentheses or quotes in '\(optionName)'", segment: optionName)
        }
        parts.append(current)
        return parts
    }
}

extension ODataExpandItem {
    mutating func applyNested(_ text: String, version: ODataVersion, optionName: String, depth: Int)
        throws(ODataError)
    {
        var seen: Set<String> = []
        for part in try ODataQueryOptions.splitTopLevel(text, separator: ";", optionName: optionName) {
            let trimmed = part.trimmingSpaces()
            if trimmed.isEmpty { continue }
            guard let eq = trimmed.firstIndex(of: "=") else {
                throw ODataError(
                    .query, "expected name=value in '\(optionName)': '\(trimmed)'", segment: optionName)
            }
            let rawName = String(trimmed[..<eq]).trimmingSpaces()
            let value = String(trimmed[trimmed.index(after: eq)...]).trimmingSpaces()
            let lower = rawName.lowercased()
            let name = lower.hasPrefix("$") ? String(lower.dropFirst()) : lower
            guard seen.insert(name).inserted else {
                throw ODataError(
                    .query, "'\(rawName)' is given twice inside '\(optionName)'", segment: optionName)
            }
            func invalid() -> ODataError {
                ODataError(
                    .query, "invalid value for '\(rawName)' inside '\(optionName)'", segment: optionName)
            }
            switch name {
            case "filter": filter = value
            case "orderby": orderBy = value
            case "search":
                search = value
                searchExpression = try ODataSearchExpression.parse(value)
            case "compute": compute = try ODataComputeItem.parseList(value, option: optionName)
            case "apply": apply = try ODataApply.parse(value)
            case "select": select = try ODataQueryOptions.parseSelect(value, optionName: optionName)
            case "expand":
                expand = try ODataQueryOptions.parseExpand(
                    value, version: version, optionName: optionName, depth: depth + 1)
            case "top":
                guard let n = Int(value), n >= 0 else { throw invalid() }
                top = n
            case "skip":
                guard let n = Int(value), n >= 0 else { throw invalid() }
                skip = n
            case "count":
                guard let b = Bool(value.lowercased()) else { throw invalid() }
                count = b
            case "levels":
                if value.lowercased() == "max" {
                    levels = Int.max
                } else {
                    guard let n = Int(value), n >= 1 else { throw invalid() }
                    levels = n
                }
            default:
                throw ODataError(
                    .query, "'\(rawName)' is not allowed inside '\(optionName)'", segment: optionName)
            }
        }
    }
}

extension ODataQueryOptions {
    /// Checks `$select`, `$expand` (with nested options) and parses `$filter`/`$orderby` against the model
    /// for a result of `entityType`; the first problem is thrown as ``ODataError`` naming the option.
    /// `$compute` aliases may be used by `$filter`, `$orderby` and `$select`; `$search` and `$apply` are
    /// checked when they are planned (``ODataQueryPlanner``).
    public func validate(against model: EdmModel, entityType: String) throws(ODataError) {
        var parser = ODataFilterParser(model: model, entityType: entityType)
        for item in compute ?? [] {
            let expression = try parser.parseExpression(item.expression)
            parser.computed[item.alias] = expression.staticType ?? EdmTypeRef(name: "Edm.String")
        }
        if let filter { _ = try parser.parseFilter(filter) }
        if let orderBy { _ = try parser.parseOrderBy(orderBy) }
        let computedNames = Set(parser.computed.keys)
        try Self.validate(
            select: select?.filter { $0.path.count != 1 || !computedNames.contains($0.path[0]) },
            expand: expand,
            model: model, entityType: entityType)
    }

    static func validate(
        select: [ODataSelectItem]?, expand: [ODataExpandItem]?, model: EdmModel, entityType: String
    ) throws(ODataError) {
        for item in select ?? [] where !item.isWildcard {
            var type = entityType
            for (index, name) in item.path.enumerated() {
                if let property = model.property(named: name, in: type) {
                    type = property.type.name
                } else if let nav = model.navigationProperty(named: name, in: type) {
                    type = nav.target
                } else if let cast = model.structuredType(name),
                    model.isType(cast.qualifiedName, derivedFrom: type)
                {
                    type = cast.qualifiedName
                } else if index == item.path.count - 1, name.hasSuffix(".*") {
                    continue
                } else if model.typeHierarchy(of: type).contains(where: \.isOpen) {
                    break
                } else {
                    throw ODataError(
                        .query, "$select: '\(name)' is not a property of '\(type)'", segment: "$select")
                }
            }
        }
        for item in expand ?? [] where !item.isWildcard {
            var type = entityType
            var reachedNavigation = false
            for name in item.path {
                if let nav = model.navigationProperty(named: name, in: type) {
                    type = nav.target
                    reachedNavigation = true
                } else if let property = model.property(named: name, in: type), !reachedNavigation,
                    model.structuredType(property.type.name) != nil
                {
                    type = property.type.name
                } else if let cast = model.structuredType(name),
                    model.isType(cast.qualifiedName, derivedFrom: type)
                {
                    type = cast.qualifiedName
                } else {
                    throw ODataError(
                        .query, "$expand: '\(name)' is not a navigation property of '\(type)'",
                        segment: "$expand")
                }
            }
            guard reachedNavigation else {
                throw ODataError(
                    .query,
                    "$expand: '\(item.path.joined(separator: "/"))' does not lead to a navigation property",
                    segment: "$expand")
            }
            let parser = ODataFilterParser(model: model, entityType: type)
            if let filter = item.filter { _ = try parser.parseFilter(filter) }
            if let orderBy = item.orderBy { _ = try parser.parseOrderBy(orderBy) }
            try validate(select: item.select, expand: item.expand, model: model, entityType: type)
        }
    }
}
