import JSONCore

/// Bounds on the sizes a search request gives, checked before anything is allocated from them (issue 23):
/// beyond one, the search answers `400` in Algolia's format instead of doing the work. Numbers Algolia
/// clamps (`hitsPerPage`, `length`, `maxValuesPerFacet`, `maxFacetHits`, `distinct`,
/// `paginationLimitedTo`) are clamped where they are read, as Algolia does.
public enum SearchLimits {
    /// The longest `query` (and `facetQuery`), in UTF-8 bytes: Algolia's limit.
    public static let queryBytes = 512
    /// The longest highlight tag or snippet ellipsis (`highlightPreTag`, `highlightPostTag`,
    /// `snippetEllipsisText`), in UTF-8 bytes: Algolia's limit on a parameter's value.
    public static let tagBytes = 512
    /// The most filter conditions in one search, over `filters`, `facetFilters`, `numericFilters`,
    /// `tagFilters` and `optionalFilters` together (each costs a test per candidate record).
    public static let filterConditions = 10_000
    /// The most `insideBoundingBox` rectangles.
    public static let boundingBoxes = 1_000
    /// The most `insidePolygon` points, over all polygons: Algolia's limit for one polygon.
    public static let polygonPoints = 10_000
    /// The most `aroundPrecision` ranges.
    public static let precisionRanges = 1_000

    /// The error for an answer that would pass `maxBytes` (its hits are not built further).
    public static func answerTooLarge(_ maxBytes: Int) -> SearchError {
        SearchError(
            status: 400,
            message: "The answer would be larger than \(maxBytes >> 20) MiB: ask for fewer hits, attributes "
                + "or queries")
    }

    /// Algolia's error for a string parameter longer than `limit` bytes.
    static func tooLong(_ name: String, _ limit: Int) -> SearchError {
        SearchError(
            status: 400,
            message: "Invalid value for \"\(name)\" parameter, expected string shorter than \(limit) bytes")
    }

    /// Throws Algolia's error when `value` (a string, or any value as serialized) is longer than `limit`.
    static func checkLength(_ name: String, _ value: JSON?, limit: Int) throws(SearchError) {
        guard let value, !value.isNull else { return }
        let count = value.stringValue?.utf8.count ?? value.serializedBytes().count
        if count > limit { throw tooLong(name, limit) }
    }

    /// Checks the string parameters of merged search parameters (the tags may also come from settings).
    static func check(_ options: SearchOptions) throws(SearchError) {
        try checkLength("query", options.params["query"], limit: queryBytes)
        try checkLength("facetQuery", options.params["facetQuery"], limit: queryBytes)
        for name in ["highlightPreTag", "highlightPostTag", "snippetEllipsisText"] {
            try checkLength(name, options.value(name), limit: tagBytes)
        }
    }

    /// Throws Algolia's error when the `query` of `params` (object form, `params` string merged) passes
    /// ``queryBytes``: for the calls that search something else with it (synonyms, rules).
    public static func checkQuery(_ params: JSON) throws(SearchError) {
        try checkLength("query", SearchIndex.mergedParameters(params)["query"], limit: queryBytes)
    }

    /// Throws when a search's filters hold more than ``filterConditions`` conditions.
    static func checkFilterCount(_ count: Int) throws(SearchError) {
        guard count <= filterConditions else {
            throw SearchError(
                status: 400,
                message: "Too many filters: \(count) conditions, at most \(filterConditions) per search")
        }
    }
}
