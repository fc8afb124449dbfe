import JSONCore
import Storage
import Testing

@testable import SearchEngine

@Suite struct RuleTests {
    static func index(_ rules: [JSON]) -> SearchIndex {
        SearchIndex(name: "shop", settings: Shop.settings, rules: rules, records: Shop.records)
    }

    @Test func anchoringAndQueryEdits() throws {
        let index = Self.index([
            [
                "objectID": "is", "conditions": [["pattern": "cheap car", "anchoring": "is"]],
                "consequence": ["params": ["query": "family car"]],
            ],
            [
                "objectID": "starts", "conditions": [["pattern": "buy", "anchoring": "startsWith"]],
                "consequence": ["params": ["query": ["remove": ["buy"]]]],
            ],
            [
                "objectID": "ends", "conditions": [["pattern": "please", "anchoring": "endsWith"]],
                "consequence": ["params": ["query": ["edits": [["type": "remove", "delete": "please"]]]]],
            ],
            [
                "objectID": "contains", "conditions": [["pattern": "automobile", "anchoring": "contains"]],
                "consequence": [
                    "params": [
                        "query": ["edits": [["type": "replace", "delete": "automobile", "insert": "car"]]]
                    ]
                ],
            ],
        ])
        let cheap = try index.search(["query": "cheap car"])
        #expect(ids(cheap) == ["b"])
        #expect(cheap["appliedRules"] == [["objectID": "is"]])
        #expect(cheap["query"] == "family car")
        // "is" needs the whole query.
        #expect(try index.search(["query": "very cheap car"])["appliedRules"] == nil)
        #expect(ids(try index.search(["query": "buy red car"])) == ["a"])
        #expect(ids(try index.search(["query": "red car please"])) == ["a"])
        #expect(ids(try index.search(["query": "red automobile"])) == ["a"])
        // enableRules false: nothing applied.
        let off = try index.search(["query": "cheap car", "enableRules": false])
        #expect(off["appliedRules"] == nil)
        #expect(off["nbHits"] == 0)
    }

    @Test func contextValidityEnabledAndFilters() throws {
        let index = Self.index([
            [
                "objectID": "ctx",
                "conditions": [["pattern": "car", "anchoring": "is", "context": "mobile"]],
                "consequence": ["userData": ["banner": "mobile"]],
            ],
            [
                "objectID": "past", "conditions": [["pattern": "car", "anchoring": "is"]],
                "validity": [["from": 0, "until": 1000]], "consequence": ["userData": ["banner": "old"]],
            ],
            [
                "objectID": "off", "enabled": false, "conditions": [["pattern": "car", "anchoring": "is"]],
                "consequence": ["userData": ["banner": "off"]],
            ],
            [
                "objectID": "now", "conditions": [["pattern": "car", "anchoring": "is"]],
                "validity": [["from": 0, "until": 99_999_999_999]],
                "consequence": ["userData": ["banner": "now"]],
            ],
            [
                "objectID": "filtered", "conditions": [["filters": "brand:Calm"]],
                "consequence": ["userData": ["banner": "calm"]],
            ],
        ])
        #expect(try index.search(["query": "car"])["userData"] == [["banner": "now"]])
        let mobile = try index.search(["query": "car", "ruleContexts": ["mobile"]])
        #expect(mobile["userData"] == [["banner": "mobile"], ["banner": "now"]])
        #expect(mobile["appliedRules"] == [["objectID": "ctx"], ["objectID": "now"]])
        let calm = try index.search(["query": "", "facetFilters": ["brand:Calm"]])
        #expect(calm["userData"] == [["banner": "calm"]])
    }

    @Test func facetPlaceholdersAndAutomaticFilters() throws {
        let index = Self.index([
            [
                "objectID": "brand", "conditions": [["pattern": "{facet:brand}", "anchoring": "contains"]],
                "consequence": ["params": ["automaticFacetFilters": [["facet": "brand"]]]],
            ]
        ])
        // "calm car": the brand word leaves the query and becomes a filter.
        let response = try index.search(["query": "calm car"])
        #expect(ids(response) == ["b"])
        #expect(response["appliedRules"] == [["objectID": "brand"]])
        let optional = Self.index([
            [
                "objectID": "boost", "conditions": [["pattern": "{facet:brand}", "anchoring": "contains"]],
                "consequence": [
                    "params": ["automaticOptionalFacetFilters": [["facet": "brand", "score": 2]]]
                ],
            ]
        ])
        let boosted = try optional.search(["query": "fast", "getRankingInfo": true])
        #expect(Set(ids(boosted)) == ["a", "d"])
        #expect(hitInfo(boosted, "a")?["filters"] == 2)
        let disjunctive = Self.index([
            [
                "objectID": "dis", "conditions": [["pattern": "{facet:brand}", "anchoring": "startsWith"]],
                "consequence": [
                    "params": ["automaticFacetFilters": [["facet": "brand", "disjunctive": true]]]
                ],
            ]
        ])
        #expect(Set(ids(try disjunctive.search(["query": "toy"]))) == ["c"])
    }

