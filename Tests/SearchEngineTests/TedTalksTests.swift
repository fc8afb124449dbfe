import Foundation
import JSONCore
import Testing

@testable import SearchEngine

/// The TED talks data with its real (legacy v1) settings: `attributesToIndex` with `unordered()`,
/// `searchable()` facets, `distinct` on speakers, `attributesToSnippet: ["speakers:15"]`, `slaves`.
@Suite struct TedTalksTests {
    /// `../shared/data` beside the repository root (overridable with `SHARED_DATA`).
    static let directory: URL = {
        if let override = ProcessInfo.processInfo.environment["SHARED_DATA"] {
            return URL(fileURLWithPath: override).appendingPathComponent("algolia/tedtalks")
        }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().appendingPathComponent("../../../shared/data/algolia/tedtalks")
            .standardized
    }()

    static func load() throws -> (settings: JSON, index: SearchIndex)? {
        let settingsURL = directory.appendingPathComponent("talks_settings.json")
        let talksURL = directory.appendingPathComponent("talks.json")
        guard FileManager.default.fileExists(atPath: talksURL.path) else {
            print("TedTalksTests skipped: \(directory.path) is absent")
            return nil
        }
        let settings = try JSON.parse([UInt8](try Data(contentsOf: settingsURL)))
        let index = try SearchIndex(
            name: "talks", settings: settings, jsonArray: [UInt8](try Data(contentsOf: talksURL)))
        return (settings, index)
    }

    @Test func realSettingsAndSearch() throws {
        guard let (settings, index) = try Self.load() else { return }
        #expect(index.objectCount == 2356)
        // Settings come back exactly as given, legacy names included.
        #expect(index.settingsJSON.serialized() == settings.serialized())
        let response = try index.search(["query": "climate change", "facets": ["*"], "getRankingInfo": true])
        let hits = try #require(response["hits"]?.arrayValue)
        #expect(!hits.isEmpty)
        #expect(hits[0]["_snippetResult"]?["speakers"] != nil)
        #expect(hits[0]["_rankingInfo"]?["nbTypos"] == 0)
        #expect(response["facets"]?["tags"]?.objectValue?.isEmpty == false)
        // distinct=true on speakers: no speaker twice in a page.
        let all = try index.search(["query": "", "hitsPerPage": 100])
        let speakers = (all["hits"]?.arrayValue ?? []).compactMap { $0["speakers"]?.serialized() }
        #expect(Set(speakers).count == speakers.count)
        // One typo still finds talks.
        #expect((try index.search(["query": "climat chnage"])["nbHits"]?.intValue ?? 0) > 0)
        // Facet-value search on a searchable() facet.
        let facetHits = try index.searchForFacetValues(facet: "tags", params: ["facetQuery": "tech"])
        #expect(facetHits["facetHits"]?.arrayValue?.isEmpty == false)
    }
}
