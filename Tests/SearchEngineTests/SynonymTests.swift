import JSONCore
import MirrorgateTesting
import Testing

@testable import SearchEngine

/// Query-time synonyms from the stored synonym objects.
@Suite struct SynonymTests {
    static let records = AlgoliaFixtures.vehicleRecords
    static let synonyms = AlgoliaFixtures.vehicleSynonyms

    static func index() -> SearchIndex {
        SearchIndex(
            name: "syn", settings: ["searchableAttributes": ["title"]], synonyms: synonyms, records: records)
    }

    @Test func multiWaySynonymsMatchEachOther() throws {
        let index = Self.index()
        // Typo and exact tie (synonyms are typo-free and exact); the attribute criterion (word position)
        // puts "Vehicle insurance" (position 0) first, then the tie: the record indexed last first.
        #expect(ids(try index.search(["query": "auto"])) == ["vehicle", "auto", "car"])
        #expect(Set(ids(try index.search(["query": "vehicle"]))) == ["car", "auto", "vehicle"])
        #expect(try index.search(["query": "car"])["nbHits"] == 3)
    }

    @Test func oneWaySynonymsOnlyFromTheInput() throws {
        let index = Self.index()
        #expect(Set(ids(try index.search(["query": "tablet"]))) == ["tablet", "ipad"])
        #expect(ids(try index.search(["query": "ipad"])) == ["ipad"])
    }

    @Test func altCorrectionCountsItsTypos() throws {
        let index = Self.index()
        let response = try index.search(["query": "color", "getRankingInfo": true])
        #expect(ids(response) == ["colour"])
        #expect(response["hits"]?[0]?["_rankingInfo"]?["nbTypos"] == 1)
    }

    @Test func synonymMatchesAreHighlighted() throws {
        let response = try Self.index().search(["query": "tablet"])
        let ipad = response["hits"]?.arrayValue?.first { $0["objectID"] == "ipad" }
        #expect(ipad?["_highlightResult"]?["title"]?["value"] == "<em>iPad</em> cover")
        #expect(ipad?["_highlightResult"]?["title"]?["matchedWords"] == ["tablet"])
    }

    @Test func disabledByTheSynonymsParameter() throws {
        let index = Self.index()
        #expect(ids(try index.search(["query": "auto", "synonyms": false])) == ["auto"])
        #expect(ids(try index.search(["params": "query=tablet&synonyms=false"])) == ["tablet"])
    }

    @Test func phraseAlternativesNeedAllTheirWords() throws {
        let index = SearchIndex(
            name: "cities", settings: ["searchableAttributes": ["title"]],
            synonyms: [["objectID": "ny", "type": "synonym", "synonyms": ["NY", "new york"]]],
            records: [
                ["objectID": "pizza", "title": "New York pizza"],
                ["objectID": "bagels", "title": "NY bagels"],
                ["objectID": "minster", "title": "York minster"],
            ])
        #expect(Set(ids(try index.search(["query": "ny"]))) == ["pizza", "bagels"])
        // Several query words do not trigger a synonym: "new york" finds only the phrase.
        #expect(ids(try index.search(["query": "new york"])) == ["pizza"])
        let pizza = try index.search(["query": "ny"])["hits"]?.arrayValue?.first { $0["objectID"] == "pizza" }
        #expect(pizza?["_highlightResult"]?["title"]?["value"] == "<em>New</em> <em>York</em> pizza")
        try SerializedTests.expectSame(index, ["query": "ny"])
    }

    @Test func bytesPathAgrees() throws {
        let index = Self.index()
        for query in ["auto", "tablet", "color", "car parts"] {
            try SerializedTests.expectSame(index, ["query": .string(query)])
        }
    }

    @Test func placeholders() throws {
        let index = SearchIndex(
            name: "streets", settings: ["searchableAttributes": ["address"]],
            synonyms: [
                [
                    "objectID": "p", "type": "placeholder", "placeholder": "<Street>",
                    "replacements": ["street", "st"],
                ]
            ],
            records: [
                ["objectID": "1", "address": "12 <Street> Main"],
                ["objectID": "2", "address": "Main street corner"],
                ["objectID": "3", "address": "7 Main avenue"],
            ])
        #expect(Set(ids(try index.search(["query": "main st", "queryType": "prefixNone"]))) == ["1"])
        #expect(
            Set(ids(try index.search(["query": "main street", "queryType": "prefixNone"]))) == ["1", "2"])
        // The placeholder's own name is not a word of the record.
        #expect(ids(try index.search(["query": "main avenue"])) == ["3"])
        #expect(ids(try index.search(["query": "12 main", "queryType": "prefixNone"])) == ["1"])
        // Without the synonyms parameter, nothing stands for the placeholder.
        #expect(
            ids(try index.search(["query": "main st", "queryType": "prefixNone", "synonyms": false])) == [])
    }
}
