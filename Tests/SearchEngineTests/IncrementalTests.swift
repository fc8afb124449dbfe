import JSONCore
import Storage
import Testing

@testable import SearchEngine

/// Incremental writes (``SearchIndex/applying(_:)``): after any sequence of writes the index answers
/// exactly as a full build of its live records, in the same order, would.
@Suite struct IncrementalTests {
    static let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
        "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    ]
    static let settings: JSON = [
        "searchableAttributes": ["title", "unordered(body)", "tags"],
        "attributesForFaceting": ["color", "searchable(brand)", "filterOnly(size)"],
        "customRanking": ["desc(rank)", "asc(name)"],
        "ranking": ["typo", "geo", "words", "filters", "proximity", "attribute", "exact", "custom"],
    ]

    /// A deterministic pseudo-random record generator.
    struct Generator {
        var state: UInt64
        mutating func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        mutating func text(_ count: Int) -> String {
            (0..<count).map { _ in IncrementalTests.words[next(IncrementalTests.words.count)] }.joined(
                separator: " ")
        }
        mutating func record(_ id: Int) -> JSON {
            var o: JSONObject = [
                "objectID": .string("o\(id)"), "title": .string(text(1 + next(3))),
                "body": .string(text(3 + next(6))), "color": .string(["red", "green", "blue"][next(3)]),
                "brand": .string(["Acme", "Globex", "Initech", "Umbrella"][next(4)]),
                "rank": .int(Int64(next(7))), "name": .string(text(1)),
            ]
            if next(3) == 0 { o["size"] = .array([.int(Int64(next(5))), .int(Int64(next(5)))]) }
            if next(4) == 0 { o["_tags"] = .array([.string(["new", "sale"][next(2)])]) }
            if next(5) == 0 { o["price"] = .double(Double(next(1000)) / 10) }
            return .object(o)
        }
    }

    static let queries: [JSON] = [
        ["query": "", "hitsPerPage": 50, "facets": ["*"]],
        ["query": "alp", "hitsPerPage": 30, "facets": ["color", "brand"]],
        ["query": "bravo charlie", "hitsPerPage": 30],
        ["query": "deltta", "hitsPerPage": 30],
        ["query": "echo", "filters": "color:red OR brand:Acme", "hitsPerPage": 30],
        ["query": "", "filters": "rank > 3 AND size:2", "hitsPerPage": 40],
        ["query": "golfhotel", "hitsPerPage": 20],
        ["query": "india", "tagFilters": ["sale"], "hitsPerPage": 20],
        ["query": "", "numericFilters": ["price >= 20"], "hitsPerPage": 60, "facets": ["color"]],
        ["query": "kilo lima mike", "optionalWords": ["mike"], "hitsPerPage": 20, "getRankingInfo": true],
    ]

    /// The answers that must not differ (everything but the timing and the generation-bound parts).
    static func answers(_ index: SearchIndex) throws -> [JSON] {
        try queries.map { query in
            var result = try index.search(query).objectValue ?? JSONObject()
            result["processingTimeMS"] = nil
            if case .array(let hits)? = result["hits"] {
                result["hits"] = .array(
                    hits.map { hit in
                        guard case .object(var o) = hit, case .object(var info)? = o["_rankingInfo"] else {
                            return hit
                        }
                        // userScore counts live records; identical. Nothing else depends on ids.
                        info["userScore"] = nil
                        o["_rankingInfo"] = .object(info)
                        return .object(o)
                    })
            }
            return .object(result)
        }
    }

    static func rebuilt(_ index: SearchIndex) -> SearchIndex {
        SearchIndex(
            name: index.name, settings: index.settingsJSON, synonyms: index.synonyms, rules: index.rules,
            records: index.records)
    }

    @Test func randomWritesMatchFullBuilds() throws {
        var gen = Generator(state: 42)
        var index = SearchIndex(name: "t", settings: Self.settings, records: (0..<150).map { gen.record($0) })
        var nextID = 150
        for round in 0..<40 {
            var write = IndexWrite()
            var touched = Set<String>()
            for _ in 0..<(round % 7 == 0 ? 60 : 1 + gen.next(5)) {
                switch gen.next(4) {
                case 0:
                    let id = "o\(gen.next(nextID))"
                    if touched.insert(id).inserted { write.deletes.append(id) }
                case 1:
                    nextID += 1
                    let record = gen.record(nextID)
                    touched.insert(record["objectID"]!.stringValue!)
                    write.upserts.append(record)
                default:
                    let id = gen.next(nextID)
                    if touched.insert("o\(id)").inserted { write.upserts.append(gen.record(id)) }
                }
            }
            let before = try Self.answers(index)
            let previous = index
            index = index.applying(write).index
            // The previous version is untouched (a reader holding it sees no half write).
            #expect(try Self.answers(previous) == before)
            #expect(try Self.answers(index) == Self.answers(Self.rebuilt(index)), "round \(round)")
        }
        #expect(index.data.segments.count > 1 || index.data.dead.count == 0)
    }

