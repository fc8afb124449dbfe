import JSONCore
import Testing

@testable import SearchEngine

/// Issue 23: every size a search request gives is bounded before the work it sizes; beyond a bound the
/// answer is a 400 with Algolia's message, never an allocation sized by the input.
@Suite struct SearchLimitTests {
    func refusal(_ params: JSON, _ index: SearchIndex = Fixtures.index()) -> SearchError? {
        #expect(throws: SearchError.self) { try index.search(params) }
    }

    @Test func queryLongerThan512BytesIsAlgoliasError() throws {
        let index = Fixtures.index()
        // 100 000 characters made the typo search ask for 40 GB.
        for query in [String(repeating: "a", count: 100_000), String(repeating: "dumas ", count: 86)] {
            let error = refusal(["query": .string(query)], index)
            #expect(error?.status == 400)
            #expect(
                error?.message
                    == #"Invalid value for "query" parameter, expected string shorter than 512 bytes"#)
            #expect(throws: SearchError.self) { try index.searchSerialized(["query": .string(query)]) }
            #expect(throws: SearchError.self) { try index.browse(["query": .string(query)]) }
            #expect(throws: SearchError.self) {
                try index.searchForFacetValues(facet: "author", params: ["query": .string(query)])
            }
        }
        // Bytes, not characters: 171 three-byte characters are 513 bytes.
        #expect(refusal(["query": .string(String(repeating: "€", count: 171))], index)?.status == 400)
        // The limit itself is accepted, typos and all (one 512-byte word).
        let longest = String(repeating: "dumas", count: 102) + "du"
        #expect(longest.utf8.count == 512)
        _ = try index.search(["query": .string(longest)])
        _ = try index.search(["query": .string(String(repeating: "€", count: 170))])
        #expect(ids(try index.search(["query": "dumas"])).count == 2)
        // Through the `params` string too.
        let form = "query=" + String(repeating: "x", count: 600)
        #expect(refusal(["params": .string(form)], index)?.status == 400)
    }

    @Test func facetQueryLongerThan512BytesIsRefused() throws {
        let index = Fixtures.index()
        let error = #expect(throws: SearchError.self) {
            try index.searchForFacetValues(
                facet: "author", params: ["facetQuery": .string(String(repeating: "alex ", count: 200))])
        }
        #expect(error?.message.contains(#""facetQuery""#) == true)
        _ = try index.searchForFacetValues(
            facet: "author", params: ["facetQuery": .string(String(repeating: "a", count: 512))])
    }

    @Test func longHighlightTagsAreRefused() throws {
        let index = Fixtures.index()
        for name in ["highlightPreTag", "highlightPostTag", "snippetEllipsisText"] {
            var params: JSONObject = ["query": "dumas"]
            params[name] = .string(String(repeating: "<b>", count: 200))
            let error = refusal(.object(params), index)
            #expect(error?.status == 400)
            #expect(error?.message.contains("\"\(name)\"") == true)
            params[name] = .string(String(repeating: "b", count: 512))
            _ = try index.search(.object(params))
        }
    }

    @Test func tooManyFilterConditionsAreRefused() throws {
        let index = Fixtures.index()
        let many = (0...SearchLimits.filterConditions).map { "genre:g\($0)" }
        let cases: [JSON] = [
            ["filters": .string(many.joined(separator: " OR "))],
            ["facetFilters": .array([.array(many.map { .string($0) })])],
            ["facetFilters": .array(many.map { .string($0) })],
            ["optionalFilters": .array(many.map { .string($0) })],
            ["tagFilters": .array(many.map { .string($0) })],
            ["numericFilters": .array((0...SearchLimits.filterConditions).map { .string("year > \($0)") })],
        ]
        for params in cases {
            let error = refusal(params, index)
            #expect(error?.status == 400)
            #expect(error?.message.hasPrefix("Too many filters") == true)
        }
        // Within the bound, an ordinary answer.
        let fewer = many.prefix(SearchLimits.filterConditions - 1) + ["genre:Drama"]
        #expect(!ids(try index.search(["filters": .string(fewer.joined(separator: " OR "))])).isEmpty)
    }

    @Test func geoSizesAreBounded() throws {
        let index = Fixtures.index()
        let boxes = Array(repeating: JSON.array([1, 2, 3, 4]), count: SearchLimits.boundingBoxes + 1)
        #expect(refusal(["insideBoundingBox": .array(boxes)], index)?.status == 400)
        let points = (0...SearchLimits.polygonPoints).flatMap { i -> [JSON] in
            [.double(Double(i % 80)), .double(Double(i % 170))]
        }
        #expect(refusal(["insidePolygon": .array([.array(points)])], index)?.status == 400)
        let ranges = Array(
            repeating: JSON.object(["from": 0, "value": 10]), count: SearchLimits.precisionRanges + 1)
        #expect(
            refusal(["aroundLatLng": "48.8,2.3", "aroundPrecision": .array(ranges)], index)?.status == 400)
        // Within the bounds: ordinary answers.
        _ = try index.search(["insideBoundingBox": .array(Array(boxes.prefix(10)))])
        _ = try index.search(["insidePolygon": .array([.array(Array(points.prefix(20)))])])
    }

    @Test func hugeSnippetSizesAndPagesAllocateNothing() throws {
        let index = Fixtures.index()
        // Algolia clamps these; none sizes an allocation.
        for snippet in ["title:100000000", "title:9223372036854775807", "title:-5", "*:100000000"] {
            let answer = try index.search(["query": "dumas", "attributesToSnippet": [.string(snippet)]])
            #expect(ids(answer).count == 2)
        }
        let answer = try index.search([
            "query": "", "hitsPerPage": 100_000_000, "maxValuesPerFacet": 100_000_000, "facets": ["*"],
            "distinct": 100_000_000,
        ])
        #expect(answer["hitsPerPage"] == 1000)
    }

    @Test func browseCursorCarriesTheQueryBound() throws {
        let index = Fixtures.index()
        let state: JSON = [
            "p": ["query": .string(String(repeating: "a", count: 10_000))], "o": 0,
            "g": .string(index.generation),
        ]
        let cursor = Base64.encode(state.serializedBytes())
        let error = #expect(throws: SearchError.self) { try index.browse([:], cursor: cursor) }
        #expect(error?.status == 400)
    }

    @Test func answersStopGrowingAtTheirByteBound() throws {
        // Highlighting multiplies a record: 2,000 matching words with 512-byte tags are ~2 MB per hit.
        let text = Array(repeating: "spam", count: 2000).joined(separator: " ")
        let records: [JSON] = (0..<20).map { ["objectID": .string("\($0)"), "body": .string(text)] }
        let index = SearchIndex(name: "spam", settings: ["searchableAttributes": ["body"]], records: records)
        let tag = String(repeating: "b", count: 512)
        let params: JSON = [
            "query": "spam", "highlightPreTag": .string(tag), "highlightPostTag": .string(tag),
        ]
        let byJSON = #expect(throws: SearchError.self) { try index.search(params, maxBytes: 4 << 20) }
        let bySerialized = #expect(throws: SearchError.self) {
            try index.searchSerialized(params, maxBytes: 4 << 20)
        }
        for error in [byJSON, bySerialized] {
            #expect(error?.message.hasPrefix("The answer would be larger than 4 MiB") == true)
        }
        // Without tags the same hits fit.
        #expect(ids(try index.search(["query": "spam"], maxBytes: 4 << 20)).count == 20)
        #expect(try index.searchSerialized(["query": "spam"], maxBytes: 4 << 20).count < 4 << 20)
    }

    @Test func synonymAndRuleSearchQueriesShareTheBound() throws {
        let long: JSON = ["query": .string(String(repeating: "q", count: 513))]
        #expect(throws: SearchError.self) { try SearchLimits.checkQuery(long) }
        #expect(throws: SearchError.self) {
            try SearchLimits.checkQuery(["params": .string("query=" + String(repeating: "q", count: 513))])
        }
        try SearchLimits.checkQuery(["query": .string(String(repeating: "q", count: 512))])
        try SearchLimits.checkQuery([:])
    }
}
