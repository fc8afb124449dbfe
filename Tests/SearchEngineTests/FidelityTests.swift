import JSONCore
import Testing

@testable import SearchEngine

/// A small shop used by the fidelity tests (issue 13): plural forms, stop words, phrases, filters.
enum Shop {
    static let records: [JSON] = [
        ["objectID": "a", "name": "Red sports car", "brand": "Fast", "kind": "car", "price": 30],
        ["objectID": "b", "name": "Blue family car", "brand": "Calm", "kind": "car", "price": 20],
        ["objectID": "c", "name": "Two cars for kids", "brand": "Toy", "kind": "toy", "price": 5],
        [
            "objectID": "d", "name": "Running shoes for the feet", "brand": "Fast", "kind": "shoe",
            "price": 50,
        ],
        ["objectID": "e", "name": "Foot spa", "brand": "Calm", "kind": "spa", "price": 70],
        ["objectID": "f", "name": "Les chevaux du village", "brand": "Livre", "kind": "book", "price": 12],
        ["objectID": "g", "name": "Das Haus am See", "brand": "Buch", "kind": "book", "price": 14],
        ["objectID": "h", "name": "Canciones de la ciudad", "brand": "Libro", "kind": "book", "price": 9],
    ]
    static let settings: JSON = ["attributesForFaceting": ["brand", "kind"]]
    static func index(_ settings: JSON = settings, records: [JSON] = records) -> SearchIndex {
        SearchIndex(name: "shop", settings: settings, records: records)
    }
}

func hitInfo(_ response: JSON, _ id: String) -> JSON? {
    response["hits"]?.arrayValue?.first { $0["objectID"]?.stringValue == id }?["_rankingInfo"]
}

@Suite struct PluralTests {
    @Test func tablesHoldTheFourLanguages() {
        #expect(LanguageTables.english.forms(of: Array("car".utf8)) == [Array("cars".utf8)])
        #expect(LanguageTables.english.forms(of: Array("feet".utf8)).contains(Array("foot".utf8)))
        #expect(LanguageTables.french.forms(of: Array("cheval".utf8)) == [Array("chevaux".utf8)])
        #expect(LanguageTables.spanish.forms(of: Array("cancion".utf8)) == [Array("canciones".utf8)])
        #expect(
            LanguageTables.plurals("de")?.forms(of: Array("haus".utf8)).contains(Array("hauser".utf8)) == true
        )
        #expect(LanguageTables.english.forms(of: Array("zzqx".utf8)).isEmpty)
        #expect(LanguageTables.english.count > 10_000)
    }

    @Test func ignorePluralsParameterAndSetting() throws {
        let index = Shop.index()
        // Without: "cars" (not a prefix: prefixNone, no typo) only matches the plural.
        let base: JSON = ["query": "cars", "queryType": "prefixNone", "typoTolerance": false]
        #expect(ids(try index.search(base)) == ["c"])
        var on = base.objectValue!
        on["ignorePlurals"] = true
        #expect(Set(ids(try index.search(.object(on)))) == ["a", "b", "c"])
        on["ignorePlurals"] = ["en"]
        #expect(Set(ids(try index.search(.object(on)))) == ["a", "b", "c"])
        on["ignorePlurals"] = ["fr"]
        #expect(Set(ids(try index.search(.object(on)))) == ["a", "b", "c"])  // "car"/"cars" is French too
        on["ignorePlurals"] = ["es"]
        #expect(ids(try index.search(.object(on))) == ["c"])
        on["ignorePlurals"] = "false"
        #expect(ids(try index.search(.object(on))) == ["c"])
        let setting = Shop.index(["ignorePlurals": true, "queryLanguages": ["en"]])
        #expect(Set(ids(try setting.search(["query": "foot", "queryType": "prefixNone"]))) == ["d", "e"])
        #expect(
            ids(try setting.search(["query": "foot", "queryType": "prefixNone", "ignorePlurals": false])) == [
                "e"
            ])
    }

    @Test func otherLanguages() throws {
        let index = Shop.index()
        #expect(ids(try index.search(["query": "cheval", "ignorePlurals": ["fr"]])) == ["f"])
        #expect(ids(try index.search(["query": "häuser", "ignorePlurals": ["de"]])) == ["g"])
        #expect(ids(try index.search(["query": "canción", "ignorePlurals": ["es"]])) == ["h"])
        #expect(ids(try index.search(["query": "cheval", "queryType": "prefixNone"])) == [])
    }

    @Test func pluralMatchIsExactHighlightedAndTypoFree() throws {
        let index = Shop.index()
        let response = try index.search([
            "query": "foot", "queryType": "prefixNone", "ignorePlurals": true, "queryLanguages": ["en"],
            "getRankingInfo": true,
        ])
        #expect(hitInfo(response, "d")?["nbTypos"] == 0)
        let hit = response["hits"]!.arrayValue!.first { $0["objectID"] == "d" }!
        #expect(hit["_highlightResult"]?["name"]?["value"] == "Running shoes for the <em>feet</em>")
        #expect(hit["_highlightResult"]?["name"]?["matchedWords"] == ["foot"])
        // A plural counts as an exact word (alternativesAsExact lists ignorePlurals by default)…
        let q: JSON = ["query": "shoes foot", "ignorePlurals": ["en"], "getRankingInfo": true]
        #expect(hitInfo(try index.search(q), "d")?["nbExactWords"] == 2)
        // …and not when alternativesAsExact leaves it out.
        var strict = q.objectValue!
        strict["alternativesAsExact"] = ["singleWordSynonym"]
        #expect(hitInfo(try index.search(.object(strict)), "d")?["nbExactWords"] == 1)
    }

    @Test func unsupportedLanguagesAreNamed() throws {
        let index = Shop.index()
        let all = try index.search(["query": "car", "ignorePlurals": true])
        #expect(all["message"]?.stringValue?.contains("ignorePlurals for all other languages") == true)
        let listed = try index.search(["query": "car", "ignorePlurals": ["en", "it"]])
        #expect(listed["message"]?.stringValue?.contains("ignorePlurals for it") == true)
        let fine = try index.search(["query": "car", "ignorePlurals": ["en"]])
        #expect(fine["message"] == nil)
    }
}

