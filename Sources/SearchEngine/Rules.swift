import Foundation
import JSONCore

/// What the query rules that matched a search change: the parameters to search with, records to
/// promote or hide, and what the answer reports (`appliedRules`, `userData`, `renderingContent`).
struct RuleOutcome {
    var params: JSONObject
    var applied: [String] = []
    var userData: [JSON] = []
    var renderingContent: JSON?
    /// (objectID, position) to pin, in order.
    var promote: [(String, Int)] = []
    var hide: Set<String> = []
    var filterPromotes = false
}

/// The query rules of an index (Algolia's rule objects, kept as given) and their application: conditions
/// (`pattern` with `anchoring` `is`/`startsWith`/`endsWith`/`contains`, `{facet:attr}` placeholders,
/// `alternatives`, `context`, `filters`), `validity` ranges and `enabled`; consequences (`params` with
/// `query` replacement or `remove`/`replace` edits, `automaticFacetFilters`,
/// `automaticOptionalFacetFilters`, `promote`, `hide`, `filterPromotes`, `userData`,
/// `renderingContent`). Matching rules are applied by precedence (an `is` pattern first, then
/// `startsWith`/`endsWith`, then `contains`, then rules without a pattern; longer patterns first);
/// for one parameter the first rule wins.
struct RuleSet: Sendable {
    let rules: [JSON]
    /// Each rule's conditions, parsed once.
    private let compiled: [[Condition]]
    /// Some condition matches on alternatives (needs the query's plural and synonym forms).
    let usesAlternatives: Bool
    /// Some condition has `filters` (needs the query's filters).
    let usesFilters: Bool

    init(_ rules: [JSON]) {
        self.rules = rules.filter { $0.objectValue != nil }
        compiled = self.rules.map(Self.conditions)
        usesAlternatives = compiled.contains { $0.contains(where: \.alternatives) }
        usesFilters = compiled.contains { $0.contains { $0.filters != nil } }
    }

    var isEmpty: Bool { rules.isEmpty }

    /// A condition of a rule, normalized.
    private struct Condition: Sendable {
        var pattern: [String]?
        var anchoring: String
        var alternatives: Bool
        var context: String?
        var filters: String?
    }

    private static func conditions(_ rule: JSON) -> [Condition] {
        var raw: [JSON] = rule["conditions"]?.arrayValue ?? []
        if let single = rule["condition"], single.objectValue != nil { raw.append(single) }
        return raw.map { c in
            Condition(
                pattern: c["pattern"]?.stringValue.map { Self.patternTokens($0) },
                anchoring: c["anchoring"]?.stringValue ?? "contains",
                alternatives: boolParam(c["alternatives"]) ?? false,
                context: c["context"]?.stringValue, filters: c["filters"]?.stringValue)
        }
    }

    /// Pattern words: `{facet:attr}` placeholders kept as they are, other text normalized.
    private static func patternTokens(_ text: String) -> [String] {
        var out: [String] = []
        var rest = Substring(text)
        while !rest.isEmpty {
            if rest.hasPrefix("{facet:"), let close = rest.firstIndex(of: "}") {
                out.append(String(rest[...close]))
                rest = rest[rest.index(after: close)...]
                continue
            }
            let next = rest.range(of: "{facet:")?.lowerBound ?? rest.endIndex
            out += Normalizer().tokens(String(rest[..<next])).map {
                String(decoding: $0.normalized, as: UTF8.self)
            }
            rest = rest[next...]
        }
        return out
    }

    static func isValid(_ rule: JSON, now: Int64) -> Bool {
        if boolParam(rule["enabled"]) == false { return false }
        guard let ranges = rule["validity"]?.arrayValue, !ranges.isEmpty else { return true }
        return ranges.contains { range in
            let from = range["from"]?.doubleValue.map { Int64($0) } ?? Int64.min
            let until = range["until"]?.doubleValue.map { Int64($0) } ?? Int64.max
            return from <= now && now <= until
        }
    }

    /// The words of `query`, each with the forms that count as it when `alternatives` is on.
    private struct QueryView {
        var words: [String]
        var forms: [Set<String>]
    }

