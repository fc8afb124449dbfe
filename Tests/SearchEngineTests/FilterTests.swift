import JSONCore
import Testing

@testable import SearchEngine

@Suite struct FilterGrammarTests {
    @Test func parsesFacetNumericRangeTagBoolean() throws {
        let cnf = try FilterParser.parse(
            #"genre:"Science Fiction" AND price >= 10 AND year:1800 TO 1900 AND classic AND inStock:true"#)
        #expect(cnf.count == 5)
        #expect(
            cnf[0] == [
                FilterLiteral(negated: false, predicate: .facet(attribute: "genre", value: "Science Fiction"))
            ])
        #expect(
            cnf[1] == [
                FilterLiteral(
                    negated: false, predicate: .numeric(attribute: "price", op: .greaterOrEqual, value: 10))
            ])
        #expect(
            cnf[2] == [
                FilterLiteral(negated: false, predicate: .range(attribute: "year", lower: 1800, upper: 1900))
            ])
        #expect(cnf[3] == [FilterLiteral(negated: false, predicate: .tag("classic"))])
        #expect(
            cnf[4] == [FilterLiteral(negated: false, predicate: .facet(attribute: "inStock", value: "true"))])
    }

    @Test func orGroupsAndNot() throws {
        let cnf = try FilterParser.parse("(a:1 OR a:2) AND NOT b:3 AND (c:x OR NOT c:y)")
        #expect(cnf.count == 3)
        #expect(cnf[0].count == 2)
        #expect(cnf[1] == [FilterLiteral(negated: true, predicate: .facet(attribute: "b", value: "3"))])
        #expect(cnf[2][1].negated)
        #expect(try FilterParser.parse("a:1 OR a:2").count == 1)
        #expect(
            try FilterParser.parse(#"author:"John \"JJ\" Doe""#)[0][0].predicate
                == .facet(attribute: "author", value: #"John "JJ" Doe"#))
        #expect(try FilterParser.parse("  ").isEmpty)
    }

    @Test(arguments: [
        ("a:1 AND", "col 8"),
        ("(a:1 OR b:2", "expected ')'"),
        ("a:1 OR (b:2 AND c:3)", "AND inside OR"),
        ("NOT (a:1 OR b:2)", "NOT can only negate"),
        ("a:1 OR price > 3", "different types"),
        ("price > abc", "expected a numeric value"),
        ("a:1 b:2", "expected end of filter at col 5"),
        (#"a:"open"#, "Unterminated"),
        ("price:1 TO x", "numeric value"),
        ("a:", "expected a value"),
        ("()", "Empty parentheses"),
    ])
    func invalidFiltersSayWhere(_ input: String, _ fragment: String) {
        do {
            _ = try FilterParser.parse(input)
            Issue.record("expected an error for \(input)")
        } catch {
            #expect(error.status == 400)
            #expect(error.message.contains(fragment), "\(error.message)")
            #expect(error.message.hasPrefix("filters: "))
        }
    }
}

@Suite struct FilterEvaluationTests {
    let index = Fixtures.index()

    func hits(_ params: JSON) throws -> Set<String> { Set(ids(try index.search(params))) }

    @Test func facetValuesCaseInsensitiveNamesCaseSensitive() throws {
        #expect(try hits(["filters": "genre:drama"]) == ["3", "4"])
        #expect(try hits(["filters": "genre:ADVENTURE"]) == ["1", "2"])
        #expect(try hits(["filters": "Genre:drama"]) == [])
    }

    @Test func numericAndRanges() throws {
        #expect(try hits(["filters": "price < 10"]) == ["1", "4"])
        #expect(try hits(["filters": "price:9.5 TO 12"]) == ["1", "2"])
        #expect(try hits(["filters": "year != 1844 AND year <= 1862"]) == ["2", "3"])
        #expect(try hits(["filters": "popularity >= 50 OR popularity = 10"]) == ["1", "2", "3", "5"])
    }

    @Test func tagsAreCaseSensitive() throws {
        #expect(try hits(["filters": "classic"]) == ["1", "2"])
        #expect(try hits(["filters": "_tags:French"]) == ["1"])
        #expect(try hits(["filters": "_tags:french"]) == [])
        #expect(try hits(["tagFilters": ["classic", "-French"]]) == ["2"])
        #expect(try hits(["tagFilters": [["modern", "French"]]]) == ["1", "4"])
    }

    @Test func arrayForms() throws {
        #expect(try hits(["facetFilters": ["genre:drama", "author:Victor Hugo"]]) == ["3"])
        #expect(try hits(["facetFilters": [["genre:drama", "genre:tech"]]]) == ["3", "4", "5"])
        #expect(try hits(["facetFilters": ["genre:-drama"]]) == ["1", "2", "5"])
        #expect(try hits(["facetFilters": "genre:Tech"]) == ["5"])
        #expect(try hits(["facetFilters": #"["genre:Tech"]"#]) == ["5"])
        #expect(try hits(["numericFilters": ["price > 5", ["year < 1845", "year > 2000"]]]) == ["1", "5"])
        #expect(try hits(["numericFilters": "price:1 TO 4"]) == ["4"])
        #expect(try hits(["facetFilters": ["tags.label:paris"]]) == ["3"])
        #expect(try hits(["filters": "genre:drama", "numericFilters": ["year > 1900"]]) == ["4"])
    }

    @Test func invalidArrayFiltersAre400() {
        #expect(throws: SearchError.self) { try index.search(["numericFilters": ["price >> 3"]]) }
        #expect(throws: SearchError.self) { try index.search(["facetFilters": ["novalue"]]) }
        #expect(throws: SearchError.self) { try index.search(["filters": "a:1 OR (b:2 AND c:3)"]) }
    }
}

@Suite struct FacetTests {
    @Test func countsSortedByCountThenValue() throws {
        let index = Fixtures.index()
        let response = try index.search(["query": "", "facets": ["genre", "year", "author"]])
        let genre = response["facets"]?["genre"]?.objectValue
        #expect(genre?.keys == ["Adventure", "Drama", "Tech"])
        #expect(genre?["Drama"] == 2)
        // filterOnly(year) is not counted
        #expect(response["facets"]?["year"] == nil)
        #expect(response["exhaustiveFacetsCount"] == true)
        let all = try index.search(["query": "dumas", "facets": ["*"], "maxValuesPerFacet": 1])
        #expect(all["facets"]?["author"] == ["Alexandre Dumas": 2])
        #expect(all["facets"]?["genre"] == ["Adventure": 2])
        let alpha = try index.search(["facets": ["genre"], "sortFacetValuesBy": "alpha"])
        #expect(alpha["facets"]?["genre"]?.objectValue?.keys == ["Adventure", "Drama", "Tech"])
    }

    @Test func facetStats() throws {
        let settings: JSON = ["attributesForFaceting": ["price"]]
        let index = Fixtures.index(settings: settings)
        let response = try index.search(["query": "", "facets": ["price"], "filters": "price < 13"])
        #expect(
            response["facets_stats"]?["price"] == [
                "min": 3, "max": 12, "avg": 8.1666666666666661, "sum": 24.5,
            ])
    }

    @Test func searchForFacetValues() throws {
        let index = Fixtures.index()
        let response = try index.searchForFacetValues(facet: "author", params: ["facetQuery": "alex"])
        #expect(
            response["facetHits"] == [
                ["value": "Alexandre Dumas", "highlighted": "<em>Alex</em>andre Dumas", "count": 2]
            ])
        #expect(throws: SearchError.self) { try index.searchForFacetValues(facet: "genre", params: [:]) }
    }
}

