import JSONCore

enum NumericOperator: String, Sendable {
    case less = "<"
    case lessOrEqual = "<="
    case equal = "="
    case notEqual = "!="
    case greaterOrEqual = ">="
    case greater = ">"

    func test(_ lhs: Double, _ rhs: Double) -> Bool {
        switch self {
        case .less: return lhs < rhs
        case .lessOrEqual: return lhs <= rhs
        case .equal: return lhs == rhs
        case .notEqual: return lhs != rhs
        case .greaterOrEqual: return lhs >= rhs
        case .greater: return lhs > rhs
        }
    }
}

/// One filter condition before it is resolved against an index.
enum FilterPredicate: Sendable, Equatable {
    case facet(attribute: String, value: String)
    case tag(String)
    case numeric(attribute: String, op: NumericOperator, value: Double)
    case range(attribute: String, lower: Double, upper: Double)

    var kind: Int {
        switch self {
        case .facet: return 0
        case .tag: return 1
        case .numeric, .range: return 2
        }
    }
}

struct FilterLiteral: Sendable, Equatable {
    var negated: Bool
    var predicate: FilterPredicate
    /// The filter score (`<score=N>`), 1 unless given.
    var score: Int = 1
    /// The score was given explicitly.
    var scored = false
}

/// A filter in conjunctive normal form: every group must hold; a group holds when any literal holds.
typealias FilterCNF = [[FilterLiteral]]

// MARK: - `filters` string grammar

private indirect enum FilterNode {
    case literal(FilterLiteral, column: Int)
    case and([FilterNode])
    case or([FilterNode], column: Int)
    case not(FilterNode, column: Int)
    case group(FilterNode, column: Int)
}

/// Parses the `filters` grammar (reference §2.4) into CNF, enforcing the documented restrictions.
struct FilterParser {
    private let scalars: [Unicode.Scalar]
    private var pos = 0
    private let label: String
    /// Current nesting of parentheses and `NOT`s.
    private var depth = 0
    /// Deeper nesting is refused: the parser recurses once per level, on a worker thread's small stack.
    static let maxDepth = 64

    init(_ text: String, label: String = "filters") {
        scalars = Array(text.unicodeScalars)
        self.label = label
    }

    static func parse(_ text: String) throws(SearchError) -> FilterCNF {
        var parser = FilterParser(text)
        parser.skipSpaces()
        if parser.pos == parser.scalars.count { return [] }
        let node = try parser.parseOr()
        parser.skipSpaces()
        if parser.pos < parser.scalars.count {
            throw parser.failure("Unexpected token \(parser.describeNext()) expected end of filter")
        }
        return try parser.toCNF(node)
    }

    /// Parses exactly one predicate (used by `numericFilters` items).
    static func parsePredicate(_ text: String, label: String) throws(SearchError) -> FilterPredicate {
        var parser = FilterParser(text, label: label)
        parser.skipSpaces()
        let literal = try parser.parsePredicate()
        parser.skipSpaces()
        if parser.pos < parser.scalars.count {
            throw parser.failure("Unexpected token \(parser.describeNext()) expected end of filter")
        }
        return literal
    }

    private func failure(_ message: String, at column: Int? = nil) -> SearchError {
        SearchError(status: 400, message: "\(label): \(message) at col \((column ?? pos) + 1)")
    }

    private mutating func skipSpaces() {
        while pos < scalars.count, scalars[pos].properties.isWhitespace { pos += 1 }
    }

    private func describeNext() -> String {
        guard pos < scalars.count else { return "end of filter" }
        var end = pos
        while end < scalars.count, !scalars[end].properties.isWhitespace, end - pos < 20 { end += 1 }
        if end == pos { end = pos + 1 }
        return "'" + String(String.UnicodeScalarView(scalars[pos..<end])) + "'"
    }

