import JSONCore

/// Highlighting and snippeting of returned hits only. One highlighter serves one search (all its
/// hits): it remembers how each distinct token matched the query, so repeated words cost one hash
/// lookup. Not thread-safe; never shared between searches.
final class Highlighter {
    let normalizer: Normalizer
    let words: [QueryWord]
    let preTag: String
    let postTag: String
    let ellipsis: String
    /// normalized token → encoded match (see `encode`).
    private var memo = ByteKeyTable()
    private var starts: [Int] = []
    private var ends: [Int] = []
    private var marks: [(start: Int, end: Int)] = []
    /// Bytes written by all highlights so far (what tags and repeated texts add to an answer).
    private(set) var emitted = 0

    init(normalizer: Normalizer, words: [QueryWord], preTag: String, postTag: String, ellipsis: String) {
        self.normalizer = normalizer
        // Matched words are tracked as a 64-bit mask; queries keep at most 32 words (facet queries
        // longer than 64 words are highlighted on their first 64).
        self.words = Array(words.prefix(64))
        self.preTag = preTag
        self.postTag = postTag
        self.ellipsis = ellipsis
    }

    /// How a token matches the query: the word, and whether the whole original token is wrapped
    /// (`cut` nil) or only its first `cut` bytes when the original is as long as the normalized form.
    private static func tokenMatch(_ t: [UInt8], words: [QueryWord]) -> (word: Int, cut: Int?)? {
        var found: (Int, Int?)?
        for (w, word) in words.enumerated() {
            if t == word.bytes || word.alternatives.contains(where: { $0.tokens.contains(t) }) {
                return (w, nil)
            }
            if word.prefix && t.count > word.bytes.count && t.starts(with: word.bytes) {
                if found == nil { found = (w, word.bytes.count) }
                continue
            }
            guard word.maxTypos > 0, found == nil else { continue }
            if typoDistance(word.bytes, t[...], maxTypos: word.maxTypos) != nil {
                found = (w, nil)
            } else if word.prefix {
                for cut in [word.bytes.count, word.bytes.count + 1] where cut < t.count {
                    if typoDistance(word.bytes, t[..<cut], maxTypos: word.maxTypos) != nil {
                        found = (w, cut)
                        break
                    }
                }
            }
        }
        return found
    }

    /// The match of a normalized token (memoized): (word, bytes of the original to wrap).
    @inline(__always)
    private static func match(
        _ bytes: UnsafeBufferPointer<UInt8>, originalLength: Int, memo: inout ByteKeyTable, words: [QueryWord]
    ) -> (word: Int, length: Int)? {
        let code: UInt64
        if let known = memo.value(for: bytes) {
            code = known
        } else {
            if let m = tokenMatch(Array(bytes), words: words) {
                code = UInt64(m.word) << 32 | UInt64(m.cut.map { $0 + 1 } ?? 0)
            } else {
                code = UInt64.max
            }
            memo.insert(bytes, code)
        }
        if code == UInt64.max { return nil }
        let word = Int(code >> 32)
        let cut = Int(code & 0xFFFF_FFFF)
        if cut == 0 { return (word, originalLength) }
        return (word, bytes.count == originalLength ? cut - 1 : originalLength)
    }

    struct Result {
        var value: String
        var matched: Set<Int>
        var fullyHighlighted: Bool
    }

    /// Highlights `text`; with `snippetWords`, keeps a window of that many words around the first match.
    func highlight(_ text: String, snippetWords: Int? = nil) -> Result {
        var out: [UInt8] = []
        let (mask, fully) = highlight(text, snippetWords: snippetWords, escaped: false, into: &out)
        var matched = Set<Int>()
        for w in words.indices where mask >> UInt64(w) & 1 == 1 { matched.insert(w) }
        return Result(value: String(decoding: out, as: UTF8.self), matched: matched, fullyHighlighted: fully)
    }

