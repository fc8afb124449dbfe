import HTTPCore
import JSONCore

/// A parsed Algolia API route: which index (if any) and which operation.
public enum AlgoliaRoute: Equatable, Sendable {
    /// `POST /1/indexes/{i}/query` or `GET /1/indexes/{i}?query=…`
    case search(index: String)
    /// `POST /1/indexes/*/queries`
    case multiQuery
    /// `POST|GET /1/indexes/{i}/browse`
    case browse(index: String)
    /// `GET /1/indexes/{i}/{objectID}`
    case getObject(index: String, objectID: String)
    /// `POST /1/indexes/*/objects`
    case getObjects
    /// `GET /1/indexes/{i}/settings`
    case getSettings(index: String)
    /// `POST /1/indexes/{i}/facets/{facet}/query`
    case facetSearch(index: String, facet: String)
    /// `POST /1/indexes/{i}/synonyms/search`
    case synonymSearch(index: String)
    /// `POST /1/indexes/{i}/rules/search`
    case ruleSearch(index: String)
    /// `GET /1/indexes/{i}/rules/{objectID}`
    case getRule(index: String, objectID: String)
    /// `GET /1/indexes`
    case listIndices
    /// Anything else addressing one index (writes, rules, tasks, …).
    case otherIndexCall(index: String)
    /// Anything else under `/1/`.
    case other

    /// The index this route addresses, if exactly one.
    public var index: String? {
        switch self {
        case .search(let i), .browse(let i), .getSettings(let i), .synonymSearch(let i), .ruleSearch(let i),
            .otherIndexCall(let i):
            return i
        case .getObject(let i, _), .facetSearch(let i, _), .getRule(let i, _): return i
        case .multiQuery, .getObjects, .listIndices, .other: return nil
        }
    }

    /// Parses method and raw path (percent-encoded segments are decoded).
    public static func parse(method: String, path: Substring) -> AlgoliaRoute {
        guard path.hasPrefix("/1/indexes") else { return .other }
        let rest = path.dropFirst("/1/indexes".count)
        if rest.isEmpty || rest == "/" { return method == "GET" ? .listIndices : .other }
        guard rest.hasPrefix("/") else { return .other }
        let parts = rest.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map {
            FormCodec.percentDecode($0)
        }
        guard let index = parts.first, !index.isEmpty else { return .other }
        if index == "*" {
            if parts.count == 2 && method == "POST" {
                if parts[1] == "queries" { return .multiQuery }
                if parts[1] == "objects" { return .getObjects }
            }
            return .other
        }
        switch (method, parts.count) {
        case ("GET", 1): return .search(index: index)
        case ("POST", 2) where parts[1] == "query": return .search(index: index)
        case ("POST", 2) where parts[1] == "browse", ("GET", 2) where parts[1] == "browse":
            return .browse(index: index)
        case ("GET", 2) where parts[1] == "settings": return .getSettings(index: index)
        case ("POST", 4) where parts[1] == "facets" && parts[3] == "query":
            return .facetSearch(index: index, facet: parts[2])
        case ("POST", 3) where parts[1] == "synonyms" && parts[2] == "search":
            return .synonymSearch(index: index)
        case ("POST", 3) where parts[1] == "rules" && parts[2] == "search":
            return .ruleSearch(index: index)
        case ("GET", 3) where parts[1] == "rules" && !parts[2].isEmpty:
            return .getRule(index: index, objectID: parts[2])
        case ("GET", 2) where !["settings", "browse", "task", "rules", "synonyms", "keys"].contains(parts[1]):
            return .getObject(index: index, objectID: parts[1])
        default: return .otherIndexCall(index: index)
        }
    }
}

/// Application ID and API key of a request, from headers or (browser clients) query parameters.
public struct AlgoliaCredentials: Sendable, Equatable {
    /// `X-Algolia-Application-Id`.
    public var appId: String?
    /// `X-Algolia-API-Key`.
    public var apiKey: String?

    /// Reads both forms; headers win.
    public init(_ request: HTTPRequest) {
        appId = request.headers["X-Algolia-Application-Id"]
        apiKey = request.headers["X-Algolia-API-Key"]
        if appId == nil || apiKey == nil {
            for (name, value) in request.queryItems {
                let lower = name.lowercased()
                if lower == "x-algolia-application-id" && appId == nil { appId = value }
                if lower == "x-algolia-api-key" && apiKey == nil { apiKey = value }
            }
        }
    }
}

extension AlgoliaRoute {
    /// The indices a call addresses: its one index, or the `indexName`s of a multi-query or getObjects
    /// body (empty when the body names none or is not JSON).
    public func indexNames(body: [UInt8]) -> [String] {
        if let index { return [index] }
        return (parts(body: body) ?? []).compactMap { $0["indexName"]?.stringValue }
    }

    /// The `requests` of a multi-query or getObjects body (nil for other calls, or when the body has
    /// none or is not JSON).
    public func parts(body: [UInt8]) -> [JSON]? {
        guard self == .multiQuery || self == .getObjects, let json = try? JSON.parse(body) else { return nil }
        return json["requests"]?.arrayValue
    }

    /// Whether a local index can answer this call (Algolia's read API).
    public var isLocalRead: Bool {
        switch self {
        case .search, .multiQuery, .browse, .getObject, .getObjects, .getSettings, .facetSearch,
            .synonymSearch, .ruleSearch, .getRule:
            true
        case .listIndices, .otherIndexCall, .other: false
        }
    }

    /// Whether the answer's envelope says where it came from (`"origin"`): search, multi-query, getObjects.
    public var tagsEnvelope: Bool {
        switch self {
        case .search, .multiQuery, .getObjects: true
        default: false
        }
    }

    /// Whether a client may ask for a preventive NDJSON stream of this call: search and multi-query.
    public var streamsPreventively: Bool {
        switch self {
        case .search, .multiQuery: true
        default: false
        }
    }
}
