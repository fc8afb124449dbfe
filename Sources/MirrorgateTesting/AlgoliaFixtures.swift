import AlgoliaGateway
import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import SearchEngine

/// Algolia test data shared by the unit tests: the engine's catalogues (books, vehicles with synonyms),
/// a phone catalogue for the gateway's mirrored index, bootstrap files, configurations and requests with
/// the credentials the configurations accept.
public enum AlgoliaFixtures {
    /// The application ID of every fixture configuration.
    public static let appId = "TESTAPP"
    /// The gateway's own sync key (`algolia.apiKey`): always admitted to mirrored indices.
    public static let syncKey = "sync-key-0123456789"
    /// A client's search key, admitted to a mirrored index only once the upstream has accepted it.
    public static let clientKey = "client-key-0123456789"

    // MARK: books (the engine's catalogue)

    /// Settings of the books catalogue: searchable attributes with `unordered` and a comma group,
    /// facets (`searchable`, `filterOnly`, nested), custom ranking, an unretrievable attribute.
    public static let bookSettings: JSON = [
        "searchableAttributes": ["title", "unordered(author)", "description,notes"],
        "attributesForFaceting": ["genre", "searchable(author)", "filterOnly(year)", "tags.label"],
        "customRanking": ["desc(popularity)"],
        "unretrievableAttributes": ["secret"],
    ]

    /// Five books (objectIDs `1`…`5`).
    public static let books: [JSON] = [
        [
            "objectID": "1", "title": "The Three Musketeers", "author": "Alexandre Dumas",
            "genre": "Adventure",
            "year": 1844, "price": 9.5, "popularity": 50,
            "description": "Swords, friendship and intrigue in France",
            "secret": "x", "_tags": ["classic", "French"],
        ],
        [
            "objectID": "2", "title": "The Count of Monte Cristo", "author": "Alexandre Dumas",
            "genre": "Adventure",
            "year": 1845, "price": 12, "popularity": 90,
            "description": "Revenge story of a wrongly imprisoned man",
            "_tags": ["classic"],
        ],
        [
            "objectID": "3", "title": "Les Misérables", "author": "Victor Hugo", "genre": "Drama",
            "year": 1862,
            "price": 15, "popularity": 80, "description": "Jean Valjean and the musketeer of justice",
            "tags": [["label": "Paris"], ["label": "Revolution"]],
        ],
        [
            "objectID": "4", "title": "Musk", "author": "Unknown Author", "genre": "drama", "year": 2001,
            "price": 3,
            "description": "A short book about musk and perfume", "_tags": ["modern"],
        ],
        [
            "objectID": "5", "title": "Hello World Programming", "author": "Ada Lovelace", "genre": "Tech",
            "year": 2020, "price": 30, "popularity": 10, "description": "Learn helloworld style coding",
            "notes": "first steps",
        ],
    ]

    // MARK: vehicles (synonyms)

    /// Records whose titles the synonyms below connect.
    public static let vehicleRecords: [JSON] = [
        ["objectID": "car", "title": "Red car for sale"],
        ["objectID": "auto", "title": "Used auto parts"],
        ["objectID": "vehicle", "title": "Vehicle insurance"],
        ["objectID": "ipad", "title": "iPad cover"],
        ["objectID": "tablet", "title": "Tablet stand"],
        ["objectID": "colour", "title": "Colour chart"],
    ]

    /// A multi-way synonym, a one-way synonym and an alternative correction.
    public static let vehicleSynonyms: [JSON] = [
        ["objectID": "s1", "type": "synonym", "synonyms": ["car", "auto", "vehicle"]],
        ["objectID": "s2", "type": "onewaysynonym", "input": "tablet", "synonyms": ["iPad", "galaxy tab"]],
        ["objectID": "s3", "type": "altCorrection1", "word": "color", "corrections": ["colour"]],
    ]

    // MARK: products (the gateway's mirrored index)

    /// Settings of the phone catalogue: `brand` is a facet.
    public static let productSettings: JSON = ["attributesForFaceting": ["brand"]]

    /// Four phones and tablets (objectIDs `p1`…`p4`).
    public static let products: [JSON] = [
        ["objectID": "p1", "name": "Apple phone", "brand": "Apple", "price": 900],
        ["objectID": "p2", "name": "Samsung phone", "brand": "Samsung", "price": 700],
        ["objectID": "p3", "name": "Apple tablet", "brand": "Apple", "price": 600],
        ["objectID": "p4", "name": "Nokia phone", "brand": "Nokia", "price": 100],
    ]