    /// Matches a pattern at `start`: the end index and the facet values captured, or nil.
    private func match(
        _ pattern: [String], _ view: QueryView, at start: Int, alternatives: Bool, data: IndexData
    ) -> (end: Int, captured: [(String, String)])? {
        var i = start
        var captured: [(String, String)] = []
        for token in pattern {
            if token.hasPrefix("{facet:") {
                let attribute = String(token.dropFirst(7).dropLast())
                guard let column = data.facetColumns[attribute] else { return nil }
                // The longest facet value (in words) that the query holds here.
                var best: (Int, String)?
                for value in column.originals {
                    let words = data.normalizer.tokens(value).map {
                        String(decoding: $0.normalized, as: UTF8.self)
                    }
                    guard !words.isEmpty, i + words.count <= view.words.count,
                        Array(view.words[i..<(i + words.count)]) == words
                    else { continue }
                    if best == nil || words.count > best!.0 { best = (words.count, value) }
                }
                guard let best else { return nil }
                captured.append((attribute, best.1))
                i += best.0
                continue
            }
            guard i < view.words.count else { return nil }
            let ok = alternatives ? view.forms[i].contains(token) : view.words[i] == token
            guard ok else { return nil }
            i += 1
        }
        return (i, captured)
    }

    /// Applies the rules matching `params` (merged parameters) and returns the parameters to search
    /// with and the rest of the outcome. `words` are the query's parsed words (for `alternatives`).
    func apply(
        _ params: JSONObject, settings: JSONObject, data: IndexData, words: () -> [QueryWord], now: Int64,
        queryFilters: () -> FilterCNF
    ) -> RuleOutcome {
        var outcome = RuleOutcome(params: params)
        let options = SearchOptions(params: params, settings: settings)
        guard !rules.isEmpty, options.bool("enableRules", default: true) else { return outcome }
        let contexts = Set(options.list("ruleContexts") ?? [])
        let query = options.query
        let tokens = data.normalizer.tokens(query).map { String(decoding: $0.normalized, as: UTF8.self) }
        var forms: [Set<String>] = tokens.map { [$0] }
        let words = usesAlternatives ? words() : []
        let queryFilters = usesFilters ? queryFilters() : []
        for (i, token) in tokens.enumerated() {
            if let word = words.first(where: { $0.text == token }) {
                for alternative in word.alternatives where alternative.tokens.count == 1 {
                    forms[i].insert(String(decoding: alternative.tokens[0], as: UTF8.self))
                }
            }
        }
        let view = QueryView(words: tokens, forms: forms)

        // (precedence, rule index, matched range, captured facets)
        var matched: [(Int, Int, Range<Int>?, [(String, String)])] = []
        for (index, rule) in rules.enumerated() where Self.isValid(rule, now: now) {
            for condition in compiled[index] {
                if let context = condition.context, !contexts.contains(context) { continue }
                if let filters = condition.filters, !Self.filtersHeld(filters, by: queryFilters) { continue }
                guard let pattern = condition.pattern, !(pattern.isEmpty && condition.anchoring != "is")
                else {
                    matched.append((0, index, nil, []))
                    break
                }
                var hit: (Range<Int>, [(String, String)])?
                switch condition.anchoring {
                case "is":
                    if pattern.isEmpty {
                        if tokens.isEmpty { hit = (0..<0, []) }
                    } else if let m = match(
                        pattern, view, at: 0, alternatives: condition.alternatives, data: data),
                        m.end == tokens.count
                    {
                        hit = (0..<m.end, m.captured)
                    }
                case "startsWith":
                    if let m = match(pattern, view, at: 0, alternatives: condition.alternatives, data: data) {
                        hit = (0..<m.end, m.captured)
                    }
                case "endsWith":
                    for start in stride(from: tokens.count, through: 0, by: -1) {
                        if let m = match(
                            pattern, view, at: start, alternatives: condition.alternatives, data: data),
                            m.end == tokens.count
                        {
                            hit = (start..<m.end, m.captured)
                            break
                        }
                    }
                default:
                    for start in 0...tokens.count {
                        if let m = match(
                            pattern, view, at: start, alternatives: condition.alternatives, data: data),
                            m.end > start || pattern.isEmpty
                        {
                            hit = (start..<m.end, m.captured)
                            break
                        }
                    }
                }
                if let hit {
                    let rank =
                        condition.anchoring == "is" ? 3 : condition.anchoring == "contains" ? 1 : 2
                    matched.append((rank * 1000 + pattern.count, index, hit.0, hit.1))
                    break
                }
            }
        }
        matched.sort { $0.0 != $1.0 ? $0.0 > $1.0 : $0.1 < $1.1 }

        var setKeys = Set<String>()
        var queryEdited = false
        var removeWords = Set<Int>()
        for (_, index, range, captured) in matched {
            let rule = rules[index]
            let consequence = rule["consequence"] ?? [:]
            outcome.applied.append(rule["objectID"]?.stringValue ?? String(index))
            if let userData = consequence["userData"], !userData.isNull { outcome.userData.append(userData) }
            if let params = consequence["params"]?.objectValue {
                for (key, value) in params {
                    switch key {
                    case "query":
                        guard !queryEdited else { continue }
                        queryEdited = true
                        if let text = value.stringValue {
                            outcome.params["query"] = .string(text)
                        } else {
                            outcome.params["query"] = .string(Self.edit(query, value, data: data))
                        }
                    case "automaticFacetFilters", "automaticOptionalFacetFilters":
                        let optional = key == "automaticOptionalFacetFilters"
                        let filters = Self.automatic(value, captured: captured)
                        guard !filters.isEmpty else { continue }
                        let target = optional ? "optionalFilters" : "facetFilters"
                        var list = outcome.params[target].map { Self.asArray($0) } ?? []
                        list += filters
                        outcome.params[target] = .array(list)
                        // The words a facet placeholder matched leave the query.
                        if let range, !captured.isEmpty, !optional { removeWords.formUnion(range) }
                    case "filters":
                        if let existing = outcome.params["filters"]?.stringValue, !existing.isEmpty,
                            let added = value.stringValue, !added.isEmpty
                        {
                            outcome.params["filters"] = .string("(\(existing)) AND (\(added))")
                        } else if outcome.params["filters"] == nil || outcome.params["filters"] == "" {
                            outcome.params["filters"] = value
                        }
                    case "facetFilters", "optionalFilters", "numericFilters", "tagFilters":
                        var list = outcome.params[key].map { Self.asArray($0) } ?? []
                        list += Self.asArray(value)
                        outcome.params[key] = .array(list)
                    case "renderingContent":
                        if outcome.renderingContent == nil { outcome.renderingContent = value }
                    default:
                        guard setKeys.insert(key).inserted else { continue }
                        outcome.params[key] = value
                    }
                }
            }
            if let rendering = consequence["renderingContent"], outcome.renderingContent == nil {
                outcome.renderingContent = rendering
            }
            for entry in consequence["promote"]?.arrayValue ?? [] {
                let position = entry["position"]?.intValue ?? 0
                if let id = entry["objectID"]?.stringValue { outcome.promote.append((id, position)) }
                for (offset, id) in (entry["objectIDs"]?.arrayValue ?? []).enumerated() {
                    if let id = id.stringValue { outcome.promote.append((id, position + offset)) }
                }
            }
            for entry in consequence["hide"]?.arrayValue ?? [] {
                if let id = entry["objectID"]?.stringValue { outcome.hide.insert(id) }
            }
            if boolParam(consequence["filterPromotes"]) == true { outcome.filterPromotes = true }
        }
        if !removeWords.isEmpty && !queryEdited {
            let kept = data.normalizer.tokens(query).enumerated().filter { !removeWords.contains($0.offset) }
            let utf8 = Array(query.utf8)
            outcome.params["query"] = .string(
                kept.map { String(decoding: utf8[$0.element.start..<$0.element.end], as: UTF8.self) }
                    .joined(separator: " "))
        }
        return outcome
    }

