/// Why and where a JSON text was rejected.
///
/// Promises: `offset` is the byte offset (0-based) of the offending byte, or the length of the input for
/// unexpected ends; `message` says what was expected.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var offset: Int
    public var message: String

    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    public var description: String { "\(message) at byte \(offset)" }
}

/// What the one JSON parser builds: ``JSON`` (numbers as `Int64`/`Double`, duplicate keys last-wins)
/// or ``RawJSON`` (numbers as written, members in order with duplicates kept). Internal: the parser is
/// specialized for each inside this module.
protocol JSONRepresentation {
    associatedtype Members
    static var null: Self { get }
    static func bool(_ value: Bool) -> Self
    static func string(_ value: String) -> Self
    static func array(_ elements: [Self]) -> Self
    static func object(_ members: Members) -> Self
    /// An empty member list.
    static func members() -> Members
    /// Adds one member as the document gives it.
    static func add(_ key: String, _ value: Self, to members: inout Members)
    /// A number from its (grammatically valid) text; nil when it cannot be represented.
    static func number(_ text: UnsafeBufferPointer<UInt8>, isInteger: Bool) -> Self?
}

extension JSON: JSONRepresentation {
    static func members() -> JSONObject { JSONObject() }

    static func add(_ key: String, _ value: JSON, to object: inout JSONObject) {
        if object.index(of: key) != nil {
            object[key] = value
        } else {
            object.appendUnchecked(key, value)
        }
    }

    static func number(_ text: UnsafeBufferPointer<UInt8>, isInteger: Bool) -> JSON? {
        if isInteger, text.count <= 18 {
            var value: Int64 = 0
            var i = 0
            let negative = text[0] == UInt8(ascii: "-")
            if negative { i = 1 }
            while i < text.count {
                value = value * 10 + Int64(text[i] - UInt8(ascii: "0"))
                i += 1
            }
            return .int(negative ? -value : value)
        }
        let string = String(decoding: text, as: UTF8.self)
        if isInteger, let value = Int64(string) { return .int(value) }
        return Double(string).map { .double($0) }
    }
}

extension JSON {
    /// The default nesting limit: deeper documents are rejected with an error, never a stack overflow.
    public static let defaultMaxDepth = 512
    /// The longest number text accepted (digits, sign, fraction and exponent): longer ones are rejected
    /// with an error before any conversion.
    public static let maxNumberLength = 4096

    /// Parses one JSON text (RFC 8259): whitespace around one value, strict grammar, UTF-8 validated,
    /// `\u` escapes including surrogate pairs, nesting limited to `maxDepth`.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONParseError) -> JSON
    {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSON in
            var parser = JSONParser<JSON>(buffer: buffer, maxDepth: maxDepth)
            return try parser.parseDocument()
        }
    }

    /// Parses one JSON text from a string.
    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONParseError) -> JSON {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(JSONParseError) -> JSON in
                var parser = JSONParser<JSON>(buffer: buffer, maxDepth: maxDepth)
                return try parser.parseDocument()
            }
        }
        return try result.get()
    }

    /// Parses one JSON text from any collection of bytes.
    public static func parse(
        bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSON {
        let contiguous = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONParseError) -> JSON in
                var parser = JSONParser<JSON>(buffer: buffer, maxDepth: maxDepth)
                return try parser.parseDocument()
            }
        }
        if let contiguous { return try contiguous.get() }
        return try parse(Array(bytes), maxDepth: maxDepth)
    }

    /// Parses from a raw buffer (no copy).
    public static func parse(
        buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSON {
        var parser = JSONParser<JSON>(buffer: buffer, maxDepth: maxDepth)
        return try parser.parseDocument()
    }
}

extension JSON {
    /// Streams the elements of a top-level JSON array: `body` gets each parsed element and its exact bytes,
    /// one at a time, so a large array never has to be held as values all at once. Errors from parsing are
    /// `JSONParseError`; errors thrown by `body` are rethrown as they are.
    public static func forEachArrayElement(
        _ bytes: [UInt8], maxDepth: Int = defaultMaxDepth,
        _ body: (JSON, UnsafeBufferPointer<UInt8>) throws -> Void
    ) throws {
        try bytes.withUnsafeBufferPointer { buffer in
            var parser = JSONParser<JSON>(buffer: buffer, maxDepth: maxDepth)
            try parser.forEachElement(body)
        }
    }
}

