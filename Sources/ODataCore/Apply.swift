/// A standard aggregation method of the Data Aggregation extension.
public enum ODataAggregationMethod: String, Sendable, Hashable, CaseIterable {
    case sum, min, max, average, countdistinct
}

/// One aggregate expression of `aggregate(…)`.
///
/// Promises: `expression` is the aggregated value's text as written (a property path or a common
/// expression, trimmed), parsed against the input's type when translated; `alias` is an OData identifier.
public enum ODataAggregateExpression: Sendable, Hashable {
    /// `$count as Alias`: the number of input instances.
    case count(alias: String)
    /// `expression with method as Alias`.
    case aggregate(expression: String, method: ODataAggregationMethod, alias: String)

    public var alias: String {
        switch self {
        case .count(let a), .aggregate(_, _, let a): return a
        }
    }

    public var text: String {
        switch self {
        case .count(let alias): return "$count as \(alias)"
        case .aggregate(let e, let m, let alias): return "\(e) with \(m.rawValue) as \(alias)"
        }
    }
}

/// One `expression as Alias` item of `$compute` or of the `compute` transformation.
public struct ODataComputeItem: Sendable, Hashable {
    /// The expression's text as written (trimmed).
    public var expression: String
    public var alias: String

    public init(expression: String, alias: String) {
        self.expression = expression
        self.alias = alias
    }

    public var text: String { "\(expression) as \(alias)" }

    /// Parses `expr as Alias, expr as Alias` (`$compute`); errors name `option`.
    public static func parseList(_ text: String, option: String = "$compute") throws(ODataError)
        -> [ODataComputeItem]
    {
        var items: [ODataComputeItem] = []
        for part in try ApplySyntax.split(text, on: ",", option: option) {
            let (expression, alias) = try ApplySyntax.splitAlias(part, option: option)
            guard !items.contains(where: { $0.alias == alias }) else {
                throw ODataError(.query, "\(option): the alias '\(alias)' is used twice", segment: option)
            }
            items.append(ODataComputeItem(expression: expression, alias: alias))
        }
        return items
    }
}

/// One transformation of `$apply`.
///
/// Promises: `filter`, `orderBy` hold the expression text as written (trimmed), parsed against the type
/// of the transformation's input when translated; `groupBy` paths are property paths split on `/`, and
/// `then` is the transformation sequence applied to each group (empty for plain `groupby((…))`).
public indirect enum ODataApplyTransformation: Sendable, Hashable {
    case aggregate([ODataAggregateExpression])
    case groupBy(paths: [[String]], then: [ODataApplyTransformation])
    case filter(String)
    case search(ODataSearchExpression)
    case orderBy(String)
    case top(Int)
    case skip(Int)
    case compute([ODataComputeItem])
    case identity

    public var text: String {
        switch self {
        case .aggregate(let items): return "aggregate(" + items.map(\.text).joined(separator: ",") + ")"
        case .groupBy(let paths, let then):
            let head = "groupby((" + paths.map { $0.joined(separator: "/") }.joined(separator: ",") + ")"
            return head + (then.isEmpty ? "" : "," + then.map(\.text).joined(separator: "/")) + ")"
        case .filter(let f): return "filter(\(f))"
        case .search(let s): return "search(\(s.text))"
        case .orderBy(let o): return "orderby(\(o))"
        case .top(let n): return "top(\(n))"
        case .skip(let n): return "skip(\(n))"
        case .compute(let items): return "compute(" + items.map(\.text).joined(separator: ",") + ")"
        case .identity: return "identity"
        }
    }
}

/// A parsed `$apply` (OData Data Aggregation extension): a sequence of transformations.
///
/// Promises: ``parse(_:)`` accepts `aggregate`, `groupby` (with a nested transformation sequence),
/// `filter`, `search`, `orderby`, `top`, `skip`, `compute` and `identity` chained with `/`; the other
/// transformations of the extension (`concat`, `expand`, `join`, `outerjoin`, `nest`, `topcount` and the
/// other top/bottom ones, `ancestors`, `descendants`, `traverse`, `rollup`, custom aggregates,
/// `from`, custom functions) are ``ODataError`` of kind `.notImplemented` naming them, never dropped;
/// malformed text is kind `.query`. ``text`` prints what parses back to the same value.
public struct ODataApply: Sendable, Hashable, CustomStringConvertible {
    public var transformations: [ODataApplyTransformation]

    public init(_ transformations: [ODataApplyTransformation]) { self.transformations = transformations }

    /// Deepest nesting of `groupby` sequences.
    public static let maxDepth = 8

    public static func parse(_ text: String) throws(ODataError) -> ODataApply {
        ODataApply(try ApplySyntax.sequence(text, depth: 0))
    }

