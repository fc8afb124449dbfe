import AlgoliaGateway
import GatewayConfig
import JSONCore
import MirrorgateTesting
import SearchEngine
import Testing
import Upstream

/// What a sync brings home besides records (query rules, the replicas a primary's settings name) and how
/// the mirror answers with them; synonyms and rules of offline indices from bootstrap files; the local
/// index list; the status of what local answers do not apply.
@Suite struct MirrorContentTests {
    static let records: [JSON] = [
        ["objectID": "a", "name": "Cheap phone", "brand": "Nokia", "price": 100],
        ["objectID": "b", "name": "Premium phone", "brand": "Apple", "price": 900],
        ["objectID": "c", "name": "Phone case", "brand": "Generic", "price": 10],
        ["objectID": "d", "name": "Tablet", "brand": "Apple", "price": 600],
    ]
    static let rules: [JSON] = [
        [
            "objectID": "promote-tablet", "conditions": [["pattern": "phone", "anchoring": "contains"]],
            "consequence": [
                "promote": [["objectID": "d", "position": 0]], "userData": ["banner": "tablets"],
            ],
        ],
        [
            "objectID": "apple-context", "conditions": [["context": "apple"]],
            "consequence": ["params": ["filters": "brand:Apple"]],
        ],
    ]
    static let primarySettings: JSON = [
        "attributesForFaceting": ["brand"], "searchableAttributes": ["name"],
        "replicas": ["products_price_asc", "virtual(products_price_desc)"],
    ]

    /// The upstream: `products` with rules and two replicas (standard: ranked by ascending price;
    /// virtual: relevant sort by descending price).
    static func upstream() throws -> FakeAlgoliaServer {
        let settings = primarySettings
        return try FakeAlgoliaServer(indices: [
            SearchIndex(name: "products", settings: settings, rules: rules, records: records),
            SearchIndex(
                name: "products_price_asc",
                settings: [
                    "attributesForFaceting": ["brand"], "searchableAttributes": ["name"],
                    "primary": "products",
                    "ranking": [
                        "asc(price)", "typo", "geo", "words", "filters", "proximity", "attribute", "exact",
                    ],
                ],
                records: records),
            SearchIndex(
                name: "products_price_desc",
                settings: [
                    "customRanking": ["desc(price)"], "relevancyStrictness": 0, "primary": "products",
                ],
                records: records),
        ])
    }

    /// A service whose mirrored `products` syncs from `upstream` into a store in `dir`.
    func syncedService(_ upstream: FakeAlgoliaServer, in dir: TemporaryDirectory) throws -> (
        AlgoliaService, IndexStore
    ) {
        let store = try IndexStore(directory: dir.path)
        let configuration = try AlgoliaFixtures.configuration(
            in: dir, hosts: [AlgoliaHost(url: upstream.url)])
        let service = try AlgoliaService(
            configuration: configuration, upstream: nil,
            fetcher: MirrorFetcher.configured(configuration, client: UpstreamClient()), store: store,
            state: nil,
            pool: AlgoliaFixtures.pool, events: { _, _ in })
        let done = RecordingResponder()
        let launch = service.sync("products") { result in
            done.respond(.json(200, (try? result.get()).map { _ in "ok" } ?? "\(result)"))
        }
        guard case .started = launch else { throw SyncError(description: "the sync did not start") }
        let result = try #require(done.wait(for: .seconds(30)))
        guard case .bytes(let b) = result.body else { throw SyncError(description: "no result") }
        #expect(String(decoding: b, as: UTF8.self) == "ok")
        return (service, store)
    }

    func answer(_ service: AlgoliaService, _ request: HTTPRequest) throws -> (Int, JSON) {
        let out = RecordingResponder()
        service.handle(request, out)
        let response = try #require(out.wait(for: .seconds(20)))
        guard case .bytes(let bytes) = response.body else { return (response.status, .null) }
        return (response.status, try JSON.parse(bytes))
    }

    func get(_ path: String, key: String = AlgoliaFixtures.syncKey) -> HTTPRequest {
        var request = AlgoliaFixtures.post(path, .null, key: key)
        request.method = "GET"
        request.body = []
        return request
    }

    func ids(_ json: JSON) -> [String] {
        (json["hits"]?.arrayValue ?? []).compactMap { $0["objectID"]?.stringValue }
    }

