import Foundation
import GatewayConfig
import HTTPCore
import JSONCore
import SearchEngine

/// Answers Algolia's read API from local indices with Algolia's shapes and errors. Runs on worker
/// threads (searching is CPU work). Every answer carries `X-Mirrorgate-Origin: local`.
///
/// Promises: an index is read only by a caller that ``ReadAccess`` admits for it (else `403` in Algolia's
/// format); a secured API key's `filters` are ANDed with the request's and its other parameters win; a
/// mirrored index without local data answers `424`, never a 5xx.
public struct LocalAlgolia: Sendable {
    /// The indices answered here.
    public let catalog: LocalCatalog
    /// Who may read them.
    public let access: ReadAccess
    /// The search parameters local answers did not apply, per index.
    public let notApplied = NotAppliedLog()

    /// Creates the responder over `catalog`, admitting callers by `access`.
    public init(catalog: LocalCatalog, access: ReadAccess) {
        self.catalog = catalog
        self.access = access
    }

    /// Answers `request`, whose route addresses indices of the catalog. `isAbandoned` is polled between
    /// the parts of a multi-query or getObjects: when it turns true (the client is gone) the work stops.
    public func answer(
        _ request: HTTPRequest, route: AlgoliaRoute, isAbandoned: @Sendable () -> Bool = { false }
    ) -> HTTPResponse {
        var response = compute(request, route: route, isAbandoned: isAbandoned)
        response.headers.set(MirrorgateHeader.origin, "local")
        return response
    }

