import JSONCore
import MirrorgateTesting
import Testing

@testable import SearchEngine

/// A small catalogue used by most tests (``AlgoliaFixtures``' books).
enum Fixtures {
    static let settings = AlgoliaFixtures.bookSettings
    static let records = AlgoliaFixtures.books

    static func index(settings: JSON = settings, records: [JSON] = records) -> SearchIndex {
        SearchIndex(name: "books", settings: settings, records: records)
    }
}

func ids(_ response: JSON) -> [String] {
    (response["hits"]?.arrayValue ?? []).compactMap { $0["objectID"]?.stringValue }
}

func search(_ index: SearchIndex, _ params: JSON) throws -> JSON {
    try index.search(params)
}