@Suite struct StopWordTests {
    @Test func stopWordsAreRemovedExceptPrefixes() throws {
        let index = Shop.index()
        // "the" is not in "Red sports car": removed, the record matches.
        #expect(ids(try index.search(["query": "the red car", "removeStopWords": ["en"]])) == ["a"])
        #expect(ids(try index.search(["query": "the red car"])) == [])
        // The last word is a prefix (prefixLast): never removed.
        #expect(
            ids(
                try index.search(["query": "red car the", "removeStopWords": true, "queryLanguages": ["en"]]))
                == [])
        #expect(
            ids(
                try index.search(["query": "red the car", "removeStopWords": true, "queryLanguages": ["en"]]))
                == ["a"])
        // prefixAll: every word is a prefix, nothing is removed.
        #expect(
            ids(
                try index.search([
                    "query": "the red car", "removeStopWords": ["en"], "queryType": "prefixAll",
                ])) == [])
        // Other languages.
        #expect(ids(try index.search(["query": "las canciones", "removeStopWords": ["es"]])) == ["h"])
        #expect(ids(try index.search(["query": "die haus", "removeStopWords": ["de"]])) == ["g"])
        #expect(ids(try index.search(["query": "un village", "removeStopWords": ["fr"]])) == ["f"])
    }
}

