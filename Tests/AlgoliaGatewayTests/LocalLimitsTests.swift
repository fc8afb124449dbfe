import AlgoliaGateway
import Foundation
import GatewayConfig
import JSONCore
import MirrorgateTesting
import SearchEngine
import Synchronization
import Testing

/// Bounded work (issue 19, D10), secured keys on getObject(s), and the rules endpoints of local indices.
@Suite struct LocalLimitsTests {
    func makeService(_ upstream: ScriptedAlgoliaUpstream?) throws -> AlgoliaService {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        return try AlgoliaFixtures.service(upstream: upstream, in: dir)
    }

    func answer(_ service: AlgoliaService, _ request: HTTPRequest) throws -> HTTPResponse {
        let out = RecordingResponder()
        service.handle(request, out)
        return try #require(out.wait(for: .seconds(20)), "no answer within 20 s")
    }

    func body(_ response: HTTPResponse) throws -> JSON {
        guard case .bytes(let bytes) = response.body else {
            Issue.record("expected a fixed body")
            return .null
        }
        return try JSON.parse(bytes)
    }

    func multiQuery(_ index: String, count: Int) -> HTTPRequest {
        let requests: [JSON] = (0..<count).map { _ in ["indexName": .string(index), "query": "musk"] }
        return AlgoliaFixtures.post("/1/indexes/*/queries", ["requests": .array(requests)])
    }

    // MARK: D10

    @Test(arguments: ["books", "remote-only"])
    func moreThanFiftyQueriesGetAlgoliasErrorWithoutAnyWork(_ index: String) throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(["results": []]))
        let service = try makeService(upstream)
        let response = try answer(service, multiQuery(index, count: 51))
        #expect(response.status == 400)
        #expect(
            try body(response)
                == ["message": "Too many queries in multi query request", "status": 400])
        #expect(upstream.requests.isEmpty)
    }

    @Test func fiftyQueriesAreAnswered() throws {
        let service = try makeService(nil)
        let response = try answer(service, multiQuery("books", count: 50))
        #expect(response.status == 200)
        #expect(try body(response)["results"]?.arrayValue?.count == 50)
    }

    @Test func moreThanAThousandObjectsAreRefused() throws {
        let service = try makeService(nil)
        let requests: [JSON] = (0..<1001).map {
            ["indexName": "books", "objectID": .string("\($0 % 5 + 1)")]
        }
        let response = try answer(
            service, AlgoliaFixtures.post("/1/indexes/*/objects", ["requests": .array(requests)]))
        #expect(response.status == 400)
        #expect(try body(response)["message"]?.stringValue?.hasPrefix("Too many objects") == true)
    }

    /// A local catalogue of one offline index `big` (1000 records of about 2 KB), any key.
    func bigCatalogue() -> LocalAlgolia {
        let text = String(repeating: "lorem ipsum dolor sit amet ", count: 80)
        let records: [JSON] = (0..<1000).map { ["objectID": .string("r\($0)"), "text": .string(text)] }
        let index = SearchIndex(name: "big", settings: .object(JSONObject()), records: records)
        let catalog = LocalCatalog(
            offline: OfflineIndexRegistry(["big": LocalIndex(index: index, access: .keys(nil))]), mirrors: [:]
        )
        // swift-format-ignore: NeverUseForceTry
        let keys = try! KeyMemory(pool: nil)
        return LocalAlgolia(catalog: catalog, access: ReadAccess(appId: nil, syncKey: nil, keys: keys))
    }

    @Test func aLocalAnswerOverTheSizeLimitIsRefused() throws {
        let local = bigCatalogue()
        let requests: [JSON] = (0..<20).map { _ in
            ["indexName": "big", "query": "", "hitsPerPage": 1000, "attributesToHighlight": []]
        }
        let response = local.answer(
            AlgoliaFixtures.post("/1/indexes/*/queries", ["requests": .array(requests)]), route: .multiQuery)
        #expect(response.status == 400)
        #expect(
            try body(response)["message"]?.stringValue?.hasPrefix("The answer would be larger than") == true)
    }

    @Test func aMultiQueryStopsWhenTheClientIsGone() throws {
        let local = bigCatalogue()
        let polls = Atomic<Int>(0)
        let requests: [JSON] = (0..<50).map { _ in ["indexName": "big", "query": "lorem", "hitsPerPage": 1] }
        let response = local.answer(
            AlgoliaFixtures.post("/1/indexes/*/queries", ["requests": .array(requests)]), route: .multiQuery,
            isAbandoned: { polls.add(1, ordering: .relaxed).newValue > 3 })
        #expect(response.status != 200)
        // Polled before each query: the fourth poll said the client was gone, and no query ran after it.
        #expect(polls.load(ordering: .relaxed) == 4)
    }

    // MARK: secured API keys on getObject(s)

    /// A secured API key (`base64(hex HMAC + params)`) carrying `params`; the gateway never checks the
    /// HMAC (the upstream did, for mirrored indices), it reads the restrictions.
    static func securedKey(_ params: String) -> String {
        Data((String(repeating: "ab", count: 32) + params).utf8).base64EncodedString()
    }

    @Test func getObjectWithholdsRecordsOutsideTheKeysFilters() throws {
        let service = try makeService(nil)
        let key = Self.securedKey("filters=genre%3ADrama")
        func get(_ id: String) -> HTTPRequest {
            var r = AlgoliaFixtures.post("/1/indexes/books/\(id)", .null, key: key)
            r.method = "GET"
            r.body = []
            return r
        }
        #expect(try answer(service, get("3")).status == 200)
        let refused = try answer(service, get("1"))
        #expect(refused.status == 404)
        #expect(try body(refused) == ["message": "ObjectID does not exist", "status": 404])
        let many = try answer(
            service,
            AlgoliaFixtures.post(
                "/1/indexes/*/objects",
                [
                    "requests": [
                        ["indexName": "books", "objectID": "1"], ["indexName": "books", "objectID": "3"],
                    ]
                ],
                key: key))
        let results = try #require(try body(many)["results"]?.arrayValue)
        #expect(results.count == 2)
        #expect(results.first == .null)
        #expect(results.last?["objectID"]?.stringValue == "3")
    }

    @Test func aKeysAttributesToRetrieveWinsOverTheRequests() throws {
        let service = try makeService(nil)
        let key = Self.securedKey("attributesToRetrieve=%5B%22title%22%5D")
        var request = AlgoliaFixtures.post("/1/indexes/books/2?attributesToRetrieve=author", .null, key: key)
        request.method = "GET"
        request.body = []
        let record = try body(try answer(service, request))
        #expect(record == ["objectID": "2", "title": "The Count of Monte Cristo"])
    }
}
