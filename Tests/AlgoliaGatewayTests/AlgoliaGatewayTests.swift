import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import SearchEngine
import Testing

@testable import AlgoliaGateway

@Suite struct RouteParsingTests {
    @Test(arguments: [
        ("POST", "/1/indexes/products/query", AlgoliaRoute.search(index: "products")),
        ("GET", "/1/indexes/products", .search(index: "products")),
        ("POST", "/1/indexes/*/queries", .multiQuery),
        ("POST", "/1/indexes/*/objects", .getObjects),
        ("GET", "/1/indexes/products/browse", .browse(index: "products")),
        ("POST", "/1/indexes/products/browse", .browse(index: "products")),
        ("GET", "/1/indexes/products/settings", .getSettings(index: "products")),
        ("GET", "/1/indexes/my%20index/a%2Fb", .getObject(index: "my index", objectID: "a/b")),
        ("POST", "/1/indexes/products/facets/brand/query", .facetSearch(index: "products", facet: "brand")),
        ("POST", "/1/indexes/products/synonyms/search", .synonymSearch(index: "products")),
        ("POST", "/1/indexes/products/rules/search", .ruleSearch(index: "products")),
        ("GET", "/1/indexes/products/rules/a%20rule", .getRule(index: "products", objectID: "a rule")),
        ("PUT", "/1/indexes/products/rules/r1", .otherIndexCall(index: "products")),
        ("GET", "/1/indexes/products/rules", .otherIndexCall(index: "products")),
        ("GET", "/1/indexes", .listIndices),
        ("POST", "/1/indexes/products/batch", .otherIndexCall(index: "products")),
        ("GET", "/1/indexes/products/task/12", .otherIndexCall(index: "products")),
        ("GET", "/1/keys", .other),
    ])
    func parses(method: String, path: String, expected: AlgoliaRoute) {
        #expect(AlgoliaRoute.parse(method: method, path: path[...]) == expected)
    }

    @Test func readCallsAreClassifiedLikeTheOfficialClients() {
        #expect(AlgoliaForwarder.isRead(method: "GET", path: "/1/indexes/a/task/1"))
        #expect(AlgoliaForwarder.isRead(method: "POST", path: "/1/indexes/a/query"))
        #expect(AlgoliaForwarder.isRead(method: "POST", path: "/1/indexes/*/objects"))
        #expect(!AlgoliaForwarder.isRead(method: "POST", path: "/1/indexes/a/batch"))
        #expect(!AlgoliaForwarder.isRead(method: "PUT", path: "/1/indexes/a/settings"))
    }
}

