/// Parses `$filter` and `$orderby` text (already percent-decoded) into a typed ``ODataFilterExpression``.
///
/// Promises: precedence follows OData (unary, multiplicative, additive, relational, equality/`has`/`in`,
/// `and`, `or`), with `not X eq Y` read as `not (X eq Y)`; property paths are resolved against `entityType`
/// in `model` (an unknown property is an error naming it, unless the type is open or no model is given);
/// every failure is an ``ODataError`` of kind `.filter` with the character offset; nesting deeper than
/// ``maxDepth`` is an error, never a stack overflow.
public struct ODataFilterParser: Sendable {
    public var model: EdmModel?
    public var entityType: String?
    public var version: ODataVersion
    /// Maximum nesting of parentheses, function calls, lambdas and unary operators.
    public var maxDepth: Int = 64
    /// Properties computed by `$compute` or `$apply` (name → type): a path naming one (and no declared
    /// property) resolves to it.
    public var computed: [String: EdmTypeRef] = [:]

    public init(model: EdmModel?, entityType: String?, version: ODataVersion? = nil) {
        self.model = model
        self.entityType = entityType
        self.version = version ?? model?.version ?? .v4
    }

    /// Parses a boolean `$filter` expression.
    public func parseFilter(_ text: String) throws(ODataError) -> ODataFilterExpression {
        var state = try FilterParserState(self, text)
        let (expression, kind) = try state.parseExpression()
        try state.expectEnd()
        guard kind.isBooleanish else {
            throw ODataError(.filter, "the filter expression is not boolean", offset: 0)
        }
        return expression
    }

    /// Parses a value expression of any type (a `$compute` or aggregated expression).
    public func parseExpression(_ text: String) throws(ODataError) -> ODataFilterExpression {
        var state = try FilterParserState(self, text)
        let (expression, kind) = try state.parseExpression()
        try state.expectEnd()
        if case .entity = kind { throw ODataError(.filter, "an entity is not a value", offset: 0) }
        return expression
    }

    /// Parses `$orderby`: comma-separated expressions each optionally followed by `asc` or `desc`.
    public func parseOrderBy(_ text: String) throws(ODataError) -> [ODataOrderByItem] {
        var state = try FilterParserState(self, text)
        var items: [ODataOrderByItem] = []
        while true {
            let (expression, kind) = try state.parseExpression()
            if case .entity = kind {
                throw ODataError(.filter, "cannot order by an entity", offset: state.offset)
            }
            var descending = false
            if case .identifier(let word) = state.current.kind, word == "asc" || word == "desc" {
                descending = word == "desc"
                state.advance()
            }
            items.append(ODataOrderByItem(expression: expression, descending: descending))
            if state.current.kind == .comma {
                state.advance()
                continue
            }
            try state.expectEnd()
            return items
        }
    }
}

// MARK: - Value kinds for type checking

enum ValueKind: Equatable {
    case boolean
    case string
    case numeric
    case temporal(EdmPrimitiveType)
    case guid
    case binary
    case enumeration(String)
    case entity(String)
    case complex(String)
    case collection
    case null
    case unknown

    var isBooleanish: Bool { self == .boolean || self == .unknown || self == .null }

    var name: String {
        switch self {
        case .boolean: return "Edm.Boolean"
        case .string: return "Edm.String"
        case .numeric: return "a number"
        case .temporal(let p): return p.rawValue
        case .guid: return "Edm.Guid"
        case .binary: return "Edm.Binary"
        case .enumeration(let t), .entity(let t), .complex(let t): return t
        case .collection: return "a collection"
        case .null: return "null"
        case .unknown: return "an untyped value"
        }
    }

    static func of(_ literal: ODataLiteral) -> ValueKind {
        switch literal {
        case .null: return .null
        case .boolean: return .boolean
        case .integer, .decimal, .double: return .numeric
        case .string: return .string
        case .guid: return .guid
        case .binary: return .binary
        case .enumMember(let type, _): return .enumeration(type)
        case .date: return .temporal(.date)
        case .dateTime: return .temporal(.dateTime)
        case .dateTimeOffset: return .temporal(.dateTimeOffset)
        case .timeOfDay: return .temporal(.timeOfDay)
        case .duration: return .temporal(.duration)
        }
    }

    static func of(_ ref: EdmTypeRef?, model: EdmModel?) -> ValueKind {
        guard let ref else { return .unknown }
        if ref.isCollection { return .collection }
        if let p = ref.primitive {
            switch p {
            case .boolean: return .boolean
            case .string: return .string
            case .guid: return .guid
            case .binary: return .binary
            case .time: return .temporal(.duration)
            default:
                if p.isNumeric { return .numeric }
                if p.isTemporal { return .temporal(p) }
                return .unknown
            }
        }
        if let model {
            if let e = model.enumTypes[model.resolveQualifiedName(ref.name)] {
                return .enumeration(e.qualifiedName)
            }
            if let t = model.structuredType(ref.name) {
                return t.isEntity ? .entity(t.qualifiedName) : .complex(t.qualifiedName)
            }
        }
        return .unknown
    }

