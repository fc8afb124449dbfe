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
        var state = try ParserState(self, text)
        let (expression, kind) = try state.parseExpression()
        try state.expectEnd()
        guard kind.isBooleanish else {
            throw ODataError(.filter, "the filter expression is not boolean", offset: 0)
        }
        return expression
    }

    /// Parses a value expression of any type (a `$compute` or aggregated expression).
    public func parseExpression(_ text: String) throws(ODataError) -> ODataFilterExpression {
        var state = try ParserState(self, text)
        let (expression, kind) = try state.parseExpression()
        try state.expectEnd()
        if case .entity = kind { throw ODataError(.filter, "an entity is not a value", offset: 0) }
        return expression
    }

    /// Parses `$orderby`: comma-separated expressions each optionally followed by `asc` or `desc`.
    public func parseOrderBy(_ text: String) throws(ODataError) -> [ODataOrderByItem] {
        var state = try ParserState(self, text)
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

private struct Scope {
    var name: String
    var type: EdmTypeRef?
}

private struct ParserState {
    let config: ODataFilterParser
    let tokens: [Token]
    var position = 0
    var depth = 0
    var scopes: [Scope] = []

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

    // MARK: Functions

    mutating func parseFunction(_ function: ODataFunction, name: String, at start: Int) throws(ODataError)
        -> Typed
    {
        try expect(.open, "'('")
        try enter()
        defer { leave() }
        var args: [Typed] = []
        var argOffsets: [Int] = []
        if current.kind != .close {
            while true {
                argOffsets.append(offset)
                if function == .isof || function == .cast, let typeName = typeNameArgument() {
                    args.append((.typeName(typeName), .unknown))
                } else {
                    args.append(try parseExpression())
                }
                if current.kind == .comma {
                    advance()
                    continue
                }
                break
            }
        }
        try expect(.close, "',' or ')'")
        let lower = name.lowercased()
        if lower == "substringof" {
            guard args.count == 2 else { throw error("'substringof' takes 2 arguments", at: start) }
            args.swapAt(0, 1)
            argOffsets.swapAt(0, 1)
        }
        func arity(_ range: ClosedRange<Int>) throws(ODataError) {
            guard range.contains(args.count) else {
                let expected =
                    range.lowerBound == range.upperBound
                    ? "\(range.lowerBound)" : "\(range.lowerBound) or \(range.upperBound)"
                throw error(
                    "'\(name)' takes \(expected) argument\(range.upperBound == 1 ? "" : "s")", at: start)
            }
        }
        func require(_ index: Int, _ ok: (ValueKind) -> Bool, _ what: String) throws(ODataError) {
            let kind = args[index].1
            if kind == .unknown || kind == .null || ok(kind) { return }
            throw error(
                "argument \(index + 1) of '\(name)' must be \(what), not \(kind.name)", at: argOffsets[index])
        }
        let isString: (ValueKind) -> Bool = { $0 == .string }
        let isNumber: (ValueKind) -> Bool = { $0 == .numeric }
        let isTemporal: (ValueKind) -> Bool = {
            if case .temporal = $0 { return true }
            return false
        }
        let result: ValueKind
        switch function {
        case .contains, .startswith, .endswith:
            try arity(2...2)
            try require(0, isString, "a string")
            try require(1, isString, "a string")
            result = .boolean
        case .length:
            try arity(1...1)
            try require(0, isString, "a string")
            result = .numeric
        case .indexof:
            try arity(2...2)
            try require(0, isString, "a string")
            try require(1, isString, "a string")
            result = .numeric
        case .substring:
            try arity(2...3)
            try require(0, isString, "a string")
            for i in 1..<args.count { try require(i, isNumber, "a number") }
            result = .string
        case .tolower, .toupper, .trim:
            try arity(1...1)
            try require(0, isString, "a string")
            result = .string
        case .concat:
            try arity(2...2)
            try require(0, isString, "a string")
            try require(1, isString, "a string")
            result = .string
        case .replace:
            try arity(3...3)
            for i in 0..<3 { try require(i, isString, "a string") }
            result = .string
        case .year, .month, .day, .hour, .minute, .second, .fractionalseconds, .totaloffsetminutes:
            try arity(1...1)
            try require(0, isTemporal, "a date or time")
            result = .numeric
        case .date:
            try arity(1...1)
            try require(0, { $0.isDateLike }, "a date-time")
            result = .temporal(.date)
        case .time:
            try arity(1...1)
            try require(0, { $0.isDateLike }, "a date-time")
            result = .temporal(.timeOfDay)
        case .now, .mindatetime, .maxdatetime:
            try arity(0...0)
            result = .temporal(.dateTimeOffset)
        case .round, .floor, .ceiling:
            try arity(1...1)
            try require(0, isNumber, "a number")
            result = .numeric
        case .isof, .cast:
            try arity(1...2)
            guard case .typeName(let typeName)? = args.last?.0 else {
                throw error(
                    "the last argument of '\(name)' must be a type name", at: argOffsets.last ?? start)
            }
            if function == .isof {
                result = .boolean
            } else {
                result = ValueKind.of(EdmTypeRef(name: typeName), model: config.model)
            }
        }
        return (.function(function, args.map(\.0)), result)
    }

    /// A qualified type name (`Edm.String`, `NS.Type`) or a quoted one (V2 `isof('NS.Type')`) as the next
    /// argument, when the argument is just that.
    mutating func typeNameArgument() -> String? {
        let next = peek().kind
        guard next == .comma || next == .close else { return nil }
        switch current.kind {
        case .identifier(let name) where name.contains("."):
            advance()
            return config.model?.resolveQualifiedName(name) ?? name
        case .literal(.string(let name)) where name.contains("."):
            advance()
            return config.model?.resolveQualifiedName(name) ?? name
        default:
            return nil
        }
    }

    // MARK: Paths and lambdas

    mutating func parsePath() throws(ODataError) -> Typed {
        let start = offset
        guard case .identifier(let first) = current.kind else { throw error("expected a property") }
        var path: ODataPropertyPath
        var currentType: EdmTypeRef?
        if first == "$it" || first == "$this" {
            path = ODataPropertyPath(root: .it, steps: [], type: nil)
            currentType = config.entityType.map { EdmTypeRef(name: $0) }
            if first == "$this", let scope = scopes.last {
                path.root = .variable(scope.name)
                currentType = scope.type
            }
            advance()
            if current.kind != .slash {
                path.type = currentType
                return (.property(path), ValueKind.of(currentType, model: config.model))
            }
            advance()
        } else if let scope = scopes.last(where: { $0.name == first }) {
            path = ODataPropertyPath(root: .variable(first), steps: [], type: nil)
            currentType = scope.type
            advance()
            if current.kind != .slash {
                path.type = currentType
                return (.property(path), ValueKind.of(currentType, model: config.model))
            }
            advance()
        } else {
            path = ODataPropertyPath(root: .it, steps: [], type: nil)
            currentType = config.entityType.map { EdmTypeRef(name: $0) }
            if let computedType = config.computed[first],
                currentType.flatMap({ config.model?.property(named: first, in: $0.name) }) == nil
            {
                advance()
                guard current.kind != .slash else {
                    throw error("the computed property '\(first)' has no members")
                }
                let path = ODataPropertyPath(
                    root: .it, steps: [.property(name: first, type: computedType)], type: computedType)
                return (.property(path), ValueKind.of(computedType, model: config.model))
            }
            // 4.01 bare duration, when no property has that name.
            if LiteralScanner.isDuration(first), peek().kind != .slash,
                currentType.flatMap({ config.model?.property(named: first, in: $0.name) }) == nil
            {
                advance()
                return (.literal(.duration(first)), .temporal(.duration))
            }
        }
        var untyped = config.model == nil || currentType == nil
        while true {
            guard case .identifier(let name) = current.kind else {
                throw error("expected a property name after '/'")
            }
            let nameOffset = offset
            if (name == "any" || name == "all") && peek().kind == .open {
                guard !path.steps.isEmpty || path.root != .it else {
                    throw error("'\(name)' must follow a collection path", at: nameOffset)
                }
                advance()
                return try parseLambda(
                    name == "any" ? .any : .all, path: path, collectionType: currentType, untyped: untyped)
            }
            advance()
            if untyped {
                path.steps.append(.property(name: name, type: nil))
                currentType = nil
            } else {
                let resolved = try resolveStep(name, in: currentType!, at: nameOffset)
                path.steps.append(resolved.step)
                currentType = resolved.type
                untyped = currentType == nil
            }
            if current.kind == .slash {
                if let ct = currentType, ct.isCollection, !untyped, !followsCollection(peek()) {
                    throw error("'\(name)' is a collection; use any(), all() or $count", at: nameOffset)
                }
                advance()
                if case .identifier("$count") = current.kind {
                    advance()
                    path.type = currentType
                    return (.count(path), .numeric)
                }
                continue
            }
            break
        }
        path.type = currentType
        if path.steps.isEmpty { throw error("expected a property", at: start) }
        return (.property(path), ValueKind.of(currentType, model: config.model))
    }

    /// Only a lambda, `$count` or a cast may follow a collection.
    func followsCollection(_ token: Token) -> Bool {
        guard case .identifier(let next) = token.kind else { return false }
        return next == "any" || next == "all" || next == "$count" || next.contains(".")
    }

    func resolveStep(_ name: String, in type: EdmTypeRef, at offset: Int) throws(ODataError)
        -> (step: ODataPropertyPath.Step, type: EdmTypeRef?)
    {
        guard let model = config.model else { return (.property(name: name, type: nil), nil) }
        let typeName = type.name
        if let property = model.property(named: name, in: typeName) {
            return (.property(name: name, type: property.type), property.type)
        }
        if let nav = model.navigationProperty(named: name, in: typeName) {
            return (
                .navigation(name: name, entityType: nav.target, isCollection: nav.isCollection),
                EdmTypeRef(name: nav.target, isCollection: nav.isCollection)
            )
        }
        if name.contains("."), let derived = model.structuredType(name),
            model.isType(derived.qualifiedName, derivedFrom: typeName)
        {
            return (
                .cast(type: derived.qualifiedName),
                EdmTypeRef(name: derived.qualifiedName, isCollection: type.isCollection)
            )
        }
        if model.structuredType(typeName)?.isOpen == true
            || model.typeHierarchy(of: typeName).contains(where: \.isOpen)
        {
            return (.property(name: name, type: nil), nil)
        }
        if model.structuredType(typeName) == nil {
            throw error("'\(name)' cannot be applied to a value of type \(typeName)", at: offset)
        }
        throw error("'\(name)' is not a property of '\(typeName)'", at: offset)
    }

    mutating func parseLambda(
        _ kind: ODataLambda.Kind, path: ODataPropertyPath, collectionType: EdmTypeRef?, untyped: Bool
    ) throws(ODataError) -> Typed {
        let lambdaOffset = offset
        if let collectionType, !collectionType.isCollection {
            throw error(
                "'\(kind.rawValue)' needs a collection, but '\(path.names.joined(separator: "/"))' is single-valued",
                at: lambdaOffset)
        }
        var collection = path
        collection.type = collectionType
        let elementType = collectionType.map { EdmTypeRef(name: $0.name) }
        try expect(.open, "'('")
        try enter()
        defer { leave() }
        if current.kind == .close {
            guard kind == .any else { throw error("'all' needs a predicate") }
            advance()
            return (
                .lambda(
                    ODataLambda(
                        kind: kind, collection: collection, variable: nil, predicate: nil,
                        elementType: elementType)), .boolean
            )
        }
        guard case .identifier(let variable) = current.kind, !variable.hasPrefix("$") else {
            throw error("expected a range variable name")
        }
        advance()
        try expect(.colon, "':' after the range variable")
        if scopes.contains(where: { $0.name == variable }) {
            throw error("the range variable '\(variable)' is already in use")
        }
        scopes.append(Scope(name: variable, type: untyped ? nil : elementType))
        defer { scopes.removeLast() }
        let predicateOffset = offset
        let predicate = try parseExpression()
        guard predicate.1.isBooleanish else {
            throw error("the predicate of '\(kind.rawValue)' must be boolean", at: predicateOffset)
        }
        try expect(.close, "')'")
        return (
            .lambda(
                ODataLambda(
                    kind: kind, collection: collection, variable: variable, predicate: predicate.0,
                    elementType: elementType)),
            .boolean
        )
    }
}
