import JSONCore

// Byte-level JSON helpers of the engine: numbers as JSON, URL-safe base64 for cursors, the top-level
// fields of a serialized record, and a streaming splitter of JSON arrays.

func numberJSON(_ value: Double) -> JSON {
    if value == value.rounded(), abs(value) < 1e15 { return .int(Int64(value)) }
    return .double(value)
}

/// URL-safe base64 without padding, for opaque cursors.
enum Base64 {
    private static let alphabet = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [
                alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)],
                alphabet[Int(n & 63)],
            ]
            i += 3
        }
        if bytes.count - i == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)]]
        } else if bytes.count - i == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(byte - 65)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(byte - 97 + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(byte - 48 + 52)
            case UInt8(ascii: "-"), UInt8(ascii: "+"): values.append(62)
            case UInt8(ascii: "_"), UInt8(ascii: "/"): values.append(63)
            case UInt8(ascii: "="): continue
            default: return nil
            }
        }
        var out: [UInt8] = []
        var i = 0
        while i + 3 < values.count {
            let n =
                UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12 | UInt32(values[i + 2]) << 6
                | UInt32(values[i + 3])
            out += [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
            i += 4
        }
        let rest = values.count - i
        if rest == 1 { return nil }
        if rest >= 2 {
            var n = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12
            if rest == 3 { n |= UInt32(values[i + 2]) << 6 }
            out.append(UInt8(n >> 16 & 0xFF))
            if rest == 3 { out.append(UInt8(n >> 8 & 0xFF)) }
        }
        return out
    }
}

@inline(__always) func memcmpEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>?, _ count: Int)
    -> Bool
{
    guard let b else { return count == 0 }
    var i = 0
    while i < count {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}

/// The top-level (key, value) byte ranges of a compact serialized object (as ``JSON/write(to:)``
/// writes it); nil when `bytes` is not such an object or a key holds an escape.
func topLevelFields(_ bytes: UnsafeBufferPointer<UInt8>) -> [(key: Range<Int>, value: Range<Int>)]? {
    let quote = UInt8(ascii: "\"")
    guard bytes.count >= 2, bytes[0] == UInt8(ascii: "{") else { return nil }
    var fields: [(key: Range<Int>, value: Range<Int>)] = []
    if bytes[1] == UInt8(ascii: "}") { return bytes.count == 2 ? fields : nil }
    var i = 1
    while i < bytes.count {
        guard bytes[i] == quote else { return nil }
        let keyStart = i + 1
        var j = keyStart
        while j < bytes.count && bytes[j] != quote {
            if bytes[j] == UInt8(ascii: "\\") { return nil }
            j += 1
        }
        guard j + 1 < bytes.count, bytes[j + 1] == UInt8(ascii: ":") else { return nil }
        let valueStart = j + 2
        guard let valueEnd = skipJSONValue(bytes, from: valueStart), valueEnd < bytes.count else {
            return nil
        }
        fields.append((keyStart..<j, valueStart..<valueEnd))
        if bytes[valueEnd] == UInt8(ascii: "}") { return valueEnd == bytes.count - 1 ? fields : nil }
        guard bytes[valueEnd] == UInt8(ascii: ",") else { return nil }
        i = valueEnd + 1
    }
    return nil
}

/// The end of the compact JSON value starting at `start` (exclusive), or nil when unterminated.
private func skipJSONValue(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
    var i = start
    var depth = 0
    while i < bytes.count {
        let c = bytes[i]
        if c == UInt8(ascii: "\"") {
            i += 1
            while i < bytes.count && bytes[i] != UInt8(ascii: "\"") {
                if bytes[i] == UInt8(ascii: "\\") { i += 1 }
                i += 1
            }
            i += 1
            if depth == 0 { return i <= bytes.count ? i : nil }
            continue
        }
        if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
            depth += 1
        } else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
            if depth == 0 { return i }
            depth -= 1
            if depth == 0 { return i + 1 }
        } else if depth == 0 && c == UInt8(ascii: ",") {
            return i
        }
        i += 1
    }
    return depth == 0 && i > start ? i : nil
}

/// Splits a JSON array text arriving in chunks into its elements' bytes (each handed over once
/// complete; parsing is the caller's). Keeps only the unfinished element between chunks.
struct JSONArrayStream {
    private var buffer: [UInt8] = []
    /// Bytes of the text before `buffer[0]` (for error offsets).
    private var base = 0
    private var position = 0
    private var elementStart = -1
    private var depth = 0
    private var inString = false
    private var escaped = false
    private var scalar = false
    private var started = false
    private var finished = false

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 }

    private func failure(_ message: String) -> JSONParseError {
        JSONParseError(offset: base + position, message: message)
    }

    mutating func feed(_ chunk: [UInt8], _ body: (UnsafeBufferPointer<UInt8>) throws -> Void) throws {
        buffer.append(contentsOf: chunk)
        while position < buffer.count {
            let c = buffer[position]
            if finished {
                guard Self.isSpace(c) else { throw failure("Unexpected data after the array") }
                position += 1
                continue
            }
            if !started {
                if Self.isSpace(c) {
                    position += 1
                    continue
                }
                guard c == UInt8(ascii: "[") else { throw failure("Expected a JSON array") }
                started = true
                position += 1
                continue
            }
            if elementStart < 0 {
                if Self.isSpace(c) || c == UInt8(ascii: ",") {
                    position += 1
                    continue
                }
                if c == UInt8(ascii: "]") {
                    finished = true
                    position += 1
                    continue
                }
                elementStart = position
                depth = 0
                inString = false
                escaped = false
                scalar = false
                switch c {
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth = 1
                case UInt8(ascii: "\""): inString = true
                default: scalar = true
                }
                position += 1
                continue
            }
            var end = -1
            if inString {
                if escaped {
                    escaped = false
                } else if c == UInt8(ascii: "\\") {
                    escaped = true
                } else if c == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 0 { end = position + 1 }
                }
            } else if scalar {
                if Self.isSpace(c) || c == UInt8(ascii: ",") || c == UInt8(ascii: "]") { end = position }
            } else if c == UInt8(ascii: "\"") {
                inString = true
            } else if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
                depth += 1
            } else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                depth -= 1
                if depth == 0 { end = position + 1 }
            }
            if end >= 0 {
                let range = elementStart..<end
                try buffer.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[range])) }
                elementStart = -1
                position = end
                continue
            }
            position += 1
        }
        // Keep only the unfinished element.
        let keep = elementStart >= 0 ? elementStart : position
        if keep > 0 {
            buffer.removeSubrange(0..<keep)
            base += keep
            position -= keep
            if elementStart >= 0 { elementStart = 0 }
        }
    }

    mutating func finish() throws {
        guard started, finished, elementStart < 0 else { throw failure("Unterminated JSON array") }
    }
}