    /// The bootstrap files of a catalogue, written to `directory` as `<name>-settings.json` and
    /// `<name>-objects.json`.
    public static func bootstrap(
        _ name: String, settings: JSON, records: [JSON], in directory: TemporaryDirectory
    ) throws -> AlgoliaBootstrap {
        let settingsFile = try directory.write("\(name)-settings.json", settings.serialized())
        let objectsFile = try directory.write("\(name)-objects.json", JSON.array(records).serialized())
        return AlgoliaBootstrap(settings: settingsFile, objects: [objectsFile])
    }

    /// A configuration with the mirrored index `products` (bootstrapped from ``products``, strategy
    /// `strategy`) and the offline index `books` (from ``books``, any key), files and data in `directory`.
    /// `hosts` defaults to none, so that nothing reaches a network unless a test says so.
    public static func configuration(
        in directory: TemporaryDirectory, strategy: RequestStrategy = .fallbackOnFailure,
        fallbackTimeout: Duration = .milliseconds(200), preventiveDelay: Duration = .milliseconds(100),
        hosts: [AlgoliaHost] = [], timeout: Duration = .seconds(5)
    ) throws -> MirrorgateConfiguration {
        let mirrored = AlgoliaIndexConfig(
            name: "products", requestStrategy: strategy, offlineFallbackTimeout: fallbackTimeout,
            preventiveOfflineSearchDelay: preventiveDelay,
            dataSelectionQueries: [DataSelectionQuery(selection: .params(""), maxObjects: 1000)],
            bootstrap: try bootstrap("products", settings: productSettings, records: products, in: directory))
        let offline = OfflineIndexConfig(
            name: "books",
            bootstrap: try bootstrap("books", settings: bookSettings, records: books, in: directory))
        return MirrorgateConfiguration(
            server: ServerConfig(listen: ListenAddress(host: "127.0.0.1", port: 0)),
            dataDir: directory.file("data"),
            algolia: AlgoliaConfig(
                appId: appId, apiKey: syncKey, hosts: hosts, connectTimeout: .milliseconds(500),
                timeout: timeout, indices: ["products": mirrored], offlineIndices: ["books": offline]),
            baseDirectory: directory.path)
    }

    /// A search request (`POST /1/indexes/{index}/query`) with the fixture application ID and `key`.
    public static func search(
        _ index: String, _ params: JSON = ["query": "phone"], key: String = clientKey,
        headers: HTTPHeaders = [:]
    ) -> HTTPRequest {
        post("/1/indexes/\(FormCodec.percentEncode(index))/query", params, key: key, headers: headers)
    }

    /// A `POST` to `path` with the JSON `body`, the fixture application ID and `key`.
    public static func post(_ path: String, _ body: JSON, key: String = clientKey, headers: HTTPHeaders = [:])
        -> HTTPRequest
    {
        var h: HTTPHeaders = [
            "X-Algolia-Application-Id": appId, "X-Algolia-API-Key": key, "Content-Type": "application/json",
        ]
        for (name, value) in headers { h.set(name, value) }
        return HTTPRequest(method: "POST", target: path, headers: h, body: body.serializedBytes())
    }

    /// One worker pool for the local answers of every test service (a pool's threads live as long as the
    /// process).
    public static let pool = WorkerPool(threads: 2, name: "mg-test-local")

    /// An ``AlgoliaService`` over `upstream` (nil: no Algolia host) for ``configuration(in:strategy:fallbackTimeout:preventiveDelay:hosts:timeout:)``:
    /// the mirrored index `products` with `strategy` and the offline index `books`, kept in memory unless
    /// a `store` is given (manual builds need one); no sync, no process, no network.
    public static func service(
        upstream: ScriptedAlgoliaUpstream?, strategy: RequestStrategy = .fallbackOnFailure,
        fallbackTimeout: Duration = .milliseconds(200), preventiveDelay: Duration = .milliseconds(100),
        logger: Logger = Logger(label: "mirrorgate.algolia"), store: IndexStore? = nil,
        in directory: TemporaryDirectory
    ) throws -> AlgoliaService {
        let configuration = try configuration(
            in: directory, strategy: strategy, fallbackTimeout: fallbackTimeout,
            preventiveDelay: preventiveDelay)
        return try AlgoliaService(
            configuration: configuration, upstream: upstream, fetcher: nil, store: store, state: nil,
            pool: pool, events: { _, _ in }, logger: logger, syncLogger: logger)
    }
}
