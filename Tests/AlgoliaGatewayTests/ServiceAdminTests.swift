import AlgoliaGateway
import JSONCore
import MirrorgateTesting
import SearchEngine
import Testing

/// The Algolia side of the admin API, on the service: manual builds (SPEC §5) and the index status.
@Suite struct ServiceAdminTests {
    func respond(_ body: (any Responder) -> Void) throws -> (status: Int, json: JSON) {
        let out = RecordingResponder()
        body(out)
        let response = try #require(out.wait(for: .seconds(20)), "no answer within 20 s")
        guard case .bytes(let bytes) = response.body else {
            Issue.record("expected a fixed body")
            return (response.status, .null)
        }
        return (response.status, try JSON.parse(bytes))
    }

    @Test func aManualBuildReplacesTheMirrorsVersion() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = try IndexStore(directory: dir.path)
        let service = try AlgoliaFixtures.service(upstream: nil, store: store, in: dir)
        let body: JSON = [
            "settings": ["searchableAttributes": ["name"]],
            "objects": [["objectID": "n1", "name": "new phone"], ["objectID": "n2", "name": "new tablet"]],
        ]
        let built = try respond { service.build("products", body: body.serializedBytes(), $0) }
        #expect(built.status == 200)
        #expect(built.json["index"]?.stringValue == "products")
        #expect(built.json["objects"]?.intValue == 2)
        #expect(service.catalog.mirrors["products"]?.current?.objectCount == 2)
        #expect(try store.load(name: "products")?.objectCount == 2)
        let search = try respond {
            service.handle(
                AlgoliaFixtures.search("products", ["query": "phone"], key: AlgoliaFixtures.syncKey), $0)
        }
        #expect(search.json["hits"]?.arrayValue?.compactMap { $0["objectID"]?.stringValue } == ["n1"])
        #expect(service.indexStatus()["products"]?["objects"]?.intValue == 2)
    }

    @Test(arguments: [
        ("products", #"{"objects": 1}"#, 400, "objects must be an array of records"),
        ("products", #"{"objects": [1]}"#, 400, "objects[0] is not a JSON object"),
        (
            "products", #"{"objects": [], "objectFiles": ["x.json"]}"#, 400,
            "give either settings/objects or settingsFile/objectFiles, not both"
        ),
        ("products", #"{"objectFiles": ["missing.json"]}"#, 400, nil),
        ("books", #"{"objects": []}"#, 400, nil),
        ("nowhere", #"{"objects": []}"#, 404, "no mirrored index named nowhere"),
    ])
    func aBuildThatCannotRunSaysWhy(index: String, body: String, status: Int, message: String?) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = try AlgoliaFixtures.service(
            upstream: nil, store: try IndexStore(directory: dir.path), in: dir)
        let answer = try respond { service.build(index, body: Array(body.utf8), $0) }
        #expect(answer.status == status)
        #expect(answer.json["status"]?.intValue == status)
        if let message { #expect(answer.json["message"]?.stringValue == message) }
        #expect(service.catalog.mirrors["products"]?.current?.objectCount == AlgoliaFixtures.products.count)
    }

    @Test func withoutAStoreABuildIsRefusedAndTheMirrorKept() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = try AlgoliaFixtures.service(upstream: nil, in: dir)
        let answer = try respond { service.build("products", body: Array(#"{"objects": []}"#.utf8), $0) }
        #expect(answer.status == 500)
        #expect(service.catalog.mirrors["products"]?.isSyncing == false)
    }

    @Test func aSyncNeedsAKnownIndexAndAFetcher() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = try AlgoliaFixtures.service(upstream: nil, in: dir)
        guard case .unknownIndex = service.sync("nowhere", completion: nil) else {
            Issue.record("an unknown index must not start a sync")
            return
        }
        let done = RecordingResponder()
        guard
            case .started = service.sync(
                "products",
                completion: { result in
                    if case .failure(let error) = result {
                        done.respond(AlgoliaError.response(502, error.description))
                    }
                })
        else {
            Issue.record("a sync of a mirrored index must start")
            return
        }
        // No fetcher (no appId/apiKey/hosts to sync with): the run fails and says why.
        let failed = try #require(done.wait(for: .seconds(20)))
        #expect(failed.status == 502)
        #expect(
            service.indexStatus()["products"]?["lastError"]?.stringValue
                == "algolia.appId, apiKey and hosts are needed to sync")
    }
}
