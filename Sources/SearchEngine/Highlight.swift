import JSONCore

/// Highlighting and snippeting of returned hits only.
struct Highlighter {
    let normalizer: Normalizer
    let words: [QueryWord]
    let preTag: String
    let postTag: String
    let ellipsis: String

    /// How a token matches the query: which word and how many bytes of the original to wrap.
    private func tokenMatch(_ token: Token, originalLength: Int) -> (word: Int, length: Int)? {
        var found: (Int, Int)?
        for (w, word) in words.enumerated() {
            let t = token.normalized
            if t == word.bytes { return (w, originalLength) }
            if word.prefix && t.count > word.bytes.count && t.starts(with: word.bytes) {
                let length = t.count == originalLength ? word.bytes.count : originalLength
                if found == nil { found = (w, length) }
                continue
            }
            guard word.maxTypos > 0, found == nil else { continue }
            if typoDistance(word.bytes, t[...], maxTypos: word.maxTypos) != nil {
                found = (w, originalLength)
            } else if word.prefix {
                for cut in [word.bytes.count, word.bytes.count + 1] where cut < t.count {
                    if typoDistance(word.bytes, t[..<cut], maxTypos: word.maxTypos) != nil {
                        found = (w, t.count == originalLength ? cut : originalLength)
                        break
                    }
                }
            }
        }
        return found
    }

    struct Result {
        var value: String
        var matched: Set<Int>
        var fullyHighlighted: Bool
    }

    /// Highlights `text`; with `snippetWords`, keeps a window of that many words around the first match.
    func highlight(_ text: String, snippetWords: Int? = nil) -> Result {
        let tokens = normalizer.tokens(text)
        let utf8 = Array(text.utf8)
        var marks: [(start: Int, end: Int)] = []
        var matchedTokens: [Int] = []
        var matched = Set<Int>()
        var allFull = !tokens.isEmpty
        for (i, token) in tokens.enumerated() {
            let originalLength = token.end - token.start
            if let m = tokenMatch(token, originalLength: originalLength) {
                matched.insert(m.word)
                marks.append((token.start, token.start + m.length))
                matchedTokens.append(i)
                if m.length < originalLength { allFull = false }
            } else {
                allFull = false
            }
        }
        var from = 0
        var to = utf8.count
        var prefix = ""
        var suffix = ""
        if let size = snippetWords, !tokens.isEmpty, tokens.count > size {
            let size = max(1, size)
            let center = matchedTokens.first ?? 0
            var first = max(0, center - (size - 1) / 2)
            if first + size > tokens.count { first = max(0, tokens.count - size) }
            let last = min(tokens.count, first + size) - 1
            from = first == 0 ? 0 : tokens[first].start
            to = last == tokens.count - 1 ? utf8.count : tokens[last].end
            if first > 0 { prefix = ellipsis + (ellipsis.isEmpty ? "" : " ") }
            if last < tokens.count - 1 { suffix = (ellipsis.isEmpty ? "" : " ") + ellipsis }
            marks = marks.filter { $0.start >= from && $0.end <= to }
        }
        var out: [UInt8] = Array(prefix.utf8)
        var cursor = from
        for mark in marks {
            out.append(contentsOf: utf8[cursor..<mark.start])
            out.append(contentsOf: preTag.utf8)
            out.append(contentsOf: utf8[mark.start..<mark.end])
            out.append(contentsOf: postTag.utf8)
            cursor = mark.end
        }
        out.append(contentsOf: utf8[cursor..<to])
        out.append(contentsOf: suffix.utf8)
        return Result(
            value: String(decoding: out, as: UTF8.self), matched: matched,
            fullyHighlighted: allFull && !marks.isEmpty)
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
