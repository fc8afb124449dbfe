import JSONCore
import Testing

@testable import SearchEngine

@Suite struct NormalizationTests {
    @Test func lowercasesAndFoldsDiacritics() {
        let tokens = Normalizer().tokens("Les Misérables, ÆSIR straße Ünïcode 42x")
        #expect(
            tokens.map { String(decoding: $0.normalized, as: UTF8.self) } == [
                "les", "miserables", "aesir", "strasse", "unicode", "42x",
            ])
        #expect(tokens[1].start == 4)
        #expect(tokens[1].end == 15)
    }

    @Test func separatorsToIndex() {
        let tokens = Normalizer(separatorsToIndex: "+#").tokens("C++ and C#")
        #expect(
            tokens.map { String(decoding: $0.normalized, as: UTF8.self) } == ["c", "+", "+", "and", "c", "#"])
    }

    @Test func searchIsAccentInsensitive() throws {
        let index = Fixtures.index()
        #expect(ids(try search(index, ["query": "miserables"])) == ["3"])
        #expect(ids(try search(index, ["query": "MISÉRABLES"])) == ["3"])
    }
}

@Suite struct QueryTests {
    @Test func emptyQueryReturnsAllByCustomRanking() throws {
        let response = try search(Fixtures.index(), ["query": ""])
        // custom ranking desc(popularity), missing values last (record 4 has none).
        #expect(ids(response) == ["2", "3", "1", "5", "4"])
        #expect(response["nbHits"] == 5)
    }

    @Test func allWordsRequired() throws {
        let index = Fixtures.index()
        #expect(ids(try search(index, ["query": "alexandre dumas"])) == ["2", "1"])
        #expect(ids(try search(index, ["query": "alexandre hugo"])) == [])
    }

