import JSONCore
import Storage
import Testing

@testable import SearchEngine

@Suite struct IndexStoreTests {
    func temporaryPath() -> String {
        "/tmp/se-store-test-\(UInt64.random(in: 0...UInt64.max)).sqlite"
    }

    @Test func buildLoadSwapDelete() throws {
        let path = temporaryPath()
        let store = try IndexStore(pool: DatabasePool(path: path, readers: 1))
        #expect(try store.load(name: "books") == nil)
        let built = try store.build(
            name: "books", settings: Fixtures.settings,
            synonyms: [["objectID": "s", "type": "synonym", "synonyms": ["a", "b"]]],
            records: Fixtures.records, chunkSize: 2)
        #expect(built.objectCount == 5)
        let loaded = try #require(try store.load(name: "books"))
        #expect(loaded.objectCount == 5)
        #expect(loaded.settingsJSON == Fixtures.settings)
        #expect(loaded.synonyms.count == 1)
        #expect(ids(try loaded.search(["query": "dumas"])) == ["2", "1"])
        #expect(try store.indexNames() == ["books"])
        let first = try #require(try store.info(name: "books"))
        #expect(first.entries == 5)

        // A rebuild replaces the active version; the old one keeps answering until then.
        try store.build(
            name: "books", settings: Fixtures.settings, synonyms: [],
            records: Array(Fixtures.records.prefix(2)))
        #expect(loaded.objectCount == 5)
        let reloaded = try #require(try store.load(name: "books"))
        #expect(reloaded.objectCount == 2)
        #expect(try store.info(name: "books")!.version > first.version)

        // Reopening (a restart) answers from the stored version.
        store.pool.close()
        let reopened = try IndexStore(pool: DatabasePool(path: path, readers: 1))
        #expect(try reopened.load(name: "books")?.objectCount == 2)
        try reopened.delete(name: "books")
        #expect(try reopened.load(name: "books") == nil)
        #expect(try reopened.indexNames() == [])
        reopened.pool.close()
    }
}
