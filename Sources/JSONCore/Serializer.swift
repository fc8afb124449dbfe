import HTTPCore

extension JSON {
    /// Compact JSON text (no whitespace), keys in the object's order, strings escaped per RFC 8259
    /// (`"` `\` and control characters; non-ASCII is written as UTF-8). Non-finite doubles become `null`.
    public func serialized() -> String {
        String(decoding: serializedBytes(), as: UTF8.self)
    }

    /// Compact JSON text as UTF-8 bytes.
    public func serializedBytes() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(to: &out)
        return out
    }

    /// Appends the compact serialization to `out`.
    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): out.append(contentsOf: String(value).utf8)
        case .double(let value): JSON.writeDouble(value, to: &out)
        case .string(let value): JSON.writeString(value, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                element.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for i in object.keys.indices {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(object.keys[i], to: &out)
                out.append(UInt8(ascii: ":"))
                object.values[i].write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeDouble(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else {
            out.append(contentsOf: "null".utf8)
            return
        }
        if value == value.rounded(), abs(value) < 1e15 {
            out.append(contentsOf: String(Int64(value)).utf8)
            return
        }
        out.append(contentsOf: value.description.utf8)
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `value` as a quoted, escaped JSON string.
    public static func writeString(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { bytes in
            var runStart = 0
            for i in 0..<bytes.count {
                let byte = bytes[i]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
                runStart = i + 1
                switch byte {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
                case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
                default:
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30])
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0xF)])
                }
            }
            if runStart < bytes.count {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

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

    /// Encodes an object as an `application/x-www-form-urlencoded` string, keys in order (the `params`
    /// echo in search responses, as Algolia writes it): strings as is, other values as compact JSON, each
    /// encoded by ``FormCodec/formComponent(_:)`` (a space is `+`).
    public static func formEncode(_ object: JSONObject) -> String {
        var parts: [String] = []
        for (key, value) in object {
            let text: String
            if case .string(let string) = value { text = string } else { text = value.serialized() }
            parts.append(FormCodec.formComponent(key) + "=" + FormCodec.formComponent(text))
        }
        return parts.joined(separator: "&")
    }

    /// A search request's parameters as Algolia echoes them in the answer's `params`: a `params` string as
    /// it was sent (the request's other keys, if any, appended with ``formEncode(_:)``), else the keys
    /// sent, in order, with ``formEncode(_:)``; `""` when none was sent. A `cursor` is left out.
    public static func echoedParameters(_ params: JSON) -> String {
        guard case .object(var object) = params else { return "" }
        object["cursor"] = nil
        guard let text = object["params"]?.stringValue else { return formEncode(object) }
        object["params"] = nil
        if object.isEmpty { return text }
        let rest = formEncode(object)
        return text.isEmpty ? rest : text + "&" + rest
    }
}