    @Test func aSyncBringsTheRulesAndAppliesThem() throws {
        let upstream = try Self.upstream()
        defer { upstream.stop() }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (service, store) = try syncedService(upstream, in: dir)
        #expect(try store.load(name: "products")?.rules.count == 2)

        let (status, json) = try answer(
            service, AlgoliaFixtures.search("products", key: AlgoliaFixtures.syncKey))
        #expect(status == 200)
        #expect(ids(json).first == "d")
        #expect(json["appliedRules"] == [["objectID": "promote-tablet"]])
        #expect(json["userData"] == [["banner": "tablets"]])
        let noRules = try answer(
            service,
            AlgoliaFixtures.search(
                "products", ["query": "phone", "enableRules": false], key: AlgoliaFixtures.syncKey))
        #expect(!ids(noRules.1).contains("d"))
        let context = try answer(
            service,
            AlgoliaFixtures.search(
                "products", ["query": "", "ruleContexts": ["apple"]], key: AlgoliaFixtures.syncKey))
        #expect(Set(ids(context.1)) == ["b", "d"])

        let rule = try answer(service, get("/1/indexes/products/rules/apple-context"))
        #expect(rule.0 == 200)
        #expect(rule.1["objectID"]?.stringValue == "apple-context")
        #expect(try answer(service, get("/1/indexes/products/rules/nope")).0 == 404)
        let found = try answer(
            service,
            AlgoliaFixtures.post(
                "/1/indexes/products/rules/search", ["query": "tablet"], key: AlgoliaFixtures.syncKey))
        #expect(found.1["nbHits"] == 1)
        #expect(found.1["hits"]?.arrayValue?.first?["objectID"]?.stringValue == "promote-tablet")
    }

    @Test func replicasAreMirroredAndAnsweredUnderTheirOwnNames() throws {
        let upstream = try Self.upstream()
        defer { upstream.stop() }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (service, store) = try syncedService(upstream, in: dir)
        #expect(try store.load(name: "products_price_asc")?.objectCount == 4)

        // Standard replica: its own ranking (ascending price first).
        let asc = try answer(
            service, AlgoliaFixtures.search("products_price_asc", ["query": ""], key: AlgoliaFixtures.syncKey)
        )
        #expect(ids(asc.1) == ["c", "a", "d", "b"])
        // Virtual replica, relevancyStrictness 0: every match by its customRanking (descending price).
        let desc = try answer(
            service,
            AlgoliaFixtures.search("products_price_desc", ["query": "phone"], key: AlgoliaFixtures.syncKey))
        #expect(ids(desc.1) == ["b", "a", "c"])
        #expect(desc.1["message"] == nil)
        // Strictness above 0 with a query: relevant sort, its selection said to be approximated.
        let strict = try answer(
            service,
            AlgoliaFixtures.search(
                "products_price_desc", ["query": "phone", "relevancyStrictness": 100],
                key: AlgoliaFixtures.syncKey))
        #expect(ids(strict.1) == ["b", "a", "c"])
        #expect(strict.1["message"]?.stringValue?.contains("relevant sort approximated") == true)
        // The virtual replica's settings: the primary's, with its own custom ranking and its primary.
        let settings = try answer(service, get("/1/indexes/products_price_desc/settings"))
        #expect(settings.1["customRanking"] == ["desc(price)"])
        #expect(settings.1["searchableAttributes"] == ["name"])
        #expect(settings.1["primary"]?.stringValue == "products")
        #expect(settings.1["replicas"] == nil)

        // The same key rules as the primary: a key the upstream accepted for `products` reads its replicas;
        // a key never seen does not.
        #expect(try answer(service, AlgoliaFixtures.search("products_price_asc")).0 == 403)
        service.keys.accept(appId: AlgoliaFixtures.appId, index: "products", key: AlgoliaFixtures.clientKey)
        #expect(try answer(service, AlgoliaFixtures.search("products_price_asc")).0 == 200)

        let status = service.indexStatus()["products"]?["replicas"]
        #expect(status?["products_price_desc"]?["virtual"] == true)
        #expect(status?["products_price_asc"]?["objects"] == 4)
    }

