/// A parsed `$search` expression (OData V4 search grammar).
///
/// Promises: produced by ``parse(_:)``, whose precedence is `NOT` over `AND` (explicit or implied by
/// juxtaposition) over `OR`, both binary operators associating to the left; ``text`` prints an expression
/// that parses back to the same tree.
public indirect enum ODataSearchExpression: Sendable, Hashable, CustomStringConvertible {
    /// A search word (no spaces, quotes or parentheses; not `AND`, `OR` or `NOT`).
    case word(String)
    /// A quoted phrase, unescaped.
    case phrase(String)
    case not(ODataSearchExpression)
    case and(ODataSearchExpression, ODataSearchExpression)
    case or(ODataSearchExpression, ODataSearchExpression)

    /// Most terms in one expression.
    public static let maxTerms = 100
    /// Deepest nesting of parentheses and `NOT`.
    public static let maxDepth = 32

    /// Parses `$search` text (already percent-decoded). Errors are ``ODataError`` of kind `.query` with
    /// the offset, e.g. for an unbalanced parenthesis, an unterminated phrase, a dangling operator, more
    /// than ``maxTerms`` terms or nesting beyond ``maxDepth``.
    public static func parse(_ text: String) throws(ODataError) -> ODataSearchExpression {
        var parser = SearchParser(scalars: Array(text.unicodeScalars))
        try parser.tokenize()
        guard parser.tokens.count > 1 else {
            throw ODataError(.query, "$search is empty", segment: "$search")
        }
        let expression = try parser.parseOr()
        guard case .end = parser.current.kind else {
            throw parser.error("unexpected \(parser.describe(parser.current))")
        }
        return expression
    }

    /// The expression as `$search` text, with parentheses only where precedence or left association needs
    /// them; phrases escape `"` and `\` with a backslash.
    public var text: String { print(context: 0) }

    public var description: String { text }

    /// Precedence: 0 = OR position, 1 = AND position, 2 = operand of NOT.
    private func print(context: Int) -> String {
        switch self {
        case .word(let w): return w
        case .phrase(let p):
            var out = "\""
            for c in p.unicodeScalars {
                if c == "\"" || c == "\\" { out.unicodeScalars.append("\\") }
                out.unicodeScalars.append(c)
            }
            return out + "\""
        case .not(let inner):
            return "NOT " + inner.print(context: 2)
        case .and(let l, let r):
            let text = l.print(context: 1) + " AND " + r.print(context: 2)
            return context > 1 ? "(" + text + ")" : text
        case .or(let l, let r):
            let text = l.print(context: 0) + " OR " + r.print(context: 1)
            return context > 0 ? "(" + text + ")" : text
        }
    }

    /// The words and phrases, in order.
    public var terms: [String] {
        switch self {
        case .word(let t), .phrase(let t): return [t]
        case .not(let e): return e.terms
        case .and(let l, let r), .or(let l, let r): return l.terms + r.terms
        }
    }
}

private struct SearchToken {
    enum Kind: Equatable {
        case word(String)
        case phrase(String)
        case and, or, not, open, close, end
    }
    var kind: Kind
    var offset: Int
}

private struct SearchParser {
    let scalars: [Unicode.Scalar]
    var tokens: [SearchToken] = []
    var position = 0
    var depth = 0

    init(scalars: [Unicode.Scalar]) { self.scalars = scalars }

    var current: SearchToken { tokens[min(position, tokens.count - 1)] }

    func error(_ message: String, at offset: Int? = nil) -> ODataError {
        ODataError(.query, "$search: " + message, offset: offset ?? current.offset, segment: "$search")
    }

    func describe(_ token: SearchToken) -> String {
        switch token.kind {
        case .word(let w): return "'\(w)'"
        case .phrase(let p): return "\"\(p)\""
        case .and: return "AND"
        case .or: return "OR"
        case .not: return "NOT"
        case .open: return "'('"
        case .close: return "')'"
        case .end: return "the end"
        }
    }

    static func isSpace(_ c: Unicode.Scalar) -> Bool { c == " " || c == "\t" || c == "\r" || c == "\n" }

    mutating func tokenize() throws(ODataError) {
        var i = 0
        var terms = 0
        while i < scalars.count {
            let c = scalars[i]
            if Self.isSpace(c) {
                i += 1
                continue
            }
            if c == "(" || c == ")" {
                tokens.append(SearchToken(kind: c == "(" ? .open : .close, offset: i))
                i += 1
                continue
            }
            if c == "\"" {
                let start = i
                var text = String.UnicodeScalarView()
                i += 1
                var closed = false
                while i < scalars.count {
                    if scalars[i] == "\\", i + 1 < scalars.count {
                        text.append(scalars[i + 1])
                        i += 2
                        continue
                    }
                    if scalars[i] == "\"" {
                        closed = true
                        i += 1
                        break
                    }
                    text.append(scalars[i])
                    i += 1
                }
                guard closed else { throw error("unterminated phrase", at: start) }
                guard !text.isEmpty else { throw error("empty phrase", at: start) }
                tokens.append(SearchToken(kind: .phrase(String(text)), offset: start))
                terms += 1
            } else {
                let start = i
                while i < scalars.count, !Self.isSpace(scalars[i]),
                    !"()\"".unicodeScalars.contains(scalars[i])
                {
                    i += 1
                }
                let word = String(String.UnicodeScalarView(scalars[start..<i]))
                switch word {
                case "AND": tokens.append(SearchToken(kind: .and, offset: start))
                case "OR": tokens.append(SearchToken(kind: .or, offset: start))
                case "NOT": tokens.append(SearchToken(kind: .not, offset: start))
                default:
                    tokens.append(SearchToken(kind: .word(word), offset: start))
                    terms += 1
                }
            }
            if terms > ODataSearchExpression.maxTerms {
                throw error("more than \(ODataSearchExpression.maxTerms) terms", at: 0)
            }
        }
        tokens.append(SearchToken(kind: .end, offset: scalars.count))
    }

