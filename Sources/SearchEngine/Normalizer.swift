import Foundation

/// One token of a text: its normalized bytes and where it came from in the original UTF-8.
struct Token {
    var normalized: [UInt8]
    /// Byte range of the token in the original text's UTF-8.
    var start: Int
    var end: Int
    /// Word position inside the text (0-based).
    var position: Int
}

/// Text normalization shared by indexing, queries and highlighting: Unicode lowercasing, diacritics
/// folding (Latin-1 and Latin Extended-A letters and combining marks), tokens are runs of letters and
/// digits plus the characters of `separatorsToIndex` (each such character is a token by itself);
/// everything else separates.
struct Normalizer: Sendable {
    /// Characters of `separatorsToIndex` (as Unicode scalars).
    let indexedSeparators: Set<Unicode.Scalar>

    init(separatorsToIndex: String = "") {
        indexedSeparators = Set(separatorsToIndex.unicodeScalars)
    }

    /// Folding table for U+00C0...U+017F (nil: keep after lowercasing).
    private static let latinFold: [String?] = {
        var table = [String?](repeating: nil, count: 0x180 - 0xC0)
        func set(_ from: UInt32, _ to: UInt32, _ value: String) {
            for scalar in from...to { table[Int(scalar) - 0xC0] = value }
        }
        set(0xC0, 0xC5, "a")
        set(0xC6, 0xC6, "ae")
        set(0xC7, 0xC7, "c")
        set(0xC8, 0xCB, "e")
        set(0xCC, 0xCF, "i")
        set(0xD0, 0xD0, "d")
        set(0xD1, 0xD1, "n")
        set(0xD2, 0xD6, "o")
        set(0xD8, 0xD8, "o")
        set(0xD9, 0xDC, "u")
        set(0xDD, 0xDD, "y")
        set(0xDE, 0xDE, "th")
        set(0xDF, 0xDF, "ss")
        set(0xE0, 0xE5, "a")
        set(0xE6, 0xE6, "ae")
        set(0xE7, 0xE7, "c")
        set(0xE8, 0xEB, "e")
        set(0xEC, 0xEF, "i")
        set(0xF0, 0xF0, "d")
        set(0xF1, 0xF1, "n")
        set(0xF2, 0xF6, "o")
        set(0xF8, 0xF8, "o")
        set(0xF9, 0xFC, "u")
        set(0xFD, 0xFD, "y")
        set(0xFE, 0xFE, "th")
        set(0xFF, 0xFF, "y")
        set(0x100, 0x105, "a")
        set(0x106, 0x10D, "c")
        set(0x10E, 0x111, "d")
        set(0x112, 0x11B, "e")
        set(0x11C, 0x123, "g")
        set(0x124, 0x127, "h")
        set(0x128, 0x131, "i")
        set(0x132, 0x133, "ij")
        set(0x134, 0x135, "j")
        set(0x136, 0x138, "k")
        set(0x139, 0x142, "l")
        set(0x143, 0x14B, "n")
        set(0x14C, 0x151, "o")
        set(0x152, 0x153, "oe")
        set(0x154, 0x159, "r")
        set(0x15A, 0x161, "s")
        set(0x162, 0x167, "t")
        set(0x168, 0x173, "u")
        set(0x174, 0x175, "w")
        set(0x176, 0x178, "y")
        set(0x179, 0x17E, "z")
        set(0x17F, 0x17F, "s")
        return table
    }()

    /// Appends the normalized form of a non-ASCII scalar; returns false when it is a separator.
    @inline(__always)
    private func appendFolded(_ scalar: Unicode.Scalar, to out: inout [UInt8]) -> Bool {
        let value = scalar.value
        if value >= 0x300 && value <= 0x36F { return true }  // combining marks: dropped, not separators
        if value >= 0xC0 && value < 0x180, let folded = Self.latinFold[Int(value) - 0xC0] {
            out.append(contentsOf: folded.utf8)
            return true
        }
        let properties = scalar.properties
        guard properties.isAlphabetic || properties.numericType != nil else { return false }
        Self.appendLowerFolded(scalar, to: &out)
        return true
    }

    /// Lowercases a scalar beyond Latin-1/Extended-A and drops its diacritics: canonical decomposition
    /// (for example `ằ` → `a` + marks, `ά` → `α` + mark), marks removed, each part lowercased.
    static func appendLowerFolded(_ scalar: Unicode.Scalar, to out: inout [UInt8]) {
        let decomposed = String(scalar).decomposedStringWithCanonicalMapping
        var any = false
        for part in decomposed.unicodeScalars {
            switch part.properties.generalCategory {
            case .nonspacingMark, .enclosingMark, .spacingMark: continue
            default:
                out.append(contentsOf: part.properties.lowercaseMapping.utf8)
                any = true
            }
        }
        if !any { out.append(contentsOf: scalar.properties.lowercaseMapping.utf8) }
    }