    private func isDelimiter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar == "(" || scalar == ")" || scalar == "\"" || scalar == ":"
            || scalar == "<" || scalar == ">" || scalar == "=" || scalar == "!"
    }

    /// Peeks an unquoted keyword (AND/OR/NOT/TO) at the current position.
    private func peekKeyword(_ keyword: String) -> Bool {
        let chars = Array(keyword.unicodeScalars)
        guard pos + chars.count <= scalars.count else { return false }
        for i in chars.indices where scalars[pos + i] != chars[i] { return false }
        let after = pos + chars.count
        return after == scalars.count || isDelimiter(scalars[after])
    }

    private mutating func parseOr() throws(SearchError) -> FilterNode {
        let start = pos
        var items = [try parseAnd()]
        skipSpaces()
        while peekKeyword("OR") {
            pos += 2
            skipSpaces()
            items.append(try parseAnd())
            skipSpaces()
        }
        return items.count == 1 ? items[0] : .or(items, column: start)
    }

    private mutating func parseAnd() throws(SearchError) -> FilterNode {
        var items = [try parseUnary()]
        skipSpaces()
        while peekKeyword("AND") {
            pos += 3
            skipSpaces()
            items.append(try parseUnary())
            skipSpaces()
        }
        return items.count == 1 ? items[0] : .and(items)
    }

    private mutating func parseUnary() throws(SearchError) -> FilterNode {
        skipSpaces()
        let start = pos
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maxDepth else {
            throw failure("Filter nested too deeply (more than \(Self.maxDepth) parentheses or NOTs)")
        }
        if peekKeyword("NOT") {
            pos += 3
            skipSpaces()
            return .not(try parseUnary(), column: start)
        }
        guard pos < scalars.count else { throw failure("Unexpected end of filter, expected a filter") }
        if scalars[pos] == "(" {
            pos += 1
            skipSpaces()
            if pos < scalars.count, scalars[pos] == ")" { throw failure("Empty parentheses") }
            let inner = try parseOr()
            skipSpaces()
            guard pos < scalars.count, scalars[pos] == ")" else {
                throw failure("Unexpected token \(describeNext()) expected ')'")
            }
            pos += 1
            return .group(inner, column: start)
        }
        if scalars[pos] == ")" { throw failure("Unexpected token ')' expected a filter") }
        if peekKeyword("AND") || peekKeyword("OR") {
            throw failure("Unexpected token \(describeNext()) expected a filter")
        }
        var literal = FilterLiteral(negated: false, predicate: try parsePredicate())
        if let score = try parseScore() {
            literal.score = score
            literal.scored = true
        }
        return .literal(literal, column: start)
    }

    /// A name or value: quoted (with `\` escapes) or a bare run up to a delimiter.
    private mutating func parseWord(allowColon: Bool) throws(SearchError) -> (String, quoted: Bool)? {
        guard pos < scalars.count else { return nil }
        if scalars[pos] == "\"" || scalars[pos] == "'" {
            let quote = scalars[pos]
            let start = pos
            pos += 1
            var out = String.UnicodeScalarView()
            while pos < scalars.count, scalars[pos] != quote {
                if scalars[pos] == "\\", pos + 1 < scalars.count { pos += 1 }
                out.append(scalars[pos])
                pos += 1
            }
            guard pos < scalars.count else { throw failure("Unterminated quoted string", at: start) }
            pos += 1
            return (String(out), true)
        }
        var out = String.UnicodeScalarView()
        let scoreMarker = Array("<score=".unicodeScalars)
        while pos < scalars.count {
            let scalar = scalars[pos]
            if scalar.properties.isWhitespace || scalar == "(" || scalar == ")" || scalar == "\"" { break }
            if scalar == "<", pos + scoreMarker.count <= scalars.count,
                Array(scalars[pos..<(pos + scoreMarker.count)]) == scoreMarker
            {
                break
            }
            if !allowColon
                && (scalar == ":" || scalar == "<" || scalar == ">" || scalar == "=" || scalar == "!")
            {
                break
            }
            if scalar == "\\", pos + 1 < scalars.count {
                pos += 1
                out.append(scalars[pos])
                pos += 1
                continue
            }
            out.append(scalar)
            pos += 1
        }
        return out.isEmpty ? nil : (String(out), false)
    }

    /// A `<score=N>` right after a filter (Algolia's filter scores), or nil.
    private mutating func parseScore() throws(SearchError) -> Int? {
        let marker = Array("<score=".unicodeScalars)
        guard pos + marker.count <= scalars.count, Array(scalars[pos..<(pos + marker.count)]) == marker else {
            return nil
        }
        let start = pos
        pos += marker.count
        var digits = ""
        while pos < scalars.count, scalars[pos] != ">" {
            digits.unicodeScalars.append(scalars[pos])
            pos += 1
        }
        guard pos < scalars.count, let score = Int(digits), score >= 0, score <= 65535 else {
            throw failure("Invalid filter score, expected <score=N> with N an integer from 0", at: start)
        }
        pos += 1
        return score
    }

    private mutating func parseNumber(after what: String) throws(SearchError) -> Double {
        skipSpaces()
        let start = pos
        guard let (text, _) = try parseWord(allowColon: false), let value = Double(text), value.isFinite
        else {
            pos = start
            throw failure("Unexpected token \(describeNext()) expected a numeric value \(what)", at: start)
        }
        return value
    }

    private mutating func parsePredicate() throws(SearchError) -> FilterPredicate {
        skipSpaces()
        let start = pos
        guard let (name, _) = try parseWord(allowColon: false) else {
            throw failure("Unexpected token \(describeNext()) expected a filter")
        }
        // No space allowed between name and ':' in Algolia, but spaces before comparison operators are.
        if pos < scalars.count, scalars[pos] == ":" {
            pos += 1
            skipSpaces()
            let valueStart = pos
            guard let (value, quoted) = try parseWord(allowColon: true) else {
                throw failure("Unexpected token \(describeNext()) expected a value after ':'", at: valueStart)
            }
            let save = pos
            skipSpaces()
            if !quoted, peekKeyword("TO") {
                pos += 2
                guard let lower = Double(value), lower.isFinite else {
                    throw failure("Invalid lower bound '\(value)' in range", at: valueStart)
                }
                let upper = try parseNumber(after: "after TO")
                return .range(attribute: name, lower: lower, upper: upper)
            }
            pos = save
            if name == "_tags" { return .tag(value) }
            return .facet(attribute: name, value: value)
        }
        let save = pos
        skipSpaces()
        if pos < scalars.count, "<>=!".unicodeScalars.contains(scalars[pos]) {
            var op = String(scalars[pos])
            pos += 1
            if pos < scalars.count, scalars[pos] == "=" {
                op.append("=")
                pos += 1
            }
            guard let parsed = NumericOperator(rawValue: op) else {
                throw failure("Invalid operator '\(op)'", at: pos - op.count)
            }
            let value = try parseNumber(after: "after '\(op)'")
            return .numeric(attribute: name, op: parsed, value: value)
        }
        pos = save
        _ = start
        return .tag(name)
    }

    private func toCNF(_ node: FilterNode) throws(SearchError) -> FilterCNF {
        var conjuncts: [FilterNode] = []
        func flattenAnd(_ node: FilterNode) {
            switch node {
            case .and(let items): items.forEach(flattenAnd)
            case .group(let inner, _):
                if case .and = inner { flattenAnd(inner) } else { conjuncts.append(inner) }
            default: conjuncts.append(node)
            }
        }
        flattenAnd(node)
        var cnf: FilterCNF = []
        for conjunct in conjuncts {
            var group: [FilterLiteral] = []
            try collectOr(conjunct, into: &group)
            let kinds = Set(group.map { $0.predicate.kind })
            if kinds.count > 1 {
                let column: Int
                if case .or(_, let c) = conjunct { column = c } else { column = 0 }
                throw failure(
                    "filters of different types (facet, tag, numeric) cannot be combined with OR", at: column)
            }
            cnf.append(group)
        }
        return cnf
    }

    private func collectOr(_ node: FilterNode, into group: inout [FilterLiteral]) throws(SearchError) {
        switch node {
        case .literal(let literal, _): group.append(literal)
        case .or(let items, _):
            for item in items { try collectOr(item, into: &group) }
        case .group(let inner, _): try collectOr(inner, into: &group)
        case .not(let inner, let column):
            guard case .literal(var literal, _) = inner else {
                throw failure("NOT can only negate a single filter, not a group", at: column)
            }
            literal.negated.toggle()
            group.append(literal)
        case .and:
            throw failure("AND inside OR is not allowed; filters must be an AND of OR groups", at: 0)
        }
    }
}

