import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import SearchEngine

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
    /// `GET /1/indexes`
    case listIndices
    /// Anything else addressing one index (writes, rules, tasks, …).
    case otherIndexCall(index: String)
    /// Anything else under `/1/`.
    case other

    /// The index this route addresses, if exactly one.
    public var index: String? {
        switch self {
        case .search(let i), .browse(let i), .getSettings(let i), .synonymSearch(let i),
            .otherIndexCall(let i):
            return i
        case .getObject(let i, _), .facetSearch(let i, _): return i
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

/// One index answered locally and who may read it.
public struct OfflineIndex: Sendable {
    /// The engine's index; nil when a mirrored index has no offline data yet.
    public let index: SearchIndex?
    /// Keys accepted for it; nil accepts any key (ignored when `authorize` is set).
    public let apiKeys: Set<String>?
    /// Decides instead of `apiKeys` (mirrored indices: keys the upstream accepted before).
    public let authorize: (@Sendable (AlgoliaCredentials) -> Bool)?

    /// Creates an entry.
    public init(
        index: SearchIndex?, apiKeys: Set<String>?, authorize: (@Sendable (AlgoliaCredentials) -> Bool)? = nil
    ) {
        self.index = index
        self.apiKeys = apiKeys
        self.authorize = authorize
    }
}

/// The restrictions carried by a secured API key: `base64(hex HMAC-SHA256 + "params")`. The HMAC cannot
/// be checked locally (the parent key is unknown), but a key is only used locally once the upstream has
/// accepted it, so its parameters are authentic.
public enum SecuredKey {
    /// The key's embedded parameters, or nil when `key` is not a secured key.
    public static func restrictions(_ key: String) -> JSONObject? {
        guard key.count > 64, let data = Data(base64Encoded: key) ?? Data(base64Encoded: padded(key)) else {
            return nil
        }
        let text = String(decoding: data, as: UTF8.self)
        let hex = text.prefix(64)
        guard hex.count == 64, hex.allSatisfy(\.isHexDigit) else { return nil }
        return JSON.parseAlgoliaParams(String(text.dropFirst(64)))
    }

    private static func padded(_ s: String) -> String {
        s + String(repeating: "=", count: (4 - s.count % 4) % 4)
    }

    /// Whether `index` matches a `restrictIndices` entry (`*` wildcards at either end).
    static func matches(_ pattern: String, _ index: String) -> Bool {
        if pattern == "*" { return true }
        if pattern.hasPrefix("*") && pattern.hasSuffix("*") && pattern.count > 1 {
            return index.contains(pattern.dropFirst().dropLast())
        }
        if pattern.hasPrefix("*") { return index.hasSuffix(pattern.dropFirst()) }
        if pattern.hasSuffix("*") { return index.hasPrefix(pattern.dropLast()) }
        return pattern == index
    }
}

/// Answers Algolia's read API from local indices with Algolia's shapes and errors. Runs on worker
/// threads (searching is CPU work). Every answer carries `X-Mirrorgate-Origin: local`.
public struct LocalAlgolia: Sendable {
    /// Looks an index up by name.
    public let lookup: @Sendable (String) -> OfflineIndex?

    /// Creates the responder over a lookup.
    public init(lookup: @escaping @Sendable (String) -> OfflineIndex?) { self.lookup = lookup }

    /// Whether `route` is answered here (it addresses local indices only).
    public func handles(_ route: AlgoliaRoute, body: [UInt8]) -> Bool {
        if let name = route.index { return lookup(name) != nil }
        switch route {
        case .multiQuery, .getObjects:
            let names = Self.indexNames(in: body)
            return !names.isEmpty && names.allSatisfy { lookup($0) != nil }
        default: return false
        }
    }

    static func indexNames(in body: [UInt8]) -> [String] {
        guard let json = try? JSON.parse(body), let requests = json["requests"]?.arrayValue else { return [] }
        return requests.compactMap { $0["indexName"]?.stringValue }
    }

    /// Answers `request` (whose route `handles` accepted).
    public func answer(_ request: HTTPRequest, route: AlgoliaRoute) -> HTTPResponse {
        var response = compute(request, route: route)
        response.headers.set(MirrorgateHeader.origin, "local")
        return response
    }

    private func compute(_ request: HTTPRequest, route: AlgoliaRoute) -> HTTPResponse {
        let credentials = AlgoliaCredentials(request)
        let body: JSON
        if request.body.isEmpty {
            body = .object(JSONObject())
        } else {
            do {
                body = try JSON.parse(request.body)
            } catch {
                return AlgoliaError.response(400, "Invalid JSON body: \(error)")
            }
        }
        do {
            switch route {
            case .search(let name):
                let idx = try authorized(name, credentials)
                let params: JSON = request.method == "GET" ? queryParams(request) : body
                return .json(200, "")
                    .withBody(
                        OriginTag.tag(try idx.index.searchSerialized(idx.restrict(params)), origin: "local"))
            case .browse(let name):
                let idx = try authorized(name, credentials)
                let params: JSON = request.method == "GET" ? queryParams(request) : body
                return ok(try idx.index.browse(idx.restrict(params), cursor: nil))
            case .getObject(let name, let objectID):
                let idx = try authorized(name, credentials)
                let attrs = request.queryValue("attributesToRetrieve").map(Self.list)
                guard let object = idx.index.getObject(objectID, attributesToRetrieve: attrs) else {
                    return AlgoliaError.response(404, "ObjectID does not exist")
                }
                return ok(object)
            case .getSettings(let name):
                let idx = try authorized(name, credentials)
                let version = request.queryValue("getVersion").flatMap { Int($0) }
                return ok(idx.index.settings(getVersion: version))
            case .facetSearch(let name, let facet):
                let idx = try authorized(name, credentials)
                return ok(try idx.index.searchForFacetValues(facet: facet, params: idx.restrict(body)))
            case .synonymSearch(let name):
                let idx = try authorized(name, credentials)
                var params = SearchIndex.mergedParameters(body)
                for (k, v) in request.queryItems where params[k] == nil {
                    params[k] = JSON.typedParameter(name: k, value: v)
                }
                return ok(idx.index.searchSynonyms(params: .object(params)))
            case .multiQuery:
                return ok(try multiQuery(body, credentials))
            case .getObjects:
                return ok(try getObjects(body, credentials))
            case .otherIndexCall(let name):
                _ = try authorized(name, credentials)
                return AlgoliaError.response(
                    400,
                    "index \(name) is a read-only offline index in this version: \(request.method) not supported"
                )
            case .listIndices, .other:
                return AlgoliaError.response(404, "no local answer for \(request.method) \(request.path)")
            }
        } catch let error as SearchError {
            return AlgoliaError.response(error.status, error.message)
        } catch {
            return AlgoliaError.response(400, "\(error)")
        }
    }

    private func ok(_ json: JSON) -> HTTPResponse { .json(200, "").withBody(json.serializedBytes()) }

    private func authorized(_ name: String, _ credentials: AlgoliaCredentials) throws -> Authorized {
        guard let idx = lookup(name) else {
            throw SearchError(status: 404, message: "Index \(name) does not exist")
        }
        guard let key = credentials.apiKey, credentials.appId != nil, !key.isEmpty else {
            throw SearchError(status: 403, message: "Invalid Application-ID or API key")
        }
        if let authorize = idx.authorize {
            guard authorize(credentials) else {
                throw SearchError(status: 403, message: "Invalid Application-ID or API key")
            }
        } else if let keys = idx.apiKeys, !keys.contains(key) {
            throw SearchError(status: 403, message: "Invalid Application-ID or API key")
        }
        var restrictions = SecuredKey.restrictions(key) ?? JSONObject()
        if let until = restrictions["validUntil"]?.intValue, Double(until) < Date().timeIntervalSince1970 {
            throw SearchError(status: 403, message: "The validity of the secured API key has expired")
        }
        if let allowed = restrictions["restrictIndices"] {
            let list = allowed.arrayValue?.compactMap(\.stringValue) ?? Self.list(allowed.stringValue ?? "")
            guard list.contains(where: { SecuredKey.matches($0, name) }) else {
                throw SearchError(status: 403, message: "Index not allowed with this API key")
            }
        }
        for k in ["validUntil", "restrictIndices", "restrictSources", "userToken", "referers"] {
            restrictions[k] = nil
        }
        guard let index = idx.index else {
            throw SearchError(
                status: 424, message: "upstream unavailable and no offline data for index \(name)")
        }
        return Authorized(index: index, restrictions: restrictions)
    }

    struct Authorized {
        let index: SearchIndex
        let restrictions: JSONObject

        /// The request's parameters with the key's restrictions applied: its `filters` are ANDed with the
        /// request's, its other parameters win.
        func restrict(_ params: JSON) -> JSON {
            guard !restrictions.isEmpty else { return params }
            var merged = SearchIndex.mergedParameters(params)
            for (key, value) in restrictions {
                if key == "filters", let extra = value.stringValue, !extra.isEmpty {
                    if let own = merged["filters"]?.stringValue, !own.isEmpty {
                        merged["filters"] = .string("(\(own)) AND (\(extra))")
                    } else {
                        merged["filters"] = .string(extra)
                    }
                } else {
                    merged[key] = value
                }
            }
            return .object(merged)
        }
    }

    private func queryParams(_ request: HTTPRequest) -> JSON {
        var object = JSONObject()
        for (name, value) in request.queryItems {
            let lower = name.lowercased()
            if lower == "x-algolia-application-id" || lower == "x-algolia-api-key"
                || lower == "x-algolia-agent"
            {
                continue
            }
            object[name] = JSON.typedParameter(name: name, value: value)
        }
        return .object(object)
    }

    static func list(_ text: String) -> [String] {
        if text.hasPrefix("["), let parsed = try? JSON.parse(text), let items = parsed.arrayValue {
            return items.compactMap(\.stringValue)
        }
        return text.split(separator: ",").map { String($0) }
    }

    private func multiQuery(_ body: JSON, _ credentials: AlgoliaCredentials) throws -> JSON {
        guard let requests = body["requests"]?.arrayValue else {
            throw SearchError(status: 400, message: "Missing `requests` in multi-query body")
        }
        let stopIfEnough = body["strategy"]?.stringValue == "stopIfEnoughMatches"
        var results: [JSON] = []
        var enough = false
        for item in requests {
            guard let name = item["indexName"]?.stringValue else {
                throw SearchError(status: 400, message: "Missing `indexName` in a multi-query request")
            }
            let idx = try authorized(name, credentials)
            var params = item.objectValue ?? JSONObject()
            params["indexName"] = nil
            params["type"] = nil
            if enough {
                results.append(["index": .string(name), "processed": false, "hits": [], "nbHits": 0])
                continue
            }
            if item["type"]?.stringValue == "facet", let facet = item["facet"]?.stringValue {
                params["facet"] = nil
                results.append(
                    try idx.index.searchForFacetValues(facet: facet, params: idx.restrict(.object(params))))
                continue
            }
            var result = try idx.index.search(idx.restrict(.object(params)))
            if case .object(var o) = result {
                o["index"] = .string(name)
                result = OriginTag.json(.object(o))
            }
            if stopIfEnough, let nbHits = result["nbHits"]?.intValue,
                let hpp = result["hitsPerPage"]?.intValue,
                nbHits >= hpp
            {
                enough = true
            }
            results.append(result)
        }
        return OriginTag.json(["results": .array(results)])
    }

    private func getObjects(_ body: JSON, _ credentials: AlgoliaCredentials) throws -> JSON {
        guard let requests = body["requests"]?.arrayValue else {
            throw SearchError(status: 400, message: "Missing `requests` in getObjects body")
        }
        var results: [JSON] = []
        for item in requests {
            guard let name = item["indexName"]?.stringValue, let id = item["objectID"]?.stringValue else {
                throw SearchError(status: 400, message: "Each request needs `indexName` and `objectID`")
            }
            let idx = try authorized(name, credentials)
            let attrs = item["attributesToRetrieve"]?.arrayValue?.compactMap(\.stringValue)
            results.append(idx.index.getObject(id, attributesToRetrieve: attrs) ?? .null)
        }
        return OriginTag.json(["results": .array(results)])
    }
}

extension HTTPResponse {
    /// The same response with another fixed body.
    func withBody(_ bytes: [UInt8]) -> HTTPResponse {
        var r = self
        r.body = .bytes(bytes)
        return r
    }
}
