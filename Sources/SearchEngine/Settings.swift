import JSONCore

/// One searchable attribute slot: a path and the rank of its priority group.
struct SearchableAttribute: Sendable, Hashable {
    var path: String
    var rank: Int
    var unordered: Bool
}

/// One entry of `attributesForFaceting`.
struct FacetAttribute: Sendable, Hashable {
    var path: String
    var filterOnly: Bool
    var searchable: Bool
}

enum SortDirection: Sendable { case ascending, descending }

/// A `ranking` criterion.
enum RankingCriterion: Sendable, Equatable {
    case typo, geo, words, filters, proximity, attribute, exact, custom
    case sort(String, SortDirection)
}

/// Index settings as read by the engine, from the settings JSON as given (legacy names accepted,
/// string booleans accepted). Search-time defaults stay in `raw` and are read per query.
struct EngineSettings: Sendable {
    var raw: JSONObject
    /// Searchable attributes; empty means every attribute, attribute criterion off.
    var searchable: [SearchableAttribute]
    var facets: [FacetAttribute]
    var customRanking: [(String, SortDirection)]
    var ranking: [RankingCriterion]
    var unretrievable: Set<String>
    var attributeForDistinct: String?
    var numericAttributesForFiltering: Set<String>?
    var separatorsToIndex: String
    var disableTypoOnAttributes: Set<String>
    var disableTypoOnWords: Set<String>
    var disablePrefixOnAttributes: Set<String>
    var disableExactOnAttributes: Set<String>

    init(_ json: JSON) {
        let raw = json.objectValue ?? JSONObject()
        self.raw = raw
        func list(_ names: String...) -> [String]? {
            for name in names {
                if let value = raw[name], !value.isNull { return stringList(value) }
            }
            return nil
        }
        var searchable: [SearchableAttribute] = []
        for (rank, entry) in (list("searchableAttributes", "attributesToIndex") ?? []).enumerated() {
            for part in entry.split(separator: ",") {
                var name = part.trimmingSpaces
                var unordered = false
                if let inner = name.unwrapping("unordered") {
                    name = inner
                    unordered = true
                } else if let inner = name.unwrapping("ordered") {
                    name = inner
                }
                searchable.append(SearchableAttribute(path: name, rank: rank, unordered: unordered))
            }
        }
        self.searchable = searchable
        var facets: [FacetAttribute] = []
        for entry in list("attributesForFaceting") ?? [] {
            var name = entry.trimmingSpaces
            var filterOnly = false
            var isSearchable = false
            var changed = true
            while changed {
                changed = false
                if let inner = name.unwrapping("filterOnly") {
                    name = inner
                    filterOnly = true
                    changed = true
                } else if let inner = name.unwrapping("searchable") {
                    name = inner
                    isSearchable = true
                    changed = true
                } else if let inner = name.unwrapping("afterDistinct") {
                    name = inner
                    changed = true
                }
            }
            facets.append(FacetAttribute(path: name, filterOnly: filterOnly, searchable: isSearchable))
        }
        self.facets = facets
        customRanking = (list("customRanking") ?? []).compactMap { Self.sortSpec($0) }
        let rankingNames =
            list("ranking") ?? [
                "typo", "geo", "words", "filters", "proximity", "attribute", "exact", "custom",
            ]
        ranking = rankingNames.compactMap { name in
            switch name.trimmingSpaces {
            case "typo": return .typo
            case "geo": return .geo
            case "words": return .words
            case "filters": return .filters
            case "proximity": return .proximity
            case "attribute": return .attribute
            case "exact": return .exact
            case "custom": return .custom
            default:
                if let (attr, direction) = Self.sortSpec(name) { return .sort(attr, direction) }
                return nil
            }
        }
        unretrievable = Set(list("unretrievableAttributes") ?? [])
        attributeForDistinct = raw["attributeForDistinct"]?.stringValue
        if let numeric = list("numericAttributesForFiltering", "numericAttributesToIndex"), !numeric.isEmpty {
            numericAttributesForFiltering = Set(numeric.map { $0.unwrapping("equalOnly") ?? $0 })
        } else {
            numericAttributesForFiltering = nil
        }
        separatorsToIndex = raw["separatorsToIndex"]?.stringValue ?? ""
        disableTypoOnAttributes = Set(list("disableTypoToleranceOnAttributes") ?? [])
        disableTypoOnWords = Set((list("disableTypoToleranceOnWords") ?? []).map { Normalizer.facetKey($0) })
        disablePrefixOnAttributes = Set(list("disablePrefixOnAttributes") ?? [])
        disableExactOnAttributes = Set(list("disableExactOnAttributes") ?? [])
    }

    static func sortSpec(_ text: String) -> (String, SortDirection)? {
        let text = text.trimmingSpaces
        if let inner = text.unwrapping("asc") { return (inner, .ascending) }
        if let inner = text.unwrapping("desc") { return (inner, .descending) }
        return nil
    }
}

/// A list parameter given as a JSON array, a JSON array in a string, or a comma-separated string.
func stringList(_ value: JSON) -> [String] {
    switch value {
    case .array(let items):
        return items.compactMap { item in
            switch item {
            case .string(let s): return s
            case .int, .double, .bool: return item.serialized()
            default: return nil
            }
        }
    case .string(let text):
        let trimmed = text.trimmingSpaces
        if trimmed.hasPrefix("["), let parsed = try? JSON.parse(trimmed), case .array = parsed {
            return stringList(parsed)
        }
        if trimmed.isEmpty { return [] }
        return trimmed.split(separator: ",").map { String($0).trimmingSpaces }
    case .null: return []
    default: return [value.serialized()]
    }
}

/// A boolean parameter that may be a string (`"true"`) or a number.
func boolParam(_ value: JSON?) -> Bool? {
    switch value {
    case .bool(let b)?: return b
    case .string(let s)?:
        switch s.lowercased() {
        case "true", "1": return true
        case "false", "0": return false
        default: return nil
        }
    case .int(let i)?: return i != 0
    case .double(let d)?: return d != 0
    default: return nil
    }
}

/// An integer parameter that may be given as a string.
func intParam(_ value: JSON?) -> Int? {
    switch value {
    case .int(let i)?: return Int(i)
    // Out of Int's range (1e19, 2^63 parsed as a double) is invalid, not a trap.
    case .double(let d)?: return Int(exactly: d.rounded(.towardZero))
    case .string(let s)?: return Int(s.trimmingSpaces)
    case .bool(let b)?: return b ? 1 : 0
    default: return nil
    }
}

extension StringProtocol {
    var trimmingSpaces: String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" || first == "\n" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" || last == "\n" { slice.removeLast() }
        return String(slice)
    }

    /// `name(inner)` → `inner` when the function name matches.
    func unwrapping(_ function: String) -> String? {
        let text = String(self)
        guard text.hasPrefix(function + "("), text.hasSuffix(")") else { return nil }
        return String(text.dropFirst(function.count + 1).dropLast()).trimmingSpaces
    }
}
