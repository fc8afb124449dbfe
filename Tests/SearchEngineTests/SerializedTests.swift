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

/// `SearchIndex(jsonArrayChunks:)` builds the same index as `SearchIndex(jsonArray:)` whatever the
/// chunk boundaries, and rejects malformed arrays.
@Suite struct StreamingBuildTests {
    static let text = #"""
         [ {"objectID":"1","title":"alpha ] \"beta\" {","tags":["x","y]"],"n":{"a":[1,{"b":2}]}},
        {"objectID":"2","title":"gamma\\","v":-1.5e3} ,{"objectID":"3","title":"delta","e":[]}
        ,{"objectID":"4"} ]
        """#

    static func chunks(_ bytes: [UInt8], size: Int) -> () -> [UInt8]? {
        var offset = 0
        return {
            guard offset < bytes.count else { return nil }
            defer { offset += size }
            return Array(bytes[offset..<min(bytes.count, offset + size)])
        }
    }

    @Test func sameIndexAnyChunking() throws {
        let bytes = Array(Self.text.utf8)
        let whole = try SearchIndex(name: "t", settings: [:], jsonArray: bytes, generation: "g")
        for size in [1, 2, 3, 7, 64, 100_000] {
            let streamed = try SearchIndex(
                name: "t", settings: [:], jsonArrayChunks: Self.chunks(bytes, size: size), generation: "g")
            #expect(streamed.records == whole.records, "chunk size \(size)")
            for query in ["alpha", "gamma", "", "delt"] {
                var a = try streamed.search(["query": .string(query)]).objectValue!
                var b = try whole.search(["query": .string(query)]).objectValue!
                a["processingTimeMS"] = nil
                b["processingTimeMS"] = nil
                #expect(a == b)
            }
        }
        #expect(whole.objectCount == 4)
    }

    @Test func malformedArrays() {
        for bad in ["", "{}", "[{\"a\":1}", "[{\"a\":1}] x", "[{\"a\":}]", "[{\"a\":\"unterminated]"] {
            #expect(throws: (any Error).self, "\(bad)") {
                _ = try SearchIndex(
                    name: "t", settings: [:], jsonArrayChunks: Self.chunks(Array(bad.utf8), size: 3))
            }
        }
        #expect(
            (try? SearchIndex(
                name: "t", settings: [:], jsonArrayChunks: Self.chunks(Array("[]".utf8), size: 1)))?
                .objectCount == 0)
    }
}