    private func compute(_ request: HTTPRequest, route: AlgoliaRoute, isAbandoned: () -> Bool)
        -> HTTPResponse
    {
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
                let idx = try authorized(name, credentials, route.acl)
                let params: JSON = request.method == "GET" ? queryParams(request) : body
                let restricted = idx.restrict(params)
                notApplied.record(name, idx.index.ignoredParameters(restricted))
                let answer = try idx.index.searchSerialized(restricted, maxBytes: AlgoliaLimits.answerBytes)
                if answer.count > AlgoliaLimits.answerBytes { throw AlgoliaLimits.tooLarge }
                return .json(200, "").withBody(OriginTag.tag(answer, origin: "local"))
            case .browse(let name):
                let idx = try authorized(name, credentials, route.acl)
                let params: JSON = request.method == "GET" ? queryParams(request) : body
                let restricted = idx.restrict(params)
                notApplied.record(name, idx.index.ignoredParameters(restricted))
                return ok(try idx.index.browse(restricted, cursor: nil))
            case .getObject(let name, let objectID):
                let idx = try authorized(name, credentials, route.acl)
                let attrs = request.queryValue("attributesToRetrieve").map(Self.list)
                guard let object = try idx.object(objectID, attributesToRetrieve: attrs) else {
                    return AlgoliaError.response(404, "ObjectID does not exist")
                }
                return ok(object)
            case .getSettings(let name):
                let idx = try authorized(name, credentials, route.acl)
                let version = request.queryValue("getVersion").flatMap { Int($0) }
                return ok(idx.index.settings(getVersion: version))
            case .facetSearch(let name, let facet):
                let idx = try authorized(name, credentials, route.acl)
                return ok(try idx.index.searchForFacetValues(facet: facet, params: idx.restrict(body)))
            case .synonymSearch(let name):
                let idx = try authorized(name, credentials, route.acl)
                var params = SearchIndex.mergedParameters(body)
                for (k, v) in request.queryItems where params[k] == nil {
                    params[k] = JSON.typedParameter(name: k, value: v)
                }
                try SearchLimits.checkQuery(.object(params))
                return ok(idx.index.searchSynonyms(params: .object(params)))
            case .ruleSearch(let name):
                let idx = try authorized(name, credentials, route.acl)
                try SearchLimits.checkQuery(body)
                return ok(idx.index.searchRules(params: body))
            case .getRule(let name, let objectID):
                let idx = try authorized(name, credentials, route.acl)
                guard let rule = idx.index.getRule(objectID) else {
                    return AlgoliaError.response(404, "ObjectID does not exist")
                }
                return ok(rule)
            case .multiQuery:
                return .json(200, "").withBody(try multiQuery(body, credentials, isAbandoned: isAbandoned))
            case .getObjects:
                return ok(try getObjects(body, credentials, isAbandoned: isAbandoned))
            case .otherIndexCall(let name):
                _ = try authorized(name, credentials, route.acl)
                return AlgoliaError.response(
                    400, "\(request.method) \(request.path) is not supported on the local index \(name)")
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

    private func authorized(_ name: String, _ credentials: AlgoliaCredentials, _ acl: AlgoliaACL) throws
        -> Authorized
    {
        guard let idx = catalog.lookup(name) else {
            throw SearchError(status: 404, message: "Index \(name) does not exist")
        }
        guard let key = credentials.apiKey, credentials.appId != nil, !key.isEmpty,
            access.admits(credentials, to: name, idx.access)
        else {
            throw SearchError(status: 403, message: "Invalid Application-ID or API key")
        }
        guard access.allows(credentials, acl, idx.access) else {
            throw SearchError(status: 403, message: "Method not allowed with this API key")
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

        /// One record, unless the key's restrictions withhold it (see
        /// `SearchIndex.getObject(_:attributesToRetrieve:restrictedBy:)`).
        func object(_ objectID: String, attributesToRetrieve: [String]?) throws(SearchError) -> JSON? {
            guard !restrictions.isEmpty else {
                return index.getObject(objectID, attributesToRetrieve: attributesToRetrieve)
            }
            return try index.getObject(
                objectID, attributesToRetrieve: attributesToRetrieve, restrictedBy: restrictions)
        }

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

    /// A multi-query's answer, serialized (`{"origin":"local","results":[…]}`), stopping when the client
    /// is gone or the answer would pass ``AlgoliaLimits/answerBytes``.
    private func multiQuery(_ body: JSON, _ credentials: AlgoliaCredentials, isAbandoned: () -> Bool) throws
        -> [UInt8]
    {
        guard let requests = body["requests"]?.arrayValue else {
            throw SearchError(status: 400, message: "Missing `requests` in multi-query body")
        }
        if let error = AlgoliaLimits.error(.multiQuery, count: requests.count) { throw error }
        let stopIfEnough = body["strategy"]?.stringValue == "stopIfEnoughMatches"
        var out = Array(#"{"origin":"local","results":["#.utf8)
        var enough = false
        for (position, item) in requests.enumerated() {
            if isAbandoned() { throw SearchError(status: 400, message: "the client is gone") }
            guard let name = item["indexName"]?.stringValue else {
                throw SearchError(status: 400, message: "Missing `indexName` in a multi-query request")
            }
            let idx = try authorized(name, credentials, .search)
            var params = item.objectValue ?? JSONObject()
            params["indexName"] = nil
            params["type"] = nil
            let result: JSON
            if enough {
                // A query `stopIfEnoughMatches` skipped, shaped as Algolia's (and its Offline SDK's).
                result = [
                    "hits": [], "page": 0, "nbHits": 0, "nbPages": 0, "hitsPerPage": 0, "processingTimeMS": 1,
                    "params": .string(JSON.echoedParameters(.object(params))), "index": .string(name),
                    "processed": false,
                ]
            } else if item["type"]?.stringValue == "facet", let facet = item["facet"]?.stringValue {
                params["facet"] = nil
                result = try idx.index.searchForFacetValues(
                    facet: facet, params: idx.restrict(.object(params)))
            } else {
                let restricted = idx.restrict(.object(params))
                notApplied.record(name, idx.index.ignoredParameters(restricted))
                var answer = try idx.index.search(restricted, maxBytes: AlgoliaLimits.answerBytes - out.count)
                if case .object(var o) = answer {
                    o["index"] = .string(name)
                    answer = OriginTag.json(.object(o))
                }
                if stopIfEnough, let nbHits = answer["nbHits"]?.intValue,
                    let hpp = answer["hitsPerPage"]?.intValue, nbHits >= hpp
                {
                    enough = true
                }
                result = answer
            }
            if position > 0 { out.append(UInt8(ascii: ",")) }
            result.write(to: &out)
            if out.count > AlgoliaLimits.answerBytes { throw AlgoliaLimits.tooLarge }
        }
        out.append(contentsOf: Array("]}".utf8))
        return out
    }

    private func getObjects(_ body: JSON, _ credentials: AlgoliaCredentials, isAbandoned: () -> Bool) throws
        -> JSON
    {
        guard let requests = body["requests"]?.arrayValue else {
            throw SearchError(status: 400, message: "Missing `requests` in getObjects body")
        }
        if let error = AlgoliaLimits.error(.getObjects, count: requests.count) { throw error }
        var results: [JSON] = []
        var size = 0
        for item in requests {
            if isAbandoned() { throw SearchError(status: 400, message: "the client is gone") }
            guard let name = item["indexName"]?.stringValue, let id = item["objectID"]?.stringValue else {
                throw SearchError(status: 400, message: "Each request needs `indexName` and `objectID`")
            }
            let idx = try authorized(name, credentials, .search)
            let attrs = item["attributesToRetrieve"]?.arrayValue?.compactMap(\.stringValue)
            let object = try idx.object(id, attributesToRetrieve: attrs) ?? .null
            size += object.serializedBytes().count
            if size > AlgoliaLimits.answerBytes { throw AlgoliaLimits.tooLarge }
            results.append(object)
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
