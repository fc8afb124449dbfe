/// A JSON value that keeps numbers exactly as written (`22.00` stays `22.00`, a 20-digit Int64 stays
/// exact) and object members in order, so that mirrored OData entities are served back without loss.
///
/// Promises: `serialized()` of a parsed value reproduces every number's text and every string's content;
/// parsing is the one JSON parser's (strict RFC 8259, the same as ``JSON/parse(_:maxDepth:)``), rejects
/// malformed text with ``RawJSONError`` and never recurses deeper than 256 levels.
public indirect enum RawJSON: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` / `false`.
    case bool(Bool)
    /// A number, as written.
    case number(String)
    /// A string (unescaped).
    case string(String)
    /// An array.
    case array([RawJSON])
    /// An object with its members in order.
    case object([(String, RawJSON)])

    /// The member named `key` of an object.
    public subscript(key: String) -> RawJSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    /// The members of an object, else nil.
    public var members: [(String, RawJSON)]? {
        if case .object(let m) = self { return m }
        return nil
    }

    /// The elements of an array, else nil.
    public var elements: [RawJSON]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The text of a string, else nil.
    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public static func == (lhs: RawJSON, rhs: RawJSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(serialized())
    }

    /// The nesting limit of ``parse(_:)-(\[UInt8\])``.
    public static let maxDepth = 256

    /// Parses one JSON text.
    public static func parse(_ bytes: [UInt8]) throws(RawJSONError) -> RawJSON {
        try bytes.withUnsafeBufferPointer { (buffer) throws(RawJSONError) -> RawJSON in
            var parser = JSONParser<RawJSON>(buffer: buffer, maxDepth: maxDepth)
            return try parser.parseDocument()
        }
    }

    /// Parses one JSON text from a string.
    public static func parse(_ text: String) throws(RawJSONError) -> RawJSON {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(RawJSONError) -> RawJSON in
                var parser = JSONParser<RawJSON>(buffer: buffer, maxDepth: maxDepth)
                return try parser.parseDocument()
            }
        }
        return try result.get()
    }

    /// The JSON text.
    public func serialized() -> String {
        var out: [UInt8] = []
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the JSON text to `out`.
    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.utf8)
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let a):
            out.append(91)
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(44) }
                v.write(to: &out)
            }
            out.append(93)
        case .object(let members):
            out.append(123)
            for (i, (k, v)) in members.enumerated() {
                if i > 0 { out.append(44) }
                Self.writeString(k, to: &out)
                out.append(58)
                v.write(to: &out)
            }
            out.append(125)
        }
    }

    /// Appends `s` as a JSON string literal.
    public static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(34)
        for b in s.utf8 {
            switch b {
            case 34: out.append(contentsOf: [92, 34])
            case 92: out.append(contentsOf: [92, 92])
            case 10: out.append(contentsOf: [92, 110])
            case 13: out.append(contentsOf: [92, 114])
            case 9: out.append(contentsOf: [92, 116])
            case 0..<32:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [92, 117, 48, 48, hex[Int(b >> 4)], hex[Int(b & 15)]])
            default: out.append(b)
            }
        }
        out.append(34)
    }
}

/// A JSON syntax error with its byte offset (the one parser's error).
public typealias RawJSONError = JSONParseError

extension RawJSON: JSONRepresentation {
    static func members() -> [(String, RawJSON)] { [] }

    static func add(_ key: String, _ value: RawJSON, to members: inout [(String, RawJSON)]) {
        members.append((key, value))
    }

    static func number(_ text: UnsafeBufferPointer<UInt8>, isInteger: Bool) -> RawJSON? {
        .number(String(decoding: text, as: UTF8.self))
    }
}
