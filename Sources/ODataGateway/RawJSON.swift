/// A JSON value that keeps numbers exactly as written (`22.00` stays `22.00`, a 20-digit Int64 stays
/// exact) and object members in order, so that mirrored OData entities are served back without loss.
///
/// Promises: `serialized()` of a parsed value reproduces every number's text and every string's content;
/// parsing rejects malformed text with ``RawJSONError`` and never recurses deeper than 256 levels.
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

    /// Parses one JSON text.
    public static func parse(_ bytes: [UInt8]) throws(RawJSONError) -> RawJSON {
        var p = RawParser(bytes: bytes)
        p.skipSpace()
        let value = try p.value(depth: 0)
        p.skipSpace()
        guard p.pos == bytes.count else { throw RawJSONError(offset: p.pos, message: "trailing characters") }
        return value
    }

    /// Parses one JSON text from a string.
    public static func parse(_ text: String) throws(RawJSONError) -> RawJSON { try parse(Array(text.utf8)) }

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

/// A JSON syntax error with its byte offset.
public struct RawJSONError: Error, Sendable, CustomStringConvertible {
    /// Byte offset of the error.
    public var offset: Int
    /// What is wrong.
    public var message: String
    public var description: String { "\(message) at byte \(offset)" }
}

private struct RawParser {
    let bytes: [UInt8]
    var pos = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func skipSpace() {
        while pos < bytes.count, bytes[pos] == 32 || bytes[pos] == 9 || bytes[pos] == 10 || bytes[pos] == 13 {
            pos += 1
        }
    }

    func fail(_ message: String) -> RawJSONError { RawJSONError(offset: pos, message: message) }

    mutating func literal(_ word: String, _ value: RawJSON) throws(RawJSONError) -> RawJSON {
        let w = Array(word.utf8)
        guard pos + w.count <= bytes.count, Array(bytes[pos..<pos + w.count]) == w else {
            throw fail("invalid literal")
        }
        pos += w.count
        return value
    }

    mutating func value(depth: Int) throws(RawJSONError) -> RawJSON {
        guard depth < 256 else { throw fail("nesting too deep") }
        guard pos < bytes.count else { throw fail("unexpected end") }
        switch bytes[pos] {
        case 110: return try literal("null", .null)
        case 116: return try literal("true", .bool(true))
        case 102: return try literal("false", .bool(false))
        case 34: return .string(try string())
        case 91:
            pos += 1
            var items: [RawJSON] = []
            skipSpace()
            if pos < bytes.count, bytes[pos] == 93 {
                pos += 1
                return .array(items)
            }
            while true {
                skipSpace()
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard pos < bytes.count else { throw fail("unterminated array") }
                if bytes[pos] == 44 {
                    pos += 1
                    continue
                }
                guard bytes[pos] == 93 else { throw fail("expected , or ]") }
                pos += 1
                return .array(items)
            }
        case 123:
            pos += 1
            var members: [(String, RawJSON)] = []
            skipSpace()
            if pos < bytes.count, bytes[pos] == 125 {
                pos += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard pos < bytes.count, bytes[pos] == 34 else { throw fail("expected a member name") }
                let key = try string()
                skipSpace()
                guard pos < bytes.count, bytes[pos] == 58 else { throw fail("expected :") }
                pos += 1
                skipSpace()
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                guard pos < bytes.count else { throw fail("unterminated object") }
                if bytes[pos] == 44 {
                    pos += 1
                    continue
                }
                guard bytes[pos] == 125 else { throw fail("expected , or }") }
                pos += 1
                return .object(members)
            }
        default:
            let start = pos
            if bytes[pos] == 45 { pos += 1 }
            var digits = 0
            while pos < bytes.count {
                let c = bytes[pos]
                if c >= 48 && c <= 57 {
                    digits += 1
                } else if !(c == 46 || c == 101 || c == 69 || c == 43 || c == 45) {
                    break
                }
                pos += 1
            }
            guard digits > 0 else { throw fail("unexpected character") }
            return .number(String(decoding: bytes[start..<pos], as: UTF8.self))
        }
    }

    mutating func hex4() throws(RawJSONError) -> UInt32 {
        guard pos + 4 <= bytes.count else { throw fail("bad \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[pos]
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 65...70: d = UInt32(c - 55)
            case 97...102: d = UInt32(c - 87)
            default: throw fail("bad \\u escape")
            }
            v = v << 4 | d
            pos += 1
        }
        return v
    }

    mutating func string() throws(RawJSONError) -> String {
        pos += 1
        var out: [UInt8] = []
        while true {
            guard pos < bytes.count else { throw fail("unterminated string") }
            let c = bytes[pos]
            if c == 34 {
                pos += 1
                break
            }
            if c == 92 {
                pos += 1
                guard pos < bytes.count else { throw fail("unterminated string") }
                let e = bytes[pos]
                pos += 1
                switch e {
                case 34, 92, 47: out.append(e)
                case 98: out.append(8)
                case 102: out.append(12)
                case 110: out.append(10)
                case 114: out.append(13)
                case 116: out.append(9)
                case 117:
                    var scalar = try hex4()
                    if scalar >= 0xD800, scalar < 0xDC00, pos + 1 < bytes.count, bytes[pos] == 92,
                        bytes[pos + 1] == 117
                    {
                        pos += 2
                        let low = try hex4()
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low &- 0xDC00)
                    }
                    let u = Unicode.Scalar(scalar) ?? "\u{FFFD}"
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw fail("bad escape")
                }
                continue
            }
            out.append(c)
            pos += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}