    public var text: String { transformations.map(\.text).joined(separator: "/") }
    public var description: String { text }
}

/// Splitting and parsing helpers for `$apply` and `$compute` text.
enum ApplySyntax {
    static let option = "$apply"

    static func fail(_ message: String, _ kind: ODataError.Kind = .query, option: String = option)
        -> ODataError
    {
        ODataError(kind, "\(option): \(message)", segment: option)
    }

    /// The indices of the characters of `text` outside parentheses, single-quoted strings (`''` escapes)
    /// and double-quoted phrases (`\` escapes), and whether parentheses and quotes are balanced.
    static func topLevel(_ text: String) -> (indices: [String.Index], balanced: Bool) {
        var indices: [String.Index] = []
        var depth = 0
        var single = false
        var double = false
        var escaped = false
        var balanced = true
        for i in text.indices {
            let c = text[i]
            if double {
                if escaped {
                    escaped = false
                } else if c == "\\" {
                    escaped = true
                } else if c == "\"" {
                    double = false
                }
            } else if single {
                if c == "'" { single = false }
            } else if c == "'" {
                single = true
            } else if c == "\"" {
                double = true
            } else if c == "(" {
                depth += 1
            } else if c == ")" {
                depth -= 1
                if depth < 0 { balanced = false }
            } else if depth == 0 {
                indices.append(i)
            }
        }
        return (indices, balanced && depth == 0 && !single && !double)
    }

    /// Splits on `separator` at the top level (see ``topLevel(_:)``); each part trimmed, none may be empty.
    static func split(_ text: String, on separator: Character, option: String) throws(ODataError) -> [String]
    {
        let (indices, balanced) = topLevel(text)
        guard balanced else { throw fail("unbalanced parentheses or quotes", option: option) }
        var parts: [String] = []
        var start = text.startIndex
        for i in indices where text[i] == separator {
            parts.append(String(text[start..<i]).trimmingSpaces())
            start = text.index(after: i)
        }
        parts.append(String(text[start...]).trimmingSpaces())
        guard !parts.contains(where: \.isEmpty) else { throw fail("an empty item", option: option) }
        return parts
    }

    /// The range of the last top-level occurrence of ` word `.
    static func lastKeyword(_ word: String, in text: String) -> Range<String.Index>? {
        let needle = " " + word + " "
        for i in topLevel(text).indices.reversed() where text[i...].hasPrefix(needle) {
            return i..<text.index(i, offsetBy: needle.count)
        }
        return nil
    }

    static func isIdentifier(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, LiteralScanner.isIdentifierStart(first) else {
            return false
        }
        return s.unicodeScalars.allSatisfy(LiteralScanner.isIdentifierChar) && s.count <= 128
    }

    /// `expr as Alias` → (expr, Alias).
    static func splitAlias(_ text: String, option: String) throws(ODataError) -> (String, String) {
        guard let range = lastKeyword("as", in: text) else {
            throw fail("'\(text)' needs 'as' and an alias", option: option)
        }
        let expression = String(text[..<range.lowerBound]).trimmingSpaces()
        let alias = String(text[range.upperBound...]).trimmingSpaces()
        guard !expression.isEmpty else { throw fail("'\(text)' has no expression", option: option) }
        guard isIdentifier(alias) else { throw fail("'\(alias)' is not a valid alias", option: option) }
        return (expression, alias)
    }

    /// `name(arguments)` → (name, arguments); a bare name → (name, nil).
    static func call(_ text: String) throws(ODataError) -> (String, String?) {
        guard let open = text.firstIndex(of: "(") else { return (text, nil) }
        guard text.hasSuffix(")") else { throw fail("'\(text)' is not a transformation") }
        let name = String(text[..<open]).trimmingSpaces()
        let inner = String(text[text.index(after: open)..<text.index(before: text.endIndex)])
        return (name, inner)
    }

    static let notImplemented: Set<String> = [
        "concat", "expand", "join", "outerjoin", "nest", "topcount", "toppercent", "topsum", "bottomcount",
        "bottompercent", "bottomsum", "ancestors", "descendants", "traverse", "rollup", "from",
    ]

    static func sequence(_ text: String, depth: Int) throws(ODataError) -> [ODataApplyTransformation] {
        guard depth < ODataApply.maxDepth else { throw fail("nested too deeply") }
        guard !text.trimmingSpaces().isEmpty else { throw fail("no transformation") }
        var out: [ODataApplyTransformation] = []
        for part in try split(text, on: "/", option: option) {
            out.append(try transformation(part, depth: depth))
        }
        return out
    }