    var isDateLike: Bool {
        if case .temporal(let p) = self { return p != .duration && p != .timeOfDay }
        return false
    }

    /// Whether values of the two kinds can be compared with eq/ne/lt/….
    func comparable(with other: ValueKind) -> Bool {
        switch (self, other) {
        case (.unknown, _), (_, .unknown), (.null, _), (_, .null): return true
        case (.boolean, .boolean), (.string, .string), (.numeric, .numeric), (.guid, .guid),
            (.binary, .binary):
            return true
        case (.temporal(let a), .temporal(let b)):
            let dateish: Set<EdmPrimitiveType> = [.date, .dateTime, .dateTimeOffset]
            return a == b || (dateish.contains(a) && dateish.contains(b))
        case (.enumeration, .enumeration), (.enumeration, .string), (.string, .enumeration),
            (.enumeration, .numeric), (.numeric, .enumeration):
            return true
        default: return false
        }
    }
}

// MARK: - Tokens

struct Token: Equatable {
    enum Kind: Equatable {
        case literal(ODataLiteral)
        case identifier(String)
        case open
        case close
        case comma
        case slash
        case colon
        case minus
        case end
    }
    var kind: Kind
    var offset: Int
}

enum Tokenizer {
    static func tokenize(_ s: [Unicode.Scalar], version: ODataVersion) throws(ODataError) -> [Token] {
        var tokens: [Token] = []
        var i = 0
        while i < s.count {
            let c = s[i]
            if c == " " || c == "\t" || c == "\n" || c == "\r" {
                i += 1
                continue
            }
            switch c {
            case "(":
                tokens.append(Token(kind: .open, offset: i))
                i += 1
                continue
            case ")":
                tokens.append(Token(kind: .close, offset: i))
                i += 1
                continue
            case ",":
                tokens.append(Token(kind: .comma, offset: i))
                i += 1
                continue
            case "/":
                tokens.append(Token(kind: .slash, offset: i))
                i += 1
                continue
            case ":":
                tokens.append(Token(kind: .colon, offset: i))
                i += 1
                continue
            default:
                break
            }
            let scanned: (ODataLiteral, Int)?
            do {
                scanned = try LiteralScanner.scan(s, at: i, version: version, allowBareDuration: false)
            } catch {
                throw ODataError(.filter, error.message, offset: error.offset.map { $0 } ?? i)
            }
            if let (literal, end) = scanned {
                tokens.append(Token(kind: .literal(literal), offset: i))
                i = end
                continue
            }
            if c == "-" {
                tokens.append(Token(kind: .minus, offset: i))
                i += 1
                continue
            }
            if LiteralScanner.isIdentifierStart(c) || c == "$" || c == "@" {
                var end = i + 1
                while end < s.count, LiteralScanner.isIdentifierChar(s[end]) || s[end] == "." { end += 1 }
                if end < s.count, s[end] == "*", s[end - 1] == "." { end += 1 }
                tokens.append(
                    Token(kind: .identifier(String(String.UnicodeScalarView(s[i..<end]))), offset: i))
                i = end
                continue
            }
            throw ODataError(.filter, "unexpected character '\(Character(c))'", offset: i)
        }
        tokens.append(Token(kind: .end, offset: s.count))
        return tokens
    }
}

// MARK: - Parser

/// A lambda variable in scope: its name and the type it ranges over.
struct FilterScope {
    var name: String
    var type: EdmTypeRef?
}

/// One parse: the tokens, the position and the lambda scopes. Functions, paths and lambdas are parsed in
/// `FilterParser+Paths.swift`.
struct FilterParserState {
    let config: ODataFilterParser
    let tokens: [Token]
    var position = 0
    var depth = 0
    var scopes: [FilterScope] = []

    init(_ config: ODataFilterParser, _ text: String) throws(ODataError) {
        self.config = config
        let scalars = Array(text.unicodeScalars)
        guard scalars.count <= 65_536 else {
            throw ODataError(.filter, "the expression is too long", offset: 0)
        }
        tokens = try Tokenizer.tokenize(scalars, version: config.version)
        if tokens.count == 1 { throw ODataError(.filter, "the expression is empty", offset: 0) }
    }

    var current: Token { tokens[position] }
    var offset: Int { current.offset }
    mutating func advance() { if position < tokens.count - 1 { position += 1 } }

