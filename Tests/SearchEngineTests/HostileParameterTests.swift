import JSONCore
import Testing

@testable import SearchEngine

/// Parameters found by the end-to-end search fuzz test (`Tests/EndToEnd/test_algolia_search_fuzz.py`) that
/// trapped the process: each now gets a 400 or an ordinary (possibly empty) answer.
@Suite struct HostileParameterTests {
    @Test func integerParameterOutOfRangeIsA400NotATrap() throws {
        // 2^63 and 1e300 parse as doubles that do not fit an Int.
        #expect(intParam(.double(9_223_372_036_854_775_808.0)) == nil)
        #expect(intParam(.double(1e300)) == nil)
        #expect(intParam(.double(-1e300)) == nil)
        #expect(intParam(.double(.nan)) == nil)
        #expect(intParam(.double(2.5)) == 2)
        #expect(intParam(.double(-2.5)) == -2)
        let index = Fixtures.index()
        for name in ["minWordSizefor1Typo", "minWordSizefor2Typos", "hitsPerPage", "page", "offset"] {
            var params = JSONObject()
            params["query"] = "dumas"
            params[name] = .double(9_223_372_036_854_775_808.0)
            let error = #expect(throws: SearchError.self) { try search(index, .object(params)) }
            #expect(error?.status == 400)
        }
    }

    @Test func hugePageOrOffsetGivesAnEmptyPage() throws {
        let index = Fixtures.index()
        let max = JSON.int(Int64.max)
        let byPage = try search(index, ["query": "", "page": max, "hitsPerPage": 20])
        #expect(ids(byPage).isEmpty)
        #expect(byPage["nbHits"] == 5)
        #expect(ids(try search(index, ["query": "", "page": .int(1 << 62), "hitsPerPage": 1000])).isEmpty)
        let byOffset = try search(index, ["query": "", "offset": max, "length": 1000])
        #expect(ids(byOffset).isEmpty)
        #expect(ids(try search(index, ["query": "", "offset": 3, "length": max])) == ["5", "4"])
    }

    @Test func deeplyNestedFilterIsA400() throws {
        let index = Fixtures.index()
        for filters in [
            String(repeating: "(", count: 5000) + "genre:Drama" + String(repeating: ")", count: 5000),
            String(repeating: "(", count: 5000),
            String(repeating: "NOT ", count: 5000) + "genre:Drama",
        ] {
            let error = #expect(throws: SearchError.self) { try search(index, ["filters": .string(filters)]) }
            #expect(error?.status == 400)
        }
        // Nesting within the limit still works.
        let nested = String(repeating: "(", count: 20) + "genre:Drama" + String(repeating: ")", count: 20)
        let flat = ids(try search(index, ["filters": "genre:Drama"]))
        #expect(!flat.isEmpty)
        #expect(ids(try search(index, ["filters": .string(nested)])) == flat)
    }

    @Test func editedBrowseCursorPositionIsRefusedOrEmpty() throws {
        let index = Fixtures.index()
        let first = try index.browse(["hitsPerPage": 2])
        let cursor = try #require(first["cursor"]?.stringValue)
        let decoded = try #require(Base64.decode(cursor))
        let state = try #require(try JSON.parse(decoded).objectValue)
        func edited(_ position: JSON) -> String {
            var s = state
            s["o"] = position
            return Base64.encode(JSON.object(s).serializedBytes())
        }
        for position: JSON in [.int(-1), .int(Int64.min)] {
            let error = #expect(throws: SearchError.self) { try index.browse([:], cursor: edited(position)) }
            #expect(error?.status == 400)
        }
        for position: JSON in [.int(Int64.max), .int(1 << 62), .int(5)] {
            let page = try index.browse([:], cursor: edited(position))
            #expect(ids(page).isEmpty)
            #expect(page["cursor"] == nil)
        }
    }

    @Test func hugeSynonymPageIsEmpty() {
        let index = Fixtures.index()
        let response = index.searchSynonyms(params: ["page": .int(Int64.max), "hitsPerPage": 1000])
        #expect(response["hits"]?.arrayValue?.isEmpty == true)
    }
}