@Suite struct HighlightTests {
    @Test func highlightShape() throws {
        let index = Fixtures.index()
        let hit = try index.search(["query": "musk", "hitsPerPage": 10])["hits"]?.arrayValue?.first {
            $0["objectID"] == "1"
        }
        let title = hit?["_highlightResult"]?["title"]
        #expect(
            title == [
                "value": "The Three <em>Musk</em>eteers", "matchLevel": "partial", "fullyHighlighted": false,
                "matchedWords": ["musk"],
            ]
                || title == [
                    "value": "The Three <em>Musk</em>eteers", "matchLevel": "full", "fullyHighlighted": false,
                    "matchedWords": ["musk"],
                ])
        #expect(title?["matchLevel"] == "full")
        let author = hit?["_highlightResult"]?["author"]
        #expect(author == ["value": "Alexandre Dumas", "matchLevel": "none", "matchedWords": []])
    }

    @Test func nestedArraysAndCustomTags() throws {
        let settings: JSON = ["searchableAttributes": ["tags", "title"]]
        let index = Fixtures.index(settings: settings)
        let hit = try index.search(["query": "paris", "highlightPreTag": "<b>", "highlightPostTag": "</b>"])[
            "hits"]?[0]
        #expect(
            hit?["_highlightResult"]?["tags"] == [
                [
                    "label": [
                        "value": "<b>Paris</b>", "matchLevel": "full", "fullyHighlighted": true,
                        "matchedWords": ["paris"],
                    ]
                ],
                ["label": ["value": "Revolution", "matchLevel": "none", "matchedWords": []]],
            ])
    }

    @Test func snippets() throws {
        let index = Fixtures.index()
        let hit = try index.search(["query": "intrigue", "attributesToSnippet": ["description:3"]])["hits"]?[
            0]
        #expect(
            hit?["_snippetResult"]?["description"] == [
                "value": "… and <em>intrigue</em> in …", "matchLevel": "full",
            ])
        let custom = try index.search([
            "query": "swords", "attributesToSnippet": ["description:2"], "snippetEllipsisText": "...",
        ])["hits"]?[0]
        #expect(custom?["_snippetResult"]?["description"]?["value"] == "<em>Swords</em>, friendship ...")
    }

    @Test func typoHighlighted() throws {
        let index = Fixtures.index()
        let hit = try index.search(["query": "revenje", "queryType": "prefixNone"])["hits"]?[0]
        #expect(
            hit?["_highlightResult"]?["description"]?["value"]
                == "<em>Revenge</em> story of a wrongly imprisoned man")
    }
}

@Suite struct SettingsAndSynonymsTests {
    @Test func settingsAsGiven() throws {
        let given = try JSON.parse(
            #"{"z":1,"searchableAttributes":["a"],"typoTolerance":"min","slaves":["x"]}"#)
        let index = SearchIndex(
            name: "s", settings: given,
            synonyms: [["objectID": "s1", "type": "synonym", "synonyms": ["car", "auto"]]], records: [])
        #expect(index.settingsJSON.serialized() == given.serialized())
        #expect(
            index.settings(getVersion: 2).objectValue?.keys.prefix(given.objectValue!.count).elementsEqual(
                given.objectValue!.keys) == true)
        #expect(index.settings(getVersion: 1)["synonyms"] == [["car", "auto"]])
        let found = index.searchSynonyms(params: ["query": "aut"])
        #expect(found["nbHits"] == 1)
        #expect(index.searchSynonyms(params: ["query": "zzz"])["nbHits"] == 0)
        #expect(index.searchSynonyms(params: ["type": "onewaysynonym"])["nbHits"] == 0)
    }
}