// MARK: - Array forms

enum ArrayFilterKind { case facet, numeric, tag }

/// Parses `facetFilters` / `numericFilters` / `tagFilters` (array, nested arrays, JSON string or legacy
/// comma string) into CNF.
func parseArrayFilters(_ value: JSON, kind: ArrayFilterKind, name: String) throws(SearchError) -> FilterCNF {
    var items: [JSON]
    switch value {
    case .null: return []
    case .array(let array): items = array
    case .string(let text):
        let trimmed = text.trimmingSpaces
        if trimmed.isEmpty { return [] }
        if trimmed.hasPrefix("["), let parsed = try? JSON.parse(trimmed), case .array(let array) = parsed {
            items = array
        } else {
            items = legacyCommaFilters(trimmed)
        }
    default:
        throw SearchError(status: 400, message: "\(name): expected an array of strings or arrays")
    }
    var cnf: FilterCNF = []
    for item in items {
        switch item {
        case .string(let text):
            cnf.append([try arrayLiteral(text, kind: kind, name: name)])
        case .array(let inner):
            // Deeper arrays inside an OR group are more alternatives of that group.
            var group: [FilterLiteral] = []
            func collect(_ elements: [JSON], depth: Int) throws(SearchError) {
                guard depth <= FilterParser.maxDepth else {
                    throw SearchError(status: 400, message: "\(name): arrays nested too deeply")
                }
                for element in elements {
                    switch element {
                    case .string(let text): group.append(try arrayLiteral(text, kind: kind, name: name))
                    case .array(let deeper): try collect(deeper, depth: depth + 1)
                    default:
                        throw SearchError(
                            status: 400, message: "\(name): nested arrays may only contain strings or arrays")
                    }
                }
            }
            try collect(inner, depth: 1)
            if !group.isEmpty { cnf.append(group) }
        default:
            throw SearchError(status: 400, message: "\(name): expected strings or arrays of strings")
        }
    }
    return cnf
}