/// The one JSON parser (RFC 8259: strict grammar, UTF-8 validated, `\u` escapes with surrogate pairs,
/// nesting limited), building whichever representation `Value` is.
struct JSONParser<Value: JSONRepresentation> {
    let buffer: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var pos = 0
    var depth = 0
    var scratch: [UInt8] = []

    init(buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.buffer = buffer
        self.maxDepth = maxDepth
    }

    func error(_ message: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? pos, message: message)
    }

    @inline(__always) mutating func skipWhitespace() {
        while pos < buffer.count {
            let byte = buffer[pos]
            if byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
                pos += 1
            } else {
                return
            }
        }
    }

    mutating func forEachElement(_ body: (Value, UnsafeBufferPointer<UInt8>) throws -> Void) throws {
        skipWhitespace()
        guard pos < buffer.count, buffer[pos] == UInt8(ascii: "[") else {
            throw error("Expected a JSON array")
        }
        pos += 1
        depth = 1
        skipWhitespace()
        if pos < buffer.count, buffer[pos] == UInt8(ascii: "]") {
            pos += 1
        } else {
            while true {
                skipWhitespace()
                let start = pos
                let value = try parseValue()
                try body(value, UnsafeBufferPointer(rebasing: buffer[start..<pos]))
                skipWhitespace()
                guard pos < buffer.count else { throw error("Unexpected end of input in array") }
                let byte = buffer[pos]
                pos += 1
                if byte == UInt8(ascii: ",") { continue }
                if byte == UInt8(ascii: "]") { break }
                throw error("Expected ',' or ']' in array", at: pos - 1)
            }
        }
        skipWhitespace()
        if pos != buffer.count { throw error("Unexpected data after the JSON value") }
    }

    mutating func parseDocument() throws(JSONParseError) -> Value {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if pos != buffer.count { throw error("Unexpected data after the JSON value") }
        return value
    }

    mutating func parseValue() throws(JSONParseError) -> Value {
        guard pos < buffer.count else { throw error("Unexpected end of input, expected a value") }
        switch buffer[pos] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        default:
            throw error("Unexpected character, expected a value")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard pos + count <= buffer.count else { throw error("Invalid literal") }
        let start = literal.utf8Start
        for i in 0..<count where buffer[pos + i] != start[i] {
            throw error("Invalid literal", at: pos + i)
        }
        pos += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > maxDepth { throw error("Nesting deeper than \(maxDepth) levels") }
    }

    mutating func parseObject() throws(JSONParseError) -> Value {
        try enter()
        pos += 1
        var object = Value.members()
        skipWhitespace()
        if pos < buffer.count, buffer[pos] == UInt8(ascii: "}") {
            pos += 1
            depth -= 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard pos < buffer.count else { throw error("Unexpected end of input in object") }
            guard buffer[pos] == UInt8(ascii: "\"") else { throw error("Expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard pos < buffer.count, buffer[pos] == UInt8(ascii: ":") else {
                throw error("Expected ':' after object key")
            }
            pos += 1
            skipWhitespace()
            let value = try parseValue()
            Value.add(key, value, to: &object)
            skipWhitespace()
            guard pos < buffer.count else { throw error("Unexpected end of input in object") }
            let byte = buffer[pos]
            pos += 1
            if byte == UInt8(ascii: ",") { continue }
            if byte == UInt8(ascii: "}") { break }
            throw error("Expected ',' or '}' in object", at: pos - 1)
        }
        depth -= 1
        return .object(object)
    }

    mutating func parseArray() throws(JSONParseError) -> Value {
        try enter()
        pos += 1
        var array: [Value] = []
        skipWhitespace()
        if pos < buffer.count, buffer[pos] == UInt8(ascii: "]") {
            pos += 1
            depth -= 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            array.append(try parseValue())
            skipWhitespace()
            guard pos < buffer.count else { throw error("Unexpected end of input in array") }
            let byte = buffer[pos]
            pos += 1
            if byte == UInt8(ascii: ",") { continue }
            if byte == UInt8(ascii: "]") { break }
            throw error("Expected ',' or ']' in array", at: pos - 1)
        }
        depth -= 1
        return .array(array)
    }

    mutating func parseString() throws(JSONParseError) -> String {
        pos += 1  // opening quote
        let start = pos
        var asciiOnly = true
        // Fast path: no escapes.
        while pos < buffer.count {
            let byte = buffer[pos]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: buffer[start..<pos])
                pos += 1
                if asciiOnly { return String(decoding: slice, as: UTF8.self) }
                guard let string = String(validating: slice, as: UTF8.self) else {
                    throw error("Invalid UTF-8 in string", at: start + firstInvalidUTF8(slice))
                }
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("Unescaped control character in string") }
            if byte >= 0x80 { asciiOnly = false }
            pos += 1
        }
        guard pos < buffer.count else { throw error("Unterminated string") }
        // Slow path with escapes.
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<pos]))
        while pos < buffer.count {
            let byte = buffer[pos]
            if byte == UInt8(ascii: "\"") {
                pos += 1
                guard let string = String(validating: scratch, as: UTF8.self) else {
                    throw error("Invalid UTF-8 in string", at: start)
                }
                return string
            }
            if byte < 0x20 { throw error("Unescaped control character in string") }
            if byte != UInt8(ascii: "\\") {
                scratch.append(byte)
                pos += 1
                continue
            }
            pos += 1
            guard pos < buffer.count else { throw error("Unterminated escape") }
            let escape = buffer[pos]
            pos += 1
            switch escape {
            case UInt8(ascii: "\""): scratch.append(0x22)
            case UInt8(ascii: "\\"): scratch.append(0x5C)
            case UInt8(ascii: "/"): scratch.append(0x2F)
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard pos + 1 < buffer.count, buffer[pos] == UInt8(ascii: "\\"),
                        buffer[pos + 1] == UInt8(ascii: "u")
                    else { throw error("Unpaired high surrogate in \\u escape") }
                    pos += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw error("Invalid low surrogate in \\u escape", at: pos - 6)
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw error("Unpaired low surrogate in \\u escape", at: pos - 6)
                }
                appendUTF8(scalar)
            default:
                throw error("Invalid escape character", at: pos - 1)
            }
        }
        throw error("Unterminated string")
    }

    func firstInvalidUTF8(_ slice: UnsafeBufferPointer<UInt8>) -> Int {
        var decoder = UTF8()
        var iterator = slice.makeIterator()
        var offset = 0
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += UTF8.width(scalar)
            case .emptyInput: return offset
            case .error: return offset
            }
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard pos + 4 <= buffer.count else { throw error("Truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = buffer[pos]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("Invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            pos += 1
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (scalar >> 6)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (scalar >> 12)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (scalar >> 18)))
            scratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> Value {
        let start = pos
        var isInteger = true
        if buffer[pos] == UInt8(ascii: "-") { pos += 1 }
        guard pos < buffer.count, isDigit(buffer[pos]) else { throw error("Invalid number") }
        if buffer[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < buffer.count, isDigit(buffer[pos]) { throw error("Leading zero in number") }
        } else {
            while pos < buffer.count, isDigit(buffer[pos]) { pos += 1 }
        }
        if pos < buffer.count, buffer[pos] == UInt8(ascii: ".") {
            isInteger = false
            pos += 1
            guard pos < buffer.count, isDigit(buffer[pos]) else { throw error("Expected digit after '.'") }
            while pos < buffer.count, isDigit(buffer[pos]) { pos += 1 }
        }
        if pos < buffer.count, buffer[pos] == UInt8(ascii: "e") || buffer[pos] == UInt8(ascii: "E") {
            isInteger = false
            pos += 1
            if pos < buffer.count, buffer[pos] == UInt8(ascii: "+") || buffer[pos] == UInt8(ascii: "-") {
                pos += 1
            }
            guard pos < buffer.count, isDigit(buffer[pos]) else { throw error("Expected digit in exponent") }
            while pos < buffer.count, isDigit(buffer[pos]) { pos += 1 }
        }
        // A number's text is converted (strtod): longer texts than any number needs are refused first.
        guard pos - start <= JSON.maxNumberLength else {
            throw error("Number longer than \(JSON.maxNumberLength) characters", at: start)
        }
        guard
            let value = Value.number(UnsafeBufferPointer(rebasing: buffer[start..<pos]), isInteger: isInteger)
        else { throw error("Invalid number", at: start) }
        return value
    }

    @inline(__always) func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
