/// Percent-decoding as OData URLs need it.
///
/// Promises: decodes exactly once (so a double-encoded `%2527` becomes the text `%27`, never a quote);
/// `+` becomes a space only when `plusAsSpace` is set (query strings), never in paths; an invalid escape
/// (`%`, `%4`, `%zz`) or bytes that are not UTF-8 throw ``ODataError``.
public enum PercentDecoding {
    public static func decode(_ text: some StringProtocol, plusAsSpace: Bool, kind: ODataError.Kind = .path)
        throws(ODataError) -> String
    {
        let bytes = Array(text.utf8)
        guard bytes.contains(where: { $0 == 37 || (plusAsSpace && $0 == 43) }) else { return String(text) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == 37 {
                guard i + 2 < bytes.count, let h = LiteralScanner.hexValue(bytes[i + 1]),
                    let l = LiteralScanner.hexValue(bytes[i + 2])
                else {
                    throw ODataError(kind, "invalid percent-encoding in '\(text)'", offset: i)
                }
                out.append(h << 4 | l)
                i += 3
            } else if b == 43 && plusAsSpace {
                out.append(32)
                i += 1
            } else {
                out.append(b)
                i += 1
            }
        }
        guard let decoded = String(validating: out, as: UTF8.self) else {
            throw ODataError(kind, "percent-encoded bytes are not valid UTF-8 in '\(text)'")
        }
        return decoded
    }
}

/// One named key value.
public struct ODataKeyValue: Sendable, Hashable {
    public var name: String
    public var value: ODataLiteral

    public init(name: String, value: ODataLiteral) {
        self.name = name
        self.value = value
    }
}

/// A key predicate resolved against an entity type: every key property named once, in key order.
///
/// Promises: `values` has exactly the entity type's key properties in declaration order, each literal
/// conforming to the property's EDM type (see ``ODataLiteral/conforms(to:in:)``) and not null.
public struct ODataKey: Sendable, Hashable {
    public var values: [ODataKeyValue]

    public init(_ values: [ODataKeyValue]) { self.values = values }

    public subscript(name: String) -> ODataLiteral? { values.first { $0.name == name }?.value }

    /// Parses the text between the parentheses (already percent-decoded), e.g. `'ALFKI'`, `1`,
    /// `OrderID=1,ProductID=2`, and types it by the key of `entityType`.
    public static func parse(
        _ text: String, entityType: String, model: EdmModel, version: ODataVersion? = nil
    ) throws(ODataError) -> ODataKey {
        let keyProperties = model.keyProperties(of: entityType)
        guard !keyProperties.isEmpty else {
            throw ODataError(.path, "entity type '\(entityType)' has no key")
        }
        let raw = try splitKeyPredicate(text, version: version ?? model.version)
        var values: [ODataKeyValue] = []
        if raw.count == 1, raw[0].name == nil {
            guard keyProperties.count == 1 else {
                throw ODataError(
                    .path,
                    "the key of '\(entityType)' has \(keyProperties.count) properties "
                        + "(\(keyProperties.map(\.name).joined(separator: ", "))); name each of them")
            }
            values = [ODataKeyValue(name: keyProperties[0].name, value: raw[0].value)]
        } else {
            var seen: [String: ODataLiteral] = [:]
            for part in raw {
                guard let name = part.name else {
                    throw ODataError(.path, "a composite key predicate needs name=value pairs: '\(text)'")
                }
                guard keyProperties.contains(where: { $0.name == name }) else {
                    throw ODataError(.path, "'\(name)' is not a key property of '\(entityType)'")
                }
                guard seen[name] == nil else { throw ODataError(.path, "key property '\(name)' given twice") }
                seen[name] = part.value
            }
            for property in keyProperties {
                guard let value = seen[property.name] else {
                    throw ODataError(.path, "key property '\(property.name)' is missing in '(\(text))'")
                }
                values.append(ODataKeyValue(name: property.name, value: value))
            }
        }
        for (value, property) in zip(values, keyProperties) {
            if case .null = value.value {
                throw ODataError(.path, "key property '\(property.name)' cannot be null")
            }
            guard value.value.conforms(to: property.type, in: model) else {
                throw ODataError(
                    .path, "the key value for '\(property.name)' is not a valid \(property.type.name) literal"
                )
            }
        }
        return ODataKey(values)
    }

    /// Splits `a=1,b='x'` or `'x'` into (optional name, literal) pairs.
    static func splitKeyPredicate(_ text: String, version: ODataVersion) throws(ODataError)
        -> [(name: String?, value: ODataLiteral)]
    {
        let s = Array(text.unicodeScalars)
        var result: [(name: String?, value: ODataLiteral)] = []
        var i = 0
        func skipSpaces() { while i < s.count, s[i] == " " { i += 1 } }
        while true {
            skipSpaces()
            var name: String?
            // name=…
            if i < s.count, LiteralScanner.isIdentifierStart(s[i]) {
                var j = i
                while j < s.count, LiteralScanner.isIdentifierChar(s[j]) { j += 1 }
                var k = j
                while k < s.count, s[k] == " " { k += 1 }
                if k < s.count, s[k] == "=" {
                    name = String(String.UnicodeScalarView(s[i..<j]))
                    i = k + 1
                    skipSpaces()
                }
            }
            guard
                let (literal, end) = try LiteralScanner.scan(
                    s, at: i, version: version, allowBareDuration: true)
            else {
                throw ODataError(.path, "invalid key predicate '(\(text))'", offset: i)
            }
            result.append((name, literal))
            i = end
            skipSpaces()
            if i == s.count { break }
            guard s[i] == "," else {
                throw ODataError(.path, "invalid key predicate '(\(text))'", offset: i)
            }
            i += 1
        }
        return result
    }
}