    /// Calls `body` for each token of `text` in order. Positions start at `firstPosition`.
    func tokenize(_ text: String, firstPosition: Int = 0, _ body: (Token) -> Void) {
        scan(text, firstPosition: firstPosition) { bytes, start, end, position in
            body(Token(normalized: Array(bytes), start: start, end: end, position: position))
        }
    }

    /// Like ``tokenize(_:firstPosition:_:)`` without allocating per token: `body` gets the normalized
    /// bytes (valid only during the call), the token's UTF-8 byte range in `text` and its position.
    func scan(
        _ text: String, firstPosition: Int = 0,
        _ body: (_ normalized: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ position: Int) -> Void
    ) {
        var state = ScanState(position: firstPosition)
        let hasIndexed = !indexedSeparators.isEmpty
        var text = text
        text.withUTF8 { utf8 in
            var offset = 0
            let count = utf8.count
            while offset < count {
                let lead = utf8[offset]
                if lead < 0x80 && !hasIndexed {
                    if lead >= 0x61 && lead <= 0x7A || lead >= 0x30 && lead <= 0x39 {
                        state.append(lead, at: offset, width: 1)
                    } else if lead >= 0x41 && lead <= 0x5A {
                        state.append(lead + 32, at: offset, width: 1)
                    } else {
                        state.flush(body)
                    }
                    offset += 1
                    continue
                }
                // Decode one scalar (the string is valid UTF-8).
                let width: Int
                var value: UInt32
                if lead < 0x80 {
                    width = 1
                    value = UInt32(lead)
                } else if lead < 0xE0 {
                    width = 2
                    value = UInt32(lead & 0x1F)
                } else if lead < 0xF0 {
                    width = 3
                    value = UInt32(lead & 0x0F)
                } else {
                    width = 4
                    value = UInt32(lead & 0x07)
                }
                var k = 1
                while k < width {
                    value = value << 6 | UInt32(utf8[offset + k] & 0x3F)
                    k += 1
                }
                let scalar = Unicode.Scalar(value) ?? " "
                if hasIndexed && indexedSeparators.contains(scalar) {
                    state.flush(body)
                    let single = Array(String(scalar).utf8)
                    single.withUnsafeBufferPointer { body($0, offset, offset + width, state.position) }
                    state.position += 1
                    offset += width
                    continue
                }
                if value < 0x80 {
                    let byte = UInt8(value)
                    if byte >= 0x61 && byte <= 0x7A || byte >= 0x30 && byte <= 0x39 {
                        state.append(byte, at: offset, width: 1)
                    } else if byte >= 0x41 && byte <= 0x5A {
                        state.append(byte + 32, at: offset, width: 1)
                    } else {
                        state.flush(body)
                    }
                } else if appendFolded(scalar, to: &state.current) {
                    state.mark(at: offset, width: width)
                } else {
                    state.flush(body)
                }
                offset += width
            }
        }
        state.flush(body)
    }

    /// The token being accumulated by ``scan(_:firstPosition:_:)``.
    private struct ScanState {
        var position: Int
        var current: [UInt8] = []
        var start = -1
        var end = 0

        init(position: Int) {
            self.position = position
            current.reserveCapacity(32)
        }

        @inline(__always) mutating func mark(at offset: Int, width: Int) {
            if start < 0 { start = offset }
            end = offset + width
        }

        @inline(__always) mutating func append(_ byte: UInt8, at offset: Int, width: Int) {
            if start < 0 { start = offset }
            current.append(byte)
            end = offset + width
        }

        @inline(__always) mutating func flush(
            _ body: (UnsafeBufferPointer<UInt8>, Int, Int, Int) -> Void
        ) {
            if start >= 0 {
                if !current.isEmpty {
                    current.withUnsafeBufferPointer { body($0, start, end, position) }
                    position += 1
                }
                current.removeAll(keepingCapacity: true)
                start = -1
            }
        }
    }

    /// The normalized tokens of `text`.
    func tokens(_ text: String) -> [Token] {
        var result: [Token] = []
        tokenize(text) { result.append($0) }
        return result
    }

    /// Normalizes a facet value for case-insensitive comparison (lowercase + diacritics folding,
    /// separators kept).
    static func facetKey(_ text: String) -> String {
        var isPlainLower = true
        for byte in text.utf8 where byte >= 0x80 || (byte >= 0x41 && byte <= 0x5A) {
            isPlainLower = false
            break
        }
        if isPlainLower { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value < 0x80 {
                let byte = UInt8(value)
                out.append(byte >= 0x41 && byte <= 0x5A ? byte + 32 : byte)
            } else if value >= 0x300 && value <= 0x36F {
                continue
            } else if value >= 0xC0 && value < 0x180, let folded = latinFold[Int(value) - 0xC0] {
                out.append(contentsOf: folded.utf8)
            } else {
                appendLowerFolded(scalar, to: &out)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Array where Element == UInt8 {
    var isNumericToken: Bool {
        !isEmpty && allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }
}
