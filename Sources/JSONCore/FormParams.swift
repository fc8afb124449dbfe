import HTTPCore

extension JSON {
    /// Parameters whose values are always text, never coerced to numbers, booleans or arrays
    /// (a query `123` stays the string `"123"`).
    public static let algoliaStringParameters: Set<String> = [
        "query", "filters", "facetQuery", "highlightPreTag", "highlightPostTag", "snippetEllipsisText",
        "aroundLatLng", "cursor", "userToken", "similarQuery", "queryType", "exactOnSingleWordQuery",
        "sortFacetValuesBy", "removeWordsIfNoResults", "mode", "attributeForDistinct", "indexName", "type",
        "facet", "strategy", "objectID", "keepDiacriticsOnCharacters", "separatorsToIndex",
    ]

    /// Types one Algolia parameter value given as text, the way Algolia reads a `params` string:
    /// names in ``algoliaStringParameters`` stay strings; otherwise a value that is a JSON array or object
    /// is parsed as JSON, `true`/`false` become booleans, numbers become numbers, anything else stays a
    /// string (list parameters such as `attributesToRetrieve=a,b` stay a comma-separated string; the search
    /// engine accepts both forms).
    public static func typedParameter(name: String, value: String) -> JSON {
        if algoliaStringParameters.contains(name) { return .string(value) }
        guard let first = value.utf8.first else { return .string(value) }
        if first == UInt8(ascii: "[") || first == UInt8(ascii: "{") {
            if let parsed = try? JSON.parse(value) { return parsed }
            return .string(value)
        }
        if value == "true" { return .bool(true) }
        if value == "false" { return .bool(false) }
        if first == UInt8(ascii: "-") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) {
            if let int = Int64(value) { return .int(int) }
            if let parsed = try? JSON.parse(value), parsed.isNumber { return parsed }
        }
        return .string(value)
    }

    /// Parses an Algolia `params` string (`query=x&hitsPerPage=5&facetFilters=%5B...%5D`) into an object
    /// with typed values (see ``typedParameter(name:value:)``). A repeated name keeps the last value.
    public static func parseAlgoliaParams(_ text: String) -> JSONObject {
        var object = JSONObject()
        for (name, value) in FormCodec.pairs(Substring(text)) {
            object[name] = typedParameter(name: name, value: value)
        }
        return object
    }

    /// Encodes an object as a form string (the `params` echo in search responses): strings as is, other
    /// values as compact JSON, each percent-encoded.
    public static func formEncode(_ object: JSONObject) -> String {
        var parts: [String] = []
        for (key, value) in object {
            let text: String
            if case .string(let string) = value { text = string } else { text = value.serialized() }
            parts.append(FormCodec.percentEncode(key) + "=" + FormCodec.percentEncode(text))
        }
        return parts.joined(separator: "&")
    }
}