    /// Appends the highlighted (or snippeted) text to `out`, JSON-escaped when `escaped` (without the
    /// quotes); returns the matched query words as a bit mask (bit w: word w) and `fullyHighlighted`.
    func highlight(
        _ text: String, snippetWords: Int?, escaped: Bool, into out: inout [UInt8]
    ) -> (matched: UInt64, fullyHighlighted: Bool) {
        let before = out.count
        defer { emitted += out.count - before }
        // Local copies (capacity reused across calls) avoid exclusivity checks in the token loop.
        var starts = self.starts
        var ends = self.ends
        var marks = self.marks
        var memo = self.memo
        self.starts = []
        self.ends = []
        self.marks = []
        self.memo = ByteKeyTable()
        defer {
            starts.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            marks.removeAll(keepingCapacity: true)
            self.starts = starts
            self.ends = ends
            self.marks = marks
            self.memo = memo
        }
        var firstMatchedToken: Int?
        var matched: UInt64 = 0
        var allFull = true
        normalizer.scan(text) { bytes, start, end, _ in
            let originalLength = end - start
            if let m = Self.match(bytes, originalLength: originalLength, memo: &memo, words: words) {
                matched |= 1 << UInt64(m.word)
                marks.append((start, start + m.length))
                if firstMatchedToken == nil { firstMatchedToken = starts.count }
                if m.length < originalLength { allFull = false }
            } else {
                allFull = false
            }
            starts.append(start)
            ends.append(end)
        }
        let tokenCount = starts.count
        if tokenCount == 0 { allFull = false }
        var text = text
        let anyMark = text.withUTF8 { utf8 -> Bool in
            @inline(__always) func emit(_ piece: UnsafeBufferPointer<UInt8>) {
                if escaped { appendEscaped(piece, to: &out) } else { out.append(contentsOf: piece) }
            }
            @inline(__always) func emit(_ piece: String) {
                var piece = piece
                piece.withUTF8 { emit($0) }
            }
            var from = 0
            var to = utf8.count
            var marks = marks[...]
            var suffix = false
            if let size = snippetWords, tokenCount > 0, tokenCount > size {
                let size = max(1, size)
                let center = firstMatchedToken ?? 0
                var first = max(0, center - (size - 1) / 2)
                if first + size > tokenCount { first = max(0, tokenCount - size) }
                let last = min(tokenCount, first + size) - 1
                from = first == 0 ? 0 : starts[first]
                to = last == tokenCount - 1 ? utf8.count : ends[last]
                if first > 0 { emit(ellipsis + (ellipsis.isEmpty ? "" : " ")) }
                suffix = last < tokenCount - 1
                marks = ArraySlice(marks.filter { $0.start >= from && $0.end <= to })
            }
            var cursor = from
            for mark in marks {
                emit(UnsafeBufferPointer(rebasing: utf8[cursor..<mark.start]))
                emit(preTag)
                emit(UnsafeBufferPointer(rebasing: utf8[mark.start..<mark.end]))
                emit(postTag)
                cursor = mark.end
            }
            emit(UnsafeBufferPointer(rebasing: utf8[cursor..<to]))
            if suffix { emit((ellipsis.isEmpty ? "" : " ") + ellipsis) }
            return !marks.isEmpty
        }
        return (matched, allFull && anyMark)
    }

    func matchLevel(_ matched: Set<Int>) -> String {
        if matched.isEmpty { return "none" }
        return matched.count == words.count ? "full" : "partial"
    }

    /// The `_highlightResult` (or `_snippetResult` when `snippetWords` is set) mirroring `value`.
    func mirror(_ value: JSON, snippetWords: Int?) -> JSON? {
        switch value {
        case .string, .int, .double, .bool:
            let text = value.stringValue ?? value.serialized()
            let result = highlight(text, snippetWords: snippetWords)
            var object: JSONObject = [
                "value": .string(result.value), "matchLevel": .string(matchLevel(result.matched)),
            ]
            if snippetWords == nil {
                if !result.matched.isEmpty { object["fullyHighlighted"] = .bool(result.fullyHighlighted) }
                object["matchedWords"] = .array(result.matched.sorted().map { .string(words[$0].text) })
            }
            return .object(object)
        case .array(let items):
            return .array(items.compactMap { mirror($0, snippetWords: snippetWords) })
        case .object(let object):
            var out = JSONObject()
            for (key, child) in object {
                if let mirrored = mirror(child, snippetWords: snippetWords) { out[key] = mirrored }
            }
            return .object(out)
        case .null:
            return nil
        }
    }
}