    private static func asArray(_ value: JSON) -> [JSON] {
        switch value {
        case .array(let items): return items
        case .string(let text):
            if let parsed = try? JSON.parse(text), case .array(let items) = parsed { return items }
            return text.isEmpty ? [] : [value]
        default: return []
        }
    }

    /// `automaticFacetFilters` entries (names, or `{facet, disjunctive, score, negative}`) for the
    /// captured placeholder values.
    private static func automatic(_ value: JSON, captured: [(String, String)]) -> [JSON] {
        var out: [JSON] = []
        for entry in value.arrayValue ?? [] {
            let facet = entry.stringValue ?? entry["facet"]?.stringValue ?? ""
            let disjunctive = boolParam(entry["disjunctive"]) ?? false
            let negative = boolParam(entry["negative"]) ?? false
            let score = entry["score"]?.intValue
            let values = captured.filter { $0.0 == facet }.map { captured -> JSON in
                var text = facet + ":" + (negative ? "-" : "") + captured.1
                if let score { text += "<score=\(score)>" }
                return .string(text)
            }
            guard !values.isEmpty else { continue }
            if disjunctive { out.append(.array(values)) } else { out += values }
        }
        return out
    }

    /// A `query` consequence object: `remove` (words) and `edits` (`remove`: `delete`; `replace`:
    /// `delete` → `insert`).
    private static func edit(_ query: String, _ value: JSON, data: IndexData) -> String {
        var removals: [String] = (value["remove"].map(stringList) ?? [])
        var replacements: [String: String] = [:]
        for edit in value["edits"]?.arrayValue ?? [] {
            guard let delete = edit["delete"]?.stringValue else { continue }
            if edit["type"]?.stringValue == "replace", let insert = edit["insert"]?.stringValue {
                replacements[Normalizer.facetKey(delete)] = insert
            } else {
                removals.append(delete)
            }
        }
        let removeSet = Set(removals.map(Normalizer.facetKey))
        let utf8 = Array(query.utf8)
        var out: [String] = []
        for token in data.normalizer.tokens(query) {
            let key = String(decoding: token.normalized, as: UTF8.self)
            if removeSet.contains(key) { continue }
            out.append(replacements[key] ?? String(decoding: utf8[token.start..<token.end], as: UTF8.self))
        }
        return out.joined(separator: " ")
    }