    @Test func alternativesMatchPlurals() throws {
        let rule: JSON = [
            "objectID": "alt", "conditions": [["pattern": "car", "anchoring": "is", "alternatives": true]],
            "consequence": ["userData": ["hit": true]],
        ]
        let index = Self.index([rule])
        #expect(try index.search(["query": "cars", "ignorePlurals": ["en"]])["userData"] == [["hit": true]])
        #expect(try index.search(["query": "cars"])["userData"] == nil)
    }

    @Test func promoteHideAndFilterPromotes() throws {
        let index = Self.index([
            [
                "objectID": "pin", "conditions": [["pattern": "car", "anchoring": "contains"]],
                "consequence": [
                    "promote": [
                        ["objectID": "e", "position": 0], ["objectIDs": ["h", "g"], "position": 2],
                    ],
                    "hide": [["objectID": "a"]],
                ],
            ]
        ])
        let response = try index.search(["query": "car", "getRankingInfo": true])
        // Candidates a, b, c; a hidden; e at 0, h at 2, g at 3.
        #expect(ids(response) == ["e", "b", "h", "g", "c"])
        #expect(response["nbHits"] == 5)
        #expect(hitInfo(response, "e")?["promoted"] == true)
        #expect(hitInfo(response, "b")?["promoted"] == false)
        let filtered = Self.index([
            [
                "objectID": "pin", "conditions": [["pattern": "car", "anchoring": "contains"]],
                "consequence": ["promote": [["objectID": "e", "position": 0]], "filterPromotes": true],
            ]
        ])
        #expect(ids(try filtered.search(["query": "car", "filters": "brand:Fast"])) == ["a"])
        #expect(ids(try filtered.search(["query": "car", "filters": "brand:Calm"])).first == "e")
    }

    @Test func renderingContentAndParams() throws {
        let index = Self.index([
            [
                "objectID": "r", "conditions": [["pattern": "book", "anchoring": "is"]],
                "consequence": [
                    "params": [
                        "filters": "kind:book", "hitsPerPage": 2,
                        "renderingContent": ["redirect": ["url": "x"]],
                    ]
                ],
            ]
        ])
        let response = try index.search(["query": "book"])
        #expect(response["renderingContent"] == ["redirect": ["url": "x"]])
        #expect(response["hitsPerPage"] == 2)
    }

    @Test func rulesSearchAndGet() throws {
        let index = Self.index([
            [
                "objectID": "one", "conditions": [["pattern": "car", "anchoring": "is", "context": "web"]],
                "consequence": [:],
            ],
            [
                "objectID": "two", "conditions": [["pattern": "bike", "anchoring": "contains"]],
                "consequence": [:],
            ],
            ["objectID": "three", "enabled": false, "description": "summer sale", "consequence": [:]],
        ])
        #expect(index.getRule("two")?["objectID"] == "two")
        #expect(index.getRule("none") == nil)
        let all = index.searchRules(params: [:])
        #expect(all["nbHits"] == 3)
        #expect(all["nbPages"] == 1)
        #expect(index.searchRules(params: ["query": "bike"])["nbHits"] == 1)
        #expect(index.searchRules(params: ["anchoring": "is"])["hits"]?.arrayValue?.count == 1)
        #expect(index.searchRules(params: ["context": "web"])["nbHits"] == 1)
        #expect(index.searchRules(params: ["enabled": false])["hits"] == [index.getRule("three")!])
        #expect(index.searchRules(params: ["query": "summer"])["nbHits"] == 1)
        let paged = index.searchRules(params: ["hitsPerPage": 2, "page": 1])
        #expect(paged["hits"]?.arrayValue?.count == 1)
        #expect(paged["nbPages"] == 2)
    }

    @Test func storeKeepsRules() throws {
        let path = "/tmp/se-rules-test-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        let store = try IndexStore(pool: DatabasePool(path: path, readers: 1))
        let rule: JSON = [
            "objectID": "r", "conditions": [["pattern": "car", "anchoring": "is"]], "consequence": [:],
        ]
        try store.build(
            name: "shop", settings: Shop.settings, synonyms: [], rules: [rule], records: Shop.records)
        let loaded = try #require(try store.load(name: "shop"))
        #expect(loaded.rules == [rule])
        #expect(try loaded.search(["query": "car"])["appliedRules"] == [["objectID": "r"]])
    }
}