    func peek(_ n: Int = 1) -> Token { tokens[min(position + n, tokens.count - 1)] }

    func error(_ message: String, at offset: Int? = nil) -> ODataError {
        ODataError(.filter, message, offset: offset ?? current.offset)
    }

    func describe(_ token: Token) -> String {
        switch token.kind {
        case .literal: return "a literal"
        case .identifier(let s): return "'\(s)'"
        case .open: return "'('"
        case .close: return "')'"
        case .comma: return "','"
        case .slash: return "'/'"
        case .colon: return "':'"
        case .minus: return "'-'"
        case .end: return "the end of the expression"
        }
    }

    mutating func expect(_ kind: Token.Kind, _ what: String) throws(ODataError) {
        guard current.kind == kind else { throw error("expected \(what) but found \(describe(current))") }
        advance()
    }

    func expectEnd() throws(ODataError) {
        guard current.kind == .end else { throw error("unexpected \(describe(current))") }
    }

    func isWord(_ word: String) -> Bool {
        if case .identifier(let w) = current.kind { return w == word }
        return false
    }

    mutating func enter() throws(ODataError) {
        depth += 1
        if depth > config.maxDepth {
            throw error("the expression is nested too deeply (limit \(config.maxDepth))")
        }
    }

    mutating func leave() { depth -= 1 }

    typealias Typed = (ODataFilterExpression, ValueKind)

    mutating func parseExpression() throws(ODataError) -> Typed {
        try parseLogical(.or)
    }

    /// `or` / `and` chains, built as balanced trees.
    mutating func parseLogical(_ op: ODataBinaryOperator) throws(ODataError) -> Typed {
        var operands: [ODataFilterExpression] = []
        var kind: ValueKind = .boolean
        var startOffset = offset
        var first = op == .or ? try parseLogical(.and) : try parseEquality()
        repeat {
            if !operands.isEmpty || isWord(op.rawValue) {
                guard first.1.isBooleanish else {
                    throw error(
                        "the operands of '\(op.rawValue)' must be boolean, not \(first.1.name)",
                        at: startOffset)
                }
            }
            operands.append(first.0)
            kind = first.1
            guard isWord(op.rawValue) else { break }
            advance()
            startOffset = offset
            first = op == .or ? try parseLogical(.and) : try parseEquality()
        } while true
        if operands.count == 1 { return (operands[0], kind) }
        return (Self.balanced(op, operands[...]), .boolean)
    }

    static func balanced(_ op: ODataBinaryOperator, _ items: ArraySlice<ODataFilterExpression>)
        -> ODataFilterExpression
    {
        if items.count == 1 { return items.first! }
        let mid = items.startIndex + items.count / 2
        return .binary(op, balanced(op, items[..<mid]), balanced(op, items[mid...]))
    }

    mutating func parseEquality() throws(ODataError) -> Typed {
        var left = try parseRelational()
        // Each operator of a left-associative chain nests the tree one level deeper: counted as nesting,
        // so that `1 add 1 add …` cannot build a tree deep enough to overflow the stack later.
        var chained = 0
        defer { depth -= chained }
        while case .identifier(let word) = current.kind {
            let opOffset = offset
            if ["eq", "ne", "has", "in"].contains(word) {
                try enter()
                chained += 1
            }
            switch word {
            case "eq", "ne":
                advance()
                let right = try parseRelational()
                try checkComparable(left.1, right.1, word, at: opOffset)
                left = (.binary(word == "eq" ? .eq : .ne, left.0, right.0), .boolean)
            case "has":
                advance()
                let rightOffset = offset
                let right = try parseRelational()
                guard case .literal(let literal) = right.0, case .enumMember = literal else {
                    throw error("the right operand of 'has' must be an enumeration literal", at: rightOffset)
                }
                left = (.has(left.0, literal), .boolean)
            case "in":
                advance()
                let list = try parseList()
                for item in list { try checkComparable(left.1, item.1, "in", at: opOffset) }
                left = (.in(left.0, list.map(\.0)), .boolean)
            default:
                return left
            }
        }
        return left
    }

    mutating func parseList() throws(ODataError) -> [Typed] {
        let closing = Token.Kind.close
        guard current.kind == .open else { throw error("expected '(' after 'in'") }
        advance()
        try enter()
        defer { leave() }
        var items: [Typed] = []
        if current.kind == closing { throw error("the list after 'in' is empty") }
        while true {
            items.append(try parseExpression())
            if current.kind == .comma {
                advance()
                continue
            }
            try expect(closing, "',' or ')'")
            return items
        }
    }