    /// Whether every filter of a condition's `filters` is among the query's filters.
    private static func filtersHeld(_ text: String, by query: FilterCNF) -> Bool {
        guard let wanted = try? FilterParser.parse(text) else { return false }
        let have = query.flatMap { $0 }.map { literal -> String in
            "\(literal.negated)|\(key(literal.predicate))"
        }
        return wanted.allSatisfy { group in
            group.allSatisfy { have.contains("\($0.negated)|\(key($0.predicate))") }
        }
    }

    private static func key(_ predicate: FilterPredicate) -> String {
        switch predicate {
        case .facet(let attribute, let value): return "f:\(attribute):\(Normalizer.facetKey(value))"
        case .tag(let value): return "t:\(value)"
        case .numeric(let attribute, let op, let value): return "n:\(attribute)\(op.rawValue)\(value)"
        case .range(let attribute, let lower, let upper): return "r:\(attribute):\(lower):\(upper)"
        }
    }

    // MARK: - Rules API

    /// One rule by objectID.
    func rule(_ objectID: String) -> JSON? { rules.first { $0["objectID"]?.stringValue == objectID } }

    /// `rules/search`: `query` (in the objectID, description, pattern or consequence), `anchoring`,
    /// `context`, `enabled`, `page`, `hitsPerPage` (default 20); Algolia's answer shape.
    func search(_ params: JSONObject) -> JSON {
        let query = Normalizer.facetKey(params["query"]?.stringValue ?? "")
        let anchoring = params["anchoring"]?.stringValue
        let context = params["context"]?.stringValue
        let enabled = boolParam(params["enabled"])
        let hitsPerPage = max(1, min(1000, intParam(params["hitsPerPage"]) ?? 20))
        let page = max(0, intParam(params["page"]) ?? 0)
        let matching = rules.filter { rule in
            let conditions = (rule["conditions"]?.arrayValue ?? []) + [rule["condition"]].compactMap { $0 }
            if let anchoring, !conditions.contains(where: { $0["anchoring"]?.stringValue == anchoring }) {
                return false
            }
            if let context, !conditions.contains(where: { $0["context"]?.stringValue == context }) {
                return false
            }
            if let enabled, (boolParam(rule["enabled"]) ?? true) != enabled { return false }
            if query.isEmpty { return true }
            var texts = [rule["objectID"]?.stringValue, rule["description"]?.stringValue].compactMap { $0 }
            texts += conditions.compactMap { $0["pattern"]?.stringValue }
            texts.append(rule["consequence"]?.serialized() ?? "")
            return texts.contains { Normalizer.facetKey($0).contains(query) }
        }
        let (skip, overflow) = page.multipliedReportingOverflow(by: hitsPerPage)
        let slice = matching.dropFirst(overflow ? Int.max : skip).prefix(hitsPerPage)
        return [
            "hits": .array(Array(slice)), "nbHits": .int(Int64(matching.count)), "page": .int(Int64(page)),
            "nbPages": .int(Int64((matching.count + hitsPerPage - 1) / hitsPerPage)),
        ]
    }
}

extension RuleSet {
    /// Seconds since 1970 now (rule validity ranges are in these units).
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }
}