@Suite struct OptionalWordTests {
    @Test func optionalWordsRelaxAndRankByWords() throws {
        let index = Shop.index()
        let response = try index.search([
            "query": "red car", "optionalWords": ["red"], "getRankingInfo": true,
        ])
        #expect(ids(response).first == "a")
        #expect(Set(ids(response)) == ["a", "b", "c"])
        #expect(hitInfo(response, "a")?["words"] == 2)
        #expect(hitInfo(response, "b")?["words"] == 1)
        // A string of several words: each is optional.
        let both = try index.search(["query": "red car", "optionalWords": "red car"])
        #expect(Set(ids(both)) == ["a", "b", "c"])
        #expect(
            both["hits"]?.arrayValue?.first?["_highlightResult"]?["name"]?["matchedWords"] == ["red", "car"])
    }

    @Test func longAllOptionalQueriesNeedMoreWordsPerThousandRecords() throws {
        // 2,500 records: 1,200 hold one query word, 1,300 hold two. With four optional words the first
        // 1,000 results need 1 matched word and the next 1,000 need 2.
        var records: [JSON] = []
        for i in 0..<1200 { records.append(["objectID": .string("one\(i)"), "t": "alpha filler"]) }
        for i in 0..<1300 { records.append(["objectID": .string("two\(i)"), "t": "alpha beta"]) }
        let index = SearchIndex(name: "long", settings: [:], records: records)
        let q: JSON = [
            "query": "alpha beta gamma delta", "optionalWords": ["alpha", "beta", "gamma", "delta"],
            "queryType": "prefixNone", "typoTolerance": false,
        ]
        let response = try index.search(q)
        // Ranked by matched words: 1,300 with two words, then 1,200 with one; positions 1,000-1,999 need
        // two words, so the one-word records (positions 1,300…) are cut.
        #expect(response["nbHits"] == 1300)
        let short = try index.search([
            "query": "alpha beta gamma", "optionalWords": ["alpha", "beta", "gamma"],
            "queryType": "prefixNone",
            "typoTolerance": false,
        ])
        #expect(short["nbHits"] == 2500)
    }
}

@Suite struct RemoveWordsTests {
    @Test func modes() throws {
        let index = Shop.index()
        let none = try index.search(["query": "red car yellow"])
        #expect(none["nbHits"] == 0)
        let last = try index.search([
            "query": "red car yellow", "removeWordsIfNoResults": "lastWords", "getRankingInfo": true,
        ])
        #expect(ids(last) == ["a"])
        #expect(last["nbHits"] == 1)
        #expect(last["queryAfterRemoval"] == "red car <em>yellow</em>")
        #expect(hitInfo(last, "a")?["words"] == 2)
        #expect(last["query"] == "red car yellow")
        let first = try index.search(["query": "yellow blue car", "removeWordsIfNoResults": "firstWords"])
        #expect(ids(first) == ["b"])
        #expect(first["queryAfterRemoval"] == "<em>yellow</em> blue car")
        let all = try index.search([
            "query": "yellow spa kids", "removeWordsIfNoResults": "allOptional", "getRankingInfo": true,
        ])
        #expect(Set(ids(all)) == ["c", "e"])
        #expect(all["queryAfterRemoval"] == "<em>yellow</em> <em>spa</em> <em>kids</em>")
        // A one-word query keeps its word.
        #expect(try index.search(["query": "yellow", "removeWordsIfNoResults": "lastWords"])["nbHits"] == 0)
        #expect(throws: SearchError.self) {
            try index.search(["query": "x", "removeWordsIfNoResults": "some"])
        }
    }
}

@Suite struct AdvancedSyntaxTests {
    @Test func exclusion() throws {
        let index = Shop.index()
        #expect(Set(ids(try index.search(["query": "car -sports", "advancedSyntax": true]))) == ["b", "c"])
        // Without advanced syntax the dash is a separator: both words are required.
        #expect(ids(try index.search(["query": "car -sports"])) == ["a"])
        // Only exclusions: every record without the word itself ("cars" is another word).
        #expect(
            Set(ids(try index.search(["query": "-car", "advancedSyntax": true]))) == [
                "c", "d", "e", "f", "g", "h",
            ])
        // The feature can be turned off.
        #expect(
            ids(
                try index.search([
                    "query": "car -sports", "advancedSyntax": true, "advancedSyntaxFeatures": ["exactPhrase"],
                ]))
                == ["a"])
        // A dash inside a word is not an exclusion.
        #expect(ids(try index.search(["query": "red-sports", "advancedSyntax": true])) == ["a"])
    }

    @Test func exactPhrase() throws {
        let index = Shop.index()
        #expect(ids(try index.search(["query": "\"family car\"", "advancedSyntax": true])) == ["b"])
        #expect(ids(try index.search(["query": "\"car family\"", "advancedSyntax": true])) == [])
        #expect(ids(try index.search(["query": "\"car family\""])) == ["b"])
        // Phrase words are exact: no prefix, no typo.
        #expect(ids(try index.search(["query": "\"family ca\"", "advancedSyntax": true])) == [])
        #expect(ids(try index.search(["query": "\"famly car\"", "advancedSyntax": true])) == [])
        let response = try index.search(["query": "\"blue family\" car", "advancedSyntax": true])
        #expect(ids(response) == ["b"])
        #expect(
            response["hits"]?.arrayValue?.first?["_highlightResult"]?["name"]?["value"]
                == "<em>Blue</em> <em>family</em> <em>car</em>")
    }
}