    @Test func prefixLastVersusPrefixNone() throws {
        let index = Fixtures.index()
        // "muske" also reaches "musk" with one typo (deletion).
        #expect(Set(ids(try search(index, ["query": "muske"]))) == ["1", "3", "4"])
        #expect(Set(ids(try search(index, ["query": "muske", "typoTolerance": false]))) == ["1", "3"])
        #expect(
            ids(try search(index, ["query": "muske", "queryType": "prefixNone", "typoTolerance": false]))
                == [])
        #expect(
            ids(try search(index, ["query": "monte cri", "queryType": "prefixLast"])) == ["2"])
        #expect(ids(try search(index, ["query": "mon cri", "queryType": "prefixAll"])) == ["2"])
        #expect(ids(try search(index, ["query": "mon cri", "queryType": "prefixLast"])) == [])
    }

    @Test func typoTolerance() throws {
        let index = Fixtures.index()
        // one typo (substitution) on a 8-letter word
        #expect(ids(try search(index, ["query": "revenje"])).contains("2"))
        // transposition counts one typo
        #expect(ids(try search(index, ["query": "imprsioned"])) == ["2"])
        #expect(ids(try search(index, ["query": "imprisonde", "queryType": "prefixNone"])) == ["2"])
        // typoTolerance false disables
        #expect(ids(try search(index, ["query": "revenje", "typoTolerance": "false"])) == [])
        // too short for a typo (minWordSizefor1Typo = 4)
        #expect(ids(try search(index, ["query": "mzn", "queryType": "prefixNone"])) == [])
        // first letter typo counts double: "hevenge" needs 2 typos but word length 7 < 8
        #expect(ids(try search(index, ["query": "hevenge", "queryType": "prefixNone"])) == [])
        #expect(
            ids(
                try search(index, ["query": "hevenge", "queryType": "prefixNone", "minWordSizefor2Typos": 5]))
                == ["2"])
    }

    @Test func typoRankingAndInfo() throws {
        let index = Fixtures.index()
        // "musk" matches record 4 exactly and "musketeer(s)" by prefix — typo 0 for all, exact decides.
        let response = try search(index, ["query": "musk", "getRankingInfo": true])
        #expect(ids(response).first == "4")
        let info = response["hits"]?[0]?["_rankingInfo"]
        #expect(info?["nbTypos"] == 0)
        #expect(info?["nbExactWords"] == 1)
    }

    @Test func typoCriterionDecides() throws {
        let records: [JSON] = [
            ["objectID": "a", "name": "prefect", "rank": 100],
            ["objectID": "b", "name": "perfect", "rank": 1],
        ]
        let index = SearchIndex(
            name: "t", settings: ["searchableAttributes": ["name"], "customRanking": ["desc(rank)"]],
            records: records)
        // "perfect": b has 0 typos, a has 1 (transposition) → b first despite custom ranking.
        let response = try index.search([
            "query": "perfect", "queryType": "prefixNone", "getRankingInfo": true,
        ])
        #expect(ids(response) == ["b", "a"])
        #expect(response["hits"]?[1]?["_rankingInfo"]?["nbTypos"] == 1)
        // typoTolerance=min keeps only the lowest typo count.
        #expect(
            ids(try index.search(["query": "perfect", "queryType": "prefixNone", "typoTolerance": "min"]))
                == ["b"])
    }

    @Test func attributeCriterionDecides() throws {
        let records: [JSON] = [
            ["objectID": "a", "title": "other", "body": "jazz music", "rank": 100],
            ["objectID": "b", "title": "jazz", "body": "other", "rank": 1],
        ]
        let index = SearchIndex(
            name: "t",
            settings: ["searchableAttributes": ["title", "body"], "customRanking": ["desc(rank)"]],
            records: records)
        #expect(ids(try index.search(["query": "jazz"])) == ["b", "a"])
    }

    @Test func proximityCriterionDecides() throws {
        let records: [JSON] = [
            ["objectID": "a", "text": "new and very old york", "rank": 100],
            ["objectID": "b", "text": "new york", "rank": 1],
        ]
        let index = SearchIndex(
            name: "t", settings: ["searchableAttributes": ["text"], "customRanking": ["desc(rank)"]],
            records: records)
        let response = try index.search(["query": "new york", "getRankingInfo": true])
        #expect(ids(response) == ["b", "a"])
        #expect(response["hits"]?[0]?["_rankingInfo"]?["proximityDistance"] == 1)
    }

    @Test func exactCriterionDecides() throws {
        let records: [JSON] = [
            ["objectID": "a", "text": "bookstore", "rank": 100],
            ["objectID": "b", "text": "book", "rank": 1],
        ]
        let index = SearchIndex(
            name: "t", settings: ["searchableAttributes": ["text"], "customRanking": ["desc(rank)"]],
            records: records)
        #expect(ids(try index.search(["query": "book"])) == ["b", "a"])
        // exactOnSingleWordQuery=none: exact no longer decides, custom ranking does.
        #expect(ids(try index.search(["query": "book", "exactOnSingleWordQuery": "none"])) == ["a", "b"])
    }

    @Test func customRankingAscDescMissingLast() throws {
        let records: [JSON] = [
            ["objectID": "a", "t": "x", "p": 3], ["objectID": "b", "t": "x"],
            ["objectID": "c", "t": "x", "p": 1],
        ]
        let desc = SearchIndex(name: "t", settings: ["customRanking": ["desc(p)"]], records: records)
        #expect(ids(try desc.search(["query": "x"])) == ["a", "c", "b"])
        let asc = SearchIndex(name: "t", settings: ["customRanking": ["asc(p)"]], records: records)
        #expect(ids(try asc.search(["query": "x"])) == ["c", "a", "b"])
    }

    @Test func splitAndConcatenation() throws {
        let index = Fixtures.index()
        #expect(ids(try search(index, ["query": "hello world"])).contains("5"))
        #expect(ids(try search(index, ["query": "helloworld"])).contains("5"))
        #expect(ids(try search(index, ["query": "monte cristo"])) == ["2"])
        #expect(ids(try search(index, ["query": "montecristo"])) == ["2"])
    }

    @Test func disableTypoToleranceOnWordsAndAttributes() throws {
        var settings = Fixtures.settings.objectValue!
        #expect(ids(try search(Fixtures.index(), ["query": "revenje"])) == ["2"])
        settings["disableTypoToleranceOnWords"] = ["revenje"]
        let index = Fixtures.index(settings: .object(settings))
        #expect(ids(try search(index, ["query": "revenje"])) == [])
        settings["disableTypoToleranceOnWords"] = nil
        settings["disableTypoToleranceOnAttributes"] = ["description"]
        let index2 = Fixtures.index(settings: .object(settings))
        #expect(ids(try search(index2, ["query": "revenje"])) == [])
    }

    @Test func legacySettingsNames() throws {
        let settings: JSON = ["attributesToIndex": ["title"], "typoTolerance": "false", "version": 1]
        let index = Fixtures.index(settings: settings)
        #expect(ids(try search(index, ["query": "dumas"])) == [])
        #expect(ids(try search(index, ["query": "musketeers"])) == ["1"])
        #expect(ids(try search(index, ["query": "muskateers", "queryType": "prefixNone"])) == [])
        #expect(index.settingsJSON == settings)
        #expect(index.settings(getVersion: 1)["attributesToIndex"] == ["title"])
    }

    @Test func restrictSearchableAttributes() throws {
        let index = Fixtures.index()
        #expect(
            ids(try search(index, ["query": "musk", "restrictSearchableAttributes": ["title"]])) == [
                "4", "1",
            ])
    }
}