/// `a:b,(c:d,e:f)` → `["a:b", ["c:d","e:f"]]`.
private func legacyCommaFilters(_ text: String) -> [JSON] {
    var result: [JSON] = []
    var group: [JSON]?
    var current = ""
    func flush() {
        let item = current.trimmingSpaces
        current = ""
        guard !item.isEmpty else { return }
        if group != nil { group!.append(.string(item)) } else { result.append(.string(item)) }
    }
    for char in text {
        switch char {
        case "(" where group == nil: group = []
        case ")" where group != nil:
            flush()
            result.append(.array(group!))
            group = nil
        case ",": flush()
        default: current.append(char)
        }
    }
    flush()
    if let group { result.append(.array(group)) }
    return result
}

private func arrayLiteral(_ text: String, kind: ArrayFilterKind, name: String) throws(SearchError)
    -> FilterLiteral
{
    switch kind {
    case .numeric:
        let predicate = try FilterParser.parsePredicate(text, label: name)
        switch predicate {
        case .numeric, .range: return FilterLiteral(negated: false, predicate: predicate)
        default: throw SearchError(status: 400, message: "\(name): invalid numeric filter '\(text)'")
        }
    case .tag:
        var value = text
        var negated = false
        if value.hasPrefix("-") {
            negated = true
            value.removeFirst()
        } else if value.hasPrefix("\\-") {
            value.removeFirst()
        }
        return FilterLiteral(negated: negated, predicate: .tag(value))
    case .facet:
        var text = text
        var score: Int?
        if text.hasSuffix(">"), let marker = text.range(of: "<score=", options: .backwards) {
            guard let value = Int(text[marker.upperBound..<text.index(before: text.endIndex)]), value >= 0,
                value <= 65535
            else {
                throw SearchError(status: 400, message: "\(name): invalid filter score in '\(text)'")
            }
            score = value
            text = String(text[..<marker.lowerBound])
        }
        var literal = try facetLiteral(text, name: name)
        if let score {
            literal.score = score
            literal.scored = true
        }
        return literal
    }
}

private func facetLiteral(_ text: String, name: String) throws(SearchError) -> FilterLiteral {
    guard let colon = text.firstIndex(of: ":") else {
        throw SearchError(
            status: 400, message: "\(name): invalid facet filter '\(text)', expected attribute:value")
    }
    var attribute = String(text[..<colon]).trimmingSpaces
    if attribute.count >= 2, attribute.hasPrefix("\""), attribute.hasSuffix("\"") {
        attribute = String(attribute.dropFirst().dropLast())
    }
    var value = String(text[text.index(after: colon)...])
    var negated = false
    if value.hasPrefix("-") {
        negated = true
        value.removeFirst()
    } else if value.hasPrefix("\\-") {
        value.removeFirst()
    }
    if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
        value = String(value.dropFirst().dropLast())
    }
    if attribute == "_tags" { return FilterLiteral(negated: negated, predicate: .tag(value)) }
    return FilterLiteral(negated: negated, predicate: .facet(attribute: attribute, value: value))
}