@Suite struct OriginTagTests {
    @Test func insertsFirstMemberWithoutReserialising() {
        let body = Array(#"{ "hits" : [ 1.50 ], "x":"\u00e9"}"#.utf8)
        let tagged = String(decoding: OriginTag.tag(body), as: UTF8.self)
        #expect(tagged == #"{"origin":"remote", "hits" : [ 1.50 ], "x":"\u00e9"}"#)
    }

    @Test func multiQueryResultsAreTaggedEachButRecordsAreNot() throws {
        let body = Array(
            #"{"results":[{"hits":[{"objectID":"1","results":[{"x":1}]}],"nbHits":1},{}],"message":"results"}"#
                .utf8)
        let tagged = try JSON.parse(OriginTag.tagResults(body))
        #expect(tagged["origin"]?.stringValue == "remote")
        let results = try #require(tagged["results"]?.arrayValue)
        #expect(results.map { $0["origin"]?.stringValue } == ["remote", "remote"])
        #expect(results[0]["hits"]?[0]?["origin"] == nil)
        #expect(results[0]["hits"]?[0]?["results"]?[0]?["origin"] == nil)
        #expect(tagged["message"]?.stringValue == "results")
    }

    @Test func emptyObjectsAndNonObjects() {
        #expect(String(decoding: OriginTag.tag(Array("{}".utf8)), as: UTF8.self) == #"{"origin":"remote"}"#)
        #expect(OriginTag.tag(Array("[1]".utf8)) == Array("[1]".utf8))
    }

    @Test func streamingGivesTheSameBytes() {
        let body = Array(#"  {"hits":[{"a":1}],"nbHits":1}"#.utf8)
        let whole = OriginTag.tag(body)
        for size in 1...5 {
            var t = OriginTag.Streaming()
            var out: [UInt8] = []
            var i = 0
            while i < body.count {
                out += t.feed(Array(body[i..<min(body.count, i + size)]))
                i += size
            }
            out += t.flush()
            #expect(out == whole)
        }
    }
}

@Suite struct SecuredKeyTests {
    func secured(_ params: String) -> String {
        let hmac = String(repeating: "ab", count: 32)
        return Data((hmac + params).utf8).base64EncodedString()
    }

    @Test func readsEmbeddedRestrictions() throws {
        let r = try #require(SecuredKey.restrictions(secured("filters=brand%3AApple&validUntil=2000000000")))
        #expect(r["filters"]?.stringValue == "brand:Apple")
        #expect(r["validUntil"]?.intValue == 2_000_000_000)
    }

    @Test func plainKeysAreNotSecured() {
        #expect(SecuredKey.restrictions("6be0576ff61c053d5f9a3225e2a90f76") == nil)
        #expect(SecuredKey.restrictions("not base64 at all!") == nil)
    }

    @Test func indexPatterns() {
        #expect(SecuredKey.matches("prod_*", "prod_en"))
        #expect(SecuredKey.matches("*_en", "prod_en"))
        #expect(SecuredKey.matches("*", "x"))
        #expect(!SecuredKey.matches("prod_*", "dev_en"))
    }
}

@Suite struct LocalAnswerTests {
    let index = SearchIndex(
        name: "p", settings: ["attributesForFaceting": ["brand"]],
        records: [
            ["objectID": "1", "name": "apple phone", "brand": "Apple"],
            ["objectID": "2", "name": "samsung phone", "brand": "Samsung"],
        ])

    func request(_ key: String, body: String) -> HTTPRequest {
        HTTPRequest(
            method: "POST", target: "/1/indexes/p/query",
            headers: ["X-Algolia-Application-Id": "APP", "X-Algolia-API-Key": key], body: Array(body.utf8))
    }

    @Test func keysAreCheckedAndSecuredFiltersApplied() throws {
        let key = Data((String(repeating: "0", count: 64) + "filters=brand%3ASamsung").utf8)
            .base64EncodedString()
        let keys = try KeyMemory(pool: nil)
        keys.accept(appId: "APP", index: "p", key: key)
        let mirror = MirroredIndex(
            settings: MirrorSettings(name: "p"), current: index, lastSuccessfulSyncAt: nil, fingerprint: nil)
        let local = LocalAlgolia(
            catalog: LocalCatalog(offline: OfflineIndexRegistry(), mirrors: ["p": mirror]),
            access: ReadAccess(appId: "APP", syncKey: nil, keys: keys))
        let route = AlgoliaRoute.search(index: "p")
        #expect(local.answer(request("bad", body: "{}"), route: route).status == 403)
        let r = local.answer(request(key, body: #"{"query":"phone"}"#), route: route)
        #expect(r.status == 200)
        #expect(r.headers["X-Mirrorgate-Origin"] == "local")
        guard case .bytes(let body) = r.body else {
            Issue.record("fixed body expected")
            return
        }
        let json = try JSON.parse(body)
        #expect(json["origin"]?.stringValue == "local")
        #expect(json["hits"]?.arrayValue?.compactMap { $0["objectID"]?.stringValue } == ["2"])
    }

    @Test func offlineIndicesAdmitTheirListedKeysOnly() throws {
        let offline = OfflineIndexRegistry([
            "p": LocalIndex(index: index, access: .keys(["k1": [.search], "browser": [.browse]])),
            "q": LocalIndex(index: index, access: .keys(nil)),
        ])
        let local = LocalAlgolia(
            catalog: LocalCatalog(offline: offline, mirrors: [:]),
            access: ReadAccess(appId: nil, syncKey: nil, keys: try KeyMemory(pool: nil)))
        #expect(local.answer(request("k1", body: "{}"), route: .search(index: "p")).status == 200)
        #expect(local.answer(request("k2", body: "{}"), route: .search(index: "p")).status == 403)
        #expect(local.answer(request("k2", body: "{}"), route: .search(index: "q")).status == 200)
        #expect(local.answer(request("", body: "{}"), route: .search(index: "q")).status == 403)
        // A listed key without the ACL the call needs: Algolia's 403.
        let refused = local.answer(request("browser", body: "{}"), route: .search(index: "p"))
        #expect(refused.status == 403)
        if case .bytes(let bytes) = refused.body {
            #expect(try JSON.parse(bytes)["message"]?.stringValue == "Method not allowed with this API key")
        }
        #expect(local.answer(request("browser", body: "{}"), route: .browse(index: "p")).status == 200)
        #expect(local.answer(request("k1", body: "{}"), route: .browse(index: "p")).status == 403)
    }

    @Test func mirrorWithoutDataIsUnavailableNotAnError() throws {
        let offline = OfflineIndexRegistry(["p": LocalIndex(index: nil, access: .keys(nil))])
        let local = LocalAlgolia(
            catalog: LocalCatalog(offline: offline, mirrors: [:]),
            access: ReadAccess(appId: nil, syncKey: nil, keys: try KeyMemory(pool: nil)))
        #expect(local.answer(request("k", body: "{}"), route: .search(index: "p")).status == 424)
    }
}

@Suite struct KeyMemoryTests {
    @Test func remembersOnlyWhatWasAccepted() throws {
        let memory = try KeyMemory(pool: nil)
        #expect(!memory.isAccepted(appId: "A", index: "i", key: "k"))
        memory.accept(appId: "A", index: "i", key: "k")
        #expect(memory.isAccepted(appId: "A", index: "i", key: "k"))
        #expect(!memory.isAccepted(appId: "A", index: "j", key: "k"))
        #expect(!memory.isAccepted(appId: "B", index: "i", key: "k"))
    }
}

@Suite struct AlgoliaErrorTests {
    @Test func anAlgoliaErrorRendersItselfInAlgoliasFormat() throws {
        let error: any GatewayError = AlgoliaError(404, "Index \"x\" does not exist")
        let r = error.response()
        #expect(r.status == 404)
        guard case .bytes(let body) = r.body else {
            Issue.record("expected a fixed body")
            return
        }
        #expect(try JSON.parse(body) == ["message": "Index \"x\" does not exist", "status": 404])
    }
}
