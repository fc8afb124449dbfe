import Foundation
import JSONCore
import Testing

@testable import SearchEngine

/// `searchSerialized` must be `search(...).serializedBytes()` byte for byte, apart from
/// `processingTimeMS` (the fast path copies stored record bytes and writes highlights directly).
@Suite struct SerializedTests {
    /// The serialized response with `processingTimeMS` removed, checking the bytes are canonical.
    static func comparable(_ bytes: [UInt8]) throws -> [UInt8] {
        let parsed = try JSON.parse(bytes)
        guard case .object(var object) = parsed else { return bytes }
        #expect(parsed.serializedBytes() == bytes, "searchSerialized output is not canonical JSON")
        object["processingTimeMS"] = nil
        return JSON.object(object).serializedBytes()
    }

    static func expectSame(_ index: SearchIndex, _ params: JSON) throws {
        let slow = try comparable(index.search(params).serializedBytes())
        let fast = try comparable(index.searchSerialized(params))
        #expect(
            String(decoding: fast, as: UTF8.self) == String(decoding: slow, as: UTF8.self),
            "params \(params.serialized())")
    }

    static let variants: [JSON] = [
        ["query": ""],
        ["query": "musketeers"],
        ["query": "dumas adventure", "getRankingInfo": true],
        ["query": "musk", "attributesToSnippet": ["description:3", "title"]],
        ["query": "the", "attributesToSnippet": ["*:2"], "highlightPreTag": "[", "highlightPostTag": "]"],
        ["query": "hugo", "attributesToRetrieve": ["title", "author"]],
        ["query": "hugo", "attributesToRetrieve": ["*", "-price"]],
        ["query": "paris", "attributesToHighlight": ["tags.label", "title"]],
        ["query": "musketer", "attributesToHighlight": ["*"], "responseFields": ["hits", "nbHits"]],
        ["query": "hello world", "facets": ["*"], "hitsPerPage": 2, "page": 1],
        ["query": "programing", "offset": 0, "length": 3],
        ["query": "x", "attributesToHighlight": []],
    ]

    @Test func sameBytesOnFixtures() throws {
        let index = Fixtures.index()
        for params in Self.variants { try Self.expectSame(index, params) }
        // No unretrievable attributes: the stored-bytes path is taken.
        var settings = Fixtures.settings.objectValue!
        settings["unretrievableAttributes"] = nil
        let open = Fixtures.index(settings: .object(settings))
        for params in Self.variants { try Self.expectSame(open, params) }
        // Records holding keys the hit computes, null values, nested objects and arrays.
        let odd = SearchIndex(
            name: "odd", settings: [:],
            records: [
                ["objectID": "a", "_highlightResult": "mine", "title": "alpha beta", "n": nil],
                [
                    "objectID": "b", "title": "alpha", "nested": ["x": ["alpha", nil, 3], "y": nil],
                    "s\"q": "alp",
                ],
                ["title": "no id alpha"],
                [:],
            ])
        for params in Self.variants + [["query": "alpha"], ["query": "alp", "attributesToSnippet": ["*"]]] {
            try Self.expectSame(odd, params)
        }
    }

    @Test func sameBytesOnTedTalks() throws {
        guard let (_, index) = try TedTalksTests.load() else { return }
        for query in ["", "climate change", "educaton", "music", "design thinking", "psychology brain"] {
            try Self.expectSame(index, ["query": .string(query)])
            try Self.expectSame(
                index, ["query": .string(query), "facets": ["*"], "attributesToSnippet": ["description:8"]])
        }
    }
}