// MARK: - Evaluation

/// A predicate resolved against one index.
enum CompiledPredicate {
    case never
    case facetID(FacetColumn, Int32)
    case lazyFacet(path: String, key: String)
    case numeric(NumericColumn, NumericOperator, Double)
    case range(NumericColumn, Double, Double)
}

struct CompiledLiteral {
    var negated: Bool
    var predicate: CompiledPredicate
    var score: Int = 1
}

/// A filter ready to test documents.
struct CompiledFilter {
    var groups: [[CompiledLiteral]]
    let data: IndexData

    var isEmpty: Bool { groups.isEmpty }

    init(_ cnf: FilterCNF, data: IndexData) {
        self.data = data
        groups = cnf.normalizingNotEqual().map { group in
            group.map { literal in
                CompiledLiteral(
                    negated: literal.negated, predicate: Self.compile(literal.predicate, data: data),
                    score: literal.score)
            }
        }
    }

    static func compile(_ predicate: FilterPredicate, data: IndexData) -> CompiledPredicate {
        switch predicate {
        case .facet(let attribute, let value):
            if let column = data.facetColumns[attribute] {
                if let id = column.ids[Normalizer.facetKey(value)] { return .facetID(column, id) }
                return .never
            }
            return .lazyFacet(path: attribute, key: Normalizer.facetKey(value))
        case .tag(let value):
            if let id = data.tagColumn.ids[value] { return .facetID(data.tagColumn, id) }
            return .never
        case .numeric(let attribute, let op, let value):
            if op == .notEqual {
                // `!=` holds when no value equals (missing attribute included); handled by negating `=`.
                guard let column = data.numericColumns[attribute] else { return .never }
                return .numeric(column, .equal, value)
            }
            guard let column = data.numericColumns[attribute] else { return .never }
            return .numeric(column, op, value)
        case .range(let attribute, let lower, let upper):
            guard let column = data.numericColumns[attribute] else { return .never }
            return .range(column, lower, upper)
        }
    }

    @inline(__always) func matches(_ doc: Int) -> Bool {
        for group in groups {
            var any = false
            for literal in group where test(literal.predicate, doc) != literal.negated {
                any = true
                break
            }
            if !any { return false }
        }
        return true
    }

    /// The filter score of `doc`: per group, the best score among the literals it satisfies (their
    /// sum with `sumOrFiltersScores`), added over the groups.
    func score(_ doc: Int, sumOr: Bool) -> Int {
        var total = 0
        for group in groups {
            var groupScore = 0
            for literal in group where test(literal.predicate, doc) != literal.negated {
                groupScore = sumOr ? groupScore + literal.score : max(groupScore, literal.score)
            }
            total += groupScore
        }
        return total
    }

    @inline(__always) private func test(_ predicate: CompiledPredicate, _ doc: Int) -> Bool {
        switch predicate {
        case .never: return false
        case .facetID(let column, let id): return column.contains(doc: doc, id: id)
        case .lazyFacet(let path, let key):
            var found = false
            forEachLeaf(data.record(doc), path: path) { leaf in
                if !found, Normalizer.facetKey(leaf.stringValue ?? leaf.serialized()) == key { found = true }
            }
            return found
        case .numeric(let column, let op, let value):
            return column.forEach(doc: doc) { op.test($0, value) }
        case .range(let column, let lower, let upper):
            return column.forEach(doc: doc) { $0 >= lower && $0 <= upper }
        }
    }
}

extension FilterCNF {
    /// Marks `!=` literals so evaluation negates the compiled `=`.
    func normalizingNotEqual() -> FilterCNF {
        map { group in
            group.map { literal in
                if case .numeric(let attribute, .notEqual, let value) = literal.predicate {
                    return FilterLiteral(
                        negated: !literal.negated,
                        predicate: .numeric(attribute: attribute, op: .notEqual, value: value))
                }
                return literal
            }
        }
    }
}