extension Highlighter {
    /// Appends the serialization of `mirror(value, snippetWords:)`; false (nothing written) when that
    /// is nil.
    func writeMirror(_ value: JSON, snippetWords: Int?, to out: inout [UInt8]) -> Bool {
        switch value {
        case .string, .int, .double, .bool:
            let text = value.stringValue ?? value.serialized()
            out.append(contentsOf: #"{"value":""#.utf8)
            let (matched, fully) = highlight(text, snippetWords: snippetWords, escaped: true, into: &out)
            out.append(contentsOf: #"","matchLevel":""#.utf8)
            let level =
                matched == 0 ? "none" : (matched.nonzeroBitCount == words.count ? "full" : "partial")
            out.append(contentsOf: level.utf8)
            out.append(UInt8(ascii: "\""))
            if snippetWords == nil {
                if matched != 0 {
                    out.append(contentsOf: #","fullyHighlighted":"#.utf8)
                    out.append(contentsOf: (fully ? "true" : "false").utf8)
                }
                out.append(contentsOf: #","matchedWords":["#.utf8)
                var first = true
                for w in words.indices where matched >> UInt64(w) & 1 == 1 {
                    if !first { out.append(UInt8(ascii: ",")) }
                    first = false
                    JSON.writeString(words[w].text, to: &out)
                }
                out.append(UInt8(ascii: "]"))
            }
            out.append(UInt8(ascii: "}"))
            return true
        case .array(let items):
            out.append(UInt8(ascii: "["))
            var first = true
            for item in items where !item.isNull {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                _ = writeMirror(item, snippetWords: snippetWords, to: &out)
            }
            out.append(UInt8(ascii: "]"))
            return true
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, child) in object where !child.isNull {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                JSON.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                _ = writeMirror(child, snippetWords: snippetWords, to: &out)
            }
            out.append(UInt8(ascii: "}"))
            return true
        case .null:
            return false
        }
    }
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

/// Appends `bytes` (UTF-8) escaped as JSON string content, exactly as ``JSON/writeString(_:to:)``
/// escapes (`"`, `\\` and control characters).
func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
    var runStart = 0
    for i in 0..<bytes.count {
        let byte = bytes[i]
        guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
        if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
        runStart = i + 1
        out.append(0x5C)
        switch byte {
        case 0x22: out.append(0x22)
        case 0x5C: out.append(0x5C)
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        case 0x08: out.append(UInt8(ascii: "b"))
        case 0x0C: out.append(UInt8(ascii: "f"))
        default:
            out.append(contentsOf: [
                UInt8(ascii: "u"), 0x30, 0x30, hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)],
            ])
        }
    }
    if runStart < bytes.count {
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
    }
}

/// An open-addressing hash table from short byte strings to `UInt64`, storing keys in one arena so
/// that lookups never allocate.
struct ByteKeyTable {
    private var arena: [UInt8] = []
    /// (offset into arena, length, value) per entry.
    private var entries: [(offset: Int32, length: Int32, value: UInt64)] = []
    /// Entry index + 1 per slot (0 = empty); power-of-two size (empty until the first insert).
    private var slots: [Int32] = []

    @inline(__always) private static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(truncatingIfNeeded: h ^ (h >> 29))
    }

    @inline(__always) private func equal(_ entry: Int, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let e = entries[entry]
        guard Int(e.length) == bytes.count else { return false }
        var i = 0
        let offset = Int(e.offset)
        while i < bytes.count {
            if arena[offset + i] != bytes[i] { return false }
            i += 1
        }
        return true
    }

    func value(for bytes: UnsafeBufferPointer<UInt8>) -> UInt64? {
        if slots.isEmpty { return nil }
        let mask = slots.count - 1
        var slot = Self.hash(bytes) & mask
        while true {
            let entry = Int(slots[slot])
            if entry == 0 { return nil }
            if equal(entry - 1, bytes) { return entries[entry - 1].value }
            slot = (slot + 1) & mask
        }
    }

    /// Inserts a key known to be absent.
    mutating func insert(_ bytes: UnsafeBufferPointer<UInt8>, _ value: UInt64) {
        if (entries.count + 1) * 2 > slots.count { grow() }
        entries.append((Int32(arena.count), Int32(bytes.count), value))
        arena.append(contentsOf: bytes)
        place(entries.count - 1, hash: Self.hash(bytes))
    }

    private mutating func place(_ entry: Int, hash: Int) {
        let mask = slots.count - 1
        var slot = hash & mask
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = Int32(entry + 1)
    }

    private mutating func grow() {
        slots = [Int32](repeating: 0, count: Swift.max(256, slots.count * 2))
        for entry in entries.indices {
            let e = entries[entry]
            let h = arena.withUnsafeBufferPointer { arena in
                Self.hash(UnsafeBufferPointer(rebasing: arena[Int(e.offset)..<Int(e.offset + e.length)]))
            }
            place(entry, hash: h)
        }
    }
}