    mutating func parseOr() throws(ODataError) -> ODataSearchExpression {
        var left = try parseAnd()
        while current.kind == .or {
            position += 1
            left = .or(left, try parseAnd())
        }
        return left
    }

    /// `a AND b`, or `a b` (implicit AND).
    mutating func parseAnd() throws(ODataError) -> ODataSearchExpression {
        var left = try parseUnary()
        while true {
            switch current.kind {
            case .and:
                position += 1
                left = .and(left, try parseUnary())
            case .word, .phrase, .not, .open:
                left = .and(left, try parseUnary())
            default:
                return left
            }
        }
    }

    mutating func parseUnary() throws(ODataError) -> ODataSearchExpression {
        let token = current
        switch token.kind {
        case .not:
            position += 1
            try enter()
            defer { depth -= 1 }
            return .not(try parseUnary())
        case .open:
            position += 1
            try enter()
            defer { depth -= 1 }
            let inner = try parseOr()
            guard current.kind == .close else { throw error("expected ')' but found \(describe(current))") }
            position += 1
            return inner
        case .word(let w):
            position += 1
            return .word(w)
        case .phrase(let p):
            position += 1
            return .phrase(p)
        default:
            throw error("expected a word, a phrase, NOT or '(' but found \(describe(token))")
        }
    }

    mutating func enter() throws(ODataError) {
        depth += 1
        if depth > ODataSearchExpression.maxDepth {
            throw error("nested too deeply (limit \(ODataSearchExpression.maxDepth))")
        }
    }
}

/// Translates a `$search` expression to SQL over the string properties of an entity type.
///
/// Promises: a row matches a word or phrase when the term occurs as a substring of one of the entity's
/// string values (every `Edm.String` property, also inside complex properties, that has a column or is in
/// the stored document; collections are not searched), compared case-insensitively for ASCII letters
/// (SQLite's `lower`; other letters must match exactly); `NOT`, `AND`, `OR` combine the matches; null
/// values match nothing and never make a row unknown (`NOT x` matches rows without any value); every term
/// is a bound parameter.
public struct ODataSearchTranslator: Sendable {
    public var model: EdmModel
    public var mapping: any SQLMapping
    public var entityType: String
    public var alias: String

    public init(model: EdmModel, mapping: any SQLMapping, entityType: String, alias: String = "t0") {
        self.model = model
        self.mapping = mapping
        self.entityType = entityType
        self.alias = alias
    }

    /// The string property paths searched (`["Name"]`, `["Address", "City"]`), in declaration order.
    public func searchedPaths() -> [[String]] {
        var out: [[String]] = []
        func walk(_ type: String, _ prefix: [String]) {
            guard prefix.count < 5 else { return }
            for p in model.properties(of: type) where !p.type.isCollection {
                let path = prefix + [p.name]
                if model.primitiveType(of: p.type) == .string {
                    out.append(path)
                } else if let complex = model.structuredType(p.type.name), !complex.isEntity {
                    walk(complex.qualifiedName, path)
                }
            }
        }
        walk(entityType, [])
        return out
    }

    /// The text the terms are searched in: the string values joined by a separator no term contains.
    func haystack() throws(ODataError) -> SQLFragment {
        var parts: [SQLFragment] = []
        for path in searchedPaths() {
            if let column = mapping.column(for: path, in: entityType) {
                parts.append(
                    SQLFragment(
                        "coalesce(" + ODataSQLTranslator.quote(alias) + "." + ODataSQLTranslator.quote(column)
                            + ", '')"))
            } else if let document = mapping.documentColumn(for: entityType) {
                parts.append(
                    "coalesce(json_extract("
                        + SQLFragment(
                            ODataSQLTranslator.quote(alias) + "." + ODataSQLTranslator.quote(document)
                                + ", ?",
                            [.text(ODataStorage.jsonPath(path))]) + "), '')")
            }
        }
        guard !parts.isEmpty else {
            throw ODataError(.translation, "'\(entityType)' has no string properties to search locally")
        }
        return "lower(" + SQLFragment.joined(parts, separator: " || char(31) || ") + ")"
    }

    /// A boolean SQL expression (without `WHERE`).
    public func translate(_ expression: ODataSearchExpression) throws(ODataError) -> SQLFragment {
        let text = try haystack()
        func walk(_ e: ODataSearchExpression) -> SQLFragment {
            switch e {
            case .word(let t), .phrase(let t):
                return "(instr(" + text + ", ?) > 0)" + SQLFragment("", [.text(Self.asciiLowercased(t))])
            case .not(let inner): return "(NOT " + walk(inner) + ")"
            case .and(let l, let r): return "(" + walk(l) + " AND " + walk(r) + ")"
            case .or(let l, let r): return "(" + walk(l) + " OR " + walk(r) + ")"
            }
        }
        return walk(expression)
    }

    /// Lowercases ASCII letters only, as SQLite's `lower` does.
    static func asciiLowercased(_ s: String) -> String {
        var out = String.UnicodeScalarView()
        for c in s.unicodeScalars {
            if c.value >= 65 && c.value <= 90 {
                out.append(Unicode.Scalar(c.value + 32)!)
            } else {
                out.append(c)
            }
        }
        return String(out)
    }
}