    @Test func theLocalIndexListShowsOfflineMirroredAndReplicaIndices() throws {
        let upstream = try Self.upstream()
        defer { upstream.stop() }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (service, _) = try syncedService(upstream, in: dir)
        let (status, json) = try answer(service, get("/1/indexes"))
        #expect(status == 200)
        let items = json["items"]?.arrayValue ?? []
        #expect(
            items.compactMap { $0["name"]?.stringValue }
                == ["books", "products", "products_price_asc", "products_price_desc"])
        let products = items.first { $0["name"] == "products" }
        #expect(products?["entries"] == 4)
        #expect(products?["replicas"] == Self.primarySettings["replicas"])
        #expect(items.first { $0["name"] == "products_price_asc" }?["primary"] == "products")
        for item in items {
            for field in ["createdAt", "updatedAt", "dataSize", "fileSize", "lastBuildTimeS", "pendingTask"] {
                #expect(item[field] != nil, "\(field) missing")
            }
        }
        #expect(json["nbPages"] == 1)
        // A key that may read nothing locally lists only what it may read (offline `books`: any key).
        let other = try answer(service, get("/1/indexes", key: "someone-else"))
        #expect(other.1["items"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["books"])
    }

    @Test func offlineIndicesTakeSynonymsAndRulesFromTheirBootstrap() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        var configuration = try AlgoliaFixtures.configuration(in: dir)
        let synonyms: JSON = [["objectID": "s1", "type": "synonym", "synonyms": ["phone", "mobile"]]]
        configuration.algolia.offlineIndices["gadgets"] = OfflineIndexConfig(
            name: "gadgets",
            bootstrap: AlgoliaBootstrap(
                objects: [try dir.write("g.json", JSON.array(Self.records).serialized())],
                synonyms: try dir.write("s.json", synonyms.serialized()),
                rules: try dir.write("r.json", JSON.array(Self.rules).serialized())))
        let service = try AlgoliaService(
            configuration: configuration, upstream: nil, fetcher: nil, store: nil, state: nil,
            pool: AlgoliaFixtures.pool, events: { _, _ in })
        // The synonym: "mobile" finds the phones.
        let mobile = try answer(service, AlgoliaFixtures.search("gadgets", ["query": "mobile"]))
        #expect(mobile.0 == 200)
        #expect(Set(ids(mobile.1)) == ["a", "b", "c"])
        // The rule: "phone" promotes the tablet.
        let phone = try answer(service, AlgoliaFixtures.search("gadgets", ["query": "phone"]))
        #expect(ids(phone.1).first == "d")
        #expect(phone.1["appliedRules"] == [["objectID": "promote-tablet"]])
        let rule = try answer(service, get("/1/indexes/gadgets/rules/promote-tablet", key: "any"))
        #expect(rule.0 == 200)
    }

    @Test(arguments: [
        (#"[{"type":"synonym"}]"#, "synonyms[0] must be an object with a string objectID"),
        (#"[{"objectID":"x"}]"#, "synonyms[0] (x) has no type"),
        (#"{"rules":[]}"#, "synonyms must be a JSON array (or a search answer with `hits`)"),
    ])
    func aBadSynonymsFileStopsTheStartNamingTheFile(_ text: String, _ problem: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        var configuration = try AlgoliaFixtures.configuration(in: dir)
        let file = try dir.write("bad.json", text)
        configuration.algolia.offlineIndices["gadgets"] = OfflineIndexConfig(
            name: "gadgets", bootstrap: AlgoliaBootstrap(synonyms: file))
        #expect(throws: AlgoliaSetupError.self) {
            do {
                _ = try AlgoliaService(
                    configuration: configuration, upstream: nil, fetcher: nil, store: nil, state: nil,
                    pool: AlgoliaFixtures.pool, events: { _, _ in })
            } catch {
                #expect((error as? AlgoliaSetupError)?.description == "\(file): \(problem)")
                throw error
            }
        }
    }

    @Test func aManualBuildTakesRulesAndRebuildsTheReplicas() throws {
        let upstream = try Self.upstream()
        defer { upstream.stop() }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let (service, store) = try syncedService(upstream, in: dir)
        let body: JSON = [
            "settings": Self.primarySettings,
            "objects": [["objectID": "n", "name": "New phone", "price": 5]],
            "rules": [["objectID": "r", "consequence": ["userData": "built"]]],
        ]
        let out = RecordingResponder()
        service.build("products", body: body.serializedBytes(), out)
        #expect(try #require(out.wait(for: .seconds(20))).status == 200)
        #expect(try store.load(name: "products")?.rules.count == 1)
        let replica = try answer(
            service, AlgoliaFixtures.search("products_price_asc", ["query": ""], key: AlgoliaFixtures.syncKey)
        )
        #expect(ids(replica.1) == ["n"])
        #expect(service.catalog.mirrors["products"]?.replica("products_price_desc")?.isVirtualReplica == true)
    }

    @Test func theStatusListsWhatLocalAnswersDoNotApply() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = try AlgoliaFixtures.service(upstream: nil, in: dir)
        _ = try answer(service, AlgoliaFixtures.search("books", ["query": "x", "clickAnalytics": true]))
        let books = service.indexStatus()["books"]?["notApplied"]
        #expect(books?["parameters"] == ["clickAnalytics"])
        #expect(books?["settings"] == [])
    }
}

/// The replicas a primary's settings name.
@Suite struct ReplicaNameTests {
    @Test func standardAndVirtualReplicasAreReadFromReplicasOrLegacySlaves() {
        #expect(
            ReplicaName.listed(in: ["replicas": ["a", "virtual(b)", " virtual( c ) ", "", "virtual()"]])
                == [
                    ReplicaName(name: "a", isVirtual: false), ReplicaName(name: "b", isVirtual: true),
                    ReplicaName(name: "c", isVirtual: true),
                ])
        #expect(ReplicaName.listed(in: ["slaves": ["old"]]) == [ReplicaName(name: "old", isVirtual: false)])
        #expect(ReplicaName.listed(in: ["replicas": []]).isEmpty)
        #expect(ReplicaName.listed(in: .object(JSONObject())).isEmpty)
    }
}