    static func integer(_ text: String?, _ name: String) throws(ODataError) -> Int {
        guard let text, let n = Int(text.trimmingSpaces()), n >= 0 else {
            throw fail("\(name)() needs a non-negative integer")
        }
        return n
    }

    static func transformation(_ text: String, depth: Int) throws(ODataError) -> ODataApplyTransformation {
        let (name, arguments) = try call(text)
        if name.contains(".") {
            throw fail("custom transformation '\(name)' is not supported", .notImplemented)
        }
        if notImplemented.contains(name) {
            throw fail("the transformation '\(name)' is not supported", .notImplemented)
        }
        if name == "identity" {
            guard arguments == nil else { throw fail("identity takes no arguments") }
            return .identity
        }
        guard let arguments else { throw fail("'\(name)' is not a transformation") }
        let body = arguments.trimmingSpaces()
        switch name {
        case "filter":
            guard !body.isEmpty else { throw fail("filter() is empty") }
            return .filter(body)
        case "orderby":
            guard !body.isEmpty else { throw fail("orderby() is empty") }
            return .orderBy(body)
        case "search":
            do {
                return .search(try ODataSearchExpression.parse(body))
            } catch {
                throw fail(error.message)
            }
        case "top": return .top(try integer(body, name))
        case "skip": return .skip(try integer(body, name))
        case "compute":
            return .compute(try ODataComputeItem.parseList(body, option: option))
        case "aggregate":
            return .aggregate(try aggregates(body))
        case "groupby":
            return try groupBy(body, depth: depth)
        default:
            throw fail("unknown transformation '\(name)'")
        }
    }

    static func aggregates(_ text: String) throws(ODataError) -> [ODataAggregateExpression] {
        var items: [ODataAggregateExpression] = []
        for part in try split(text, on: ",", option: option) {
            if lastKeyword("from", in: part) != nil {
                throw fail("'from' in aggregate expressions is not supported", .notImplemented)
            }
            guard lastKeyword("as", in: part) != nil else {
                if lastKeyword("with", in: part) != nil || part == "$count" {
                    throw fail("'\(part)' needs 'as' and an alias")
                }
                if part.contains("(") {
                    throw fail(
                        "aggregating through a navigation prefix ('\(part)') is not supported",
                        .notImplemented)
                }
                throw fail("custom aggregate '\(part)' is not supported", .notImplemented)
            }
            let (left, alias) = try splitAlias(part, option: option)
            guard !items.contains(where: { $0.alias == alias }) else {
                throw fail("the alias '\(alias)' is used twice")
            }
            if left == "$count" {
                items.append(.count(alias: alias))
                continue
            }
            guard let with = lastKeyword("with", in: left) else {
                throw fail("custom aggregate '\(left)' is not supported", .notImplemented)
            }
            let expression = String(left[..<with.lowerBound]).trimmingSpaces()
            let methodName = String(left[with.upperBound...]).trimmingSpaces()
            guard !expression.isEmpty else { throw fail("'\(part)' has nothing to aggregate") }
            guard let method = ODataAggregationMethod(rawValue: methodName) else {
                if methodName.contains(".") {
                    throw fail("custom aggregation method '\(methodName)' is not supported", .notImplemented)
                }
                throw fail("unknown aggregation method '\(methodName)'")
            }
            items.append(.aggregate(expression: expression, method: method, alias: alias))
        }
        return items
    }

    static func groupBy(_ text: String, depth: Int) throws(ODataError) -> ODataApplyTransformation {
        let arguments = try split(text, on: ",", option: option)
        guard let first = arguments.first, first.hasPrefix("("), first.hasSuffix(")") else {
            throw fail("groupby needs a parenthesized list of properties first")
        }
        let inner = String(first.dropFirst().dropLast())
        var paths: [[String]] = []
        for item in try split(inner, on: ",", option: option) {
            if item.hasPrefix("rollup(") {
                throw fail("rollup in groupby is not supported", .notImplemented)
            }
            let path = item.split(separator: "/", omittingEmptySubsequences: false).map {
                String($0).trimmingSpaces()
            }
            guard path.allSatisfy({ isIdentifier($0) || isQualified($0) }) else {
                throw fail("'\(item)' is not a property path")
            }
            paths.append(path)
        }
        // The rest (after the first top-level comma) is one transformation sequence.
        var then: [ODataApplyTransformation] = []
        if arguments.count > 1 {
            let rest = arguments.dropFirst().joined(separator: ",")
            then = try sequence(rest, depth: depth + 1)
        }
        return .groupBy(paths: paths, then: then)
    }

    static func isQualified(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count > 1 && parts.allSatisfy { isIdentifier(String($0)) }
    }
}