    @Test func compactionKeepsAnswersAndKeys() throws {
        var gen = Generator(state: 7)
        var index = SearchIndex(name: "t", settings: Self.settings, records: (0..<50).map { gen.record($0) })
        // Replacing the same records many times makes dead documents outnumber live ones.
        for _ in 0..<30 {
            var write = IndexWrite()
            write.upserts = (0..<50).map { gen.record($0) }
            index = index.applying(write).index
        }
        #expect(index.objectCount == 50)
        #expect(index.data.count < 50 * 30, "compacted at least once")
        #expect(try Self.answers(index) == Self.answers(Self.rebuilt(index)))
        let keys = index.data.liveDocs.map { index.data.parts.storageKeys[$0] }
        #expect(keys == keys.sorted(), "storage keys follow the index order")
        #expect(Set(keys).count == keys.count)
    }

    @Test func settingsSynonymsAndClear() throws {
        var gen = Generator(state: 3)
        let index = SearchIndex(name: "t", settings: Self.settings, records: (0..<40).map { gen.record($0) })
        var write = IndexWrite()
        write.settings = ["searchableAttributes": ["body"], "attributesForFaceting": ["brand"]]
        let reindexed = index.applying(write).index
        #expect(try Self.answers(reindexed) == Self.answers(Self.rebuilt(reindexed)))
        #expect(reindexed.settingsJSON == write.settings)
        // A search-time setting only: the data is shared.
        var light = IndexWrite()
        var settings = Self.settings.objectValue!
        settings["hitsPerPage"] = 5
        light.settings = .object(settings)
        let same = index.applying(light).index
        #expect(same.data.segments.count == index.data.segments.count)
        #expect(try same.search(["query": ""])["hits"]?.arrayValue?.count == 5)
        var synonyms = IndexWrite()
        synonyms.synonyms = [["objectID": "s1", "type": "synonym", "synonyms": ["alpha", "zulu"]]]
        let withSynonyms = index.applying(synonyms).index
        #expect(ids(try withSynonyms.search(["query": "zulu", "hitsPerPage": 100])).count > 0)
        var clear = IndexWrite()
        clear.clear = true
        clear.upserts = [gen.record(999)]
        let (cleared, change) = index.applying(clear)
        #expect(cleared.objectCount == 1)
        #expect(change.clear && change.inserted.count == 1 && change.deletedKeys.isEmpty)
        #expect(cleared.settingsJSON == index.settingsJSON)
    }

    @Test func storedChangesReloadToTheSameIndex() throws {
        let path = "/tmp/se-incremental-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        let store = try IndexStore(pool: DatabasePool(path: path, readers: 1))
        var gen = Generator(state: 11)
        var index = try store.save(
            SearchIndex(name: "t", settings: Self.settings, records: (0..<80).map { gen.record($0) }))
        for round in 0..<12 {
            var write = IndexWrite()
            write.deletes = ["o\(round * 3)"]
            write.upserts = [gen.record(round * 3 + 1), gen.record(500 + round)]
            if round == 5 { write.settings = ["searchableAttributes": ["title", "body"]] }
            if round == 8 {
                write.rules = [
                    ["objectID": "r1", "consequence": ["promote": [["objectID": "o2", "position": 0]]]]
                ]
            }
            let (next, change) = index.applying(write)
            let version = try store.write { tx in
                try tx.apply(change, to: next, expectedVersion: index.storeVersion)
            }
            index = next.stored(as: version)
        }
        let loaded = try #require(try store.load(name: "t"))
        #expect(loaded.objectCount == index.objectCount)
        #expect(loaded.rules.count == 1)
        #expect(try Self.answers(loaded) == Self.answers(index))
        // A change computed from another version is refused, and nothing is written.
        var stale = IndexWrite()
        stale.upserts = [gen.record(900)]
        let (other, change) = index.applying(stale)
        #expect(throws: IndexStore.VersionConflict.self) {
            try store.write { tx in try tx.apply(change, to: other, expectedVersion: 123_456) }
        }
        #expect(try store.load(name: "t")?.objectCount == index.objectCount)
        // Copy, move and delete.
        let copied = try store.write { tx in try tx.copy(from: "t", to: "t2") }
        #expect(copied != nil)
        #expect(try store.load(name: "t2")?.objectCount == index.objectCount)
        _ = try store.write { tx in try tx.move(from: "t2", to: "t3") }
        #expect(try store.load(name: "t2") == nil)
        #expect(try store.load(name: "t3")?.objectCount == index.objectCount)
        try store.write { tx in try tx.delete("t3") }
        #expect(try store.load(name: "t3") == nil)
        #expect(try store.isDeleted(name: "t3"))
        #expect(try !store.isDeleted(name: "t"))
        #expect(try store.indexNames() == ["t"])
        store.pool.close()
    }
}
