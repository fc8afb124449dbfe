import AlgoliaGateway
import GatewayConfig
import JSONCore
import MirrorgateTesting
import Testing

/// A configuration reload builds a new ``AlgoliaService`` around what it keeps: mirrors (data and sync
/// state, under their new settings once started), offline indices (data, with the new keys), remembered keys.
@Suite struct ReloadReuseTests {
    @Test func aRebuiltServiceKeepsMirrorsOfflineIndicesAndKeys() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let first = try AlgoliaFixtures.service(upstream: nil, in: dir)
        var configuration = try AlgoliaFixtures.configuration(in: dir, strategy: .offlineOnly)
        configuration.algolia.indices["products"]?.dataSelectionQueries = [
            DataSelectionQuery(selection: .params("filters=brand%3AApple"), maxObjects: 10)
        ]
        configuration.algolia.offlineIndices["books"]?.apiKeys = ["only-this-key": [.search]]
        configuration.algolia.offlineIndices["extra"] = OfflineIndexConfig(name: "extra")
        let second = try AlgoliaService(
            configuration: configuration, upstream: nil, fetcher: nil, store: nil, state: nil,
            pool: AlgoliaFixtures.pool, events: { _, _ in }, previous: first)
        let kept = try #require(second.catalog.mirrors["products"])
        #expect(kept === first.catalog.mirrors["products"], "the mirror object, its data and state, is kept")
        #expect(kept.current?.objectCount == AlgoliaFixtures.products.count)
        #expect(second.keys === first.keys)
        #expect(kept.settings.strategy == .fallbackOnFailure, "new settings apply when the service starts")
        second.start()
        defer { second.stop() }
        #expect(kept.settings.strategy == .offlineOnly)
        let books = try #require(second.catalog.offline.lookup("books"))
        #expect(books.index?.objectCount == first.catalog.offline.lookup("books")?.index?.objectCount)
        #expect(books.access == .keys(["only-this-key": [.search]]))
        #expect(second.catalog.offline.lookup("extra") != nil)
    }
}