@Suite struct FilterScoreTests {
    @Test func optionalFiltersBoostWithoutFiltering() throws {
        let index = Shop.index()
        let q: JSON = ["query": "car", "getRankingInfo": true, "optionalFilters": ["brand:Calm"]]
        let response = try index.search(q)
        #expect(ids(response).first == "b")
        #expect(response["nbHits"] == 3)
        #expect(hitInfo(response, "b")?["filters"] == 1)
        #expect(hitInfo(response, "a")?["filters"] == 0)
        // A string, negation, and scores.
        #expect(ids(try index.search(["query": "car", "optionalFilters": "brand:Calm"])).first == "b")
        let negated = try index.search(["query": "car", "optionalFilters": ["brand:-Calm"]])
        #expect(ids(negated).last == "b")
        let scored = try index.search([
            "query": "car", "getRankingInfo": true,
            "optionalFilters": [["brand:Fast<score=3>", "brand:Toy<score=2>"]],
        ])
        #expect(Array(ids(scored).prefix(2)) == ["a", "c"])
        #expect(hitInfo(scored, "a")?["filters"] == 3)
        #expect(hitInfo(scored, "c")?["filters"] == 2)
    }

    @Test func sumOrFiltersScoresAndFilterScores() throws {
        let index = Shop.index()
        let base: JSON = [
            "query": "", "getRankingInfo": true,
            "optionalFilters": [["brand:Fast<score=2>", "kind:car<score=2>"]],
        ]
        let max = try index.search(base)
        #expect(hitInfo(max, "a")?["filters"] == 2)
        var sum = base.objectValue!
        sum["sumOrFiltersScores"] = true
        let summed = try index.search(.object(sum))
        #expect(hitInfo(summed, "a")?["filters"] == 4)
        #expect(ids(summed).first == "a")
        let filtered = try index.search([
            "query": "", "getRankingInfo": true,
            "filters": "brand:Calm<score=1> OR brand:Fast<score=5>",
        ])
        #expect(Set(ids(filtered)) == ["a", "b", "d", "e"])
        #expect(Set(ids(filtered).prefix(2)) == ["a", "d"])
        #expect(hitInfo(filtered, "a")?["filters"] == 5)
        #expect(throws: SearchError.self) { try index.search(["filters": "brand:Calm<score=x>"]) }
    }

    @Test func filtersCriterionFollowsTheRanking() throws {
        func index(_ ranking: [JSON]) -> SearchIndex {
            Shop.index([
                "attributesForFaceting": ["brand"], "customRanking": ["desc(price)"],
                "ranking": .array(ranking),
            ])
        }
        let q: JSON = ["query": "car", "optionalFilters": ["brand:Calm"]]
        #expect(ids(try index(["custom", "filters"]).search(q)) == ["a", "b", "c"])
        #expect(ids(try index(["filters", "custom"]).search(q)) == ["b", "a", "c"])
    }
}

@Suite struct NestedFacetFilterTests {
    @Test func threeLevelsAreAlternatives() throws {
        let index = Shop.index()
        let response = try index.search(["facetFilters": [[["brand:Fast", "brand:Toy"]], "kind:car"]])
        #expect(ids(response) == ["a"])
        let flat = try index.search(["facetFilters": [["brand:Fast", ["brand:Toy", "brand:Calm"]]]])
        #expect(flat["nbHits"] == 5)
    }
}

