import JSONCore
import SearchEngine
import Testing

/// A virtual replica's relevant sort (`SearchIndex.asVirtualReplica()`), and secured restrictions on
/// getObject.
@Suite struct RelevantSortTests {
    static let records: [JSON] = [
        ["objectID": "a", "name": "red phone", "price": 10],
        ["objectID": "b", "name": "red phone case", "price": 30],
        ["objectID": "c", "name": "phone", "price": 50],
        ["objectID": "d", "name": "blue tablet", "price": 40],
    ]

    func index(strictness: Int?) -> SearchIndex {
        var settings: JSONObject = ["customRanking": ["desc(price)"], "attributesForFaceting": ["price"]]
        if let strictness { settings["relevancyStrictness"] = .int(Int64(strictness)) }
        return SearchIndex(name: "virtual", settings: .object(settings), records: Self.records)
            .asVirtualReplica()
    }

    func ids(_ answer: JSON) -> [String] {
        (answer["hits"]?.arrayValue ?? []).compactMap { $0["objectID"]?.stringValue }
    }

    @Test func strictnessZeroSortsEveryMatchByTheCustomRanking() throws {
        let answer = try index(strictness: 0).search(["query": "red phone"])
        // "red phone" needs both words: a and b; with strictness 0 both, by descending price.
        #expect(ids(answer) == ["b", "a"])
        #expect(answer["message"] == nil)
        let all = try index(strictness: 0).search(["query": "phone"])
        #expect(ids(all) == ["c", "b", "a"])
    }

    @Test func aQueryWithoutWordsKeepsEveryRecordExactly() throws {
        let answer = try index(strictness: nil).search(["query": ""])
        #expect(ids(answer) == ["c", "d", "b", "a"])
        #expect(answer["message"] == nil)
        #expect(answer["nbHits"] == 4)
    }

    @Test func aStrictSelectionKeepsTheBestMatchesAndSaysItIsApproximated() throws {
        // "red phone" with optional words: a and b match both words, c only "phone". Strictness 100 keeps
        // the matches as relevant as the best (a, b), sorted by price; 0 keeps c too.
        let params: JSON = ["query": "red phone", "optionalWords": ["red"]]
        let strict = try index(strictness: 100).search(params)
        #expect(ids(strict) == ["b", "a"])
        #expect(strict["nbHits"] == 2)
        #expect(
            strict["message"]?.stringValue?.contains("relevancyStrictness 100 (relevant sort approximated")
                == true)
        let loose = try index(strictness: 100).search(
            ["query": "red phone", "optionalWords": ["red"], "relevancyStrictness": 0])
        #expect(ids(loose) == ["c", "b", "a"])
        #expect(loose["message"] == nil)
    }

    @Test func aStandardIndexRanksByRelevanceBeforeItsCustomRanking() throws {
        let standard = SearchIndex(
            name: "std", settings: ["customRanking": ["desc(price)"]], records: Self.records)
        #expect(!standard.isVirtualReplica)
        #expect(standard.asVirtualReplica().isVirtualReplica)
        // Textual relevance first: "phone" alone is an exact single-word match for c.
        let answer = try standard.search(["query": "red phone", "optionalWords": ["red"]])
        #expect(ids(answer).last == "c")
    }

    @Test func aRestrictedGetObjectWithholdsRecordsOutsideTheFilters() throws {
        let index = SearchIndex(
            name: "r", settings: ["attributesForFaceting": ["price"]], records: Self.records)
        let restrictions: JSONObject = ["filters": "price > 20"]
        #expect(try index.getObject("a", attributesToRetrieve: nil, restrictedBy: restrictions) == nil)
        #expect(
            try index.getObject("b", attributesToRetrieve: nil, restrictedBy: restrictions)?["price"] == 30)
        #expect(try index.getObject("zz", attributesToRetrieve: nil, restrictedBy: restrictions) == nil)
        let narrowed = try index.getObject(
            "b", attributesToRetrieve: ["price"], restrictedBy: ["attributesToRetrieve": ["name"]])
        #expect(narrowed == ["objectID": "b", "name": "red phone case"])
        #expect(throws: SearchError.self) {
            try index.getObject("b", attributesToRetrieve: nil, restrictedBy: ["filters": "price >"])
        }
    }
}