@Suite struct PaginationTests {
    @Test func pagesAndOffsets() throws {
        let index = Fixtures.index()
        let page1 = try search(index, ["query": "", "hitsPerPage": 2, "page": 1])
        #expect(ids(page1) == ["1", "5"])
        #expect(page1["nbPages"] == 3)
        #expect(page1["page"] == 1)
        let offset = try search(index, ["query": "", "offset": 1, "length": 3])
        #expect(ids(offset) == ["3", "1", "5"])
        #expect(offset["length"] == 3)
        let limited = try search(index, ["query": "", "hitsPerPage": 2, "paginationLimitedTo": 3])
        #expect(limited["nbPages"] == 2)
        #expect(
            ids(try search(index, ["query": "", "hitsPerPage": 2, "page": 1, "paginationLimitedTo": 3])) == [
                "1"
            ])
    }

    @Test func paramsStringIsMerged() throws {
        let index = Fixtures.index()
        let response = try search(index, ["params": "query=dumas&hitsPerPage=1&getRankingInfo=true"])
        #expect(ids(response) == ["2"])
        #expect(response["hitsPerPage"] == 1)
        #expect(response["query"] == "dumas")
    }

    @Test func retrieval() throws {
        let index = Fixtures.index()
        let hit = try search(
            index, ["query": "musk", "attributesToRetrieve": ["title", "secret"], "hitsPerPage": 1])["hits"]?[
                0]
        #expect(hit?.objectValue?.keys == ["title", "objectID", "_highlightResult"])
        let star = try search(
            index, ["query": "musketeers", "attributesToRetrieve": ["*", "-description"]])["hits"]?[0]
        #expect(star?["description"] == nil)
        #expect(star?["secret"] == nil)
        #expect(star?["title"] == "The Three Musketeers")
        #expect(index.getObject("1")?["secret"] == nil)
        #expect(index.getObject("1", attributesToRetrieve: ["year"]) == ["year": 1844, "objectID": "1"])
        #expect(index.getObject("nope") == nil)
        let fields = try search(index, ["query": "musk", "responseFields": ["nbHits"]])
        #expect(fields.objectValue?.keys == ["nbHits"])
    }

    @Test func browseWithCursor() throws {
        let index = Fixtures.index()
        var cursor: String?
        var seen: [String] = []
        var rounds = 0
        repeat {
            let response = try index.browse(["hitsPerPage": 2, "filters": "year > 1800"], cursor: cursor)
            seen += ids(response)
            cursor = response["cursor"]?.stringValue
            rounds += 1
        } while cursor != nil && rounds < 10
        #expect(seen == ["1", "2", "3", "4", "5"])
        #expect(rounds == 3)
        #expect(throws: SearchError.self) { try index.browse([:], cursor: "garbage!") }
    }

    @Test func distinct() throws {
        var settings = Fixtures.settings.objectValue!
        settings["attributeForDistinct"] = "author"
        let index = Fixtures.index(settings: .object(settings))
        let response = try search(index, ["query": "", "distinct": true])
        #expect(ids(response) == ["2", "3", "5", "4"])
        #expect(response["nbHits"] == 4)
        #expect(ids(try search(index, ["query": "", "distinct": 2])).count == 5)
    }
}