    func checkComparable(_ a: ValueKind, _ b: ValueKind, _ op: String, at offset: Int) throws(ODataError) {
        switch (a, b) {
        case (.entity, .null), (.null, .entity):
            if op == "eq" || op == "ne" { return }
        case (.entity, _), (_, .entity), (.collection, _), (_, .collection), (.complex, _), (_, .complex):
            throw error("'\(op)' cannot compare \(a.name) with \(b.name)", at: offset)
        default:
            break
        }
        guard a.comparable(with: b) else {
            throw error("'\(op)' cannot compare \(a.name) with \(b.name)", at: offset)
        }
    }

    mutating func parseRelational() throws(ODataError) -> Typed {
        var left = try parseAdditive()
        var chained = 0
        defer { depth -= chained }
        while case .identifier(let word) = current.kind, ["gt", "ge", "lt", "le"].contains(word) {
            let opOffset = offset
            try enter()
            chained += 1
            advance()
            let right = try parseAdditive()
            try checkComparable(left.1, right.1, word, at: opOffset)
            left = (.binary(ODataBinaryOperator(rawValue: word)!, left.0, right.0), .boolean)
        }
        return left
    }

    mutating func parseAdditive() throws(ODataError) -> Typed {
        var left = try parseMultiplicative()
        var chained = 0
        defer { depth -= chained }
        while case .identifier(let word) = current.kind, word == "add" || word == "sub" {
            let opOffset = offset
            try enter()
            chained += 1
            advance()
            let right = try parseMultiplicative()
            let kind = try arithmeticKind(left.1, right.1, word, at: opOffset)
            left = (.binary(word == "add" ? .add : .sub, left.0, right.0), kind)
        }
        return left
    }

    mutating func parseMultiplicative() throws(ODataError) -> Typed {
        var left = try parseUnary()
        var chained = 0
        defer { depth -= chained }
        while case .identifier(let word) = current.kind, ["mul", "div", "divby", "mod"].contains(word) {
            let opOffset = offset
            try enter()
            chained += 1
            advance()
            let right = try parseUnary()
            let kind = try arithmeticKind(left.1, right.1, word, at: opOffset)
            left = (.binary(ODataBinaryOperator(rawValue: word)!, left.0, right.0), kind)
        }
        return left
    }

    func arithmeticKind(_ a: ValueKind, _ b: ValueKind, _ op: String, at offset: Int) throws(ODataError)
        -> ValueKind
    {
        switch (a, b) {
        case (.numeric, .numeric), (.numeric, .unknown), (.unknown, .numeric), (.numeric, .null),
            (.null, .numeric):
            return .numeric
        case (.unknown, .unknown), (.null, _), (_, .null): return .unknown
        case (.temporal, .temporal(.duration)) where op == "add" || op == "sub": return a
        case (.temporal(.duration), .temporal) where op == "add": return b
        case (.temporal(let x), .temporal(let y)) where op == "sub" && x == y: return .temporal(.duration)
        case (.temporal, .unknown), (.unknown, .temporal): return .unknown
        default:
            throw error("'\(op)' needs numeric operands, not \(a.name) and \(b.name)", at: offset)
        }
    }

    mutating func parseUnary() throws(ODataError) -> Typed {
        if isWord("not"), ![.slash, .comma, .close, .end].contains(peek().kind) {
            let notOffset = offset
            advance()
            try enter()
            defer { leave() }
            let operand = try parseEquality()
            guard operand.1.isBooleanish else {
                throw error("'not' needs a boolean operand, not \(operand.1.name)", at: notOffset)
            }
            return (.not(operand.0), .boolean)
        }
        if current.kind == .minus {
            let minusOffset = offset
            advance()
            try enter()
            defer { leave() }
            let operand = try parseUnary()
            switch operand.1 {
            case .numeric, .unknown, .null, .temporal(.duration): break
            default: throw error("'-' needs a numeric operand, not \(operand.1.name)", at: minusOffset)
            }
            return (.negate(operand.0), operand.1)
        }
        return try parsePrimary()
    }

    mutating func parsePrimary() throws(ODataError) -> Typed {
        let token = current
        switch token.kind {
        case .literal(let literal):
            advance()
            return (.literal(literal), ValueKind.of(literal))
        case .open:
            advance()
            try enter()
            defer { leave() }
            let inner = try parseExpression()
            try expect(.close, "')'")
            return inner
        case .identifier(let name):
            if peek().kind == .open, let function = functionNamed(name) {
                advance()
                return try parseFunction(function, name: name, at: token.offset)
            }
            return try parsePath()
        default:
            throw error("expected an operand but found \(describe(token))")
        }
    }

    func functionNamed(_ name: String) -> ODataFunction? {
        let lower = name.lowercased()
        if lower == "substringof" { return .contains }
        return ODataFunction(rawValue: lower)
    }
}
