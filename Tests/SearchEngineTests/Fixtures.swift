import JSONCore
import Testing

@testable import SearchEngine

/// A small catalogue used by most tests.
enum Fixtures {
    static let settings: JSON = [
        "searchableAttributes": ["title", "unordered(author)", "description,notes"],
        "attributesForFaceting": ["genre", "searchable(author)", "filterOnly(year)", "tags.label"],
        "customRanking": ["desc(popularity)"],
        "unretrievableAttributes": ["secret"],
    ]

    static let records: [JSON] = [
        [
            "objectID": "1", "title": "The Three Musketeers", "author": "Alexandre Dumas",
            "genre": "Adventure",
            "year": 1844, "price": 9.5, "popularity": 50,
            "description": "Swords, friendship and intrigue in France",
            "secret": "x", "_tags": ["classic", "French"],
        ],
        [
            "objectID": "2", "title": "The Count of Monte Cristo", "author": "Alexandre Dumas",
            "genre": "Adventure",
            "year": 1845, "price": 12, "popularity": 90,
            "description": "Revenge story of a wrongly imprisoned man",
            "_tags": ["classic"],
        ],
        [
            "objectID": "3", "title": "Les Misérables", "author": "Victor Hugo", "genre": "Drama",
            "year": 1862,
            "price": 15, "popularity": 80, "description": "Jean Valjean and the musketeer of justice",
            "tags": [["label": "Paris"], ["label": "Revolution"]],
        ],
        [
            "objectID": "4", "title": "Musk", "author": "Unknown Author", "genre": "drama", "year": 2001,
            "price": 3,
            "description": "A short book about musk and perfume", "_tags": ["modern"],
        ],
        [
            "objectID": "5", "title": "Hello World Programming", "author": "Ada Lovelace", "genre": "Tech",
            "year": 2020, "price": 30, "popularity": 10, "description": "Learn helloworld style coding",
            "notes": "first steps",
        ],
    ]

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
