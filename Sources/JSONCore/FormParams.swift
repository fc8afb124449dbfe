extension JSON {
    /// Parameters whose values are always text, never coerced to numbers, booleans or arrays
    /// (a query `123` stays the string `"123"`).
    public static let algoliaStringParameters: Set<String> = [
        "query", "filters", "facetQuery", "highlightPreTag", "highlightPostTag", "snippetEllipsisText",
        "aroundLatLng", "cursor", "userToken", "similarQuery", "queryType", "exactOnSingleWordQuery",
        "sortFacetValuesBy", "removeWordsIfNoResults", "mode", "attributeForDistinct", "indexName", "type",
        "facet", "strategy", "objectID", "keepDiacriticsOnCharacters", "separatorsToIndex",
    ]

    /// Decodes an `application/x-www-form-urlencoded` string (`+` is a space, `%XX` escapes, invalid
    /// escapes kept literally) into ordered `(name, value)` pairs.
    public static func decodeFormPairs(_ text: String) -> [(String, String)] {
        var pairs: [(String, String)] = []
        for part in text.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            if let eq = part.firstIndex(of: UInt8(ascii: "=")) {
                pairs.append(
                    (percentDecode(part[part.startIndex..<eq]), percentDecode(part[part.index(after: eq)...]))
                )
            } else {
                pairs.append((percentDecode(part), ""))
            }
        }
        return pairs
    }

    /// Percent-decodes form text (`+` becomes a space). Invalid UTF-8 is repaired with U+FFFD.
    public static func percentDecode(_ bytes: some Collection<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i != bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "+") {
                out.append(0x20)
            } else if byte == UInt8(ascii: "%") {
                let h1 = bytes.index(after: i)
                if h1 != bytes.endIndex {
                    let h2 = bytes.index(after: h1)
                    if h2 != bytes.endIndex, let high = hexValue(bytes[h1]), let low = hexValue(bytes[h2]) {
                        out.append(high << 4 | low)
                        i = bytes.index(after: h2)
                        continue
                    }
                }
                out.append(byte)
            } else {
                out.append(byte)
            }
            i = bytes.index(after: i)
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

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
        for (name, value) in decodeFormPairs(text) {
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
            parts.append(percentEncode(key) + "=" + percentEncode(text))
        }
        return parts.joined(separator: "&")
    }

    /// Percent-encodes everything except RFC 3986 unreserved characters.
    public static func percentEncode(_ text: String) -> String {
        var out: [UInt8] = []
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                UInt8(ascii: "."),
                UInt8(ascii: "~"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