@Suite struct GeoFidelityTests {
    static let places: [JSON] = [
        ["objectID": "paris", "_geoloc": ["lat": 48.8566, "lng": 2.3522]],
        ["objectID": "lyon", "_geoloc": ["lat": 45.764, "lng": 4.8357]],
        ["objectID": "berlin", "_geoloc": ["lat": 52.52, "lng": 13.405]],
        ["objectID": "madrid", "_geoloc": ["lat": 40.4168, "lng": -3.7038]],
    ]

    @Test func insidePolygonSeveral() throws {
        let index = SearchIndex(name: "geo", settings: [:], records: Self.places)
        let france: [JSON] = [51, -5, 51, 8, 42, 8, 42, -5]
        let germany: [JSON] = [55, 6, 55, 15, 47, 15, 47, 6]
        #expect(Set(ids(try index.search(["insidePolygon": .array([.array(france)])]))) == ["paris", "lyon"])
        #expect(
            Set(ids(try index.search(["insidePolygon": .array([.array(france), .array(germany)])])))
                == ["paris", "lyon", "berlin"])
        #expect(Set(ids(try index.search(["insidePolygon": "51,-5,51,8,42,8,42,-5"]))) == ["paris", "lyon"])
        #expect(throws: SearchError.self) { try index.search(["insidePolygon": [1, 2, 3, 4]]) }
    }

    @Test func aroundPrecisionBucketsDistances() throws {
        let index = SearchIndex(name: "geo", settings: [:], records: Self.places)
        // From Brussels: Paris ~264 km, Lyon ~560 km. With 1000 km buckets they tie, and ties put the
        // record indexed last (Lyon) first.
        let fine = try index.search(["aroundLatLng": "50.8503,4.3517", "aroundRadius": 600_000])
        #expect(ids(fine) == ["paris", "lyon"])
        let coarse = try index.search([
            "aroundLatLng": "50.8503,4.3517", "aroundRadius": 600_000, "aroundPrecision": 1_000_000,
            "getRankingInfo": true,
        ])
        #expect(ids(coarse) == ["lyon", "paris"])
        let ranges = try index.search([
            "aroundLatLng": "50.8503,4.3517", "aroundRadius": 600_000, "getRankingInfo": true,
            "aroundPrecision": [["from": 0, "value": 10], ["from": 100_000, "value": 1_000_000]],
        ])
        #expect(ids(ranges) == ["lyon", "paris"])
        #expect(hitInfo(ranges, "paris")?["geoPrecision"] == 1_000_000)
        #expect(throws: SearchError.self) {
            try index.search(["aroundLatLng": "46.2,6.1", "aroundPrecision": [["from": 0]]])
        }
        #expect(throws: SearchError.self) {
            try index.search(["aroundLatLng": "46.2,6.1", "minimumAroundRadius": 0])
        }
    }
}

@Suite struct RankingFidelityTests {
    @Test func wordPositionCountsWithoutSearchableAttributes() throws {
        let index = SearchIndex(
            name: "pos", settings: [:],
            records: [
                ["objectID": "late", "t": "one two three four target"],
                ["objectID": "early", "t": "target one two three four"],
            ])
        #expect(ids(try index.search(["query": "target"])) == ["early", "late"])
    }

    @Test func tiesPutTheLastIndexedRecordFirst() throws {
        let index = SearchIndex(
            name: "ties", settings: [:],
            records: [
                ["objectID": "1", "t": "same"], ["objectID": "2", "t": "same"],
                ["objectID": "3", "t": "same"],
            ])
        #expect(ids(try index.search(["query": "same"])) == ["3", "2", "1"])
        #expect(ids(try index.search(["query": ""])) == ["3", "2", "1"])
    }
}

@Suite struct ShapeTests {
    @Test func renderingContentFromSettings() throws {
        let rendering: JSON = ["facetOrdering": ["facets": ["order": ["brand"]]]]
        let index = Shop.index(["attributesForFaceting": ["brand"], "renderingContent": rendering])
        #expect(try index.search(["query": "car"])["renderingContent"] == rendering)
        // Nothing to render: Algolia answers `{}` (its API clients' end-to-end expectations).
        #expect(try Shop.index().search(["query": "car"])["renderingContent"] == .object(JSONObject()))
    }

    @Test func settingsCarryAlgoliasDefaults() {
        let index = Shop.index(["attributesForFaceting": ["brand"], "hitsPerPage": 5])
        let settings = index.settings(getVersion: 2)
        #expect(settings["minWordSizefor1Typo"] == 4)
        #expect(settings["minWordSizefor2Typos"] == 8)
        #expect(settings["maxValuesPerFacet"] == 100)
        #expect(settings["hitsPerPage"] == 5)
        #expect(settings["paginationLimitedTo"] == 1000)
        #expect(settings["ranking"]?.arrayValue?.count == 8)
        #expect(settings["queryType"] == "prefixLast")
        #expect(settings["attributesForFaceting"] == ["brand"])
        #expect(settings["synonyms"] == nil)
    }

    @Test func ignoredParametersAreNamed() throws {
        let index = Shop.index()
        let response = try index.search(["query": "car", "clickAnalytics": true, "someUnknownThing": 1])
        let message = try #require(response["message"]?.stringValue)
        #expect(message.contains("clickAnalytics"))
        #expect(message.contains("someUnknownThing"))
        #expect(index.ignoredParameters(["clickAnalytics": false, "analytics": true]).isEmpty)
        #expect(try index.search(["query": "car", "analytics": false])["message"] == nil)
        let browse = try index.browse(["query": "", "aroundLatLngViaIP": true])
        #expect(browse["message"]?.stringValue?.contains("aroundLatLngViaIP") == true)
        #expect(try index.browse(["query": ""])["message"] == nil)
        let facets = SearchIndex(
            name: "f", settings: ["attributesForFaceting": ["searchable(brand)"]], records: Shop.records)
        #expect(
            try facets.searchForFacetValues(facet: "brand", params: ["facetQuery": "ca"])["message"] == nil)
        let warned = try facets.searchForFacetValues(
            facet: "brand", params: ["facetQuery": "ca", "clickAnalytics": true])
        #expect(warned["message"]?.stringValue?.contains("clickAnalytics") == true)
        let withSetting = Shop.index(["camelCaseAttributes": ["name"]])
        #expect(withSetting.ignoredSettings == ["setting camelCaseAttributes"])
        #expect(
            try withSetting.search(["query": "car"])["message"]?.stringValue?.contains("camelCaseAttributes")
                == true)
    }
}

@Suite struct GermanPluralRuleTests {
    func forms(_ word: String) -> Set<String> {
        Set(GermanPlurals.forms(of: Array(word.utf8)).map { String(decoding: $0, as: UTF8.self) })
    }

    @Test func singularsReachTheirPlurals() {
        #expect(forms("haus").contains("hauser"))  // Häuser, umlaut folded
        #expect(forms("blume").contains("blumen"))
        #expect(forms("lehrerin").contains("lehrerinnen"))
        #expect(forms("kind").isSuperset(of: ["kinder", "kindern"]))
        #expect(forms("auto") == ["autos"])
        #expect(forms("zeitung").contains("zeitungen"))
        #expect(forms("regel").contains("regeln"))
    }

    @Test func pluralsReachTheirSingulars() {
        #expect(forms("hauser").contains("haus"))
        #expect(forms("blumen").contains("blume"))
        #expect(forms("lehrerinnen").contains("lehrerin"))
        #expect(forms("kindern").isSuperset(of: ["kind", "kinder"]))
        #expect(forms("autos").contains("auto"))
        #expect(forms("zeitungen").contains("zeitung"))
    }

    @Test func shortWordsAndNonLettersHaveNoForms() {
        #expect(forms("ab").isEmpty)
        #expect(forms("r2d2").isEmpty)
        #expect(!forms("eis").contains("ei"))  // no stem under three letters
    }
}
